package polite

import (
	"container/list"
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/newsflow/newsflow/internal/option"
)

// LimiterOptions configures a Limiter. The zero value of every field means its
// default (see DefaultLimiterOptions).
type LimiterOptions struct {
	// GlobalConcurrency caps requests in flight across all hosts (default 64).
	GlobalConcurrency int `json:"global_concurrency,omitempty" yaml:"global_concurrency"`
	// HostConcurrency caps requests in flight to one host (default 2).
	HostConcurrency int `json:"host_concurrency,omitempty" yaml:"host_concurrency"`
	// HostRate is the sustained request rate per host, in requests per
	// second (default 1). +Inf turns the per-host rate limit off. Rates below
	// one request a day are refused.
	HostRate float64 `json:"host_rate,omitempty" yaml:"host_rate"`
	// HostBurst is how many requests a host that has been quiet may receive
	// back to back before HostRate applies (default 2).
	HostBurst int `json:"host_burst,omitempty" yaml:"-"`
	// IdleHostTTL is how long a host with nothing waiting or in flight is
	// remembered (default 10m). A host is forgotten only once forgetting it
	// changes nothing: its token bucket is full again, its crawl delay and
	// pause have elapsed. Its crawl delay (SetCrawlDelay) is forgotten with
	// it. This is what bounds memory when the crawler touches many hosts.
	IdleHostTTL time.Duration `json:"idle_host_ttl,omitempty" yaml:"-"`
	// Clock is the time source (default SystemClock()).
	Clock Clock `json:"-" yaml:"-"`
}

// DefaultLimiterOptions returns the options with every default filled in.
func DefaultLimiterOptions() LimiterOptions {
	return LimiterOptions{
		GlobalConcurrency: 64,
		HostConcurrency:   2,
		HostRate:          1,
		HostBurst:         2,
		IdleHostTTL:       10 * time.Minute,
		Clock:             SystemClock(),
	}
}

// minHostRate is one request a day: anything slower is a configuration error
// (and would overflow the interval arithmetic).
const minHostRate = 1.0 / (24 * 60 * 60)

// Validate reports options that are out of range. Zero values are valid:
// they mean the default.
func (o LimiterOptions) Validate() error {
	var rateErr error
	if math.IsNaN(o.HostRate) || o.HostRate < 0 || (o.HostRate > 0 && o.HostRate < minHostRate) {
		rateErr = fmt.Errorf("host rate %v must be at least one request a day, or +Inf", o.HostRate)
	}
	return option.Join("limiter",
		option.NotNegative("global concurrency", o.GlobalConcurrency),
		option.NotNegative("host concurrency", o.HostConcurrency),
		rateErr,
		option.NotNegative("host burst", o.HostBurst),
		option.NotNegative("idle host ttl", o.IdleHostTTL),
	)
}

// LimiterStats is a snapshot of a Limiter.
type LimiterStats struct {
	// Waiting is the number of Acquire calls blocked.
	Waiting int `json:"waiting"`
	// InFlight is the number of granted slots not yet released.
	InFlight int `json:"in_flight"`
	// Hosts is the number of hosts remembered.
	Hosts int `json:"hosts"`
	// ReadyHosts is the number of hosts whose own limits allow a request
	// and that wait only for a global slot.
	ReadyHosts int `json:"ready_hosts"`
}

