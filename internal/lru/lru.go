// Package lru is the bounded cache the node uses wherever it keeps state
// per client, user or reader (rate limiters, feed lists): at most Size
// entries, the least recently used evicted first in O(1)
// (github.com/hashicorp/golang-lru), and entries unused for longer than a
// TTL treated as absent and dropped.
//
// The clock is the caller's (every method takes now), so that tests and
// token buckets read one clock. A Cache is not safe for concurrent use:
// its owner holds a lock around it, usually the one that guards what the
// entries describe.
package lru

import (
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// Cache maps keys to values. The zero value is not usable: call New.
type Cache[K comparable, V any] struct {
	l   *simplelru.LRU[K, *entry[V]]
	ttl time.Duration
}

type entry[V any] struct {
	v    V
	used time.Time
}

// New returns a cache of at most size entries (at least 1) whose entries
// are dropped when unused for ttl (0: never).
func New[K comparable, V any](size int, ttl time.Duration) *Cache[K, V] {
	l, err := simplelru.NewLRU[K, *entry[V]](max(size, 1), nil)
	if err != nil {
		panic(err) // only for a size below 1
	}
	return &Cache[K, V]{l: l, ttl: ttl}
}

func (c *Cache[K, V]) idle(e *entry[V], now time.Time) bool {
	return c.ttl > 0 && now.Sub(e.used) >= c.ttl
}

// Get returns key's value and marks it used at now. An entry unused for
// the TTL is removed and reported absent.
func (c *Cache[K, V]) Get(key K, now time.Time) (V, bool) {
	e, ok := c.l.Get(key)
	if ok && c.idle(e, now) {
		c.l.Remove(key)
		ok = false
	}
	if !ok {
		var zero V
		return zero, false
	}
	e.used = now // Get moved it to the front
	return e.v, true
}

// Peek returns key's value without marking it used (nor removing it when
// idle: it reports it absent).
func (c *Cache[K, V]) Peek(key K, now time.Time) (V, bool) {
	e, ok := c.l.Peek(key)
	if !ok || c.idle(e, now) {
		var zero V
		return zero, false
	}
	return e.v, true
}

// Add sets key's value, used at now. When the cache is full the least
// recently used entry makes room; it reports whether one did.
func (c *Cache[K, V]) Add(key K, v V, now time.Time) (evicted bool) {
	return c.l.Add(key, &entry[V]{v: v, used: now})
}

// Remove drops key.
func (c *Cache[K, V]) Remove(key K) { c.l.Remove(key) }

// EvictIdle drops the entries unused for the TTL, in time proportional to
// their number (they are the least recently used).
func (c *Cache[K, V]) EvictIdle(now time.Time) {
	for {
		_, e, ok := c.l.GetOldest()
		if !ok || !c.idle(e, now) {
			return
		}
		c.l.RemoveOldest()
	}
}

// Len returns the number of entries, idle ones included until they are
// dropped.
func (c *Cache[K, V]) Len() int { return c.l.Len() }
