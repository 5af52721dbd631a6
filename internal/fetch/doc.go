// Package fetch performs the single HTTP request the crawler makes for one
// feed: a conditional GET with gzip/brotli decoding, a body cap, connect and
// total timeouts, hand-counted redirects and an SSRF guard.
//
// # What a fetch returns
//
// Fetch returns a *Response on success. A 304 Not Modified is a success with
// NotModified set and no body. Redirects are followed by Fetch itself (at most
// Options.MaxRedirects hops, loops detected); PermanentURL is set only when
// every hop was a 301 or 308, and is the URL the caller should store from now
// on. 302, 303 and 307 hops set FinalURL but never PermanentURL.
//
// Every failure is an error the scheduler can branch on:
//
//   - *StatusError for any final status other than 2xx and 304. IsGone (410)
//     means the source should be stopped; its message says why.
//     IsRateLimited (429, 503) means "come back after RetryAfter" and must not
//     count toward disabling the source. Other statuses, including 401, 403
//     and 404, are ordinary failures: the source backs off (see Backoff) and
//     the per-source circuit breaker decides when to give up, because those
//     statuses are often transient on real feed hosts (deploys, CDN rules).
//   - ErrBlockedAddress when the SSRF guard refused to connect.
//   - ErrTooLarge when the body (on the wire or decompressed) exceeds
//     Options.MaxBodyBytes.
//   - ErrTooManyRedirects and ErrRedirectLoop.
//   - ErrTimeout (together with context.DeadlineExceeded when a deadline
//     expired) for connect, header and body timeouts.
//   - ErrInvalidURL when the request URL itself cannot be fetched (not
//     http/https, no host); this is permanent.
//   - ErrUnsupportedEncoding when the server used a Content-Encoding other
//     than gzip, br or identity (we only ever ask for gzip and br).
//
// IsPermanent reports the errors that will not go away by retrying (410 and
// ErrInvalidURL). Everything else is transient.
//
// When the server answered but the fetch still failed (a *StatusError, a body
// that was too large or too slow), Fetch returns a non-nil *Response together
// with the error. It carries the status, URLs, headers and timing but no
// body, so the caller can record what happened.
//
// # SSRF guard
//
// The guard runs in the dialer's ControlContext, that is on the IP address the
// socket is about to connect to, after DNS resolution. A hostname that
// resolves (or is re-bound) to a private address is therefore refused just
// like an IP literal, on every redirect hop and on every new connection.
// The blocked ranges are the IANA special-purpose registries, as
// code.dny.dev/ssrf maintains them (loopback, RFC 1918, link-local and cloud
// metadata, CGNAT, unique-local, multicast, unspecified, broadcast, reserved,
// documentation, AS112, ..., and for IPv6 everything outside global unicast),
// also in their IPv4-mapped form; NAT64 and 6to4 addresses are checked as the
// IPv4 address they embed. Options.AllowCIDRs
// lets chosen ranges through (intranets, tests); Options.AllowPrivate turns the
// guard off. Proxies from the environment are ignored.
//
// # Concurrency
//
// A Fetcher is safe for concurrent use by many goroutines; it holds a pool of
// keep-alive connections. CloseIdleConnections releases them.
package fetch
