package neardup

import (
	"math"
	"slices"
	"testing"
)

// FuzzText checks Features, SimHash and Shingles on arbitrary strings: no
// panics, deterministic, independent of Hasher history, invariant under
// normalize, and well-formed.
func FuzzText(f *testing.F) {
	for _, s := range [][2]string{
		{"", ""},
		{"Storm hits coast", "The storm hits the coast; the coast braces."},
		{"東京で地震", "震度4を観測"},
		{"cafe\u0301 İSTANBUL ǅemal", "हिन्दी समाचार ١٢٣"},
		{"bad\xff\xfeutf8\xc3", "\x00\x01 tab\tnl\n"},
		{"a", "a a a a a a a a a a"},
		{"\u0301\u0301 東\u0301", "ﬁ ß ẞ Σσς"},
	} {
		f.Add(s[0], s[1])
	}
	var h Hasher
	f.Fuzz(func(t *testing.T, title, summary string) {
		fs := Features(title, summary)
		if !slices.Equal(fs, Features(title, summary)) {
			t.Fatal("Features not deterministic")
		}
		if got := h.AppendFeatures(nil, title, summary); !slices.Equal(got, fs) {
			t.Fatal("reused Hasher gives other features")
		}
		seen := make(map[uint64]bool, len(fs))
		for _, ft := range fs {
			if seen[ft.Hash] {
				t.Fatalf("feature %016x repeated", ft.Hash)
			}
			seen[ft.Hash] = true
			if !(ft.Weight >= 1) || math.IsInf(ft.Weight, 0) {
				t.Fatalf("feature weight %v", ft.Weight)
			}
		}
		fp := SimHash(fs)
		if h.Fingerprint(title, summary) != fp || Fingerprint(title, summary) != fp {
			t.Fatal("Fingerprint differs from SimHash(Features)")
		}
		rev := slices.Clone(fs)
		slices.Reverse(rev)
		if SimHash(rev) != fp {
			t.Fatal("SimHash depends on feature order")
		}
		nt, ns := normalize(title), normalize(summary)
		if normalize(nt) != nt {
			t.Fatalf("normalize not idempotent: %q → %q → %q", title, nt, normalize(nt))
		}
		if Fingerprint(nt, ns) != fp {
			t.Fatalf("normalized text has another fingerprint: %q %q", nt, ns)
		}
		if len(fs) == 0 != (nt == "" && ns == "") {
			t.Fatalf("%d features for normalized text %q %q", len(fs), nt, ns)
		}

		sh := Shingles(summary)
		if !slices.Equal(sh, h.AppendShingles(nil, summary)) || !slices.Equal(sh, Shingles(ns)) {
			t.Fatal("Shingles not deterministic or not invariant under normalize")
		}
		toks := len(tokenize(summary))
		if want := max(toks-ShingleWords+1, min(toks, 1)); len(sh) != want {
			t.Fatalf("%d shingles for %d tokens, want %d", len(sh), toks, want)
		}
	})
}