// Limiter decides when the crawler may send a request to a host. A request
// needs, all at once:
//
//   - a host slot: fewer than HostConcurrency requests in flight to the host;
//   - a host token: a token bucket per host refilled at HostRate, holding at
//     most HostBurst tokens;
//   - the host's minimum delay (SetCrawlDelay, from robots.txt Crawl-delay)
//     elapsed since the previous request to the host was granted, and any
//     pause (PauseHost) over;
//   - a global slot: fewer than GlobalConcurrency requests in flight overall.
//
// # Concurrency contract
//
// A Limiter is safe for concurrent use by any number of goroutines and starts
// none of its own: the goroutines blocked in Acquire are the only ones that
// wait, and each waits on its own context, a signal channel and at most one
// Clock timer.
//
// Every successful Acquire must be followed by exactly one call of the
// returned release function once the request is over (response body read
// and closed); further calls are no-ops. release never blocks for long and
// may be called from any goroutine. An Acquire that returns an error holds
// nothing and has consumed nothing (no slot, no token, no delay).
//
// Ordering: the host's limits are checked first, and only a host whose own
// limits allow a request now joins the queue for global slots, so a host
// held back by its rate, crawl delay or concurrency never occupies a global
// slot (nor a place that blocks other hosts) while it waits. Waiters of one
// host are served first come, first served. Hosts ready for a global slot are
// served round-robin: a host that just got a slot goes to the back of the
// queue, so one busy host cannot starve the others. All of a grant (the host
// slot, the token, the crawl-delay mark and the global slot) is taken at one
// instant, so the spacing between requests holds between actual grants, not
// between earlier reservations.
//
// Acquire may succeed even though its context was cancelled at the same
// moment; the caller's request then fails on the cancelled context and
// releases as usual.
//
// All state is guarded by one mutex (mu); Clock methods are called with it
// held, so a Clock must not call back into the Limiter.
type Limiter struct {
	opts     LimiterOptions
	clock    Clock
	interval time.Duration // between tokens; 0 when the rate is unlimited
	burstTol time.Duration // (HostBurst-1) * interval: the GCRA tolerance
	sweepGap time.Duration // between sweeps of idle hosts

	mu struct {
		sync.Mutex
		hosts     map[string]*hostState
		ready     list.List // of *hostState whose own limits allow a request now
		inFlight  int
		waiting   int
		lastSweep time.Time
	}
}

// hostState is what the Limiter knows of one host. Guarded by Limiter.mu.
type hostState struct {
	name     string
	waiters  list.List // of *waiter, first come first served
	inFlight int
	// tat is the GCRA "theoretical arrival time": the token bucket is full
	// when tat <= now, and a request conforms when tat-now <= burstTol.
	tat         time.Time
	lastGrant   time.Time
	minDelay    time.Duration
	pausedUntil time.Time
	lastUsed    time.Time
	readyElem   *list.Element // in Limiter.mu.ready, nil when not there
	// wakeAt is when the host's time-based limits next allow a request, set
	// while the head waiter must wait for it (zero otherwise); wakeFor is the
	// waiter last told about it.
	wakeAt  time.Time
	wakeFor *waiter
}

type waiter struct {
	host    *hostState
	elem    *list.Element // in host.waiters
	granted bool          // guarded by Limiter.mu
	// signal is a buffered-1 kick: "look again" (granted, or the host's
	// wakeAt changed). Sent without blocking, under Limiter.mu.
	signal chan struct{}
}

// NewLimiter returns a Limiter with opts (zero fields take their defaults).
func NewLimiter(opts LimiterOptions) (*Limiter, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	option.Fill(&opts, DefaultLimiterOptions())
	l := &Limiter{opts: opts, clock: opts.Clock}
	if !math.IsInf(opts.HostRate, 1) {
		l.interval = time.Duration(float64(time.Second) / opts.HostRate)
		l.burstTol = time.Duration(opts.HostBurst-1) * l.interval
	}
	l.sweepGap = max(opts.IdleHostTTL/2, time.Second)
	l.mu.hosts = make(map[string]*hostState)
	l.mu.lastSweep = l.clock.Now()
	return l, nil
}

// Options returns the options in use, defaults filled in.
func (l *Limiter) Options() LimiterOptions { return l.opts }

