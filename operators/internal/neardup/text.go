package neardup

import (
	"math"
	"slices"

	"github.com/cespare/xxhash/v2"
	"github.com/newsflow/newsflow/internal/text"
)

// Feature is one weighted text feature: the 64-bit hash of a word or of a
// word shingle, and its weight in a SimHash.
type Feature struct {
	Hash   uint64
	Weight float64
}

// Feature weights. A word or shingle of the title counts twice as much as
// one of the summary: titles are short and chosen by the editor, so they say
// more about the story per word than the summary does.
const (
	titleWeight   = 2.0
	summaryWeight = 1.0
)

// ShingleWords is the number of consecutive words in a MinHash shingle.
//
// Measured with 128 permutations (TestShingleChoice): on the planted
// near-duplicates of the shared minhash_planted set (articles_1000), 2-word,
// 3-word and 5-character shingles all keep the planted pairs at 0.97 or more
// and all other pairs at 0.24 or less. Headlines tell them apart: for the
// UCI news aggregator titles of different stories the 99.99th percentile
// similarity is 0.15 with 3 words, 0.22 with 2 and 0.37 with 5 characters.
// 3-word shingles also treat a swapped word in a short headline, which often
// changes the news ("rise" for "fall"), as a big change: one swap in 8 words
// leaves 3 of 9 shingles shared (0.33), against 5 of 9 (0.56) with 2 words.
// And a word costs one hash, not one per character.
const ShingleWords = 3

// Hasher computes features, fingerprints and shingles, reusing its scratch
// space between calls so that, once warmed up, it does not allocate. The
// zero value is ready to use. A Hasher is not safe for concurrent use: give
// each goroutine its own.
type Hasher struct {
	tok    text.Tokenizer // with the zero Options; see Features
	toks   []uint64       // token hashes of one field
	feats  []Feature      // features for Fingerprint
	slots  []int32        // hash table of mergeFeatures
	counts []int32        // occurrences of each feature in mergeFeatures
}

// tokenHashes appends the hashes of the tokens of s to dst.
func (h *Hasher) tokenHashes(dst []uint64, s string) []uint64 {
	h.tok.Reset(s)
	for h.tok.Next() {
		dst = append(dst, xxhash.Sum64(h.tok.Token()))
	}
	return dst
}

// combine hashes an ordered pair of hashes; it is the hash of a shingle given
// the hash of its words.
func combine(a, b uint64) uint64 {
	return mix64(a*0x9E3779B97F4A7C15 ^ b)
}

// mix64 is the SplitMix64 finalizer: a bijection with full avalanche.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 27
	x *= 0x94D049BB133111EB
	x ^= x >> 31
	return x
}

// appendGrams appends a feature for every token and for every pair of
// adjacent tokens (a 2-word shingle), all with weight w.
func appendGrams(dst []Feature, toks []uint64, w float64) []Feature {
	for i, t := range toks {
		dst = append(dst, Feature{Hash: t, Weight: w})
		if i > 0 {
			dst = append(dst, Feature{Hash: combine(toks[i-1], t), Weight: w})
		}
	}
	return dst
}

// AppendFeatures appends the features of an article to dst and returns the
// extended slice; see Features.
func (h *Hasher) AppendFeatures(dst []Feature, title, summary string) []Feature {
	start := len(dst)
	h.toks = h.tokenHashes(h.toks[:0], title)
	dst = appendGrams(dst, h.toks, titleWeight)
	h.toks = h.tokenHashes(h.toks[:0], summary)
	dst = appendGrams(dst, h.toks, summaryWeight)
	return dst[:start+h.mergeFeatures(dst[start:])]
}

