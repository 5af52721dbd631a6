package neardup

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
)

// Index geometry: a fingerprint is cut into Bands bands of BandBits bits, and
// the Index keeps, for every band, the entries under the value of that band.
const (
	Bands    = 4
	BandBits = 64 / Bands

	// MaxDistance is the largest Hamming distance Query answers exactly.
	MaxDistance = 2*Bands - 1
)

// ErrDistance is returned by Query for a distance outside 0..MaxDistance.
var ErrDistance = errors.New("neardup: distance out of range 0..7")

// Index finds the stored fingerprints within a small Hamming distance of a
// query fingerprint, with a band index (LSH with 4 bands of 16 bits).
//
// Query is exact, not approximate: it reports every stored entry within the
// distance, once. For distance k ≤ 3 some band of a match equals the query's
// (4 bands cannot all differ with 3 bits), so Query reads the query's bucket
// in each band. For 4 ≤ k ≤ 7 some band differs in at most one bit (otherwise
// the distance would be at least 8), so Query also reads the 16 buckets one
// bit away in each band: 68 buckets instead of 4.
//
// Memory: an entry costs 16 bytes (id and fingerprint) plus 4 bytes per band
// (its slot in a bucket), 32 bytes before the slack of growing slices; the
// 4×65536 bucket heads cost 6 MiB, allocated by the first Add. With
// 1,000,000 random fingerprints BenchmarkIndexMemory measures 45.8 bytes per
// entry of live heap, 6.3 of them for the heads. A map from id to
// fingerprint, to spare callers passing the fingerprint to Remove, would add
// 38 bytes per entry at that size (map[uint64]uint64). See MemoryBytes.
//
// An Index is not safe for concurrent mutation: Add and Remove need exclusive
// access. Query does not modify the Index, so any number of goroutines may
// Query at once while no Add or Remove runs; a writer and its readers can
// share an Index under a sync.RWMutex. Query's callback must not call Add or
// Remove.
type Index struct {
	// Entries live in slots 0..len-1 of ids and fps; Remove moves the last
	// entry into the freed slot, so the slots stay dense.
	ids []uint64
	fps []uint64
	// bands[b][key] lists the slots of the entries whose band b is key. All
	// are nil before the first Add.
	bands [Bands][]bucket
	// bucketCap is the total capacity of the buckets, in slots.
	bucketCap int
}

// bucket holds slots of ids and fps, in no particular order.
type bucket []uint32

// NewIndex returns an empty Index. The zero Index is also empty and ready to
// use.
func NewIndex() *Index { return new(Index) }

// bandKey returns band b of fp.
func bandKey(fp uint64, b int) uint16 { return uint16(fp >> (b * BandBits)) }

// Len returns the number of entries.
func (ix *Index) Len() int { return len(ix.fps) }

// MemoryBytes returns the bytes of heap the Index holds: its slices at their
// capacity. Allocator rounding is not counted, so the true figure is a few
// percent higher.
func (ix *Index) MemoryBytes() int {
	n := 8*cap(ix.ids) + 8*cap(ix.fps) + 4*ix.bucketCap
	for _, bk := range ix.bands {
		n += len(bk) * 24 // slice headers
	}
	return n
}

// Add stores fingerprint fp under id. Add does not look for id among the
// stored entries: adding an id twice stores it twice, and Query reports both.
// An Index holds at most 2³²−1 entries; Add panics beyond that.
func (ix *Index) Add(id, fp uint64) {
	s := len(ix.fps)
	if s >= math.MaxUint32 {
		panic("neardup: index full")
	}
	if ix.bands[0] == nil {
		for b := range ix.bands {
			ix.bands[b] = make([]bucket, 1<<BandBits)
		}
	}
	ix.ids = append(ix.ids, id)
	ix.fps = append(ix.fps, fp)
	for b := range ix.bands {
		bk := &ix.bands[b][bandKey(fp, b)]
		c := cap(*bk)
		*bk = append(*bk, uint32(s))
		ix.bucketCap += cap(*bk) - c
	}
}

