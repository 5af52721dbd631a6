package lru

import (
	"strconv"
	"testing"
	"time"
)

func TestCacheEvictsLeastRecentlyUsed(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	c := New[string, int](3, 0)
	for i := range 3 {
		c.Add(strconv.Itoa(i), i, now)
	}
	if _, ok := c.Get("0", now); !ok { // 0 is now the most recently used
		t.Fatal("0 missing")
	}
	if !c.Add("3", 3, now) {
		t.Error("Add to a full cache reported no eviction")
	}
	if _, ok := c.Peek("1", now); ok {
		t.Error("1, the least recently used, was kept")
	}
	for _, k := range []string{"0", "2", "3"} {
		if _, ok := c.Peek(k, now); !ok {
			t.Errorf("%s was evicted", k)
		}
	}
	if c.Len() != 3 {
		t.Errorf("Len %d, want 3", c.Len())
	}
}

func TestCacheTTL(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	c := New[string, int](10, time.Minute)
	c.Add("a", 1, now)
	c.Add("b", 2, now.Add(30*time.Second))
	// Get marks use: a stays while it is used within the TTL.
	if v, ok := c.Get("a", now.Add(50*time.Second)); !ok || v != 1 {
		t.Fatalf("a at 50s: %v %v", v, ok)
	}
	if _, ok := c.Peek("a", now.Add(109*time.Second)); !ok {
		t.Error("a dropped 59s after its last use")
	}
	// Peek does not mark use, and an idle entry reads as absent.
	if _, ok := c.Peek("b", now.Add(90*time.Second)); ok {
		t.Error("b present a minute after its last use")
	}
	c.EvictIdle(now.Add(95 * time.Second)) // b idle; a used at 50s is not
	if c.Len() != 1 {
		t.Errorf("Len %d after EvictIdle, want 1", c.Len())
	}
	if _, ok := c.Get("a", now.Add(111*time.Second)); ok {
		t.Error("a present 61s after its last use")
	}
	if c.Len() != 0 {
		t.Errorf("Len %d: Get of an idle entry did not drop it", c.Len())
	}
}

// BenchmarkAddFull measures a new key in a full cache: O(1), whatever its
// size.
func BenchmarkAddFull(b *testing.B) {
	for _, size := range []int{10_000, 100_000} {
		b.Run(strconv.Itoa(size), func(b *testing.B) {
			now := time.Unix(1_800_000_000, 0)
			c := New[string, int](size, 10*time.Minute)
			for i := range size {
				c.Add("k"+strconv.Itoa(i), i, now)
			}
			keys := make([]string, 1<<16)
			for i := range keys {
				keys[i] = "n" + strconv.Itoa(i)
			}
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				c.Add(keys[i&(len(keys)-1)], i, now)
			}
		})
	}
}
