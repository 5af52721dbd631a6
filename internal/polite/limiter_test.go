package polite

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

// Most Limiter tests run in a synctest bubble: the SystemClock's timers then
// run on the bubble's fake time, which advances only when every goroutine is
// blocked, so durations are exact and nothing sleeps for real.

func newTestLimiter(t *testing.T, opts LimiterOptions) *Limiter {
	t.Helper()
	l, err := NewLimiter(opts)
	if err != nil {
		t.Fatalf("new limiter: %v", err)
	}
	return l
}

// grantTimes runs n concurrent Acquire calls for host, each releasing at
// once, and returns the grant times relative to the start, sorted.
func grantTimes(t *testing.T, l *Limiter, host string, n int) []time.Duration {
	t.Helper()
	start := time.Now()
	var (
		mu   sync.Mutex
		got  []time.Duration
		errs []error
		wg   sync.WaitGroup
	)
	for range n {
		wg.Go(func() {
			rel, err := l.Acquire(context.Background(), host)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			got = append(got, time.Since(start))
			rel()
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("acquire: %v", errors.Join(errs...))
	}
	slices.Sort(got)
	return got
}

// holding acquires host, runs fn while it holds the slot, and releases it.
// It reports an error with t.Error: it runs on a goroutine of its own.
func holding(t *testing.T, l *Limiter, host string, fn func()) {
	rel, err := l.Acquire(context.Background(), host)
	if err != nil {
		t.Error(err)
		return
	}
	fn()
	rel()
}

// touch acquires host and releases it at once.
func touch(t *testing.T, l *Limiter, host string) {
	t.Helper()
	rel, err := l.Acquire(context.Background(), host)
	if err != nil {
		t.Fatal(err)
	}
	rel()
}

// drain closes ch and returns what it held.
func drain[T any](ch chan T) []T {
	close(ch)
	var out []T
	for v := range ch {
		out = append(out, v)
	}
	return out
}

func TestLimiterHostRateAndBurst(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name  string
		rate  float64
		burst int
		n     int
		want  []time.Duration
	}{
		{"defaults 1/s burst 2", 0, 0, 5, []time.Duration{0, 0, time.Second, 2 * time.Second, 3 * time.Second}},
		{"4/s burst 1", 4, 1, 4, []time.Duration{0, 250 * ms, 500 * ms, 750 * ms}},
		{"2/s burst 3", 2, 3, 6, []time.Duration{0, 0, 0, 500 * ms, 1000 * ms, 1500 * ms}},
		{"unlimited", math.Inf(1), 0, 5, []time.Duration{0, 0, 0, 0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := newTestLimiter(t, LimiterOptions{HostRate: tc.rate, HostBurst: tc.burst, HostConcurrency: 100})
				got := grantTimes(t, l, "example.com", tc.n)
				if !slices.Equal(got, tc.want) {
					t.Fatalf("grant times %v, want %v", got, tc.want)
				}
				// A quiet host earns its burst back.
				time.Sleep(time.Hour)
				if got := grantTimes(t, l, "example.com", 1); got[0] != 0 {
					t.Fatalf("after an idle hour the first request waited %v", got[0])
				}
			})
		})
	}
}

func TestLimiterSequentialRequestsTakeExpectedTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newTestLimiter(t, LimiterOptions{HostRate: 2, HostBurst: 1})
		start := time.Now()
		for range 10 {
			touch(t, l, "example.com")
		}
		if got, want := time.Since(start), 4500*time.Millisecond; got != want {
			t.Fatalf("10 requests at 2/s took %v, want %v", got, want)
		}
	})
}

// peak tracks the highest value of a counter.
type peak struct{ cur, max atomic.Int64 }

func (p *peak) inc() {
	n := p.cur.Add(1)
	for {
		m := p.max.Load()
		if n <= m || p.max.CompareAndSwap(m, n) {
			return
		}
	}
}
func (p *peak) dec() { p.cur.Add(-1) }

