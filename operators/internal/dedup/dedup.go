// Package dedup remembers the ids of the events a task has applied, for a
// horizon of event time, so that an event delivered again (a producer's
// retry, a file produced twice, a replayed log) changes nothing.
//
// # Semantics
//
// A [Set] belongs to one task and is a deterministic function of its
// [Set.Add] calls. Its watermark is the largest timestamp added. Event time
// is cut into buckets of width Horizon/(Buckets-1) (rounded up to a
// millisecond); at watermark W the set remembers the ids added with a
// timestamp in the newest Buckets buckets, so an id is remembered for at
// least Horizon of event time after its own timestamp, and at most one
// bucket longer. [Set.TooOld] tells a caller that an event is older than
// that: the set could not tell whether it was applied, so the caller must
// not apply it (the operators that use a Set reject such events as older
// than their largest window, which the horizon covers).
//
// An id is remembered by its 64-bit fingerprint (xxHash64), not its text. Two
// different ids with the same fingerprint would be taken for one: with n ids
// remembered, a new id collides with probability n/2^64 (5e-13 at 10
// million).
//
// # Persistence
//
// [Set.Flush] stages, relative to the task's namespace and under the byte
// Options.Prefix, one key per bucket that received ids since the previous
// Flush:
//
//	prefix | bucket (uint64 BE) | chunk (uint64 BE) → fingerprints (8 bytes each, BE)
//
// and removes the buckets that expired with one DeleteRange. A chunk number
// grows with every Flush, so chunks of one bucket never overwrite each other;
// re-applying a batch rewrites the same chunk. On disk an id costs its 8
// bytes plus a key per bucket and Flush.
//
// # Memory
//
// The fingerprints themselves stay on disk. In memory the set keeps the ids
// added since the last Flush (exactly), and a cuckoo filter (filter.go) of
// every remembered id: 16 bits of its fingerprint and 16 bits of its bucket
// in 4 bytes, between 35% and 93% full, so 4.3-11 bytes per id (about 5 in a
// steady stream). When the filter matches an id that was flushed, the set
// reads the bucket the entry names back from disk to tell a repeat from a
// false match (about one new id in 4,000); a bucket where a repeat was found
// is cached, so a burst of repeats reads each bucket once. The set reads with
// the [state.Reader] given to [Set.Load], which must see every batch the set
// flushed into once it is committed.
package dedup

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
	"unsafe"

	"github.com/cespare/xxhash/v2"
	"github.com/newsflow/newsflow/state"
)

// Options configures a [Set].
type Options struct {
	// Horizon is how long, in event time behind the watermark, an id is
	// remembered at least. Required.
	Horizon time.Duration
	// Buckets is how many buckets the horizon is cut into; ids expire a
	// bucket at a time. Zero means 64. At most MaxBuckets.
	Buckets int
	// Prefix is the first byte of the set's keys in the task's namespace.
	Prefix byte
}

// MaxBuckets bounds Options.Buckets (bucket tags are 16 bits).
const MaxBuckets = 1 << 14

// Validate reports invalid options.
func (o Options) Validate() error {
	switch {
	case o.Horizon < time.Millisecond:
		return fmt.Errorf("dedup: horizon %v must be at least 1ms", o.Horizon)
	case o.Buckets < 0 || o.Buckets == 1 || o.Buckets > MaxBuckets:
		return fmt.Errorf("dedup: %d buckets, want 2..%d", o.Buckets, MaxBuckets)
	}
	return nil
}

// Fingerprint is the 64-bit fingerprint an id is remembered by.
type Fingerprint uint64

// FingerprintOf returns the fingerprint of an event id.
func FingerprintOf(id string) Fingerprint {
	f := Fingerprint(xxhash.Sum64String(id))
	if f <= tomb {
		f += 2 // 0 and 1 mark empty and deleted slots
	}
	return f
}

const (
	empty Fingerprint = 0
	tomb  Fingerprint = 1
)

// Set remembers event ids by fingerprint for a horizon of event time. It is
// not safe for concurrent use.
type Set struct {
	opts  Options
	width int64 // ms
	n     int64 // buckets

	started bool
	hi, lo  int64 // remembered buckets are [lo, hi]

	r       state.Reader // the committed state; nil until Load
	filter  *filter
	pending map[Fingerprint]int64 // added since the last Flush → bucket
	order   []pendingID           // the same, in the order added
	matches []uint16              // scratch for filter lookups
	cache   bucketCache

	buckets   []int64 // scratch for Flush
	chunk     uint64
	deletedLo int64
	key, val  []byte
}

