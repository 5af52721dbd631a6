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
	for _, o := range []LimiterOptions{{IPBurst: -1}, {UserInterval: -time.Second}, {MaxBackoff: -1}, {MaxKeys: -1}} {
		if _, err := NewLimiter(o, nil); err == nil {
			t.Errorf("NewLimiter(%+v) accepted", o)
		}
	}
	d := DefaultLimiterOptions()
	if d.IPBurst != 10 || d.IPInterval != 6*time.Second || d.UserBurst != 5 || d.UserInterval != 30*time.Second || d.MaxBackoff != 15*time.Minute {
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

// fail makes n failed attempts from ip on user, each allowed.
func fail(t *testing.T, l *Limiter, ip, user string, n int) {
	t.Helper()
	for range n {
		expect(t, l, ip, user, true, 0)
		l.Failed(ip, user)
	}
}

// Failures back off per (username, address), doubling, up to MaxBackoff;
// the same username from another address is not affected.
func TestLimiterBackoffPerUserAndAddress(t *testing.T) {
	l, c := newTestLimiter(t, LimiterOptions{IPBurst: 1000, IPInterval: time.Millisecond})
	const attacker, owner = "198.51.100.7", "203.0.113.1"
	fail(t, l, attacker, "alice", 4)
	expect(t, l, attacker, "alice", true, 0) // the fifth try
	l.Failed(attacker, "ALICE")              // usernames count regardless of case
	for _, wait := range []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 15 * time.Minute, 15 * time.Minute} {
		expect(t, l, attacker, "Alice", false, wait)
		// The owner, from another address, is never refused.
		expect(t, l, owner, "alice", true, 0)
		expect(t, l, attacker, "bob", true, 0) // another username from the attacker
		c.Advance(wait)
		expect(t, l, attacker, "alice", true, 0)
		l.Failed(attacker, "alice")
	}
	// A success forgets the pair's failures; the owner's are its own.
	fail(t, l, owner, "alice", 4)
	l.Succeeded(owner, "alice")
	fail(t, l, owner, "alice", 5)
	expect(t, l, owner, "alice", false, 30*time.Second)
	c.Advance(30 * time.Second)
	expect(t, l, owner, "alice", true, 0)
	l.Succeeded(owner, "alice")
	fail(t, l, owner, "alice", 5)
	// The attacker's pair backs off still (30s of it went by).
	expect(t, l, attacker, "alice", false, 15*time.Minute-30*time.Second)
	// A pair untouched for twice the longest backoff starts over.
	c.Advance(30 * time.Minute)
	fail(t, l, attacker, "alice", 5)
	expect(t, l, attacker, "alice", false, 30*time.Second)
}

// TestLimiterIndependence checks that a refused attempt takes nothing,
// and that the answer waits for the slower of the address's bucket and
// the pair's backoff.
func TestLimiterIndependence(t *testing.T) {
	l, c := newTestLimiter(t, LimiterOptions{})
	const ip = "192.0.2.7"
	fail(t, l, ip, "alice", 5) // 5 of the address's 10 left
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
	// Successful attempts take the address's tokens too.
	c.Advance(time.Minute)
	for range 10 {
		expect(t, l, ip, "dave", true, 0)
		l.Succeeded(ip, "dave")
	}
	expect(t, l, ip, "dave", false, 6*time.Second)
}

func TestLimiterInvalidUsernames(t *testing.T) {
	l, _ := newTestLimiter(t, LimiterOptions{})
	for i := range 50 {
		expect(t, l, fmt.Sprintf("192.0.2.%d", i), "not a name!", true, 0)
	}
	for i := range 50 {
		l.Failed(fmt.Sprintf("192.0.2.%d", i), "not a name!")
	}
	if _, pairs := l.Len(); pairs != 0 {
		t.Fatalf("%d pairs for invalid names", pairs)
	}
	l.Succeeded("192.0.2.1", "not a name!") // no effect, no panic
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
		ip := fmt.Sprintf("10.%d.%d.%d", i>>16, i>>8&0xff, i&0xff)
		l.Allow(ip, fmt.Sprintf("user%d", i))
		l.Failed(ip, fmt.Sprintf("user%d", i))
		if ips, pairs := l.Len(); ips > 100 || pairs > 100 {
			t.Fatalf("after %d keys: tracking %d addresses and %d pairs", i+1, ips, pairs)
		}
	}
	// The most recent buckets are kept: the last address is still limited.
	for range 9 {
		l.Allow("10.0.39.15", "x!") // 10.0.39.15 is key 9999
	}
	expect(t, l, "10.0.39.15", "x!", false, 6*time.Second)

	// Idle buckets (refilled) and pairs (twice the longest backoff) are
	// dropped.
	c.Advance(30 * time.Minute)
	l.Allow("192.0.2.1", "someone")
	l.Failed("192.0.2.1", "someone")
	if ips, pairs := l.Len(); ips != 1 || pairs != 1 {
		t.Fatalf("after all refilled: tracking %d addresses and %d pairs, want 1 and 1", ips, pairs)
	}
}

// TestLimiterIdleKeepsLimits checks that idle eviction drops only buckets
// that have refilled and pairs quiet for twice the longest backoff.
func TestLimiterIdleKeepsLimits(t *testing.T) {
	l, c := newTestLimiter(t, LimiterOptions{MaxBackoff: time.Minute})
	fail(t, l, "192.0.2.1", "alice", 5)
	// The address's bucket refills in 60s; the pair's backoff (30s) is
	// over, and it is kept for 2m.
	c.Advance(60 * time.Second)
	expect(t, l, "192.0.2.2", "bob", true, 0)
	if ips, pairs := l.Len(); ips != 1 || pairs != 1 {
		t.Fatalf("tracking %d addresses and %d pairs, want 1 and 1", ips, pairs)
	}
	expect(t, l, "192.0.2.1", "alice", true, 0)
	l.Failed("192.0.2.1", "alice")
	expect(t, l, "192.0.2.1", "alice", false, time.Minute) // min(30s×2, MaxBackoff)
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
					l.Failed("192.0.2.1", fmt.Sprintf("user%d", g))
					l.Succeeded("192.0.2.1", fmt.Sprintf("user%d", g))
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