// Acquire blocks until a request to host may be sent (see Limiter) or ctx is
// done. On success it returns the function that releases the slots; on
// failure it returns ctx's error and holds nothing. host should be a
// canonical key such as HostKey returns.
func (l *Limiter) Acquire(ctx context.Context, host string) (release func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l.mu.Lock()
	now := l.clock.Now()
	l.maybeSweepLocked(now)
	h := l.hostLocked(host, now)
	w := &waiter{host: h, signal: make(chan struct{}, 1)}
	w.elem = h.waiters.PushBack(w)
	l.mu.waiting++
	l.evalLocked(h, now)
	l.dispatchLocked(now)

	var (
		timer   Timer
		timerC  <-chan time.Time
		armedAt time.Time
	)
	stopTimer := func() {
		if timer != nil {
			timer.Stop()
			timer, timerC, armedAt = nil, nil, time.Time{}
		}
	}
	for {
		if w.granted {
			l.mu.Unlock()
			stopTimer()
			return l.releaseFunc(h), nil
		}
		// Only the host's first waiter watches the clock, and only while
		// the host waits on time (rate, crawl delay, pause).
		if h.wakeFor == w && !h.wakeAt.IsZero() {
			if !h.wakeAt.Equal(armedAt) {
				stopTimer()
				timer = l.clock.NewTimer(h.wakeAt.Sub(now))
				timerC, armedAt = timer.C(), h.wakeAt
			}
		} else {
			stopTimer()
		}
		l.mu.Unlock()

		fired := false
		select {
		case <-w.signal:
		case <-timerC:
			fired = true
			timer, timerC, armedAt = nil, nil, time.Time{}
		case <-ctx.Done():
			l.mu.Lock()
			if w.granted {
				l.mu.Unlock()
				stopTimer()
				return l.releaseFunc(h), nil
			}
			l.cancelLocked(w, l.clock.Now())
			l.mu.Unlock()
			stopTimer()
			return nil, ctx.Err()
		}

		l.mu.Lock()
		now = l.clock.Now()
		if fired {
			l.evalLocked(h, now)
			l.dispatchLocked(now)
		}
	}
}

// SetCrawlDelay sets the minimum time between the grants of two requests to
// host, normally robots.txt's Crawl-delay for our user agent (see
// Robots.Allowed). Zero removes it. The delay is forgotten with the host
// after IdleHostTTL, so the crawler sets it before each Acquire; that is
// cheap.
func (l *Limiter) SetCrawlDelay(host string, d time.Duration) {
	d = max(d, 0)
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	l.maybeSweepLocked(now)
	h := l.mu.hosts[host]
	if h == nil {
		if d == 0 {
			return
		}
		h = l.hostLocked(host, now)
	}
	if h.minDelay == d {
		return
	}
	h.minDelay = d
	l.evalLocked(h, now)
	l.dispatchLocked(now)
}

// PauseHost holds every request to host until the given instant, for example
// after the host answered 429 or 503 with a Retry-After header. A pause never
// shortens an earlier one.
func (l *Limiter) PauseHost(host string, until time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	if !until.After(now) {
		return
	}
	l.maybeSweepLocked(now)
	h := l.hostLocked(host, now)
	if !until.After(h.pausedUntil) {
		return
	}
	h.pausedUntil = until
	l.evalLocked(h, now)
	l.dispatchLocked(now)
}

// Stats returns a snapshot of the Limiter's counters.
func (l *Limiter) Stats() LimiterStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return LimiterStats{
		Waiting:    l.mu.waiting,
		InFlight:   l.mu.inFlight,
		Hosts:      len(l.mu.hosts),
		ReadyHosts: l.mu.ready.Len(),
	}
}

// hostLocked returns host's state, creating it.
func (l *Limiter) hostLocked(host string, now time.Time) *hostState {
	h := l.mu.hosts[host]
	if h == nil {
		h = &hostState{name: host}
		l.mu.hosts[host] = h
	}
	h.lastUsed = now
	return h
}

// readyAt is the earliest instant the host's time-based limits allow a
// request.
func (l *Limiter) readyAt(h *hostState) time.Time {
	at := h.pausedUntil
	if l.interval > 0 {
		if t := h.tat.Add(-l.burstTol); t.After(at) {
			at = t
		}
	}
	if h.minDelay > 0 && !h.lastGrant.IsZero() {
		if t := h.lastGrant.Add(h.minDelay); t.After(at) {
			at = t
		}
	}
	return at
}

