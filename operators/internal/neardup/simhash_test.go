package neardup

import (
	"math/rand/v2"
	"testing"
)

// article is a title and summary.
type article struct{ title, summary string }

// edited pairs an article with a lightly edited copy, as aggregators see
// them: a source tag on the title, a corrected word, a dropped or added
// clause.
var edited = []struct{ orig, edit article }{
	{
		article{"Storm forces evacuation of coastal towns",
			"Thousands of residents left their homes on Tuesday as a powerful storm approached the coast, bringing winds of up to 150 kilometres an hour and heavy rain that officials said could cause widespread flooding."},
		article{"Storm forces evacuation of coastal towns - Reuters",
			"Thousands of residents left their homes on Tuesday as a powerful storm approached the coast, bringing winds of up to 150 kilometres an hour and heavy rain that officials said could cause widespread flooding."},
	},
	{
		article{"Central bank raises interest rates for third time this year",
			"The central bank raised its benchmark rate by a quarter of a percentage point on Thursday, citing persistent inflation and a tight labour market, and signalled that further increases were possible."},
		article{"Central bank raises interest rates for third time this year",
			"The central bank raised its benchmark rate by a quarter of a percentage point on Thursday, citing stubborn inflation and a tight labour market, and signalled that further increases were possible."},
	},
	{
		article{"Tech giant unveils new smartphone with longer battery life",
			"The company showed off its latest flagship phone at an event in California, promising a battery that lasts two days, a brighter screen and an improved camera for low-light photography."},
		article{"Tech giant unveils new smartphone with longer battery life",
			"The company showed off its latest flagship phone at an event in California on Wednesday, promising a battery that lasts two days, a brighter screen and an improved camera for low-light photography."},
	},
	{
		article{"Striking rail workers reach deal with operators",
			"Unions representing train drivers and conductors said they had agreed a new pay deal with the country's main rail operators, ending a dispute that caused months of cancellations and delays for commuters."},
		article{"UPDATE 1-Striking rail workers reach deal with operators",
			"Unions representing train drivers and conductors said they had agreed a new pay deal with the country's main rail operators, ending a dispute that caused months of cancellations and delays."},
	},
	{
		article{"Scientists discover new species of frog in rainforest",
			"A team of researchers has identified a previously unknown species of tiny frog in a remote part of the rainforest, the smallest ever recorded, measuring less than eight millimetres long."},
		article{"Scientists discover new species of frog in rainforest",
			"A team of researchers has identified a previously unknown species of tiny frog in a remote part of the rainforest, measuring less than eight millimetres long, the smallest ever recorded."},
	},
	{
		article{"Football club sacks manager after run of defeats",
			"The club announced on Sunday that it had parted company with its manager following a seventh consecutive league defeat, which left the team two points above the relegation zone."},
		article{"Football club sacks manager after run of defeats",
			"The club announced on Sunday that it had parted company with its manager following a seventh straight league defeat, which left the team just two points above the relegation zone."},
	},
	{
		article{"Wildfire spreads across national park, thousands flee",
			"Firefighters battled a fast-moving wildfire that has burned more than 20,000 hectares of forest in the national park, forcing the evacuation of several villages and closing a major highway."},
		article{"Wildfire spreads across national park; thousands flee (PHOTOS)",
			"Firefighters battled a fast-moving wildfire that has burned more than 20,000 hectares of forest in the national park, forcing the evacuation of several villages and closing a major highway."},
	},
	{
		article{"Oil prices fall as demand concerns weigh on markets",
			"Crude oil futures dropped more than two percent on Friday after weak factory data from the world's largest importer raised fears about demand, while producers showed no sign of cutting output."},
		article{"Oil prices fall as demand concerns weigh on markets",
			"Crude oil futures dropped more than 2% on Friday after weak factory data from the world's largest importer raised fears about demand, while producers showed no sign of cutting output."},
	},
}

