package neardup

import (
	"cmp"
	"errors"
	"fmt"

	"github.com/newsflow/newsflow/internal/option"
)

// Options configure a Detector. The zero value of every field selects its
// default (see DefaultOptions), so Options{} is the default configuration;
// in particular K cannot be 0.
type Options struct {
	// K is the Hamming distance up to which two fingerprints are taken for
	// near-duplicates without further checks. Default 3.
	K int `yaml:"near_dup_k"`
	// Borderline is the Hamming distance up to which a pair beyond K is
	// checked with MinHash; pairs farther apart are distinct. It is also the
	// distance to Query the Index with for candidates, so it may not exceed
	// MaxDistance. Default 6.
	Borderline int `yaml:"-"`
	// MinJaccard is the least estimated Jaccard similarity of the word
	// shingles (see Shingles) of a borderline pair that makes it a
	// near-duplicate. Default 0.4; see DefaultOptions for its calibration.
	MinJaccard float64 `yaml:"-"`
	// Permutations is the length of the MinHash signatures. Default 128.
	Permutations int `yaml:"-"`
	// Seed fixes the MinHash permutations. Signatures are comparable only
	// between Detectors with equal Permutations and Seed, so keep it fixed
	// for as long as signatures are stored. Zero is a valid seed.
	Seed uint64 `yaml:"-"`
}

// DefaultOptions returns the default options.
//
// MinJaccard = 0.4 comes from measurements with 3-word shingles and 128
// permutations (eval_test.go); the standard error of an estimate J is
// √(J(1−J)/128), 0.036 at 0.2 and 0.044 at 0.5.
//
//   - The planted near-duplicates of the shared minhash_planted set (one
//     word inserted or deleted in ~250) are estimated at 0.93 or more (exact
//     Jaccard ≥ 0.978); the most similar of the other 3.1 million pairs of
//     articles_2500 at 0.20, and their mean is 0.001.
//   - Wire copies republished with another headline and dateline (ECB+
//     corpus) that SimHash puts 4–6 bits apart are estimated at 0.56–0.97,
//     the lowest with exact Jaccard 0.52; articles by different writers
//     about the same event have a median of 0.016, and SemEval 2022 task 8
//     pairs graded "very similar" (same story, mostly other outlets) a mean
//     of 0.04.
//   - One swapped word in an 8-word headline leaves 0.33, and such a
//     headline often reports other news ("rise" for "fall").
//
// 0.4 is more than five standard errors above the most similar unrelated
// pair and between two and three below the lowest wire copy: a merged pair
// of distinct articles hides news, while a missed copy only shows it twice,
// so the threshold leans to precision. On minhash_planted SimHash alone
// separates the classes (the only pairs within 6 bits are planted ones, and
// one of them is beyond 3 bits, estimated at 0.98), so there any MinJaccard
// up to 0.98 scores precision and recall 1; the bounds above come from the
// similarity of its unrelated pairs and from the ECB+ wire copies.
func DefaultOptions() Options {
	return Options{K: 3, Borderline: 6, MinJaccard: 0.4, Permutations: DefaultPermutations}
}

// withDefaults returns o with its zero fields set to their defaults.
func (o Options) withDefaults() Options {
	d := DefaultOptions()
	d.Borderline = max(d.Borderline, cmp.Or(o.K, d.K)) // never below K
	option.Fill(&o, d)
	return o
}

// ErrInvalidOptions is wrapped by the errors of Options.Validate.
var ErrInvalidOptions = errors.New("neardup: invalid options")

// Validate reports whether the options, with their defaults filled in, make
// sense: 0 < K ≤ Borderline ≤ MaxDistance, 0 < MinJaccard ≤ 1 and
// Permutations > 0.
func (o Options) Validate() error {
	o = o.withDefaults()
	switch {
	case o.K < 0:
		return fmt.Errorf("%w: k %d is negative", ErrInvalidOptions, o.K)
	case o.Borderline < o.K || o.Borderline > MaxDistance:
		return fmt.Errorf("%w: borderline %d not in k..%d (k = %d)", ErrInvalidOptions, o.Borderline, MaxDistance, o.K)
	case !(o.MinJaccard > 0 && o.MinJaccard <= 1):
		return fmt.Errorf("%w: min jaccard %v not in (0, 1]", ErrInvalidOptions, o.MinJaccard)
	case o.Permutations < 0:
		return fmt.Errorf("%w: permutations %d is negative", ErrInvalidOptions, o.Permutations)
	}
	return nil
}

// Doc is what a Detector needs to know of an article: its SimHash
// fingerprint and the MinHash signature of its shingles.
type Doc struct {
	FP  uint64
	Sig []uint32
}

// Decision is the verdict of Detector.Decide on a pair of articles.
type Decision uint8

const (
	// Distinct: the articles are not near-duplicates.
	Distinct Decision = iota
	// CloseFingerprints: the fingerprints are at most K bits apart.
	CloseFingerprints
	// SimilarShingles: the fingerprints are more than K but at most
	// Borderline bits apart, and the shingle sets are at least MinJaccard
	// similar.
	SimilarShingles
)

// Duplicate reports whether d says the articles are near-duplicates.
func (d Decision) Duplicate() bool { return d != Distinct }

func (d Decision) String() string {
	switch d {
	case Distinct:
		return "distinct"
	case CloseFingerprints:
		return "close-fingerprints"
	case SimilarShingles:
		return "similar-shingles"
	}
	return fmt.Sprintf("Decision(%d)", uint8(d))
}

// Detector decides whether two articles are near-duplicates: a SimHash
// fingerprint decides the clear cases, and a MinHash estimate of the Jaccard
// similarity of their word shingles decides the borderline ones.
//
// To find the near-duplicates of an article among many, keep their
// fingerprints in an Index and their signatures in a store, Query the Index
// with the article's fingerprint at distance Options().Borderline, and
// Decide on each candidate.
//
// A Detector is not safe for concurrent use: Doc reuses scratch space. Use
// one Detector per goroutine; their Docs are comparable if their Options
// are equal.
type Detector struct {
	opts Options
	mh   *MinHasher
	h    Hasher
	sh   []uint64
}

// NewDetector returns a Detector with the given options; their zero fields
// take the defaults.
func NewDetector(opts Options) (*Detector, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	return &Detector{opts: opts, mh: NewMinHasher(opts.Permutations, opts.Seed)}, nil
}

// Options returns the options of d, with the defaults filled in.
func (d *Detector) Options() Options { return d.opts }

// Doc returns the fingerprint (see Fingerprint) and the MinHash signature of
// the shingles of an article, title and summary shingled separately. Only
// the signature is allocated.
func (d *Detector) Doc(title, summary string) Doc {
	d.sh = d.h.AppendShingles(d.sh[:0], title)
	d.sh = d.h.AppendShingles(d.sh, summary)
	return Doc{
		FP:  d.h.Fingerprint(title, summary),
		Sig: d.mh.Signature(d.sh),
	}
}

// Decide tells whether a and b are near-duplicates, and why: fingerprints at
// most K bits apart are; fingerprints more than Borderline bits apart are
// not; in between, the signatures decide (a missing signature, or one from a
// MinHasher with other Permutations, makes the pair distinct).
func (d *Detector) Decide(a, b Doc) Decision {
	switch dist := Hamming(a.FP, b.FP); {
	case dist <= d.opts.K:
		return CloseFingerprints
	case dist > d.opts.Borderline:
		return Distinct
	}
	if Similarity(a.Sig, b.Sig) >= d.opts.MinJaccard {
		return SimilarShingles
	}
	return Distinct
}
