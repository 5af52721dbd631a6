package testutil

import (
	"math"
	"math/rand/v2"
	"slices"
)

// Zipf samples ranks 0..n-1 with P(i) ∝ 1/(i+1)^s by inverse CDF: exact
// for any s, including s = 1, which rand.NewZipf does not support.
type Zipf struct{ cdf []float64 }

// NewZipf returns a sampler of n ranks with skew s.
func NewZipf(n int, s float64) *Zipf {
	z := &Zipf{cdf: make([]float64, n)}
	sum := 0.0
	for i := range n {
		sum += math.Pow(float64(i+1), -s)
		z.cdf[i] = sum
	}
	return z
}

// Sample draws a rank: the first i whose cumulative weight exceeds a
// uniform draw.
func (z *Zipf) Sample(rng *rand.Rand) int {
	u := rng.Float64() * z.cdf[len(z.cdf)-1]
	i, found := slices.BinarySearch(z.cdf, u)
	if found {
		i++ // cdf[i] == u: the rank is the next one
	}
	return min(i, len(z.cdf)-1)
}