// New returns an empty set. It panics if opts.Validate fails: validate
// options that come from configuration first. Load it before the first
// Flush.
func New(opts Options) *Set {
	if err := opts.Validate(); err != nil {
		panic(err)
	}
	if opts.Buckets == 0 {
		opts.Buckets = 64
	}
	hz := opts.Horizon.Milliseconds()
	nb := int64(opts.Buckets)
	return &Set{
		opts: opts, n: nb, width: (hz + nb - 2) / (nb - 1), deletedLo: math.MinInt64,
		filter: newFilter(0), pending: map[Fingerprint]int64{},
	}
}

type pendingID struct {
	b int64
	f Fingerprint
}

// Horizon returns the event time an id is remembered for at least.
func (s *Set) Horizon() time.Duration { return s.opts.Horizon }

// Len returns how many ids the set remembers.
func (s *Set) Len() int { return s.filter.count }

// bucket returns the bucket of timestamp ts.
func (s *Set) bucket(ts int64) int64 {
	q := ts / s.width
	if ts%s.width != 0 && ts < 0 {
		q--
	}
	return q
}

// TooOld reports whether an event at ts is older than the set remembers at
// its watermark: whether it was applied before cannot be told.
func (s *Set) TooOld(ts int64) bool { return s.started && s.bucket(ts) < s.lo }

// Contains reports whether the id with fingerprint f is remembered. The
// error is the store's, when a filter match had to be verified on disk.
func (s *Set) Contains(f Fingerprint) (bool, error) {
	if !s.started {
		return false, nil
	}
	if _, ok := s.pending[f]; ok {
		return true, nil
	}
	s.matches = s.filter.lookup(f, s.matches[:0])
	for _, t := range s.matches {
		// Every remembered bucket is in [s.lo, s.hi], fewer than 2^16
		// apart, so a tag identifies its bucket.
		b := s.lo + int64(t-uint16(s.lo))
		if ok, err := s.flushed(b, f); ok || err != nil {
			return ok, err
		}
	}
	return false, nil
}

// flushed reports whether f was flushed in bucket b. A bucket where a
// repeat was found is cached: repeats come in bursts. A false match, the
// common case, only scans.
func (s *Set) flushed(b int64, f Fingerprint) (bool, error) {
	if s.r == nil {
		return false, nil // nothing was flushed: Flush requires Load
	}
	if fps, ok := s.cache.get(b); ok {
		_, found := fps[f]
		return found, nil
	}
	found := false
	if err := s.scanBucket(b, func(fps []byte) {
		for j := 0; j < len(fps) && !found; j += 8 {
			found = Fingerprint(binary.BigEndian.Uint64(fps[j:])) == f
		}
	}); err != nil || !found {
		return false, err
	}
	all := map[Fingerprint]struct{}{}
	if err := s.scanBucket(b, func(fps []byte) {
		for j := 0; j < len(fps); j += 8 {
			all[Fingerprint(binary.BigEndian.Uint64(fps[j:]))] = struct{}{}
		}
	}); err != nil {
		return false, err
	}
	s.cache.put(b, all)
	return true, nil
}

// scanBucket calls fn with each chunk flushed in bucket b.
func (s *Set) scanBucket(b int64, fn func(fps []byte)) error {
	lo := slices.Clone(s.chunkKey(b, 0))
	hi := s.chunkKey(b+1, 0)
	err := s.r.Scan(lo, hi, func(k, v []byte) error {
		if len(k) != 17 || len(v)%8 != 0 {
			return fmt.Errorf("%w: key %x, %d bytes", errBadChunk, k, len(v))
		}
		fn(v)
		return nil
	})
	if err != nil {
		return fmt.Errorf("dedup: read bucket %d: %w", b, err)
	}
	return nil
}

