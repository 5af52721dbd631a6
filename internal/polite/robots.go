package polite

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/newsflow/newsflow/internal/option"
	"github.com/temoto/robotstxt"
)

// FetchFunc fetches a robots.txt file. The crawler routes it through its
// SSRF-guarded fetcher (and, to be counted against the host's politeness
// budget, through the Limiter).
//
// It must follow redirects (RFC 9309 asks for at least five hops) and report
// the final status. Any HTTP answer, 4xx and 5xx included, is a status with a
// nil error; err is for no answer at all (DNS, connect, TLS, timeout, blocked
// address). The body only matters for 2xx; it may be cut short, only the
// first RobotsOptions.MaxBodyBytes are used.
type FetchFunc func(ctx context.Context, robotsURL string) (status int, body []byte, err error)

// RobotsOptions configures Robots. The zero value of every field means its
// default (see DefaultRobotsOptions).
type RobotsOptions struct {
	// TTL is how long a fetched robots.txt (or a 4xx meaning "none") is used
	// before it is fetched again (default 24h, the most RFC 9309 section 2.4
	// recommends).
	TTL time.Duration `json:"ttl,omitempty"`
	// ErrorTTL is how long after a failed fetch (5xx, 429, network error) the
	// file is fetched again (default 10m). It doubles with each consecutive
	// failure up to MaxErrorTTL.
	ErrorTTL time.Duration `json:"error_ttl,omitempty"`
	// MaxErrorTTL caps the retry interval after repeated failures (default
	// 1h).
	MaxErrorTTL time.Duration `json:"max_error_ttl,omitempty"`
	// MaxStale is how long the last good copy keeps being used while the
	// file is unreachable (default 720h, the "reasonably long period" RFC
	// 9309 section 2.3.1.4 gives as an example). Without a good copy young
	// enough, an unreachable robots.txt disallows everything.
	MaxStale time.Duration `json:"max_stale,omitempty"`
	// MaxBodyBytes is how much of the file is parsed (default 500 KiB, the
	// minimum RFC 9309 section 2.5 requires). A longer file is cut at the
	// last line break before the limit.
	MaxBodyBytes int `json:"max_body_bytes,omitempty"`
	// MaxCrawlDelay caps the Crawl-delay honoured (default 2m), so that a
	// typo such as "Crawl-delay: 86400" cannot stall a host's feeds for a
	// day. A negative value removes the cap.
	MaxCrawlDelay time.Duration `json:"max_crawl_delay,omitempty"`
	// FetchTimeout bounds one robots.txt fetch (default 30s).
	FetchTimeout time.Duration `json:"fetch_timeout,omitempty"`
	// MaxHosts bounds the cache (default 20000 origins). Past it, expired
	// entries are dropped first, then arbitrary ones; a dropped origin is
	// simply fetched again.
	MaxHosts int `json:"max_hosts,omitempty"`
	// Clock is the time source (default SystemClock()).
	Clock Clock `json:"-"`
}

// DefaultRobotsOptions returns the options with every default filled in.
func DefaultRobotsOptions() RobotsOptions {
	return RobotsOptions{
		TTL:           24 * time.Hour,
		ErrorTTL:      10 * time.Minute,
		MaxErrorTTL:   time.Hour,
		MaxStale:      30 * 24 * time.Hour,
		MaxBodyBytes:  500 << 10,
		MaxCrawlDelay: 2 * time.Minute,
		FetchTimeout:  30 * time.Second,
		MaxHosts:      20000,
		Clock:         SystemClock(),
	}
}

// Validate reports options that are out of range. Zero values are valid:
// they mean the default.
func (o RobotsOptions) Validate() error {
	errs := []error{
		option.NotNegative("ttl", o.TTL), option.NotNegative("error ttl", o.ErrorTTL),
		option.NotNegative("max error ttl", o.MaxErrorTTL), option.NotNegative("max stale", o.MaxStale),
		option.NotNegative("fetch timeout", o.FetchTimeout), option.NotNegative("max body bytes", o.MaxBodyBytes),
		option.NotNegative("max hosts", o.MaxHosts),
	}
	if d := o.withDefaults(); d.MaxErrorTTL < d.ErrorTTL {
		errs = append(errs, fmt.Errorf("max error ttl %v is below error ttl %v", d.MaxErrorTTL, d.ErrorTTL))
	}
	return option.Join("robots", errs...)
}

