package query

import (
	"cmp"
	"fmt"
	"math"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/newsflow/newsflow/internal/lru"
	"github.com/newsflow/newsflow/query/auth"
	"github.com/valyala/fasthttp"
	"golang.org/x/time/rate"
)

// RateLimits bound the requests of one client address and of one user
// (token buckets: a rate per second and a burst). Zero rates disable a
// limit; the zero value disables both.
type RateLimits struct {
	PerIP     rate.Limit `yaml:"rate_per_ip"`
	PerUser   rate.Limit `yaml:"rate_per_user"`
	BurstIP   int        `yaml:"burst_per_ip"`
	BurstUser int        `yaml:"burst_per_user"`
	// SharesPerIP and BurstSharesIP bound the share events that anonymous
	// clients (no session, no token) post, per client address: a token
	// bucket of events, not requests, so a batch takes one token a line.
	// A line over the limit is rejected with its reason (a single share:
	// 429 with Retry-After); sessions, the ingestion and admin tokens and
	// producers that write the Kafka topic are not limited.
	SharesPerIP   rate.Limit `yaml:"share_rate_per_ip"`
	BurstSharesIP int        `yaml:"share_burst_per_ip"`
	// ExemptLoopback lets requests from the node's own host through (off
	// by default: behind a reverse proxy on the same host, every client
	// would be exempt unless the proxy is in TrustedProxies).
	ExemptLoopback bool `yaml:"rate_exempt_loopback"`
	// MaxKeys bounds the buckets kept per kind; IdleAfter is when a bucket
	// may be dropped.
	MaxKeys   int           `yaml:"-"`
	IdleAfter time.Duration `yaml:"-"`
}

// DefaultRateLimits: 200 requests/s per address (burst 400), 50 per user
// (burst 100), 5 anonymous share events/s per address (burst 100);
// loopback is not exempt (a reverse proxy on the node's host would exempt
// everyone).
func DefaultRateLimits() RateLimits {
	return RateLimits{PerIP: 200, BurstIP: 400, PerUser: 50, BurstUser: 100, SharesPerIP: 5, BurstSharesIP: 100,
		MaxKeys: 100000, IdleAfter: 10 * time.Minute}
}

// limiters holds one token bucket per key, at most max of them: the least
// recently used is dropped beyond it, and a bucket unused for idle (by
// then it has refilled) is the same as none.
type limiters struct {
	limit rate.Limit
	burst int
	mu    struct {
		sync.Mutex
		c *lru.Cache[string, *rate.Limiter]
	}
}

func newLimiters(l rate.Limit, burst, maxKeys int, idle time.Duration) *limiters {
	d := DefaultRateLimits()
	ls := &limiters{limit: l, burst: max(burst, 1)}
	ls.mu.c = lru.New[string, *rate.Limiter](cmp.Or(max(maxKeys, 0), d.MaxKeys), cmp.Or(max(idle, 0), d.IdleAfter))
	return ls
}

// enabled reports whether the limit applies (a rate is set).
func (ls *limiters) enabled() bool { return ls != nil && ls.limit != 0 }

// allow takes a token for key; when none is left it returns the wait.
func (ls *limiters) allow(key string, now time.Time) (bool, time.Duration) {
	if ls == nil || ls.limit == 0 {
		return true, 0
	}
	return take(ls.bucket(key, now), now)
}

// bucket returns key's bucket, made full if there was none.
func (ls *limiters) bucket(key string, now time.Time) *rate.Limiter {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	l, ok := ls.mu.c.Get(key, now)
	if !ok {
		l = rate.NewLimiter(ls.limit, ls.burst)
		ls.mu.c.Add(key, l, now)
	}
	return l
}

// take takes a token from l; when none is left it returns the wait.
func take(l *rate.Limiter, now time.Time) (bool, time.Duration) {
	r := l.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// rateLimit answers 429 with Retry-After to a client address or user over
// its rate. Health checks and metrics are not limited, nor are requests
// with the admin token.
func (s *Server) rateLimit(next fasthttp.RequestHandler) fasthttp.RequestHandler {
	rl := s.opts.RateLimits
	byIP := newLimiters(rl.PerIP, rl.BurstIP, rl.MaxKeys, rl.IdleAfter)
	byUser := newLimiters(rl.PerUser, rl.BurstUser, rl.MaxKeys, rl.IdleAfter)
	return func(ctx *fasthttp.RequestCtx) {
		path := ctx.Path()
		if len(path) < 5 || string(path[:5]) != "/api/" {
			next(ctx)
			return
		}
		if s.adminToken(ctx) || s.fromPeer(ctx) {
			next(ctx) // the admin, or another member (its client was counted there)
			return
		}
		// The clock, the address as a string and the session are only
		// looked up for a limit that applies.
		if byIP.enabled() && !(rl.ExemptLoopback && remoteLoopback(ctx)) {
			if ok, wait := byIP.allow(auth.ClientKey(clientIP(ctx)), time.Now()); !ok {
				tooMany(ctx, wait, "rate limit exceeded; retry later")
				return
			}
		}
		if byUser.enabled() && token(ctx) != "" {
			if u, ok := s.user(ctx); ok {
				if ok, wait := byUser.allow(u.ID, time.Now()); !ok {
					tooMany(ctx, wait, "rate limit exceeded; retry later")
					return
				}
			}
		}
		next(ctx)
	}
}

// remoteLoopback reports whether the request's client (clientIP: behind a
// trusted proxy, the client it forwards for) has a loopback address.
func remoteLoopback(ctx *fasthttp.RequestCtx) bool {
	return isLoopback(clientIP(ctx))
}

func isLoopback(ip string) bool {
	a := net.ParseIP(ip)
	return a != nil && a.IsLoopback()
}

// tooMany answers 429 with a Retry-After of whole seconds (at least one).
func tooMany(ctx *fasthttp.RequestCtx, wait time.Duration, msg string) {
	ctx.Response.Header.Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(wait.Seconds())))))
	writeError(ctx, fasthttp.StatusTooManyRequests, msg)
}

// errShareLimit is a share over its client address's event limit.
type errShareLimit struct {
	wait time.Duration
	rate rate.Limit
}

func (e *errShareLimit) Error() string {
	return fmt.Sprintf("share limit of this client address reached (%g events/s without a session or token); retry in %ds",
		float64(e.rate), max(1, int(math.Ceil(e.wait.Seconds()))))
}

// shareLimit returns what admits one more share event of the request, or
// nil when its events are not limited (a session, a token, or no limit).
// It answers a refusal with Retry-After.
func (s *Server) shareLimit(ctx *fasthttp.RequestCtx) func() error {
	if !s.shares.enabled() || s.ingestToken(ctx) || s.adminToken(ctx) || s.opts.RateLimits.ExemptLoopback && remoteLoopback(ctx) {
		return nil
	}
	if _, ok := s.user(ctx); ok {
		return nil
	}
	now := time.Now()
	l := s.shares.bucket(auth.ClientKey(clientIP(ctx)), now)
	return func() error {
		ok, wait := take(l, now)
		if ok {
			return nil
		}
		ctx.Response.Header.Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(wait.Seconds())))))
		return &errShareLimit{wait: wait, rate: s.shares.limit}
	}
}
