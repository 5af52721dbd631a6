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
	DefaultMaxBackoff     = 15 * time.Minute
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
	// UserBurst failed attempts on one username from one client address
	// are allowed before that address must wait UserInterval for its next
	// try on the username, twice as long after each further failure, up
	// to MaxBackoff (defaults 5, 30s and 15m). A success forgets them.
	UserBurst    int           `yaml:"login_burst_per_user"`
	UserInterval time.Duration `yaml:"login_interval_per_user"`
	MaxBackoff   time.Duration `yaml:"login_max_backoff"`
	// MaxKeys caps the addresses and the (username, address) pairs
	// tracked, each (default 100000). Buckets that have refilled and
	// pairs untouched for twice MaxBackoff are dropped first; beyond the
	// cap the least recently used is dropped.
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
		MaxBackoff:   DefaultMaxBackoff,
		MaxKeys:      DefaultMaxLimiterKeys,
	}
}

// Validate reports whether the options are usable; zero fields are valid.
func (o LimiterOptions) Validate() error {
	if o.IPBurst < 0 || o.UserBurst < 0 {
		return errors.New("negative limiter burst")
	}
	if o.IPInterval < 0 || o.UserInterval < 0 || o.MaxBackoff < 0 {
		return errors.New("negative limiter interval")
	}
	if o.MaxKeys < 0 {
		return errors.New("negative limiter max keys")
	}
	return nil
}

// Limiter limits login attempts, in memory, so that an attacker cannot lock
// the owner out: every attempt takes a token from its client address's
// bucket, and failures back off per (username, client address), so the
// owner's correct password from another address still works while one
// address hammers the username. An attempt is allowed only if its address
// has a token and its pair is not backing off; a refused attempt takes
// nothing. The caller reports each outcome (Failed, Succeeded). It is safe
// for concurrent use.
type Limiter struct {
	now  func() time.Time
	opts LimiterOptions

	mu struct {
		sync.Mutex
		ips   buckets
		pairs *lru.Cache[string, *backoff]
	}
}

// backoff is the failures of one username from one client address.
type backoff struct {
	failures int
	until    time.Time // no attempt before
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
	l := &Limiter{now: now, opts: opts}
	l.mu.ips = newBuckets(opts.IPBurst, opts.IPInterval, opts.MaxKeys)
	// A pair untouched for twice the longest backoff is forgotten: its
	// address starts over.
	l.mu.pairs = lru.New[string, *backoff](opts.MaxKeys, 2*opts.MaxBackoff)
	return l, nil
}

// pairKey is the key of a username from a client address, or "" when the
// username is not valid (it cannot log in, so it has no pair).
func pairKey(ip, username string) string {
	name, err := NormalizeUsername(username)
	if err != nil {
		return ""
	}
	return name + "\x00" + ClientKey(ip)
}

// Allow reports whether a login attempt from ip on username may proceed,
// and if not, how long until it may (round up for a Retry-After header).
// ip is the client address ("192.0.2.1", "2001:db8::1" or with a port).
// Usernames count regardless of case; a username that is not valid has no
// backoff of its own, since it cannot log in.
func (l *Limiter) Allow(ip, username string) (ok bool, retryAfter time.Duration) {
	ipk, pk := ClientKey(ip), pairKey(ip, username)

	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.mu.ips.evictIdle(now)
	l.mu.pairs.EvictIdle(now)
	wait := l.mu.ips.wait(ipk, now)
	if pk != "" {
		if b, ok := l.mu.pairs.Peek(pk, now); ok {
			wait = max(wait, b.until.Sub(now))
		}
	}
	if wait > 0 {
		return false, wait
	}
	l.mu.ips.take(ipk, now)
	return true, 0
}

// Failed records a failed attempt from ip on username: beyond UserBurst
// failures the pair backs off, doubling each time up to MaxBackoff.
func (l *Limiter) Failed(ip, username string) {
	pk := pairKey(ip, username)
	if pk == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b, ok := l.mu.pairs.Get(pk, now)
	if !ok {
		b = &backoff{}
		l.mu.pairs.Add(pk, b, now)
	}
	b.failures++
	if over := b.failures - l.opts.UserBurst; over >= 0 {
		wait := l.opts.MaxBackoff
		if over < 32 {
			wait = min(l.opts.UserInterval<<over, l.opts.MaxBackoff)
		}
		b.until = now.Add(wait)
	}
}

// Succeeded forgets the failures of username from ip, after a successful
// login. The address's bucket is kept: a shared address may be guessing at
// other accounts.
func (l *Limiter) Succeeded(ip, username string) {
	pk := pairKey(ip, username)
	if pk == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.pairs.Remove(pk)
}

// Len returns the number of addresses and (username, address) pairs
// tracked.
func (l *Limiter) Len() (ips, pairs int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.ips.c.Len(), l.mu.pairs.Len()
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
