package neardup

import (
	"math"
	"math/bits"
)

// SimHash returns the weighted 64-bit SimHash (Charikar) of features: bit i
// is set when the total weight of the features whose hash has bit i set is
// larger than the total weight of those that have it clear. Texts whose
// feature vectors have cosine similarity s differ in about 64·arccos(s)/π
// bits. SimHash of no features is 0.
//
// Weights are rounded to multiples of 2⁻¹⁶ and summed as integers, so the
// result depends only on the multiset of features, not on their order or on
// the platform. Weights are clamped to ±2¹⁴; NaN counts as 0.
func SimHash(features []Feature) uint64 {
	// acc[i] is the weight of the features with bit i set; total is the
	// weight of all.
	var acc [64]int64
	var total int64
	for _, f := range features {
		h, q := f.Hash, quantize(f.Weight)
		total += q
		// q & -bit adds q when the bit is set; unrolled by bytes, this
		// runs twice as fast as a loop over the bits.
		for j := 0; j < 64; j += 8 {
			a := (*[8]int64)(acc[j : j+8])
			b := int64(h >> j)
			a[0] += q & -(b & 1)
			a[1] += q & -(b >> 1 & 1)
			a[2] += q & -(b >> 2 & 1)
			a[3] += q & -(b >> 3 & 1)
			a[4] += q & -(b >> 4 & 1)
			a[5] += q & -(b >> 5 & 1)
			a[6] += q & -(b >> 6 & 1)
			a[7] += q & -(b >> 7 & 1)
		}
	}
	var fp uint64
	for i, a := range acc {
		// Set beats clear: a > total − a.
		if 2*a > total {
			fp |= 1 << i
		}
	}
	return fp
}

// quantize returns w in units of 2⁻¹⁶, clamped to ±2³⁰. Sums of up to 2³¹
// such values, and their doubles, cannot overflow an int64.
func quantize(w float64) int64 {
	const limit = 1 << 30
	switch q := math.Round(w * (1 << 16)); {
	case q >= limit:
		return limit
	case q <= -limit:
		return -limit
	case q == q: // not NaN
		return int64(q)
	}
	return 0
}

// Hamming returns the number of bits in which a and b differ.
func Hamming(a, b uint64) int {
	return bits.OnesCount64(a ^ b)
}
