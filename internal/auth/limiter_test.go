package auth

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/newsflow/newsflow/internal/testutil"
)

func newTestLimiter(t *testing.T, opts LimiterOptions) (*Limiter, *testutil.Clock) {
	t.Helper()
	c := newClock()
	l, err := NewLimiter(opts, c.Now)
	if err != nil {
		t.Fatal(err)
	}
	return l, c
}

// expect checks one Allow call.
func expect(t *testing.T, l *Limiter, ip, user string, ok bool, retry time.Duration) {
	t.Helper()
	gotOK, gotRetry := l.Allow(ip, user)
	if gotOK != ok || gotRetry != retry {
		t.Fatalf("Allow(%q, %q) = %v, %v; want %v, %v", ip, user, gotOK, gotRetry, ok, retry)
	}
}

func TestLimiterOptions(t *testing.T) {
	if err := (LimiterOptions{}).Validate(); err != nil {
		t.Error(err)
	}
	for _, o := range []LimiterOptions{{IPBurst: -1}, {UserInterval: -time.Second}, {MaxKeys: -1}} {
		if _, err := NewLimiter(o, nil); err == nil {
			t.Errorf("NewLimiter(%+v) accepted", o)
		}
	}
	d := DefaultLimiterOptions()
	if d.IPBurst != 10 || d.IPInterval != 6*time.Second || d.UserBurst != 5 || d.UserInterval != 30*time.Second {
		t.Errorf("DefaultLimiterOptions() = %+v", d)
	}
}

func TestLimiterIPBurstAndRefill(t *testing.T) {
	l, c := newTestLimiter(t, LimiterOptions{})
	for i := range 10 {
		expect(t, l, "192.0.2.1", fmt.Sprintf("user%d", i), true, 0)
	}
	expect(t, l, "192.0.2.1", "newuser", false, 6*time.Second)
	expect(t, l, "192.0.2.2", "newuser", true, 0) // another address
	c.Advance(5 * time.Second)
	expect(t, l, "192.0.2.1", "newuser", false, time.Second)
	c.Advance(time.Second)
	expect(t, l, "192.0.2.1", "newuser", true, 0)
	expect(t, l, "192.0.2.1", "newuser", false, 6*time.Second)
	// Refills up to the burst, not beyond.
	c.Advance(time.Hour)
	for i := range 10 {
		expect(t, l, "192.0.2.1", fmt.Sprintf("later%d", i), true, 0)
	}
	expect(t, l, "192.0.2.1", "newuser", false, 6*time.Second)
}

func TestLimiterUserBurstAndRefill(t *testing.T) {
	l, c := newTestLimiter(t, LimiterOptions{})
	for i := range 5 {
		expect(t, l, fmt.Sprintf("198.51.100.%d", i), []string{"alice", "ALICE", "Alice"}[i%3], true, 0)
	}
	expect(t, l, "198.51.100.99", "aLiCe", false, 30*time.Second)
	expect(t, l, "198.51.100.99", "bob", true, 0) // another user, same address
	c.Advance(20 * time.Second)
	expect(t, l, "203.0.113.1", "alice", false, 10*time.Second)
	c.Advance(10 * time.Second)
	expect(t, l, "203.0.113.1", "alice", true, 0)
	expect(t, l, "203.0.113.2", "alice", false, 30*time.Second)

	// A successful login forgets the username's attempts.
	l.ResetUser("ALICE")
	for range 5 {
		expect(t, l, "203.0.113.3", "alice", true, 0)
	}
	expect(t, l, "203.0.113.3", "alice", false, 30*time.Second)
}

// TestLimiterIndependence checks that a refused attempt takes nothing,
// and that the answer waits for the slower bucket.
func TestLimiterIndependence(t *testing.T) {
	l, c := newTestLimiter(t, LimiterOptions{})
	const ip = "192.0.2.7"
	for range 5 {
		expect(t, l, ip, "alice", true, 0) // 5 of the address's 10 left
	}
	for range 20 {
		expect(t, l, ip, "alice", false, 30*time.Second) // refused: take nothing
	}
	for i := range 5 {
		expect(t, l, ip, fmt.Sprintf("user%d", i), true, 0)
	}
	expect(t, l, ip, "carol", false, 6*time.Second) // the address is out
	// Both out: the later of the two.
	expect(t, l, ip, "alice", false, 30*time.Second)
	c.Advance(6 * time.Second)
	expect(t, l, ip, "alice", false, 24*time.Second)
	expect(t, l, ip, "carol", true, 0)
}

