package fetch

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

var (
	// ErrBlockedAddress is returned when the SSRF guard refused to connect
	// to an address. The wrapping error names the address.
	ErrBlockedAddress = errors.New("blocked address")
	// ErrTooLarge is returned when the body exceeds Options.MaxBodyBytes on
	// the wire or after decompression.
	ErrTooLarge = errors.New("body too large")
	// ErrTooManyRedirects is returned when a fetch would follow more than
	// Options.MaxRedirects redirects.
	ErrTooManyRedirects = errors.New("too many redirects")
	// ErrRedirectLoop is returned when a redirect points at a URL already
	// visited during the same fetch.
	ErrRedirectLoop = errors.New("redirect loop")
	// ErrTimeout is returned when the connect timeout, the total timeout or
	// a deadline on the caller's context expired. When a context deadline
	// expired the error also matches context.DeadlineExceeded.
	ErrTimeout = errors.New("timeout")
	// ErrInvalidURL is returned when the request URL cannot be fetched:
	// unparsable, not http or https, or without a host. It is permanent.
	ErrInvalidURL = errors.New("invalid url")
	// ErrUnsupportedEncoding is returned when the server used a
	// Content-Encoding other than gzip, br or identity.
	ErrUnsupportedEncoding = errors.New("unsupported content encoding")
)

// StatusError is returned for a final response whose status is neither 2xx
// nor 304.
type StatusError struct {
	// Status is the HTTP status code.
	Status int
	// RetryAfter is the parsed Retry-After header, zero if absent.
	RetryAfter time.Duration
}

// Error implements error.
func (e *StatusError) Error() string {
	msg := fmt.Sprintf("http %d %s", e.Status, http.StatusText(e.Status))
	switch {
	case e.Status == http.StatusGone:
		msg += ": the server says the feed was removed permanently"
	case e.RetryAfter > 0:
		msg += fmt.Sprintf(" (retry after %v)", e.RetryAfter)
	}
	return msg
}

// IsGone reports whether err is a 410 Gone: the source should be stopped.
func IsGone(err error) bool {
	return statusOf(err) == http.StatusGone
}

// IsRateLimited reports whether err is a 429 Too Many Requests or a 503
// Service Unavailable. The caller should wait RetryAfter(err) (or its own
// backoff when that is zero) and must not count the failure toward disabling
// the source.
func IsRateLimited(err error) bool {
	s := statusOf(err)
	return s == http.StatusTooManyRequests || s == http.StatusServiceUnavailable
}

// IsPermanent reports whether retrying cannot help: a 410 Gone or an
// ErrInvalidURL. 401, 403 and 404 are not permanent: they back off like other
// failures and the circuit breaker decides, since feed hosts return them
// transiently during deploys and CDN misconfigurations.
func IsPermanent(err error) bool {
	return IsGone(err) || errors.Is(err, ErrInvalidURL)
}

// RetryAfter returns the Retry-After carried by a *StatusError in err's
// chain, or zero.
func RetryAfter(err error) time.Duration {
	var se *StatusError
	if errors.As(err, &se) {
		return se.RetryAfter
	}
	return 0
}

func statusOf(err error) int {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Status
	}
	return 0
}
