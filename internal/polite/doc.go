// Package polite holds the politeness and failure-isolation pieces the
// crawler wraps around each fetch:
//
//   - Robots fetches, caches (24h) and applies robots.txt per origin with RFC
//     9309 semantics, and reports the Crawl-delay for our user agent.
//   - Limiter spaces and bounds requests: per host a token bucket, a
//     concurrency cap and a minimum delay (the Crawl-delay), and a global
//     concurrency cap, without letting a host that waits on its own limits
//     hold a global slot.
//   - BreakerState is a per-source circuit breaker (closed, open, half-open)
//     kept as a plain value the scheduler persists with the source.
//
// One fetch of a source goes through them in this order (b is the source's
// BreakerState, decoded from and stored back into its crawl state):
//
//	if !b.Allow(now) { reschedule at b.NextAttempt() }
//	ok, delay, err := robots.Allowed(ctx, userAgent, feedURL)
//	// err: ErrUnreachable is transient, try later; ErrInvalidURL is permanent.
//	// !ok: the site does not want the feed crawled; skip it.
//	host, _ := polite.HostKey(feedURL)
//	limiter.SetCrawlDelay(host, delay)
//	release, err := limiter.Acquire(ctx, host)
//	resp, err := fetcher.Fetch(ctx, ...)
//	release()
//	// then b.Success(now), b.Failure(now, opts, rnd) or, for 429 and 503,
//	// b.RateLimited(now, retryAfter) with limiter.PauseHost(host, now.Add(retryAfter)).
//
// Nothing here starts a goroutine; time comes from an injected Clock (Limiter,
// Robots) or is passed in (BreakerState), so tests run on fake time.
package polite