// Add remembers the id with fingerprint f, of an event at ts, first moving
// the watermark to ts if it is newer (which forgets the buckets that leave
// the horizon). It returns false, changing nothing, if the id is remembered
// already or ts is TooOld. The error is the store's (see Contains); after
// one, discard s and Load a new one.
func (s *Set) Add(f Fingerprint, ts int64) (bool, error) {
	b := s.bucket(ts)
	switch {
	case !s.started:
		s.started, s.hi, s.lo = true, b, b-s.n+1
	case b > s.hi:
		if err := s.advance(b); err != nil {
			return false, err
		}
	case b < s.lo:
		return false, nil
	}
	if had, err := s.Contains(f); had || err != nil {
		return false, err
	}
	s.pending[f] = b
	s.order = append(s.order, pendingID{b, f})
	if s.filter.full() || !s.filter.insert(f, uint16(b)) {
		// A failed insert dropped an entry; the rebuild puts it back.
		if err := s.rebuild(s.filter.count + 1); err != nil {
			return false, err
		}
	}
	return true, nil
}

// advance moves the newest bucket to hi, forgetting the buckets that leave
// the horizon.
func (s *Set) advance(hi int64) error {
	lo := hi - s.n + 1
	gone := lo - s.lo
	s.hi, s.lo = hi, lo
	if gone <= 0 {
		return nil
	}
	s.cache.expire(lo)
	s.order = slices.DeleteFunc(s.order, func(p pendingID) bool { return p.b < lo })
	for f, b := range s.pending {
		if b < lo {
			delete(s.pending, f)
		}
	}
	if gone >= s.n {
		return s.rebuild(len(s.order)) // everything flushed expired
	}
	s.filter.expire(uint16(lo-gone), uint16(gone))
	if s.filter.sparse() {
		return s.rebuild(s.filter.count)
	}
	return nil
}

// rebuild makes a new filter for n ids from the flushed buckets and the
// ids added since.
func (s *Set) rebuild(n int) error {
	for {
		nf := newFilter(n)
		ok := true
		insert := func(p pendingID) {
			if ok && p.b >= s.lo && !nf.insert(p.f, uint16(p.b)) {
				ok = false
			}
		}
		if err := s.scan(func(b int64, fps []byte) error {
			for j := 0; j < len(fps); j += 8 {
				f := Fingerprint(binary.BigEndian.Uint64(fps[j:]))
				if f <= tomb {
					return fmt.Errorf("%w: fingerprint %d", errBadChunk, f)
				}
				insert(pendingID{b, f})
			}
			return nil
		}); err != nil {
			return err
		}
		for _, p := range s.order {
			insert(p)
		}
		if ok {
			s.filter = nf
			return nil
		}
		n = nf.capacity() + nf.capacity()/4 // a failed insert: rare, try bigger
	}
}

// scan calls fn with each chunk flushed in a live bucket.
func (s *Set) scan(fn func(b int64, fps []byte) error) error {
	if s.r == nil || !s.started {
		return nil
	}
	lo := slices.Clone(s.chunkKey(max(s.lo, 0), 0))
	return s.r.Scan(lo, []byte{s.opts.Prefix + 1}, func(k, v []byte) error {
		if len(k) != 17 || len(v)%8 != 0 {
			return fmt.Errorf("%w: key %x, %d bytes", errBadChunk, k, len(v))
		}
		return fn(int64(binary.BigEndian.Uint64(k[1:9])), v)
	})
}

// MemoryBytes estimates the heap bytes the set holds.
func (s *Set) MemoryBytes() int {
	n := int(unsafe.Sizeof(*s)) + s.filter.memoryBytes() + cap(s.key) + cap(s.val) + s.cache.memoryBytes()
	// A map entry costs its key and value and about 2 bytes of overhead
	// at the map's usual fill.
	return n + len(s.pending)*18 + cap(s.order)*int(unsafe.Sizeof(pendingID{}))
}

func (s *Set) chunkKey(b int64, chunk uint64) []byte {
	k := append(s.key[:0], s.opts.Prefix)
	k = binary.BigEndian.AppendUint64(k, uint64(b))
	s.key = binary.BigEndian.AppendUint64(k, chunk)
	return s.key
}

var errNotLoaded = errors.New("dedup: Flush before Load: the set would not read back what it flushes")

