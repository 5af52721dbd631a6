package crawl

import (
	"errors"

	"github.com/newsflow/newsflow/internal/feed"
	"github.com/newsflow/newsflow/internal/fetch"
	"github.com/newsflow/newsflow/internal/polite"
)

// Class is what a failed crawl means for the source's next attempt. The
// crawler decides retries by the class of the error alone (Classify).
type Class int

const (
	// Transient failures may go away by themselves (the network, a
	// timeout, 5xx and most 4xx answers, a truncated document, an
	// unreadable robots.txt, an address the SSRF guard refuses, which
	// DNS or the configuration may change): the source is retried with
	// exponential backoff and the host's circuit breaker counts them.
	Transient Class = iota
	// RateLimited is a 429 or 503 answer: the source waits for the
	// server's Retry-After (or the default pause) and the failure does not
	// count toward the circuit breaker.
	RateLimited
	// Gone is a 410 answer: the server says the feed was removed. The
	// source is marked gone and not crawled again.
	Gone
	// Permanent failures cannot succeed as the source is configured: the
	// feed URL is not a valid http(s) URL, or what it serves is not a
	// feed. Retrying sooner cannot help: the source is tried again once
	// per its max interval (the page may become a feed, the URL may be
	// edited), without backoff and without counting toward the host's
	// circuit breaker.
	Permanent
)

// String returns the class's name as the crawl record and metrics spell
// it.
func (c Class) String() string {
	switch c {
	case RateLimited:
		return "rate_limited"
	case Gone:
		return "gone"
	case Permanent:
		return "permanent"
	}
	return "transient"
}

// Classify returns the class of an error from a crawl: fetching
// (fetch), parsing (feed) or the host rules (polite). nil and unknown
// errors are Transient.
func Classify(err error) Class {
	switch {
	case err == nil:
		return Transient
	case fetch.IsGone(err):
		return Gone
	case fetch.IsRateLimited(err):
		return RateLimited
	case fetch.IsPermanent(err), errors.Is(err, polite.ErrInvalidURL), errors.Is(err, feed.ErrNotAFeed):
		return Permanent
	}
	return Transient
}