func TestLimiterHostConcurrency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newTestLimiter(t, LimiterOptions{HostRate: math.Inf(1), HostConcurrency: 2})
		var p peak
		var wg sync.WaitGroup
		start := time.Now()
		for range 10 {
			wg.Go(func() {
				holding(t, l, "example.com", func() {
					p.inc()
					time.Sleep(time.Second)
					p.dec()
				})
			})
		}
		wg.Wait()
		if got := p.max.Load(); got != 2 {
			t.Errorf("peak concurrency to one host %d, want 2", got)
		}
		if got := time.Since(start); got != 5*time.Second {
			t.Errorf("10 one-second requests, 2 at a time, took %v, want 5s", got)
		}
	})
}

func TestLimiterGlobalConcurrency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newTestLimiter(t, LimiterOptions{GlobalConcurrency: 3, HostRate: math.Inf(1)})
		var global peak
		hosts := make([]peak, 12)
		var wg sync.WaitGroup
		start := time.Now()
		for i := range 24 {
			wg.Go(func() {
				h := i % len(hosts)
				holding(t, l, fmt.Sprintf("h%d.example", h), func() {
					global.inc()
					hosts[h].inc()
					time.Sleep(time.Second)
					hosts[h].dec()
					global.dec()
				})
			})
		}
		wg.Wait()
		if got := global.max.Load(); got != 3 {
			t.Errorf("peak global concurrency %d, want 3", got)
		}
		for i := range hosts {
			if got := hosts[i].max.Load(); got > 2 {
				t.Errorf("host %d peaked at %d in flight", i, got)
			}
		}
		if got := time.Since(start); got != 8*time.Second {
			t.Errorf("24 one-second requests, 3 at a time, took %v, want 8s", got)
		}
		if s := l.Stats(); s.InFlight != 0 || s.Waiting != 0 || s.ReadyHosts != 0 {
			t.Errorf("stats after the run: %+v", s)
		}
	})
}

// driveFake runs until n results arrived, advancing the fake clock to the
// next timer whenever every goroutine of the bubble is blocked.
func driveFake(t *testing.T, fc *fakeClock, results <-chan time.Time, n int) []time.Time {
	t.Helper()
	var got []time.Time
	for {
		synctest.Wait()
		for drained := false; !drained; {
			select {
			case r := <-results:
				got = append(got, r)
			default:
				drained = true
			}
		}
		if len(got) >= n {
			slices.SortFunc(got, time.Time.Compare)
			return got
		}
		if !fc.AdvanceToNext() {
			t.Fatalf("stuck after %d of %d grants: no timer pending", len(got), n)
		}
	}
}

func sinceAll(start time.Time, ts []time.Time) []time.Duration {
	out := make([]time.Duration, len(ts))
	for i, ts := range ts {
		out[i] = ts.Sub(start)
	}
	return out
}

// The crawl-delay tests use the injected fake Clock (inside a bubble only to
// know when every goroutine is blocked).
func TestLimiterCrawlDelay(t *testing.T) {
	s := time.Second
	for _, tc := range []struct {
		name  string
		rate  float64
		burst int
		delay time.Duration
		want  []time.Duration
	}{
		{"delay only", math.Inf(1), 0, 10 * s, []time.Duration{0, 10 * s, 20 * s, 30 * s}},
		{"delay above rate", 1, 2, 3 * s, []time.Duration{0, 3 * s, 6 * s, 9 * s}},
		{"rate above delay", 1, 1, s / 2, []time.Duration{0, s, 2 * s, 3 * s}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fc := newFakeClock()
				l := newTestLimiter(t, LimiterOptions{HostRate: tc.rate, HostBurst: tc.burst, HostConcurrency: 10, Clock: fc})
				l.SetCrawlDelay("a.example", tc.delay)
				start := fc.Now()
				results := make(chan time.Time, 10)
				for range len(tc.want) {
					go holding(t, l, "a.example", func() { results <- fc.Now() })
				}
				// Another host is not held back by a's delay.
				for range 2 {
					go holding(t, l, "b.example", func() { results <- time.Time{} })
				}
				got := driveFake(t, fc, results, len(tc.want)+2)
				if !got[0].IsZero() || !got[1].IsZero() {
					t.Fatalf("b.example was not served")
				}
				if d := sinceAll(start, got[2:]); !slices.Equal(d, tc.want) {
					t.Fatalf("grant times %v, want %v", d, tc.want)
				}
			})
		})
	}
}

