package auth

import (
	"errors"
	"net/netip"
	"sync"
	"time"

	"github.com/newsflow/newsflow/internal/lru"
	"github.com/newsflow/newsflow/internal/option"
)

// Defaults of [LimiterOptions].
const (
	DefaultIPBurst        = 10
	DefaultIPInterval     = 6 * time.Second
	DefaultUserBurst      = 5
	DefaultUserInterval   = 30 * time.Second
	DefaultMaxLimiterKeys = 100_000
)

// LimiterOptions configure a [Limiter]. The zero value of each field means
// its default.
type LimiterOptions struct {
	// IPBurst attempts are allowed at once from one client address; one
	// more is allowed per IPInterval (defaults 10 and 6s). IPv6 addresses
	// count per /64.
	IPBurst    int           `yaml:"login_burst_per_ip"`
	IPInterval time.Duration `yaml:"login_interval_per_ip"`
	// UserBurst attempts are allowed at once on one username; one more per
	// UserInterval (defaults 5 and 30s).
	UserBurst    int           `yaml:"login_burst_per_user"`
	UserInterval time.Duration `yaml:"login_interval_per_user"`
	// MaxKeys caps the addresses and the usernames tracked, each
	// (default 100000). Buckets that have refilled are dropped first;
	// beyond the cap the least recently used bucket is dropped.
	MaxKeys int `yaml:"-"`
}

// DefaultLimiterOptions returns the options a zero LimiterOptions stands
// for.
func DefaultLimiterOptions() LimiterOptions {
	return LimiterOptions{
		IPBurst:      DefaultIPBurst,
		IPInterval:   DefaultIPInterval,
		UserBurst:    DefaultUserBurst,
		UserInterval: DefaultUserInterval,
		MaxKeys:      DefaultMaxLimiterKeys,
	}
}

// Validate reports whether the options are usable; zero fields are valid.
func (o LimiterOptions) Validate() error {
	if o.IPBurst < 0 || o.UserBurst < 0 {
		return errors.New("negative limiter burst")
	}
	if o.IPInterval < 0 || o.UserInterval < 0 {
		return errors.New("negative limiter interval")
	}
	if o.MaxKeys < 0 {
		return errors.New("negative limiter max keys")
	}
	return nil
}

// Limiter limits login attempts with token buckets per client address and
// per username, in memory. An attempt is allowed only if both buckets have
// a token, and then takes one from each; a refused attempt takes nothing.
// It is safe for concurrent use.
type Limiter struct {
	now func() time.Time

	mu struct {
		sync.Mutex
		ips, users buckets
	}
}

// NewLimiter returns a limiter; now is the clock (nil means time.Now).
func NewLimiter(opts LimiterOptions, now func() time.Time) (*Limiter, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if now == nil {
		now = time.Now
	}
	option.Fill(&opts, DefaultLimiterOptions())
	l := &Limiter{now: now}
	l.mu.ips = newBuckets(opts.IPBurst, opts.IPInterval, opts.MaxKeys)
	l.mu.users = newBuckets(opts.UserBurst, opts.UserInterval, opts.MaxKeys)
	return l, nil
}

// Allow reports whether a login attempt from ip on username may proceed,
// and if not, how long until it may (round up for a Retry-After header).
// ip is the client address ("192.0.2.1", "2001:db8::1" or with a port).
// Usernames count regardless of case; a username that is not valid has no
// bucket of its own, since it cannot log in.
func (l *Limiter) Allow(ip, username string) (ok bool, retryAfter time.Duration) {
	ipk := ClientKey(ip)
	name, err := NormalizeUsername(username)
	hasUser := err == nil

	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.mu.ips.evictIdle(now)
	l.mu.users.evictIdle(now)
	wait := l.mu.ips.wait(ipk, now)
	if hasUser {
		wait = max(wait, l.mu.users.wait(name, now))
	}
	if wait > 0 {
		return false, wait
	}
	l.mu.ips.take(ipk, now)
	if hasUser {
		l.mu.users.take(name, now)
	}
	return true, 0
}

// ResetUser forgets the attempts on a username, after a successful login.
// The address's bucket is kept: a shared address may be guessing at other
// accounts.
func (l *Limiter) ResetUser(username string) {
	name, err := NormalizeUsername(username)
	if err != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.users.remove(name)
}

// Len returns the number of addresses and usernames tracked.
func (l *Limiter) Len() (ips, users int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.ips.c.Len(), l.mu.users.c.Len()
}

// ClientKey returns the key under which the node counts a client address
// (its login and request rate limits): the address, or its /64 for IPv6
// (one host usually holds a whole /64); an IPv4-mapped address counts as
// the IPv4 address. Strings that are not addresses ("ip:port" is one) are
// kept, cut to 64 bytes.
func ClientKey(s string) string {
	a, err := netip.ParseAddr(s)
	if err != nil {
		ap, err2 := netip.ParseAddrPort(s)
		if err2 != nil {
			return s[:min(len(s), 64)]
		}
		a = ap.Addr()
	}
	a = a.Unmap().WithZone("")
	if a.Is6() {
		return netip.PrefixFrom(a, 64).Masked().String()
	}
	return a.String()
}

// bucket is a token bucket kept as its theoretical arrival time (GCRA):
// the bucket is full at tat and loses one attempt's worth per take, so the
// arithmetic stays in exact durations.
type bucket struct {
	tat time.Time
}

// buckets is a bounded set of token buckets with one burst and rate, the
// least recently used dropped beyond max.
type buckets struct {
	every time.Duration
	// slack is how far tat may run ahead of now: burst-1 intervals.
	slack time.Duration
	c     *lru.Cache[string, *bucket]
}

func newBuckets(burst int, every time.Duration, maxKeys int) buckets {
	// A bucket untouched for burst intervals has refilled from empty: it
	// is the same as no bucket.
	return buckets{every: every, slack: time.Duration(burst-1) * every, c: lru.New[string, *bucket](maxKeys, time.Duration(burst)*every)}
}

// wait returns how long until key's bucket has a token.
func (bs *buckets) wait(key string, now time.Time) time.Duration {
	b, ok := bs.c.Peek(key, now)
	if !ok {
		return 0
	}
	return max(b.tat.Sub(now)-bs.slack, 0)
}

// take takes a token from key's bucket, which must have one, creating the
// bucket if needed.
func (bs *buckets) take(key string, now time.Time) {
	b, ok := bs.c.Get(key, now)
	if !ok {
		b = &bucket{}
		bs.c.Add(key, b, now)
	}
	if b.tat.Before(now) {
		b.tat = now
	}
	b.tat = b.tat.Add(bs.every)
}

// evictIdle drops the buckets that have refilled.
func (bs *buckets) evictIdle(now time.Time) { bs.c.EvictIdle(now) }

func (bs *buckets) remove(key string) { bs.c.Remove(key) }
