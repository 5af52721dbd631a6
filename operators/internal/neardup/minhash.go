package neardup

import (
	"math"
	"slices"
)

// DefaultPermutations is the number of MinHash permutations NewMinHasher uses
// when asked for n ≤ 0. With 128 the standard error of the estimated Jaccard
// similarity J is √(J(1−J)/128), at most 0.044.
const DefaultPermutations = 128

// MinHasher computes MinHash signatures. Its permutations are fixed by the
// seed, so signatures made by MinHashers with equal n and seed are
// comparable, across processes and platforms. A MinHasher is immutable and
// safe for concurrent use.
type MinHasher struct {
	a, b []uint64 // permutation i maps x to (a[i]·x + b[i]) >> 32
}

// NewMinHasher returns a MinHasher with n permutations (DefaultPermutations
// if n ≤ 0) derived from seed.
//
// Permutation i maps a shingle hash x to the high 32 bits of a[i]·x + b[i]
// (mod 2⁶⁴), with a[i] odd; a and b come from a SplitMix64 sequence started
// at seed. Shingle hashes are already uniform, so this multiply-shift family
// is as good as a random permutation for MinHash, and it is much cheaper than
// hashing each shingle n times.
func NewMinHasher(n int, seed uint64) *MinHasher {
	if n <= 0 {
		n = DefaultPermutations
	}
	m := &MinHasher{a: make([]uint64, n), b: make([]uint64, n)}
	s := seed
	next := func() uint64 {
		s += 0x9E3779B97F4A7C15
		return mix64(s)
	}
	for i := range n {
		m.a[i] = next() | 1
		m.b[i] = next()
	}
	return m
}

// Len returns the number of permutations, the length of a signature.
func (m *MinHasher) Len() int { return len(m.a) }

// Signature returns the MinHash signature of a set of shingles: for every
// permutation, the least value it takes on the shingles. Repeated shingles do
// not change the signature. The signature of no shingles is all 0xFFFFFFFF.
func (m *MinHasher) Signature(shingles []uint64) []uint32 {
	return m.AppendSignature(nil, shingles)
}

// AppendSignature appends the signature of shingles to dst and returns the
// extended slice.
func (m *MinHasher) AppendSignature(dst []uint32, shingles []uint64) []uint32 {
	start := len(dst)
	dst = slices.Grow(dst, len(m.a))
	for range m.a {
		dst = append(dst, math.MaxUint32)
	}
	a, b := m.a, m.b[:len(m.a)]
	sig := dst[start : start+len(a)]
	for _, x := range shingles {
		for i := range a {
			if v := uint32((a[i]*x + b[i]) >> 32); v < sig[i] {
				sig[i] = v
			}
		}
	}
	return dst
}

// Similarity returns the MinHash estimate of the Jaccard similarity of the
// shingle sets behind two signatures: the fraction of permutations on which
// they agree. Signatures of different lengths (from different MinHashers)
// are not comparable and have similarity 0, as do empty signatures.
func Similarity(a, b []uint32) float64 {
	if len(a) != len(b) || len(a) == 0 {
		return 0
	}
	eq := 0
	for i, x := range a {
		if x == b[i] {
			eq++
		}
	}
	return float64(eq) / float64(len(a))
}
