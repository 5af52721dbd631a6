package fetch

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxRetryAfter clamps absurd Retry-After values so that they cannot
// overflow a time.Duration or park a source for years.
const maxRetryAfter = 30 * 24 * time.Hour

// parseRetryAfter parses a Retry-After value: either delay-seconds or an
// HTTP-date, relative to now. It returns zero for an absent, invalid or past
// value and clamps to maxRetryAfter.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if v[0] >= '0' && v[0] <= '9' {
		secs, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
				return maxRetryAfter
			}
			return 0
		}
		if secs >= uint64(maxRetryAfter/time.Second) {
			return maxRetryAfter
		}
		return time.Duration(secs) * time.Second
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0
	}
	d := t.Sub(now)
	switch {
	case d <= 0:
		return 0
	case d > maxRetryAfter:
		return maxRetryAfter
	}
	return d
}

// parseMaxAge returns the first valid max-age directive of a Cache-Control
// header, or zero. Other directives (no-cache, no-store, private) are not
// interpreted: for a feed poller max-age is only a hint for the next poll.
func parseMaxAge(v string) time.Duration {
	for dir := range strings.SplitSeq(v, ",") {
		name, val, _ := strings.Cut(strings.TrimSpace(dir), "=")
		if !strings.EqualFold(strings.TrimSpace(name), "max-age") {
			continue
		}
		val = strings.Trim(strings.TrimSpace(val), `"`)
		secs, err := strconv.ParseUint(val, 10, 64)
		if err != nil {
			if ne, ok := err.(*strconv.NumError); !ok || ne.Err != strconv.ErrRange {
				continue
			}
			secs = 1 << 31
		}
		// RFC 9111 section 1.2.2: delta-seconds past 2^31 are treated as 2^31.
		return time.Duration(min(secs, 1<<31)) * time.Second
	}
	return 0
}

// parseExpires parses an Expires header. Invalid values (RFC 9111 allows
// "0" and "-1") give the zero time.
func parseExpires(v string) time.Time {
	if v == "" {
		return time.Time{}
	}
	t, err := http.ParseTime(strings.TrimSpace(v))
	if err != nil {
		return time.Time{}
	}
	return t
}
