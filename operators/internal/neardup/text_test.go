package neardup

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"
	"github.com/newsflow/newsflow/internal/text"
)

// tokenize returns the tokens the Hasher hashes, and normalize the text
// they make joined by spaces.
func tokenize(s string) []string { return text.Tokenize(s, text.Options{}) }
func normalize(s string) string  { return strings.Join(tokenize(s), " ") }

// TestNormalizeIdempotent: normalized text normalizes to itself, and texts
// with equal normalizations have equal features, fingerprints and shingles.
func TestNormalizeIdempotent(t *testing.T) {
	for _, s := range []string{
		"Mt. Gox files for U.S. bankruptcy -- REPORT",
		"«Les Bleus» gagnent 2–1 à l'Euro",
		"東京の天気 ABC",
	} {
		n := normalize(s)
		if n2 := normalize(n); n2 != n {
			t.Errorf("normalize(normalize(%q)) = %q, want %q", s, n2, n)
		}
		if a, b := Fingerprint(s, s), Fingerprint(n, n); a != b {
			t.Errorf("Fingerprint of %q = %016x, of its normalization %016x", s, a, b)
		}
		if a, b := Shingles(s), Shingles(n); !slices.Equal(a, b) {
			t.Errorf("Shingles of %q differ from those of its normalization", s)
		}
	}
}

func TestFeatures(t *testing.T) {
	fs := Features("Storm hits coast", "The storm hits the coast; the coast braces.")
	byHash := make(map[uint64]float64)
	for _, f := range fs {
		if _, dup := byHash[f.Hash]; dup {
			t.Errorf("hash %016x repeated", f.Hash)
		}
		byHash[f.Hash] = f.Weight
	}
	weight := func(hash uint64) float64 {
		w, ok := byHash[hash]
		if !ok {
			t.Fatalf("feature %016x missing", hash)
		}
		return w
	}
	var h Hasher
	toks := h.tokenHashes(nil, "storm hits coast the braces")
	storm, hits, coast, the, braces := toks[0], toks[1], toks[2], toks[3], toks[4]
	// Unigrams and bigrams of title (weight 2) and summary (weight 1), merged
	// with weight max·√count.
	want := map[uint64]float64{
		storm:                  2 * sqrt(2),
		hits:                   2 * sqrt(2),
		coast:                  2 * sqrt(3),
		the:                    1 * sqrt(3),
		braces:                 1,
		combine(storm, hits):   2 * sqrt(2),
		combine(hits, coast):   2,
		combine(the, storm):    1,
		combine(hits, the):     1,
		combine(the, coast):    1 * sqrt(2),
		combine(coast, the):    1,
		combine(coast, braces): 1,
	}
	if len(fs) != len(want) {
		t.Errorf("got %d features, want %d: %v", len(fs), len(want), fs)
	}
	for hash, w := range want {
		if got := weight(hash); got != w {
			t.Errorf("feature %016x weight %v, want %v", hash, got, w)
		}
	}
	// First occurrence order: title unigram, title bigram, ...
	if fs[0].Hash != storm || fs[1].Hash != hits || fs[2].Hash != combine(storm, hits) {
		t.Errorf("features not in order of first occurrence: %v", fs[:3])
	}
	if len(Features("", "")) != 0 || Fingerprint("", "") != 0 {
		t.Error("empty article has features")
	}
}

func sqrt(x float64) float64 { return math.Sqrt(x) }

func TestShingles(t *testing.T) {
	var h Hasher
	toks := h.tokenHashes(nil, "a b c d")
	a, b, c, d := toks[0], toks[1], toks[2], toks[3]
	tests := []struct {
		in   string
		want []uint64
	}{
		{"", nil},
		{"A", []uint64{a}},
		{"a, b", []uint64{combine(a, b)}},
		{"a b c", []uint64{combine(combine(a, b), c)}},
		{"a b c d", []uint64{combine(combine(a, b), c), combine(combine(b, c), d)}},
	}
	for _, tt := range tests {
		if got := Shingles(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("Shingles(%q) = %x, want %x", tt.in, got, tt.want)
		}
	}
	if Shingles("a b c")[0] == Shingles("c b a")[0] {
		t.Error("shingles ignore word order")
	}
}

// TestGoldenFingerprints pins fingerprints and shingles. Stored fingerprints
// are compared with new ones, so a change here is a format change: every
// stored fingerprint and signature must be recomputed.
func TestGoldenFingerprints(t *testing.T) {
	tests := []struct {
		title, summary string
		fp             uint64
	}{
		{"Storm hits coast", "The storm hits the coast; the coast braces.", 0x46b31a6a9a344b7e},
		{"Zentralbank hebt Leitzins an", "Die Europäische Zentralbank erhöht die Zinsen um 0,25 Prozentpunkte.", 0xf1567a0412dacecf},
		{"東京で地震", "震度4を観測", 0xcd1c8e3ec8c66d4c},
		// Apostrophes separate words; accents and combining marks are
		// kept; a run of Thai is one token.
		{"BBC's chief won't resign", "O'Brien said: 'it’s over' — Pokémon Straße 東京の天気 हिन्दी cafe\u0301 " +
			"นายกรัฐมนตรีประกาศมาตรการใหม่เพื่อกระตุ้นเศรษฐกิจของประเทศ", 0x698b257111be26d0},
	}
	for _, tt := range tests {
		if got := Fingerprint(tt.title, tt.summary); got != tt.fp {
			t.Errorf("Fingerprint(%q, %q) = %#016x, want %#016x", tt.title, tt.summary, got, tt.fp)
		}
	}
	if got, want := Shingles("Storm hits the coast")[0], uint64(0xa4b99fc1be7360df); got != want {
		t.Errorf("first shingle = %#016x, want %#016x", got, want)
	}
	// Word hashes are plain xxhash64 of the lower-cased UTF-8 token.
	var h Hasher
	for _, w := range []string{"Storm", "ÉCOLE", "東"} {
		if got, want := h.tokenHashes(nil, w)[0], xxhash.Sum64String(strings.ToLower(w)); got != want {
			t.Errorf("hash of %q = %016x, want xxhash64 %016x", w, got, want)
		}
	}
}

func TestHasherDoesNotAllocate(t *testing.T) {
	title := "Ukraine crisis: LNG stocks in focus as Europe weighs gas supplies"
	summary := "Shares of liquefied natural gas exporters rose on Monday as European " +
		"leaders discussed ways to cut their dependence on Russian gas, analysts said."
	var h Hasher
	var fs []Feature
	var sh []uint64
	allocs := testing.AllocsPerRun(100, func() {
		_ = h.Fingerprint(title, summary)
		fs = h.AppendFeatures(fs[:0], title, summary)
		sh = h.AppendShingles(sh[:0], summary)
	})
	if allocs != 0 {
		t.Errorf("Hasher allocates %v times per article, want 0", allocs)
	}
	if got, want := h.Fingerprint(title, summary), Fingerprint(title, summary); got != want {
		t.Errorf("reused Hasher fingerprint %016x, fresh %016x", got, want)
	}
}