func TestLimiterCrawlDelayChangeWakesWaiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := newFakeClock()
		l := newTestLimiter(t, LimiterOptions{HostRate: math.Inf(1), Clock: fc})
		l.SetCrawlDelay("a.example", time.Hour)
		start := fc.Now()
		touch(t, l, "a.example")
		results := make(chan time.Time, 1)
		go holding(t, l, "a.example", func() { results <- fc.Now() })
		synctest.Wait()
		l.SetCrawlDelay("a.example", 2*time.Second)
		got := driveFake(t, fc, results, 1)
		if d := got[0].Sub(start); d != 2*time.Second {
			t.Fatalf("granted after %v, want 2s once the delay was lowered", d)
		}
		if n := fc.pending(); n != 0 {
			t.Fatalf("%d timers left pending", n)
		}
	})
}

func TestLimiterPauseHost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newTestLimiter(t, LimiterOptions{})
		start := time.Now()
		l.PauseHost("a.example", start.Add(30*time.Second))
		l.PauseHost("a.example", start.Add(10*time.Second)) // does not shorten
		got := grantTimes(t, l, "a.example", 1)
		if got[0] != 30*time.Second {
			t.Fatalf("granted after %v, want 30s", got[0])
		}
	})
}

// A host that waits on its own limits holds no global slot: other hosts go
// through while it waits.
func TestLimiterSlowHostDoesNotBlockOthers(t *testing.T) {
	t.Run("host slots", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l := newTestLimiter(t, LimiterOptions{GlobalConcurrency: 2, HostConcurrency: 1, HostRate: math.Inf(1)})
			start := time.Now()
			var wg sync.WaitGroup
			wg.Go(func() {
				holding(t, l, "slow.example", func() { time.Sleep(time.Hour) })
			})
			synctest.Wait()
			slow := make(chan time.Duration, 4)
			for range 4 {
				wg.Go(func() {
					holding(t, l, "slow.example", func() { slow <- time.Since(start) })
				})
			}
			synctest.Wait()
			if s := l.Stats(); s.Waiting != 4 || s.InFlight != 1 || s.ReadyHosts != 0 {
				t.Fatalf("stats with the slow host busy: %+v", s)
			}
			fast := make(chan time.Duration, 5)
			for i := range 5 {
				wg.Go(func() {
					holding(t, l, fmt.Sprintf("fast%d.example", i), func() {
						fast <- time.Since(start)
						time.Sleep(time.Second)
					})
				})
				synctest.Wait() // queue them in order
			}
			wg.Wait()
			if got, want := drain(fast), []time.Duration{0, time.Second, 2 * time.Second, 3 * time.Second, 4 * time.Second}; !slices.Equal(got, want) {
				t.Fatalf("fast hosts granted at %v, want %v", got, want)
			}
			for _, d := range drain(slow) {
				if d != time.Hour {
					t.Fatalf("a slow-host waiter was granted at %v, want 1h", d)
				}
			}
		})
	})
	t.Run("crawl delay", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l := newTestLimiter(t, LimiterOptions{GlobalConcurrency: 1, HostRate: math.Inf(1)})
			l.SetCrawlDelay("slow.example", time.Hour)
			start := time.Now()
			var wg sync.WaitGroup
			slow := make(chan time.Duration, 3)
			for range 3 {
				wg.Go(func() {
					holding(t, l, "slow.example", func() { slow <- time.Since(start) })
				})
			}
			synctest.Wait()
			fast := make(chan time.Duration, 3)
			for i := range 3 {
				wg.Go(func() {
					holding(t, l, fmt.Sprintf("fast%d.example", i), func() {
						fast <- time.Since(start)
						time.Sleep(time.Second)
					})
				})
				synctest.Wait()
			}
			wg.Wait()
			gotFast, gotSlow := drain(fast), drain(slow)
			if want := []time.Duration{0, time.Second, 2 * time.Second}; !slices.Equal(gotFast, want) {
				t.Errorf("fast hosts granted at %v, want %v", gotFast, want)
			}
			if want := []time.Duration{0, time.Hour, 2 * time.Hour}; !slices.Equal(gotSlow, want) {
				t.Errorf("slow host granted at %v, want %v", gotSlow, want)
			}
		})
	})
}

