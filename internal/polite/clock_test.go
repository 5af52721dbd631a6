package polite

import (
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/newsflow/newsflow/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeClock is a Clock whose time moves only when the test says so, and
// whose timers fire when it passes them. Its time changes only under mu.
type fakeClock struct {
	*testutil.Clock
	mu     sync.Mutex
	timers []*fakeTimer
}

type fakeTimer struct {
	c    *fakeClock
	at   time.Time
	ch   chan time.Time
	done bool
}

func newFakeClock() *fakeClock {
	return &fakeClock{Clock: testutil.NewClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))}
}

func (c *fakeClock) NewTimer(d time.Duration) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.Now()
	t := &fakeTimer{c: c, at: now.Add(d), ch: make(chan time.Time, 1)}
	if d <= 0 {
		t.done = true
		t.ch <- now
		return t
	}
	c.timers = append(c.timers, t)
	return t
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if t.done {
		return false
	}
	t.done = true
	t.c.timers = slices.DeleteFunc(t.c.timers, func(x *fakeTimer) bool { return x == t })
	return true
}

// Advance moves the clock forward by d and fires the timers that are due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.Clock.Advance(d)
	c.fireLocked()
}

// AdvanceToNext moves the clock to the earliest pending timer and fires it.
// It reports false when no timer is pending.
func (c *fakeClock) AdvanceToNext() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.timers) == 0 {
		return false
	}
	next := c.timers[0].at
	for _, t := range c.timers[1:] {
		if t.at.Before(next) {
			next = t.at
		}
	}
	if now := c.Now(); next.After(now) {
		c.Clock.Advance(next.Sub(now))
	}
	c.fireLocked()
	return true
}

func (c *fakeClock) fireLocked() {
	now := c.Now()
	c.timers = slices.DeleteFunc(c.timers, func(t *fakeTimer) bool {
		if t.at.After(now) {
			return false
		}
		t.done = true
		t.ch <- now
		return true
	})
}

func (c *fakeClock) pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}