// Remove deletes the entry with this id and fingerprint and reports whether
// there was one. The caller passes the fingerprint the id was added with: it
// says which bucket holds the entry, which saves the Index a map from ids to
// fingerprints. If id was added more than once with fp, Remove deletes one
// of them. Remove costs a scan of 8 buckets.
func (ix *Index) Remove(id, fp uint64) bool {
	if ix.bands[0] == nil {
		return false
	}
	slot := -1
	for _, s := range ix.bands[0][bandKey(fp, 0)] {
		if ix.ids[s] == id && ix.fps[s] == fp {
			slot = int(s)
			break
		}
	}
	if slot < 0 {
		return false
	}
	for b := range ix.bands {
		ix.unlink(b, bandKey(fp, b), uint32(slot))
	}
	last := len(ix.fps) - 1
	if slot != last {
		lfp := ix.fps[last]
		for b := range ix.bands {
			ix.relink(b, bandKey(lfp, b), uint32(last), uint32(slot))
		}
		ix.fps[slot], ix.ids[slot] = lfp, ix.ids[last]
	}
	ix.fps, ix.ids = ix.fps[:last], ix.ids[:last]
	if c := cap(ix.fps); c > 1024 && last <= c/4 {
		// Give back memory after mass removal; growing again is amortized.
		ix.fps = append(make([]uint64, 0, 2*last), ix.fps...)
		ix.ids = append(make([]uint64, 0, 2*last), ix.ids...)
	}
	return true
}

// unlink removes slot from bucket key of band b.
func (ix *Index) unlink(b int, key uint16, slot uint32) {
	bk := &ix.bands[b][key]
	for i, s := range *bk {
		if s != slot {
			continue
		}
		n := len(*bk) - 1
		(*bk)[i] = (*bk)[n]
		*bk = (*bk)[:n]
		if n == 0 {
			ix.bucketCap -= cap(*bk)
			*bk = nil
		}
		return
	}
}

// relink replaces slot from by slot to in bucket key of band b.
func (ix *Index) relink(b int, key uint16, from, to uint32) {
	bk := ix.bands[b][key]
	for i, s := range bk {
		if s == from {
			bk[i] = to
			return
		}
	}
}

// Query calls fn for every stored entry whose fingerprint is within Hamming
// distance k of fp, with the entry's id, fingerprint and distance, once per
// entry, in no particular order, until fn returns false. It returns
// ErrDistance, and calls nothing, if k is not in 0..MaxDistance. Apart from
// that error, Query does not allocate.
func (ix *Index) Query(fp uint64, k int, fn func(id, fp uint64, dist int) bool) error {
	if k < 0 || k > MaxDistance {
		return fmt.Errorf("query distance %d: %w", k, ErrDistance)
	}
	if len(ix.fps) == 0 {
		return nil
	}
	// A match differs from fp in at most flips bits of some band, and Query
	// reports it only from the first such band, which it reaches by probing
	// the bucket of fp's band key with up to flips bits flipped.
	flips := k / Bands
	for b := range ix.bands {
		key := bandKey(fp, b)
		if !ix.probe(b, key, fp, k, flips, fn) {
			return nil
		}
		if flips == 0 {
			continue
		}
		for i := range BandBits {
			if !ix.probe(b, key^1<<i, fp, k, flips, fn) {
				return nil
			}
		}
	}
	return nil
}

// probe reports the entries of bucket key of band b that are within k of q
// and whose first band differing from q in at most flips bits is b. It
// returns false when fn does.
func (ix *Index) probe(b int, key uint16, q uint64, k, flips int, fn func(id, fp uint64, dist int) bool) bool {
	fps := ix.fps
	for _, s := range ix.bands[b][key] {
		f := fps[s]
		x := q ^ f
		d := bits.OnesCount64(x)
		if d > k || firstBand(x, flips) != b {
			continue
		}
		if !fn(ix.ids[s], f, d) {
			return false
		}
	}
	return true
}

// firstBand returns the first band in which x has at most flips bits set,
// or Bands if there is none.
func firstBand(x uint64, flips int) int {
	for b := range Bands {
		if bits.OnesCount16(bandKey(x, b)) <= flips {
			return b
		}
	}
	return Bands
}

// Match is an entry reported by Query.
type Match struct {
	ID, FP uint64
	Dist   int
}

// AppendMatches appends the entries Query(fp, k) reports to dst and returns
// the extended slice.
func (ix *Index) AppendMatches(dst []Match, fp uint64, k int) ([]Match, error) {
	err := ix.Query(fp, k, func(id, f uint64, d int) bool {
		dst = append(dst, Match{ID: id, FP: f, Dist: d})
		return true
	})
	return dst, err
}
