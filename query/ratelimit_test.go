package query

import (
	"strconv"
	"testing"
	"time"

	"github.com/newsflow/newsflow/query/auth"
)

// The addresses of one IPv6 /64 share a bucket; other /64s and IPv4
// addresses have their own.
func TestRateLimitKeysIPv6Per64(t *testing.T) {
	ls := newLimiters(1, 2, 100, time.Minute)
	now := time.Unix(1_800_000_000, 0)
	take := func(addr string) bool {
		ok, _ := ls.allow(auth.ClientKey(addr), now)
		return ok
	}
	if !take("2001:db8:1:2::1") || !take("2001:db8:1:2:ffff::9") {
		t.Fatal("the burst of 2 refused")
	}
	if take("2001:db8:1:2:abcd::1") {
		t.Error("a third address of the same /64 got a token beyond the burst")
	}
	if !take("2001:db8:1:3::1") || !take("192.0.2.1") || !take("::ffff:192.0.2.1") {
		t.Error("another /64 or an IPv4 address shared the /64's bucket")
	}
	if take("192.0.2.1") {
		t.Error("192.0.2.1 and ::ffff:192.0.2.1 have separate buckets")
	}
}

// A full limiter drops its least recently used bucket: the newest keys
// keep theirs.
func TestRateLimitBounded(t *testing.T) {
	ls := newLimiters(1, 1, 10, time.Hour)
	now := time.Unix(1_800_000_000, 0)
	for i := range 100 {
		if ok, _ := ls.allow("k"+strconv.Itoa(i), now); !ok {
			t.Fatalf("new key %d refused", i)
		}
	}
	if n := ls.mu.c.Len(); n != 10 {
		t.Errorf("%d buckets kept, want 10", n)
	}
	if ok, _ := ls.allow("k99", now); ok {
		t.Error("k99's bucket was dropped although it is among the 10 most recent")
	}
	if ok, _ := ls.allow("k0", now); !ok {
		t.Error("k0's bucket was kept beyond the bound")
	}
}

// BenchmarkRateLimitNewKey measures a request from a new address when the
// limiter is full (100,000 addresses).
func BenchmarkRateLimitNewKey(b *testing.B) {
	const keys = 100_000
	ls := newLimiters(200, 400, keys, 10*time.Minute)
	now := time.Unix(1_800_000_000, 0)
	for i := range keys {
		ls.allow("a"+strconv.Itoa(i), now)
	}
	fresh := make([]string, 1<<16)
	for i := range fresh {
		fresh[i] = "b" + strconv.Itoa(i)
	}
	for i := 0; b.Loop(); i++ {
		ls.allow(fresh[i&(len(fresh)-1)], now)
	}
}