// evalLocked puts h in the ready queue when its own limits allow its first
// waiter to go now; otherwise takes it out and, when what it waits for is
// time, tells its first waiter when to look again.
func (l *Limiter) evalLocked(h *hostState, now time.Time) {
	front := h.waiters.Front()
	if front == nil || h.inFlight >= l.opts.HostConcurrency {
		// Nothing to do, or a release of this host will call us again.
		l.unreadyLocked(h)
		h.wakeAt, h.wakeFor = time.Time{}, nil
		return
	}
	if at := l.readyAt(h); now.Before(at) {
		l.unreadyLocked(h)
		head := front.Value.(*waiter)
		if !at.Equal(h.wakeAt) || h.wakeFor != head {
			h.wakeAt, h.wakeFor = at, head
			kick(head)
		}
		return
	}
	h.wakeAt, h.wakeFor = time.Time{}, nil
	if h.readyElem == nil {
		h.readyElem = l.mu.ready.PushBack(h)
	}
}

func (l *Limiter) unreadyLocked(h *hostState) {
	if h.readyElem != nil {
		l.mu.ready.Remove(h.readyElem)
		h.readyElem = nil
	}
}

// dispatchLocked grants global slots to ready hosts, round-robin.
func (l *Limiter) dispatchLocked(now time.Time) {
	for l.mu.inFlight < l.opts.GlobalConcurrency {
		e := l.mu.ready.Front()
		if e == nil {
			return
		}
		h := e.Value.(*hostState)
		l.mu.ready.Remove(e)
		h.readyElem = nil
		front := h.waiters.Front()
		if front == nil || h.inFlight >= l.opts.HostConcurrency || now.Before(l.readyAt(h)) {
			// Readiness is kept up to date by evalLocked; this is a guard.
			l.evalLocked(h, now)
			continue
		}
		w := h.waiters.Remove(front).(*waiter)
		l.mu.waiting--
		h.inFlight++
		l.mu.inFlight++
		if l.interval > 0 {
			h.tat = later(h.tat, now).Add(l.interval)
		}
		h.lastGrant, h.lastUsed = now, now
		w.granted = true
		kick(w)
		l.evalLocked(h, now) // back of the queue if it can go again
	}
}

// cancelLocked withdraws a waiter that was not granted.
func (l *Limiter) cancelLocked(w *waiter, now time.Time) {
	h := w.host
	h.waiters.Remove(w.elem)
	l.mu.waiting--
	h.lastUsed = now
	if h.wakeFor == w {
		h.wakeAt, h.wakeFor = time.Time{}, nil
	}
	l.evalLocked(h, now)
	l.dispatchLocked(now)
}

func (l *Limiter) releaseFunc(h *hostState) func() {
	var done atomic.Bool
	return func() {
		if done.Swap(true) {
			return
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		now := l.clock.Now()
		h.inFlight--
		l.mu.inFlight--
		h.lastUsed = now
		l.evalLocked(h, now)
		l.dispatchLocked(now)
	}
}

// maybeSweepLocked forgets idle hosts, at most once per sweepGap. A host is
// forgotten only when a fresh host state would behave the same.
func (l *Limiter) maybeSweepLocked(now time.Time) {
	if now.Sub(l.mu.lastSweep) < l.sweepGap {
		return
	}
	l.mu.lastSweep = now
	for name, h := range l.mu.hosts {
		if h.waiters.Len() == 0 && h.inFlight == 0 &&
			now.Sub(h.lastUsed) >= l.opts.IdleHostTTL &&
			!now.Before(h.tat) && !now.Before(h.pausedUntil) &&
			(h.minDelay == 0 || !now.Before(h.lastGrant.Add(h.minDelay))) {
			delete(l.mu.hosts, name)
		}
	}
}

func kick(w *waiter) {
	select {
	case w.signal <- struct{}{}:
	default:
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