func (o RobotsOptions) withDefaults() RobotsOptions {
	d := DefaultRobotsOptions()
	d.MaxErrorTTL = max(d.MaxErrorTTL, o.ErrorTTL) // never below ErrorTTL
	option.Fill(&o, d)
	return o
}

// ErrUnreachable is matched (errors.Is) by the error Allowed returns when the
// robots.txt of the URL's origin could not be fetched and no usable copy is
// cached. RFC 9309 then requires assuming complete disallow; the condition is
// transient, see UnreachableError.RetryAt.
var ErrUnreachable = errors.New("robots.txt unreachable")

// UnreachableError says why and until when an origin's robots.txt is
// considered unreachable.
type UnreachableError struct {
	// Origin is scheme://host[:port].
	Origin string
	// Status is the HTTP status (429 or 5xx), zero when there was no answer.
	Status int
	// Err is the fetch error when there was no answer.
	Err error
	// RetryAt is when the file will be fetched again.
	RetryAt time.Time
}

// Error implements error.
func (e *UnreachableError) Error() string {
	var why string
	switch {
	case e.Err != nil:
		why = e.Err.Error()
	default:
		why = "status " + strconv.Itoa(e.Status)
	}
	return fmt.Sprintf("robots.txt of %s unreachable: %s (retry at %s)", e.Origin, why, e.RetryAt.UTC().Format(time.RFC3339))
}

// Unwrap returns ErrUnreachable and the fetch error, if any.
func (e *UnreachableError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrUnreachable, e.Err}
	}
	return []error{ErrUnreachable}
}

// RobotsStats counts what Robots did.
type RobotsStats struct {
	// Hosts is the number of origins cached.
	Hosts int `json:"hosts"`
	// Hits is the number of Allowed calls answered from the cache.
	Hits uint64 `json:"hits"`
	// Fetches is the number of robots.txt fetches made.
	Fetches uint64 `json:"fetches"`
	// Unreachable is the number of fetches that failed (429, 5xx, no answer).
	Unreachable uint64 `json:"unreachable"`
	// ParseErrors is the number of files the parser refused even after
	// dropping the lines it cannot take; they are treated as empty.
	ParseErrors uint64 `json:"parse_errors"`
}

// Robots answers whether the crawler may fetch a URL according to the
// origin's robots.txt (RFC 9309), fetching and caching the file per origin.
//
// Semantics:
//   - 2xx: the file's rules. The group is chosen by the product token of the
//     user agent (its leading run of letters, '-' and '_', e.g. "newsflow" in
//     "newsflow/1.0 (+https://...)"), matched case-insensitively and exactly,
//     falling back to the "*" group, then to no rules. Groups naming the same
//     agent are merged. The longest matching rule wins. /robots.txt itself is
//     always allowed.
//   - 3xx (redirects the FetchFunc did not follow) and 4xx other than 429:
//     no robots.txt, everything is allowed; cached for TTL.
//   - 429, 5xx, other statuses, no answer: unreachable. The last good copy
//     (fetched within MaxStale) keeps being used; without one everything is
//     disallowed and Allowed returns an *UnreachableError. The file is fetched
//     again after ErrorTTL, doubling per consecutive failure up to MaxErrorTTL.
//
// Known deviations of the underlying parser (github.com/temoto/robotstxt)
// from RFC 9309: when an Allow and a Disallow rule of equal length match, the
// first listed wins (the RFC prefers Allow); paths are compared as sent,
// without normalising percent-encoding; the length of a wildcard rule is that
// of its regular expression. Before parsing, the file is normalised line by
// line as RFC 9309 reads it (comments start at '#' anywhere, blanks around the
// colon, unknown lines ignored), and the lines for which the parser would
// reject the whole file (rules before the first User-agent line, invalid
// Crawl-delay values) are dropped: RFC 9309 section 2.2 asks crawlers to use
// every rule they can parse.
//
// # Concurrency
//
// Robots is safe for concurrent use. Concurrent calls for one origin share a
// single fetch, run by the first caller on its own context (bounded by
// FetchTimeout); the others wait for it or for their own context. If the
// first caller's context ends, the fetch is abandoned, nothing is cached and a
// waiting caller takes over. No goroutine is started. The FetchFunc is called
// without any lock held. If it acquires a Limiter slot for the host, do not
// call Allowed while holding one for that host yourself.
type Robots struct {
	opts  RobotsOptions
	fetch FetchFunc
	clock Clock

	hits, fetches, unreachable, parseErrors atomic.Uint64

	mu struct {
		sync.Mutex
		entries map[string]*robotsEntry // by origin
		calls   map[string]*robotsCall  // fetches in flight, by origin
	}
}

