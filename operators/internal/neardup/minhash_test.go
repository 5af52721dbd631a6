package neardup

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestMinHasherDeterministic(t *testing.T) {
	sh := Shingles("the quick brown fox jumps over the lazy dog near the river bank")
	a := NewMinHasher(64, 7).Signature(sh)
	b := NewMinHasher(64, 7).Signature(sh)
	if !slices.Equal(a, b) {
		t.Error("equal seeds give different signatures")
	}
	if c := NewMinHasher(64, 8).Signature(sh); Similarity(a, c) > 0.2 {
		t.Errorf("seeds 7 and 8 agree on %.2f of the permutations", Similarity(a, c))
	}
	if n := NewMinHasher(0, 1).Len(); n != DefaultPermutations {
		t.Errorf("NewMinHasher(0) has %d permutations, want %d", n, DefaultPermutations)
	}
	// Order and repeats of the shingles do not matter.
	m := NewMinHasher(32, 1)
	rev := slices.Clone(sh)
	slices.Reverse(rev)
	rev = append(rev, sh...)
	if !slices.Equal(m.Signature(sh), m.Signature(rev)) {
		t.Error("signature depends on shingle order or repeats")
	}
	// AppendSignature appends.
	pre := []uint32{1, 2}
	if got := m.AppendSignature(pre, sh); !slices.Equal(got[:2], pre) || !slices.Equal(got[2:], m.Signature(sh)) {
		t.Error("AppendSignature does not append the signature")
	}
}

// TestSimilarityEstimate: on random sets of known Jaccard similarity the
// estimate is unbiased and its spread matches √(J(1−J)/n).
func TestSimilarityEstimate(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(11, 12))
	m := NewMinHasher(DefaultPermutations, 3)
	for _, j := range []float64{0, 0.1, 0.4, 0.75, 0.95, 1} {
		const trials, size = 150, 200
		var sum, sumSq float64
		for range trials {
			// |A∩B| = c, |A∪B| = size: J = c/size.
			c := int(math.Round(j * size))
			all := make([]uint64, size)
			for i := range all {
				all[i] = rng.Uint64()
			}
			a := slices.Concat(all[:c], all[c:c+(size-c)/2])
			b := slices.Concat(all[:c], all[c+(size-c)/2:])
			est := Similarity(m.Signature(a), m.Signature(b))
			sum += est
			sumSq += (est - j) * (est - j)
		}
		mean := sum / trials
		rmse := math.Sqrt(sumSq / trials)
		se := math.Sqrt(j * (1 - j) / DefaultPermutations)
		t.Logf("J=%.2f: mean estimate %.4f, rmse %.4f, theory %.4f", j, mean, rmse, se)
		if math.Abs(mean-j) > 4*se/math.Sqrt(trials)+0.002 {
			t.Errorf("J=%.2f: mean estimate %.4f is biased", j, mean)
		}
		if rmse > 1.3*se+0.002 {
			t.Errorf("J=%.2f: rmse %.4f, want about %.4f", j, rmse, se)
		}
	}
}

func TestSimilarityEdges(t *testing.T) {
	if s := Similarity(nil, nil); s != 0 {
		t.Errorf("Similarity of empty signatures = %v", s)
	}
	if s := Similarity([]uint32{1, 2}, []uint32{1, 2, 3}); s != 0 {
		t.Errorf("Similarity of signatures of different lengths = %v", s)
	}
	if s := Similarity([]uint32{1, 2, 3, 4}, []uint32{1, 0, 3, 0}); s != 0.5 {
		t.Errorf("Similarity = %v, want 0.5", s)
	}
	m := NewMinHasher(16, 0)
	empty := m.Signature(nil)
	if len(empty) != 16 || slices.IndexFunc(empty, func(v uint32) bool { return v != math.MaxUint32 }) >= 0 {
		t.Errorf("signature of no shingles = %v", empty)
	}
}