func TestSimHashIdentical(t *testing.T) {
	for _, e := range edited {
		a, b := Fingerprint(e.orig.title, e.orig.summary), Fingerprint(e.orig.title, e.orig.summary)
		if a != b {
			t.Errorf("%q: fingerprints %016x and %016x of the same text", e.orig.title, a, b)
		}
		// Case and punctuation do not count.
		c := Fingerprint(upper(e.orig.title)+"!", "«"+e.orig.summary+"»")
		if c != a {
			t.Errorf("%q: fingerprint %016x after case and punctuation changes, want %016x", e.orig.title, c, a)
		}
	}
}

func upper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

// TestSimHashDistances: light edits move a fingerprint a few bits, while
// unrelated articles differ in about half of them. Averages over several
// pairs, since single distances scatter.
func TestSimHashDistances(t *testing.T) {
	fps := make([]uint64, len(edited))
	sumEdit := 0
	for i, e := range edited {
		fps[i] = Fingerprint(e.orig.title, e.orig.summary)
		d := Hamming(fps[i], Fingerprint(e.edit.title, e.edit.summary))
		t.Logf("edit %d: distance %d", i, d)
		sumEdit += d
	}
	sumUnrel, n := 0, 0
	for i := range fps {
		for j := i + 1; j < len(fps); j++ {
			sumUnrel += Hamming(fps[i], fps[j])
			n++
		}
	}
	meanEdit := float64(sumEdit) / float64(len(edited))
	meanUnrel := float64(sumUnrel) / float64(n)
	t.Logf("mean distance: edited %.2f, unrelated %.2f", meanEdit, meanUnrel)
	if meanEdit > 6 {
		t.Errorf("edited copies are %.2f bits apart on average, want ≤ 6", meanEdit)
	}
	if meanUnrel < 22 {
		t.Errorf("unrelated articles are %.2f bits apart on average, want ≥ 22", meanUnrel)
	}
}

func TestSimHashOrderIndependent(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 100 {
		fs := make([]Feature, rng.IntN(50))
		for i := range fs {
			fs[i] = Feature{Hash: rng.Uint64(), Weight: rng.Float64() * 4}
		}
		want := SimHash(fs)
		rng.Shuffle(len(fs), func(i, j int) { fs[i], fs[j] = fs[j], fs[i] })
		if got := SimHash(fs); got != want {
			t.Fatalf("SimHash changed from %016x to %016x when features were shuffled", want, got)
		}
	}
}

func TestSimHashBits(t *testing.T) {
	// One feature: the fingerprint is its hash.
	for _, h := range []uint64{0, 1, 0xdeadbeefcafef00d, ^uint64(0)} {
		if got := SimHash([]Feature{{Hash: h, Weight: 1}}); got != h {
			t.Errorf("SimHash of one feature %016x = %016x", h, got)
		}
	}
	// The heavier of two opposite features wins every bit; a tie clears it.
	a, b := uint64(0x00ff00ff00ff00ff), ^uint64(0x00ff00ff00ff00ff)
	if got := SimHash([]Feature{{a, 1}, {b, 2}}); got != b {
		t.Errorf("heavier feature lost: %016x", got)
	}
	if got := SimHash([]Feature{{a, 1}, {b, 1}}); got != 0 {
		t.Errorf("tie gave %016x, want 0", got)
	}
	// Degenerate weights do not panic and count as documented.
	if got := SimHash([]Feature{{a, nan()}, {b, 1e300}}); got != b {
		t.Errorf("NaN and huge weights gave %016x, want %016x", got, b)
	}
}

func nan() float64 {
	var zero float64
	return zero / zero
}

func TestHamming(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 1000 {
		a, b := rng.Uint64(), rng.Uint64()
		want := 0
		for i := range 64 {
			if (a>>i)&1 != (b>>i)&1 {
				want++
			}
		}
		if got := Hamming(a, b); got != want {
			t.Fatalf("Hamming(%x, %x) = %d, want %d", a, b, got, want)
		}
	}
	if Hamming(0, ^uint64(0)) != 64 || Hamming(5, 5) != 0 {
		t.Error("Hamming extremes wrong")
	}
}