// Flush stages every change since the previous Flush into w: a chunk of
// new fingerprints per bucket, and the removal of expired buckets. Commit
// w atomically with the input offsets the changes came from. After Flush,
// s assumes w is committed and visible to the reader given to Load; if it
// is not, discard s and Load a new one.
func (s *Set) Flush(w state.Writer) error {
	if s.r == nil {
		return errNotLoaded
	}
	if s.started && s.lo > s.deletedLo {
		start := []byte{s.opts.Prefix}
		if err := w.DeleteRange(start, s.chunkKey(max(s.lo, 0), 0)); err != nil {
			return fmt.Errorf("dedup: flush expiry: %w", err)
		}
		s.deletedLo = s.lo
	}
	if len(s.order) == 0 {
		return nil
	}
	// Ids mostly arrive in time order, so a flush holds few buckets: one
	// pass over the pending ids per bucket, without sorting them.
	buckets := s.buckets[:0]
	for _, p := range s.order {
		if len(buckets) == 0 || buckets[len(buckets)-1] != p.b && !slices.Contains(buckets, p.b) {
			buckets = append(buckets, p.b)
		}
	}
	s.buckets = buckets
	for _, b := range buckets {
		v := s.val[:0]
		for _, p := range s.order {
			if p.b == b {
				v = binary.BigEndian.AppendUint64(v, uint64(p.f))
			}
		}
		s.val = v
		if err := w.Set(s.chunkKey(b, s.chunk), v); err != nil {
			return fmt.Errorf("dedup: flush bucket %d: %w", b, err)
		}
		if cached, ok := s.cache.get(b); ok {
			for _, p := range s.order {
				if p.b == b {
					cached[p.f] = struct{}{}
				}
			}
		}
	}
	s.chunk++
	if n := len(s.order); cap(s.order) > 1024 && n < cap(s.order)/4 || n > 64<<10 {
		s.val, s.order = nil, nil // a burst's buffers
		s.pending = map[Fingerprint]int64{}
	} else {
		s.order = s.order[:0]
		clear(s.pending)
	}
	return nil
}

var errBadChunk = errors.New("dedup: malformed chunk")

// Load replaces the contents of s with the committed state in r, as
// written by Flush, and keeps r to read flushed buckets back: r must see
// every batch s flushes once it is committed.
func (s *Set) Load(r state.Reader) error {
	if s.opts.Prefix == math.MaxUint8 {
		return errors.New("dedup: prefix 0xff is reserved")
	}
	*s = *New(s.opts)
	s.r = r
	// Two passes: the newest bucket and the count, then the filter, so
	// that no fingerprint is held in memory on the way.
	total := 0
	err := r.Scan([]byte{s.opts.Prefix}, []byte{s.opts.Prefix + 1}, func(k, v []byte) error {
		if len(k) != 17 || len(v)%8 != 0 {
			return fmt.Errorf("%w: key %x, %d bytes", errBadChunk, k, len(v))
		}
		b := int64(binary.BigEndian.Uint64(k[1:9]))
		s.chunk = max(s.chunk, binary.BigEndian.Uint64(k[9:])+1)
		if !s.started || b > s.hi {
			s.started, s.hi = true, b
		}
		total += len(v) / 8
		return nil
	})
	if err != nil || !s.started {
		return err
	}
	s.lo = s.hi - s.n + 1
	return s.rebuild(total)
}

// bucketCache keeps the fingerprints of the last buckets read back from
// disk, with those flushed into them since, so that a burst of repeats (a
// producer resending a file) reads each bucket once.
type bucketCache struct {
	entries [4]cachedBucket
	tick    uint64
}

type cachedBucket struct {
	b    int64
	fps  map[Fingerprint]struct{} // nil: unused
	used uint64
}

func (c *bucketCache) get(b int64) (map[Fingerprint]struct{}, bool) {
	for i := range c.entries {
		if e := &c.entries[i]; e.fps != nil && e.b == b {
			c.tick++
			e.used = c.tick
			return e.fps, true
		}
	}
	return nil, false
}

func (c *bucketCache) put(b int64, fps map[Fingerprint]struct{}) {
	old := &c.entries[0]
	for i := range c.entries {
		if e := &c.entries[i]; e.fps == nil || e.used < old.used {
			old = e
		}
	}
	c.tick++
	*old = cachedBucket{b: b, fps: fps, used: c.tick}
}

// expire drops the buckets below lo.
func (c *bucketCache) expire(lo int64) {
	for i := range c.entries {
		if c.entries[i].fps != nil && c.entries[i].b < lo {
			c.entries[i] = cachedBucket{}
		}
	}
}

func (c *bucketCache) memoryBytes() int {
	n := 0
	for _, e := range c.entries {
		n += len(e.fps) * 18 // as for Set.pending
	}
	return n
}