// Hosts ready for a global slot are served round-robin: a host with many
// waiters does not starve one that queued later.
func TestLimiterRoundRobin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newTestLimiter(t, LimiterOptions{GlobalConcurrency: 1, HostConcurrency: 10, HostRate: math.Inf(1)})
		hold, err := l.Acquire(context.Background(), "other.example")
		if err != nil {
			t.Fatal(err)
		}
		var (
			mu    sync.Mutex
			order []string
			wg    sync.WaitGroup
		)
		enqueue := func(host string) {
			wg.Go(func() {
				holding(t, l, host, func() {
					mu.Lock()
					order = append(order, host[:1])
					mu.Unlock()
					time.Sleep(time.Second)
				})
			})
			synctest.Wait()
		}
		for range 4 {
			enqueue("a.example")
		}
		enqueue("b.example")
		enqueue("c.example")
		hold()
		wg.Wait()
		if got, want := fmt.Sprint(order), "[a b c a a a]"; got != want {
			t.Fatalf("grant order %s, want %s", got, want)
		}
	})
}

func TestLimiterCancelWhileWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newTestLimiter(t, LimiterOptions{GlobalConcurrency: 1})
		hold, err := l.Acquire(context.Background(), "held.example")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		errs := make(chan error, 20)
		for i := range 20 {
			go func() {
				rel, err := l.Acquire(ctx, fmt.Sprintf("h%d.example", i%3))
				if rel != nil {
					t.Error("release returned together with an error")
					rel()
				}
				errs <- err
			}()
		}
		synctest.Wait()
		if s := l.Stats(); s.Waiting != 20 || s.InFlight != 1 || s.ReadyHosts != 3 {
			t.Fatalf("stats while waiting: %+v", s)
		}
		cancel()
		for range 20 {
			if err := <-errs; !errors.Is(err, context.Canceled) {
				t.Fatalf("acquire: %v, want context.Canceled", err)
			}
		}
		if s := l.Stats(); s.Waiting != 0 || s.InFlight != 1 || s.ReadyHosts != 0 {
			t.Fatalf("stats after cancelling: %+v", s)
		}
		hold()
		hold() // a second release is a no-op
		if s := l.Stats(); s.InFlight != 0 {
			t.Fatalf("in flight after release: %d", s.InFlight)
		}
		if _, err := l.Acquire(ctx, "x.example"); !errors.Is(err, context.Canceled) {
			t.Fatalf("acquire with a done context: %v", err)
		}
	})
	goleak.VerifyNone(t)
}

// A waiter that gives up consumes no token and leaves no crawl-delay mark.
func TestLimiterCancelConsumesNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts LimiterOptions
		set  func(*Limiter)
		want time.Duration
	}{
		{"token", LimiterOptions{HostRate: 1, HostBurst: 1}, func(*Limiter) {}, time.Second},
		{"crawl delay", LimiterOptions{HostRate: math.Inf(1)}, func(l *Limiter) { l.SetCrawlDelay("a.example", 4*time.Second) }, 4 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := newTestLimiter(t, tc.opts)
				tc.set(l)
				start := time.Now()
				touch(t, l, "a.example")
				ctx, cancel := context.WithTimeout(context.Background(), tc.want/2)
				defer cancel()
				if _, err := l.Acquire(ctx, "a.example"); !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("acquire: %v, want deadline exceeded", err)
				}
				touch(t, l, "a.example")
				if got := time.Since(start); got != tc.want {
					t.Fatalf("next request granted at %v, want %v", got, tc.want)
				}
			})
		})
	}
}

func TestLimiterIdleHostTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newTestLimiter(t, LimiterOptions{IdleHostTTL: time.Minute})
		for i := range 1000 {
			touch(t, l, fmt.Sprintf("h%d.example", i))
		}
		held, err := l.Acquire(context.Background(), "held.example")
		if err != nil {
			t.Fatal(err)
		}
		l.SetCrawlDelay("delayed.example", 10*time.Minute)
		touch(t, l, "delayed.example")
		if got := l.Stats().Hosts; got != 1002 {
			t.Fatalf("hosts %d, want 1002", got)
		}
		time.Sleep(2 * time.Minute)
		touch(t, l, "new.example")
		// Kept: the host in flight, the one whose crawl delay has not
		// elapsed, and the new one.
		if got := l.Stats().Hosts; got != 3 {
			t.Fatalf("hosts after 2m idle: %d, want 3", got)
		}
		time.Sleep(10 * time.Minute)
		touch(t, l, "new2.example")
		if got := l.Stats().Hosts; got != 2 {
			t.Fatalf("hosts after the delay elapsed: %d, want 2 (held, new2)", got)
		}
		held()

		// A crawler touching a new host every second for an hour keeps
		// about IdleHostTTL + IdleHostTTL/2 of them.
		maxHosts := 0
		for i := range 3600 {
			touch(t, l, fmt.Sprintf("stream%d.example", i))
			maxHosts = max(maxHosts, l.Stats().Hosts)
			time.Sleep(time.Second)
		}
		if maxHosts > 100 {
			t.Fatalf("host map grew to %d with a 1m idle ttl", maxHosts)
		}
	})
}

// A host is forgotten only when a fresh state would behave the same: its
// bucket is full again and its pause is over.
func TestLimiterForgetsOnlyWhenHarmless(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newTestLimiter(t, LimiterOptions{IdleHostTTL: time.Second, HostRate: 1.0 / 60, HostBurst: 1})
		start := time.Now()
		touchAt := func(host string) time.Duration {
			t.Helper()
			touch(t, l, host)
			return time.Since(start)
		}
		touchAt("slowrate.example")
		l.PauseHost("paused.example", start.Add(time.Hour))
		time.Sleep(5 * time.Second)
		touchAt("other.example") // sweeps
		if got := l.Stats().Hosts; got != 3 {
			t.Fatalf("hosts %d, want 3: nothing may be forgotten yet", got)
		}
		if got := touchAt("slowrate.example"); got != time.Minute {
			t.Fatalf("second request at %v, want 1m: the bucket was forgotten", got)
		}
		if got := touchAt("paused.example"); got != time.Hour {
			t.Fatalf("paused host served at %v, want 1h", got)
		}
	})
}