// robotsEntry is the cached state of one origin. Immutable once published.
type robotsEntry struct {
	// data holds the rules in use; nil means disallow everything (see unreach).
	data *robotstxt.RobotsData
	// goodAt is when data was fetched.
	goodAt time.Time
	// expires is when the file is fetched again.
	expires time.Time
	// failures counts consecutive unreachable fetches.
	failures int
	// unreach is the last failure, nil after a good fetch.
	unreach *UnreachableError
}

type robotsCall struct {
	done  chan struct{} // closed when entry is set or the fetch was abandoned
	entry *robotsEntry  // nil when abandoned
}

// NewRobots returns a Robots that fetches with fetch.
func NewRobots(fetch FetchFunc, opts RobotsOptions) (*Robots, error) {
	if fetch == nil {
		return nil, errors.New("robots: nil fetch function")
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	r := &Robots{opts: opts, fetch: fetch, clock: opts.Clock}
	r.mu.entries = make(map[string]*robotsEntry)
	r.mu.calls = make(map[string]*robotsCall)
	return r, nil
}

// Allowed reports whether userAgent may fetch rawURL and the Crawl-delay (capped
// at MaxCrawlDelay) that the matching group asks for, zero if none.
//
// The error is non-nil when rawURL is not an absolute http(s) URL
// (ErrInvalidURL), when ctx ended while the robots.txt was being fetched, or
// when the robots.txt is unreachable and no usable copy is cached (an
// *UnreachableError, matching ErrUnreachable); allowed is false then.
func (r *Robots) Allowed(ctx context.Context, userAgent, rawURL string) (allowed bool, crawlDelay time.Duration, err error) {
	u, err := parseHTTPURL(rawURL)
	if err != nil {
		return false, 0, err
	}
	e, err := r.entry(ctx, origin(u))
	if err != nil {
		return false, 0, err
	}
	if e.data == nil {
		ue := *e.unreach // entries are shared; hand out a copy
		return false, 0, &ue
	}
	path := u.RequestURI()
	g := findGroup(e.data, productToken(userAgent))
	delay := g.CrawlDelay
	if r.opts.MaxCrawlDelay > 0 {
		delay = min(delay, r.opts.MaxCrawlDelay)
	}
	return path == "/robots.txt" || g.Test(path), delay, nil
}

// Stats returns the counters.
func (r *Robots) Stats() RobotsStats {
	r.mu.Lock()
	n := len(r.mu.entries)
	r.mu.Unlock()
	return RobotsStats{
		Hosts:       n,
		Hits:        r.hits.Load(),
		Fetches:     r.fetches.Load(),
		Unreachable: r.unreachable.Load(),
		ParseErrors: r.parseErrors.Load(),
	}
}

// entry returns the current entry for origin, fetching it if needed.
func (r *Robots) entry(ctx context.Context, origin string) (*robotsEntry, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("robots.txt of %s: %w", origin, err)
		}
		r.mu.Lock()
		prev := r.mu.entries[origin]
		if prev != nil && r.clock.Now().Before(prev.expires) {
			r.mu.Unlock()
			r.hits.Add(1)
			return prev, nil
		}
		if c := r.mu.calls[origin]; c != nil {
			r.mu.Unlock()
			select {
			case <-c.done:
				if c.entry != nil {
					return c.entry, nil
				}
				// The fetching caller gave up; try again, maybe as the
				// one that fetches.
				continue
			case <-ctx.Done():
				return nil, fmt.Errorf("robots.txt of %s: %w", origin, ctx.Err())
			}
		}
		c := &robotsCall{done: make(chan struct{})}
		r.mu.calls[origin] = c
		r.mu.Unlock()
		return r.fetchEntry(ctx, origin, prev, c)
	}
}

