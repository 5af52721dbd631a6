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
// re-applying a batch rewrites the same chunk. [Set.Load] reads the chunks
// back. On disk an id costs its 8 bytes plus a key per bucket and Flush.
//
// # Memory
//
// Fingerprints live in one open-addressing table with linear probing: 8
// bytes of fingerprint and 2 of bucket tag per slot, between 5/16 and 3/4
// full, so 13-32 bytes per remembered id depending on where the table is in
// its growth (plus 8 per id added since the last Flush). Expiry sweeps the table once per bucket that leaves the horizon,
// leaving tombstones that the next rehash drops.
package dedup

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
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

	fps   []Fingerprint // open addressing; len a power of two
	tags  []uint16      // bucket id mod 2^16 of each slot
	live  int           // slots holding an id
	used  int           // slots holding an id or a tombstone
	shift uint8         // 64 - log2(len(fps))

	// Persistence: fingerprints added since the last Flush, with their
	// buckets; the next chunk number; buckets below deletedLo are deleted.
	pending   []pendingID
	buckets   []int64 // scratch for Flush
	chunk     uint64
	deletedLo int64
	key, val  []byte
}

// New returns an empty set. It panics if opts.Validate fails: validate
// options that come from configuration first.
func New(opts Options) *Set {
	if err := opts.Validate(); err != nil {
		panic(err)
	}
	if opts.Buckets == 0 {
		opts.Buckets = 64
	}
	hz := opts.Horizon.Milliseconds()
	nb := int64(opts.Buckets)
	s := &Set{opts: opts, n: nb, width: (hz + nb - 2) / (nb - 1), deletedLo: math.MinInt64}
	s.reset(16)
	return s
}

func (s *Set) reset(size int) {
	s.fps = make([]Fingerprint, size)
	s.tags = make([]uint16, size)
	s.live, s.used = 0, 0
	s.shift = uint8(64 - bits.TrailingZeros(uint(size)))
}

type pendingID struct {
	b int64
	f Fingerprint
}

// Horizon returns the event time an id is remembered for at least.
func (s *Set) Horizon() time.Duration { return s.opts.Horizon }

// Len returns how many ids the set remembers.
func (s *Set) Len() int { return s.live }

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

// Contains reports whether the id with fingerprint f is remembered.
func (s *Set) Contains(f Fingerprint) bool {
	mask := len(s.fps) - 1
	for i := int(uint64(f) >> s.shift); ; i = (i + 1) & mask {
		switch s.fps[i] {
		case f:
			return true
		case empty:
			return false
		}
	}
}

// Add remembers the id with fingerprint f, of an event at ts, first moving
// the watermark to ts if it is newer (which forgets the buckets that leave
// the horizon). It returns false, changing nothing, if the id is remembered
// already or ts is TooOld.
func (s *Set) Add(f Fingerprint, ts int64) bool {
	b := s.bucket(ts)
	switch {
	case !s.started:
		s.started, s.hi, s.lo = true, b, b-s.n+1
	case b > s.hi:
		s.advance(b)
	case b < s.lo:
		return false
	}
	if (s.used+1)*4 > len(s.fps)*3 {
		s.rehash(s.live + 1)
	}
	mask := len(s.fps) - 1
	at := -1
	for i := int(uint64(f) >> s.shift); ; i = (i + 1) & mask {
		switch s.fps[i] {
		case f:
			return false
		case tomb:
			if at < 0 {
				at = i
			}
			continue
		case empty:
			if at < 0 {
				at = i
				s.used++
			}
		default:
			continue
		}
		break
	}
	s.fps[at], s.tags[at] = f, uint16(b)
	s.live++
	s.pending = append(s.pending, pendingID{b, f})
	return true
}

// advance moves the newest bucket to hi, forgetting the buckets that leave
// the horizon.
func (s *Set) advance(hi int64) {
	lo := hi - s.n + 1
	if gone := lo - s.lo; gone >= s.n {
		s.reset(16) // everything expired
		s.pending = s.pending[:0]
	} else if gone > 0 && s.live > 0 {
		// Every remembered bucket is in [s.lo, s.hi], fewer than 2^16
		// apart, so a tag identifies its bucket; the expired ones are
		// the tags in [s.lo, lo).
		from, span := uint16(s.lo), uint16(gone)
		for i, f := range s.fps {
			if f > tomb && s.tags[i]-from < span {
				s.fps[i] = tomb
				s.live--
			}
		}
		s.pending = slices.DeleteFunc(s.pending, func(p pendingID) bool { return p.b < lo })
		if len(s.fps) > 64 && s.live*8 < len(s.fps) {
			s.rehash(s.live) // shrink
		}
	}
	s.hi, s.lo = hi, lo
}

