package query

import (
	"math"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
	"golang.org/x/time/rate"
)

// RateLimits bound the requests of one client address and of one user
// (token buckets: a rate per second and a burst). Zero rates disable a
// limit; the zero value disables both.
type RateLimits struct {
	PerIP, PerUser     rate.Limit
	BurstIP, BurstUser int
	// ExemptLoopback lets requests from the node's own host through.
	ExemptLoopback bool
	// MaxKeys bounds the buckets kept per kind; IdleAfter is when a bucket
	// may be dropped.
	MaxKeys   int
	IdleAfter time.Duration
}

// DefaultRateLimits: 200 requests/s per address (burst 400), 50 per user
// (burst 100); loopback is exempt.
func DefaultRateLimits() RateLimits {
	return RateLimits{PerIP: 200, BurstIP: 400, PerUser: 50, BurstUser: 100, ExemptLoopback: true, MaxKeys: 100000, IdleAfter: 10 * time.Minute}
}

// limiters holds one token bucket per key.
type limiters struct {
	limit rate.Limit
	burst int
	max   int
	idle  time.Duration
	mu    struct {
		sync.Mutex
		m map[string]*keyed
	}
}

type keyed struct {
	l    *rate.Limiter
	last time.Time
}

func newLimiters(l rate.Limit, burst, maxKeys int, idle time.Duration) *limiters {
	if maxKeys <= 0 {
		maxKeys = 100000
	}
	if idle <= 0 {
		idle = 10 * time.Minute
	}
	burst = max(burst, 1)
	ls := &limiters{limit: l, burst: burst, max: maxKeys, idle: idle}
	ls.mu.m = map[string]*keyed{}
	return ls
}

// enabled reports whether the limit applies (a rate is set).
func (ls *limiters) enabled() bool { return ls != nil && ls.limit != 0 }

// allow takes a token for key; when none is left it returns the wait.
func (ls *limiters) allow(key string, now time.Time) (bool, time.Duration) {
	if ls == nil || ls.limit == 0 {
		return true, 0
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	k := ls.mu.m[key]
	if k == nil {
		if len(ls.mu.m) >= ls.max {
			// Drop idle buckets; if none is idle, drop an arbitrary one
			// (a full bucket is the same as a fresh one).
			for kk, v := range ls.mu.m {
				if now.Sub(v.last) > ls.idle || len(ls.mu.m) >= ls.max {
					delete(ls.mu.m, kk)
				}
				if len(ls.mu.m) < ls.max*3/4 {
					break
				}
			}
		}
		k = &keyed{l: rate.NewLimiter(ls.limit, ls.burst)}
		ls.mu.m[key] = k
	}
	k.last = now
	r := k.l.ReserveN(now, 1)
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
			if ok, wait := byIP.allow(clientIP(ctx), time.Now()); !ok {
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

// remoteLoopback reports whether the request comes from a loopback address.
func remoteLoopback(ctx *fasthttp.RequestCtx) bool {
	if a, ok := ctx.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.IsLoopback()
	}
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
