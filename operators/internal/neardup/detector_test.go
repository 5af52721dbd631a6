package neardup

import (
	"errors"
	"math"
	"testing"
)

func TestOptions(t *testing.T) {
	if err := DefaultOptions().Validate(); err != nil {
		t.Fatalf("DefaultOptions().Validate() = %v", err)
	}
	if got, want := (Options{}).withDefaults(), DefaultOptions(); got != want {
		t.Errorf("zero Options with defaults = %+v, want %+v", got, want)
	}
	if got := (Options{K: 7}).withDefaults(); got.Borderline != 7 {
		t.Errorf("Options{K: 7} gets Borderline %d, want 7", got.Borderline)
	}
	tests := []struct {
		opts Options
		ok   bool
	}{
		{Options{}, true},
		{Options{K: 1, Borderline: 1, MinJaccard: 1, Permutations: 1, Seed: 9}, true},
		{Options{K: 5}, true},
		{Options{K: 7, Borderline: 7}, true},
		{Options{K: -1}, false},
		{Options{K: 8}, false},
		{Options{K: 4, Borderline: 3}, false},
		{Options{Borderline: 8}, false},
		{Options{Borderline: -2}, false},
		{Options{MinJaccard: -0.1}, false},
		{Options{MinJaccard: 1.01}, false},
		{Options{MinJaccard: math.NaN()}, false},
		{Options{Permutations: -5}, false},
	}
	for _, tt := range tests {
		err := tt.opts.Validate()
		if (err == nil) != tt.ok {
			t.Errorf("%+v.Validate() = %v, want ok=%v", tt.opts, err, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%+v.Validate() = %v, not ErrInvalidOptions", tt.opts, err)
		}
		if _, nerr := NewDetector(tt.opts); (nerr == nil) != tt.ok {
			t.Errorf("NewDetector(%+v) error = %v, want ok=%v", tt.opts, nerr, tt.ok)
		}
	}
}

func TestDecide(t *testing.T) {
	d, err := NewDetector(Options{K: 2, Borderline: 5, MinJaccard: 0.5, Permutations: 4})
	if err != nil {
		t.Fatal(err)
	}
	sig := []uint32{1, 2, 3, 4}
	half := []uint32{1, 2, 0, 0}
	less := []uint32{1, 0, 0, 0}
	tests := []struct {
		a, b Doc
		want Decision
	}{
		{Doc{0b0, sig}, Doc{0b11, nil}, CloseFingerprints},                 // ≤ K: signatures not needed
		{Doc{0b0, sig}, Doc{0b111, half}, SimilarShingles},                 // borderline, 0.5 ≥ 0.5
		{Doc{0b0, sig}, Doc{0b11111, half}, SimilarShingles},               // at Borderline
		{Doc{0b0, sig}, Doc{0b111, less}, Distinct},                        // borderline, 0.25 < 0.5
		{Doc{0b0, sig}, Doc{0b111, nil}, Distinct},                         // borderline without signature
		{Doc{0b0, sig}, Doc{0b111111, sig}, Distinct},                      // beyond Borderline
		{Doc{^uint64(0), sig}, Doc{^uint64(0) >> 3, sig}, SimilarShingles}, // high bits count too
	}
	for _, tt := range tests {
		got := d.Decide(tt.a, tt.b)
		if got != tt.want {
			t.Errorf("Decide(%b, %b) = %v, want %v", tt.a.FP, tt.b.FP, got, tt.want)
		}
		if back := d.Decide(tt.b, tt.a); back != got {
			t.Errorf("Decide is not symmetric: %v, %v", got, back)
		}
		if got.Duplicate() != (tt.want != Distinct) {
			t.Errorf("%v.Duplicate() = %v", got, got.Duplicate())
		}
	}
	for _, dec := range []Decision{Distinct, CloseFingerprints, SimilarShingles, 9} {
		if dec.String() == "" {
			t.Errorf("Decision %d has no name", dec)
		}
	}
}

// TestDetectorArticles: the lightly edited articles of simhash_test.go are
// near-duplicates unless SimHash scattered them beyond Borderline, and
// unrelated articles never are.
func TestDetectorArticles(t *testing.T) {
	d, err := NewDetector(Options{})
	if err != nil {
		t.Fatal(err)
	}
	docs := make([]Doc, len(edited))
	found := 0
	for i, e := range edited {
		docs[i] = d.Doc(e.orig.title, e.orig.summary)
		ed := d.Doc(e.edit.title, e.edit.summary)
		dist, sim := Hamming(docs[i].FP, ed.FP), Similarity(docs[i].Sig, ed.Sig)
		dec := d.Decide(docs[i], ed)
		t.Logf("edit %d: distance %d, similarity %.3f: %v", i, dist, sim, dec)
		if sim < 0.6 {
			t.Errorf("edit %d: similarity %.3f, want ≥ 0.6 for a light edit", i, sim)
		}
		if dist <= d.Options().Borderline && !dec.Duplicate() {
			t.Errorf("edit %d: distance %d, similarity %.3f, not a duplicate", i, dist, sim)
		}
		if dec.Duplicate() {
			found++
		}
	}
	if found < len(edited)-2 {
		t.Errorf("%d of %d edited copies found", found, len(edited))
	}
	for i := range docs {
		for j := i + 1; j < len(docs); j++ {
			if dec := d.Decide(docs[i], docs[j]); dec.Duplicate() {
				t.Errorf("unrelated articles %d and %d: %v", i, j, dec)
			}
		}
	}
	// Doc reuses scratch space but its results do not depend on history.
	again := d.Doc(edited[0].orig.title, edited[0].orig.summary)
	if again.FP != docs[0].FP || Similarity(again.Sig, docs[0].Sig) != 1 {
		t.Error("Doc of the same article changed")
	}
}