// fetchEntry fetches origin's robots.txt as the leader of call c and
// publishes the result.
func (r *Robots) fetchEntry(ctx context.Context, origin string, prev *robotsEntry, c *robotsCall) (_ *robotsEntry, err error) {
	var e *robotsEntry
	defer func() {
		// Runs also if fetch panics: never leave waiters hanging.
		r.mu.Lock()
		delete(r.mu.calls, origin)
		if e != nil {
			r.storeLocked(origin, e)
		}
		r.mu.Unlock()
		c.entry = e
		close(c.done)
	}()

	fctx, cancel := context.WithTimeout(ctx, r.opts.FetchTimeout)
	defer cancel()
	r.fetches.Add(1)
	status, body, ferr := r.fetch(fctx, origin+"/robots.txt")
	if ctx.Err() != nil {
		return nil, fmt.Errorf("robots.txt of %s: %w", origin, ctx.Err())
	}
	e = r.newEntry(origin, prev, status, body, ferr)
	return e, nil
}

// newEntry turns a fetch result into a cache entry.
func (r *Robots) newEntry(origin string, prev *robotsEntry, status int, body []byte, ferr error) *robotsEntry {
	now := r.clock.Now()
	switch {
	case ferr == nil && status >= 200 && status < 300:
		return &robotsEntry{data: r.parse(body), goodAt: now, expires: now.Add(r.opts.TTL)}
	case ferr == nil && status >= 300 && status < 500 && status != 429:
		// RFC 9309 2.3.1.2-3: unavailable, no restrictions.
		return &robotsEntry{data: allowAll(), goodAt: now, expires: now.Add(r.opts.TTL)}
	}
	// RFC 9309 2.3.1.4: unreachable, assume complete disallow.
	r.unreachable.Add(1)
	failures := 1
	if prev != nil {
		failures = prev.failures + 1
	}
	e := &robotsEntry{failures: failures, expires: now.Add(r.errorTTL(failures))}
	e.unreach = &UnreachableError{Origin: origin, Err: ferr, RetryAt: e.expires}
	if ferr == nil {
		e.unreach.Status = status
	}
	if prev != nil && prev.data != nil && now.Sub(prev.goodAt) <= r.opts.MaxStale {
		e.data, e.goodAt = prev.data, prev.goodAt
	}
	return e
}

func (r *Robots) errorTTL(failures int) time.Duration {
	d := r.opts.ErrorTTL
	for i := 1; i < failures && d < r.opts.MaxErrorTTL; i++ {
		d *= 2
	}
	return min(d, r.opts.MaxErrorTTL)
}

// storeLocked caches e, keeping the cache within MaxHosts.
func (r *Robots) storeLocked(origin string, e *robotsEntry) {
	r.mu.entries[origin] = e
	if len(r.mu.entries) <= r.opts.MaxHosts {
		return
	}
	now := r.clock.Now()
	for o, old := range r.mu.entries {
		if o != origin && !now.Before(old.expires) {
			delete(r.mu.entries, o)
		}
	}
	// Still too many: drop arbitrary ones, down to 90% to amortise.
	target := r.opts.MaxHosts - r.opts.MaxHosts/10
	for o := range r.mu.entries {
		if len(r.mu.entries) <= target {
			break
		}
		if o != origin {
			delete(r.mu.entries, o)
		}
	}
}

// parse parses a robots.txt body, capped at MaxBodyBytes. Should the parser
// refuse the normalised file, it counts as empty (allow everything): RFC 9309
// asks for the rules that can be parsed, and there are none.
func (r *Robots) parse(body []byte) *robotstxt.RobotsData {
	if len(body) > r.opts.MaxBodyBytes {
		body = body[:r.opts.MaxBodyBytes]
		// Drop the partial last line: half a rule could mean anything.
		if i := bytes.LastIndexAny(body, "\r\n"); i >= 0 {
			body = body[:i+1]
		} else {
			body = nil
		}
	}
	body = bytes.TrimPrefix(body, []byte("\ufeff")) // byte order mark
	data, err := robotstxt.FromBytes(normalize(body))
	if err != nil {
		r.parseErrors.Add(1)
		return allowAll()
	}
	return data
}