// rehash rebuilds the table, without tombstones, with room for need ids.
func (s *Set) rehash(need int) {
	size := 16
	for size*5 < need*8 { // at most 5/8 full after a rehash
		size *= 2
	}
	oldF, oldT := s.fps, s.tags
	s.reset(size)
	mask := size - 1
	for j, f := range oldF {
		if f <= tomb {
			continue
		}
		i := int(uint64(f) >> s.shift)
		for s.fps[i] != empty {
			i = (i + 1) & mask
		}
		s.fps[i], s.tags[i] = f, oldT[j]
		s.live++
		s.used++
	}
}

// MemoryBytes estimates the heap bytes the set holds.
func (s *Set) MemoryBytes() int {
	n := int(unsafe.Sizeof(*s)) + cap(s.fps)*8 + cap(s.tags)*2 + cap(s.key) + cap(s.val)
	return n + cap(s.pending)*int(unsafe.Sizeof(pendingID{}))
}

func (s *Set) chunkKey(b int64, chunk uint64) []byte {
	k := append(s.key[:0], s.opts.Prefix)
	k = binary.BigEndian.AppendUint64(k, uint64(b))
	s.key = binary.BigEndian.AppendUint64(k, chunk)
	return s.key
}

// Flush stages every change since the previous Flush into w: a chunk of
// new fingerprints per bucket, and the removal of expired buckets. Commit
// w atomically with the input offsets the changes came from. After Flush,
// s assumes w is committed; if it is not, discard s and Load a new one.
func (s *Set) Flush(w state.Writer) error {
	if s.started && s.lo > s.deletedLo {
		start := []byte{s.opts.Prefix}
		if err := w.DeleteRange(start, s.chunkKey(max(s.lo, 0), 0)); err != nil {
			return fmt.Errorf("dedup: flush expiry: %w", err)
		}
		s.deletedLo = s.lo
	}
	if len(s.pending) == 0 {
		return nil
	}
	// Ids mostly arrive in time order, so a flush holds few buckets: one
	// pass over the pending ids per bucket, without sorting them.
	buckets := s.buckets[:0]
	for _, p := range s.pending {
		if len(buckets) == 0 || buckets[len(buckets)-1] != p.b && !slices.Contains(buckets, p.b) {
			buckets = append(buckets, p.b)
		}
	}
	s.buckets = buckets
	for _, b := range buckets {
		v := s.val[:0]
		for _, p := range s.pending {
			if p.b == b {
				v = binary.BigEndian.AppendUint64(v, uint64(p.f))
			}
		}
		s.val = v
		if err := w.Set(s.chunkKey(b, s.chunk), v); err != nil {
			return fmt.Errorf("dedup: flush bucket %d: %w", b, err)
		}
	}
	s.chunk++
	s.pending = s.pending[:0]
	if cap(s.val) > 64<<10 || cap(s.pending) > 64<<10 {
		s.val, s.pending = nil, nil // a burst's buffers
	}
	return nil
}

var errBadChunk = errors.New("dedup: malformed chunk")

// Load replaces the contents of s with the committed state in r, as
// written by Flush.
func (s *Set) Load(r state.Reader) error {
	*s = *New(s.opts)
	type chunk struct {
		b   int64
		fps []byte
	}
	var chunks []chunk
	lo, hi := []byte{s.opts.Prefix}, []byte{s.opts.Prefix + 1}
	if s.opts.Prefix == math.MaxUint8 {
		return errors.New("dedup: prefix 0xff is reserved")
	}
	err := r.Scan(lo, hi, func(k, v []byte) error {
		if len(k) != 17 || len(v)%8 != 0 {
			return fmt.Errorf("%w: key %x, %d bytes", errBadChunk, k, len(v))
		}
		b := int64(binary.BigEndian.Uint64(k[1:9]))
		s.chunk = max(s.chunk, binary.BigEndian.Uint64(k[9:])+1)
		if !s.started || b > s.hi {
			s.started, s.hi = true, b
		}
		chunks = append(chunks, chunk{b, slices.Clone(v)})
		return nil
	})
	if err != nil {
		return err
	}
	if !s.started {
		return nil
	}
	s.lo = s.hi - s.n + 1
	total := 0
	for _, c := range chunks {
		if c.b >= s.lo {
			total += len(c.fps) / 8
		}
	}
	s.rehash(total)
	mask := len(s.fps) - 1
	for _, c := range chunks {
		if c.b < s.lo {
			continue // expired: the next Flush deletes it
		}
		for j := 0; j < len(c.fps); j += 8 {
			f := Fingerprint(binary.BigEndian.Uint64(c.fps[j:]))
			if f <= tomb {
				return fmt.Errorf("%w: fingerprint %d", errBadChunk, f)
			}
			i := int(uint64(f) >> s.shift)
			for s.fps[i] != empty && s.fps[i] != f {
				i = (i + 1) & mask
			}
			if s.fps[i] == f {
				continue
			}
			s.fps[i], s.tags[i] = f, uint16(c.b)
			s.live++
			s.used++
		}
	}
	return nil
}