// Many goroutines, real clock, -race: the caps are never exceeded and the
// limiter ends empty.
func TestLimiterStress(t *testing.T) {
	const (
		global  = 8
		perHost = 2
		hosts   = 20
		workers = 200
		rounds  = 20
	)
	l := newTestLimiter(t, LimiterOptions{GlobalConcurrency: global, HostConcurrency: perHost, HostRate: 20000, HostBurst: 4})
	var (
		g         peak
		h         [hosts]peak
		granted   atomic.Int64
		cancelled atomic.Int64
		wg        sync.WaitGroup
	)
	for w := range workers {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(w), 1))
			for range rounds {
				hi := rnd.IntN(hosts)
				ctx, cancel := context.WithCancel(context.Background())
				if rnd.IntN(4) == 0 {
					cancel() // sometimes give up at once, sometimes soon
				} else if rnd.IntN(4) == 0 {
					ctx, cancel = context.WithTimeout(ctx, time.Duration(rnd.IntN(200))*time.Microsecond)
				}
				rel, err := l.Acquire(ctx, fmt.Sprintf("h%d.example", hi))
				cancel()
				if err != nil {
					cancelled.Add(1)
					continue
				}
				granted.Add(1)
				g.inc()
				h[hi].inc()
				time.Sleep(time.Duration(rnd.IntN(100)) * time.Microsecond)
				h[hi].dec()
				g.dec()
				rel()
			}
		})
	}
	wg.Wait()
	if got := g.max.Load(); got > global {
		t.Errorf("global concurrency peaked at %d > %d", got, global)
	}
	for i := range h {
		if got := h[i].max.Load(); got > perHost {
			t.Errorf("host %d concurrency peaked at %d > %d", i, got, perHost)
		}
	}
	if granted.Load()+cancelled.Load() != workers*rounds || granted.Load() == 0 {
		t.Errorf("granted %d, cancelled %d", granted.Load(), cancelled.Load())
	}
	if s := l.Stats(); s.Waiting != 0 || s.InFlight != 0 || s.ReadyHosts != 0 {
		t.Errorf("stats after the run: %+v", s)
	}
	t.Logf("granted %d, cancelled %d", granted.Load(), cancelled.Load())
}

func TestLimiterOptionsValidate(t *testing.T) {
	cases := []optionsCase[LimiterOptions]{
		{"zero", LimiterOptions{}, true},
		{"defaults", DefaultLimiterOptions(), true},
		{"unlimited rate", LimiterOptions{HostRate: math.Inf(1)}, true},
		{"negative global", LimiterOptions{GlobalConcurrency: -1}, false},
		{"negative host", LimiterOptions{HostConcurrency: -1}, false},
		{"negative rate", LimiterOptions{HostRate: -1}, false},
		{"nan rate", LimiterOptions{HostRate: math.NaN()}, false},
		{"rate too low", LimiterOptions{HostRate: 1e-9}, false},
		{"negative burst", LimiterOptions{HostBurst: -1}, false},
		{"negative ttl", LimiterOptions{IdleHostTTL: -time.Second}, false},
	}
	checkValidate(t, cases)
	for _, tc := range cases {
		if _, err := NewLimiter(tc.opts); (err == nil) != tc.ok {
			t.Errorf("%s: NewLimiter error %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
	l := newTestLimiter(t, LimiterOptions{HostBurst: 5})
	if o := l.Options(); o.GlobalConcurrency != 64 || o.HostConcurrency != 2 || o.HostRate != 1 || o.HostBurst != 5 || o.IdleHostTTL != 10*time.Minute || o.Clock == nil {
		t.Errorf("options with defaults: %+v", o)
	}
}

func TestHostKey(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"http://Example.COM/feed", "example.com"},
		{"https://example.com:443/feed", "example.com"},
		{"http://example.com:80/", "example.com"},
		{"http://example.com:8080/", "example.com:8080"},
		{"https://example.com:80/", "example.com:80"},
		{"http://[::1]:8080/x", "[::1]:8080"},
		{"http://[::1]/x", "[::1]"},
	} {
		got, err := HostKey(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("HostKey(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"ftp://example.com/", "/relative", "http://", "mailto:x@example.com", "http://%zz"} {
		if _, err := HostKey(in); !errors.Is(err, ErrInvalidURL) {
			t.Errorf("HostKey(%q) error %v, want ErrInvalidURL", in, err)
		}
	}
}

func BenchmarkLimiterAcquireRelease(b *testing.B) {
	l, err := NewLimiter(LimiterOptions{HostRate: math.Inf(1), HostConcurrency: 1 << 20, GlobalConcurrency: 1 << 20})
	if err != nil {
		b.Fatal(err)
	}
	hosts := make([]string, 1000)
	for i := range hosts {
		hosts[i] = fmt.Sprintf("h%d.example", i)
	}
	ctx := context.Background()
	i := 0
	for b.Loop() {
		rel, err := l.Acquire(ctx, hosts[i%len(hosts)])
		if err != nil {
			b.Fatal(err)
		}
		rel()
		i++
	}
}