// allowAll returns rules that allow everything.
func allowAll() *robotstxt.RobotsData {
	d, _ := robotstxt.FromBytes(nil)
	return d
}

// normalize rewrites a robots.txt body line by line the way RFC 9309 reads
// it, so that the robotstxt tokenizer cannot misread it and never rejects the
// whole file:
//
//   - a comment starts at '#' anywhere in a line;
//   - "key: value", with blanks allowed around the colon; the value is its
//     first word;
//   - only user-agent, allow, disallow, crawl-delay and sitemap lines are
//     kept, written as "key: value";
//   - rule and crawl-delay lines before the first user-agent line, user-agent
//     lines without a value and crawl-delay lines whose value is not a finite
//     non-negative number are dropped (RFC 9309 section 2.2: use what can be
//     parsed). Crawl-delay is not a rule in RFC 9309, so dropping one does not
//     change how groups are delimited.
func normalize(body []byte) []byte {
	out := make([]byte, 0, len(body))
	seenAgent := false
	for len(body) > 0 {
		end := bytes.IndexAny(body, "\r\n")
		if end < 0 {
			end = len(body)
		}
		key, value := splitLine(string(body[:end]))
		body = body[min(end+1, len(body)):]
		switch key {
		case "user-agent", "useragent":
			if value == "" {
				continue
			}
			seenAgent = true
			key = "user-agent"
		case "allow", "disallow":
			if !seenAgent {
				continue
			}
		case "crawl-delay", "crawldelay":
			v, ok := crawlDelayValue(value)
			if !seenAgent || !ok {
				continue
			}
			key, value = "crawl-delay", v
		case "sitemap":
		default:
			continue
		}
		out = append(out, key...)
		out = append(out, ": "...)
		out = append(out, value...)
		out = append(out, '\n')
	}
	return out
}

// splitLine returns the lower-cased key of a "key: value" line and the first
// word of its value, comments removed.
func splitLine(line string) (key, value string) {
	if i := strings.IndexByte(line, '#'); i >= 0 {
		line = line[:i]
	}
	if i := strings.IndexByte(line, ':'); i >= 0 {
		key, value = line[:i], line[i+1:]
	} else {
		// No colon: be lenient, as the robotstxt tokenizer is.
		f := strings.Fields(line)
		if len(f) == 0 {
			return "", ""
		}
		key = f[0]
		if len(f) > 1 {
			value = f[1]
		}
	}
	if f := strings.Fields(value); len(f) > 0 {
		value = f[0]
	} else {
		value = ""
	}
	return strings.ToLower(strings.TrimSpace(key)), value
}

// maxDelaySeconds bounds a Crawl-delay before it becomes a time.Duration
// (which would overflow near 292 years); MaxCrawlDelay caps it further.
const maxDelaySeconds = 1e6

// crawlDelayValue validates a Crawl-delay value (a finite non-negative
// number of seconds) and clamps it to maxDelaySeconds.
func crawlDelayValue(v string) (string, bool) {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return "", false
	}
	if f > maxDelaySeconds {
		return strconv.Itoa(maxDelaySeconds), true
	}
	return v, true
}

// productToken returns the lower-cased product token of a User-Agent string:
// its leading run of letters, '-' and '_' (RFC 9309 section 2.2.1).
func productToken(userAgent string) string {
	i := 0
	for i < len(userAgent) {
		c := userAgent[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-' || c == '_' {
			i++
			continue
		}
		break
	}
	return strings.ToLower(userAgent[:i])
}

// findGroup returns the group for product token tok: the group naming
// exactly tok, else the "*" group, else an empty group (no rules).
//
// robotstxt.FindGroup picks the longest group name that is a prefix of the
// agent, so "news" would match "newsflow"; RFC 9309 asks for an exact match.
// A group name that is a proper prefix of tok is also a prefix of tok minus
// its last byte, so FindGroup returns the same group for both exactly when
// no group is named tok.
func findGroup(data *robotstxt.RobotsData, tok string) *robotstxt.Group {
	if tok != "" {
		if g := data.FindGroup(tok); g != data.FindGroup(tok[:len(tok)-1]) {
			return g
		}
	}
	return data.FindGroup("*")
}