// mergeFeatures merges the features of fs with equal hashes into one, in
// place, keeping the order of first occurrence, and returns the number of
// distinct features. A feature seen c times with largest weight w gets
// weight w·√c: repeats count, but sub-linearly, so that the function words
// and stock phrases that every long text repeats ("of the", "said") do not
// outvote the words that make it different.
//
// Measured on the shared minhash_planted set (one word inserted or deleted
// in ~250-word articles): with √c the planted pairs are at most 4 bits apart
// and all other pairs at least 10 (mean 28.7). Raw counts also keep the
// planted pairs within 4 bits, but pull unrelated articles together (mean
// 23.1, nearest pair 5 bits). Counting each feature once (w) lets a planted
// pair drift to 5 bits; w·(1 + ln c) does as well as √c, but math.Sqrt is
// correctly rounded on every platform and math.Log is not guaranteed to be,
// and fingerprints must be portable.
func (h *Hasher) mergeFeatures(fs []Feature) int {
	size := 16
	for size < 2*len(fs) {
		size <<= 1
	}
	if cap(h.slots) < size {
		h.slots = make([]int32, size)
	}
	slots := h.slots[:size] // open addressing; 1 + index into fs, 0 if free
	clear(slots)
	h.counts = slices.Grow(h.counts[:0], len(fs))[:len(fs)]
	mask := uint64(size - 1)
	n := 0
	for _, f := range fs {
		for i := f.Hash & mask; ; i = (i + 1) & mask {
			e := slots[i] - 1
			if e < 0 {
				slots[i] = int32(n + 1)
				fs[n] = f
				h.counts[n] = 1
				n++
				break
			}
			if fs[e].Hash == f.Hash {
				fs[e].Weight = max(fs[e].Weight, f.Weight)
				h.counts[e]++
				break
			}
		}
	}
	for i, c := range h.counts[:n] {
		if c > 1 {
			fs[i].Weight *= math.Sqrt(float64(c))
		}
	}
	return n
}

// Fingerprint returns the SimHash of the features of an article.
func (h *Hasher) Fingerprint(title, summary string) uint64 {
	h.feats = h.AppendFeatures(h.feats[:0], title, summary)
	return SimHash(h.feats)
}

// AppendShingles appends the shingle hashes of text to dst and returns the
// extended slice; see Shingles.
func (h *Hasher) AppendShingles(dst []uint64, text string) []uint64 {
	h.toks = h.tokenHashes(h.toks[:0], text)
	return appendWordShingles(dst, h.toks)
}

// appendWordShingles appends the hash of every run of ShingleWords tokens;
// a text with fewer tokens has one shingle, the hash of all of them (none if
// it has no token).
func appendWordShingles(dst []uint64, toks []uint64) []uint64 {
	if len(toks) == 0 {
		return dst
	}
	n := ShingleWords
	if len(toks) < n {
		n = len(toks)
	}
	for i := 0; i+n <= len(toks); i++ {
		s := toks[i]
		for _, t := range toks[i+1 : i+n] {
			s = combine(s, t)
		}
		dst = append(dst, s)
	}
	return dst
}

// Features returns the weighted features of an article for SimHash: every
// word and every 2-word shingle (pair of adjacent words) of the title and of
// the summary. Tokens are those of internal/text with the zero Options:
// lower-cased words, with accents, plurals and stop words kept and no
// length limit (a run of an unsegmented script such as Thai is one long
// token, and still tells texts apart). Shingles do not span from the title
// into the summary. Title features weigh twice as much as summary features;
// repeated features are merged into one with a sub-linearly growing weight.
// The result has distinct hashes, in order of first occurrence. Hashes are
// xxhash64 of the lower-cased token, and a fixed mix of the word hashes for
// shingles, so they are the same in every process and on every platform.
func Features(title, summary string) []Feature {
	var h Hasher
	return h.AppendFeatures(nil, title, summary)
}

// Fingerprint returns the SimHash of the features of an article. A Hasher's
// Fingerprint method gives the same result without allocating.
func Fingerprint(title, summary string) uint64 {
	var h Hasher
	return h.Fingerprint(title, summary)
}

// Shingles returns the MinHash shingles of text: the hash of every run of
// ShingleWords consecutive tokens (see Features), in text order and with
// repeats. A text with fewer tokens has a single shingle hashing all of
// them, and an empty text has none.
func Shingles(text string) []uint64 {
	var h Hasher
	return h.AppendShingles(nil, text)
}