func TestLimiterInvalidUsernames(t *testing.T) {
	l, _ := newTestLimiter(t, LimiterOptions{})
	for i := range 50 {
		expect(t, l, fmt.Sprintf("192.0.2.%d", i), "not a name!", true, 0)
	}
	if _, users := l.Len(); users != 0 {
		t.Fatalf("%d username buckets for invalid names", users)
	}
	l.ResetUser("not a name!") // no effect, no panic
}

func TestLimiterIPKeys(t *testing.T) {
	for _, tc := range []struct{ a, b string }{
		{"192.0.2.1", "192.0.2.1:4321"},
		{"192.0.2.1", "::ffff:192.0.2.1"},
		{"2001:db8::1", "2001:db8::2"},
		{"2001:db8::1", "[2001:db8::ffff]:443"},
		{"fe80::1%eth0", "fe80::2"},
	} {
		if ka, kb := ClientKey(tc.a), ClientKey(tc.b); ka != kb {
			t.Errorf("ClientKey(%q) = %q, ClientKey(%q) = %q; want one bucket", tc.a, ka, tc.b, kb)
		}
	}
	for _, tc := range []struct{ a, b string }{
		{"192.0.2.1", "192.0.2.2"},
		{"2001:db8::1", "2001:db8:0:1::1"},
		{"unix", "pipe"},
	} {
		if ClientKey(tc.a) == ClientKey(tc.b) {
			t.Errorf("ClientKey(%q) == ClientKey(%q)", tc.a, tc.b)
		}
	}
	long := string(make([]byte, 10000))
	if k := ClientKey(long); len(k) > 64 {
		t.Errorf("ipKey of garbage is %d bytes", len(k))
	}
}

func TestLimiterBoundedMemory(t *testing.T) {
	l, c := newTestLimiter(t, LimiterOptions{MaxKeys: 100})
	for i := range 10_000 {
		l.Allow(fmt.Sprintf("10.%d.%d.%d", i>>16, i>>8&0xff, i&0xff), fmt.Sprintf("user%d", i))
		if ips, users := l.Len(); ips > 100 || users > 100 {
			t.Fatalf("after %d keys: tracking %d addresses and %d users", i+1, ips, users)
		}
	}
	// The most recent buckets are kept: the last address is still limited.
	for range 9 {
		l.Allow("10.0.39.15", "x!") // 10.0.39.15 is key 9999
	}
	expect(t, l, "10.0.39.15", "x!", false, 6*time.Second)

	// Idle buckets (refilled) are dropped.
	c.Advance(5 * time.Minute)
	l.Allow("192.0.2.1", "someone")
	if ips, users := l.Len(); ips != 1 || users != 1 {
		t.Fatalf("after all refilled: tracking %d addresses and %d users, want 1 and 1", ips, users)
	}
}

// TestLimiterIdleKeepsLimits checks that idle eviction drops only buckets
// that have refilled.
func TestLimiterIdleKeepsLimits(t *testing.T) {
	l, c := newTestLimiter(t, LimiterOptions{})
	for range 5 {
		l.Allow("192.0.2.1", "alice")
	}
	// Alice's bucket refills in 5×30s = 150s; the address's in 60s.
	c.Advance(60 * time.Second)
	l.Allow("192.0.2.2", "bob")
	if ips, users := l.Len(); ips != 1 || users != 2 {
		t.Fatalf("tracking %d addresses and %d users, want 1 and 2", ips, users)
	}
	for range 2 {
		expect(t, l, "192.0.2.3", "alice", true, 0)
	}
	expect(t, l, "192.0.2.3", "alice", false, 30*time.Second)
}

func TestLimiterConcurrent(t *testing.T) {
	l, c := newTestLimiter(t, LimiterOptions{})
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				if ok, _ := l.Allow("192.0.2.1", fmt.Sprintf("user%d", g)); ok {
					allowed.Add(1)
				}
				if i%100 == 0 {
					l.Len()
					l.ResetUser(fmt.Sprintf("user%d", g))
				}
			}
		})
	}
	wg.Wait()
	if n := allowed.Load(); n != 10 {
		t.Fatalf("%d attempts allowed from one address with a frozen clock, want 10", n)
	}
	c.Advance(time.Minute)
	if ok, _ := l.Allow("192.0.2.1", "user0"); !ok {
		t.Fatal("refused after refill")
	}
}
