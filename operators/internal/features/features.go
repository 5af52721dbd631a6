// Package features computes what the story stage derives from one
// article's own text, whatever the other articles and their order: the
// near-duplicate fingerprint (SimHash) and MinHash signature of
// operators/internal/neardup, and the index terms of the story clusterer
// with their counts in the title and the summary. The IDF weights, the
// vocabulary's term ids and everything else that depends on the stream stay
// in the story stage.
//
// The articles operator, which runs one task per partition, computes them
// (Extractor.Compute) and writes them into the processed article record
// (schema.Features), so that the single stories task need not; the stories
// task decodes them (Decoder) and computes them itself with the same code
// (neardup.Detector.Doc, TermCounter.Terms) for a record without them, with
// features of another Version or with malformed ones: records written
// before features existed, by older versions or by other producers
// (newsflow replay). Both ways give the same values, so the stories are the
// same whichever way the features came.
//
// Version names how features are computed. Any change to what they are
// computed from or how (the tokens of internal/text, the stop words or
// folding of TermOptions, neardup's features, weights, shingles,
// permutations or seed, the encoding) must increase it, so that the story
// stage recomputes the features of records written before.
// TestGoldenFeatures pins the features of a few texts to catch such a
// change.
//
// Concurrency: an Extractor, a TermCounter and a Decoder hold scratch space
// and are not safe for concurrent use; give each task its own. The encoding
// functions are safe for concurrent use.
package features

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"strconv"

	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/internal/text"
	"github.com/newsflow/newsflow/operators/internal/neardup"
)

// Version is the version of the features this package computes
// (schema.Features.Version).
const Version = 1

// The MinHash signatures of the features are those of a neardup Detector
// with Permutations permutations and seed Seed (the defaults): a story stage
// configured otherwise computes its own.
const (
	Permutations        = neardup.DefaultPermutations
	Seed         uint64 = 0
)

// TermOptions make the clusterer's index terms of a text: the tokens of
// internal/text with accents and English plurals folded, without stop
// words.
var TermOptions = text.Options{FoldAccents: true, FoldPlurals: true, Stop: StopWords}

// StopWords are function words, headline boilerplate that says nothing
// about the event, and every single letter (initials, the "s" of "U.S.").
var StopWords = text.NewStopWords(`a about above after again against all am an and any are as at be because been
before being below between both but by can could did do does doing down during each few for from further had has
have having he her here hers herself him himself his how i if in into is it its itself just me more most my
myself no nor not now of off on once only or other our ours ourselves out over own same she should so some such
than that the their theirs them themselves then there these they this those through to too under until up very
was we were what when where which while who whom why will with would you your yours yourself yourselves
says say said new news update updated video watch report reports via amp vs
b c d e f g h j k l m n o p q r s t u v w x y z`)

// Term is an index term of an article and how many times it occurs in the
// title and in the summary.
type Term struct {
	Word           []byte
	Title, Summary int
}

// Doc is what the story stage needs of an article's features.
type Doc struct {
	// Near is the SimHash fingerprint and MinHash signature (with
	// Permutations permutations and seed Seed).
	Near neardup.Doc
	// Terms are the index terms, in order of first occurrence (the title's
	// tokens, then the summary's).
	Terms []Term
}

// Extractor computes features. It is not safe for concurrent use.
type Extractor struct {
	det *neardup.Detector
	tc  TermCounter
	enc []byte // scratch for Compute
}

// NewExtractor returns an Extractor.
func NewExtractor() *Extractor {
	det, err := neardup.NewDetector(neardup.Options{Permutations: Permutations, Seed: Seed})
	if err != nil {
		panic(err) // the default options are valid
	}
	return &Extractor{det: det}
}

// Doc returns the SimHash fingerprint and the MinHash signature of an
// article (neardup.Detector.Doc with Permutations and Seed).
func (e *Extractor) Doc(title, summary string) neardup.Doc { return e.det.Doc(title, summary) }

// Terms is TermCounter.Terms.
func (e *Extractor) Terms(title, summary string) []Term { return e.tc.Terms(title, summary) }

// TermCounter counts the index terms of articles. The zero value is ready
// to use; it is not safe for concurrent use.
type TermCounter struct {
	tok   text.Tokenizer
	init  bool
	seed  maphash.Seed
	words []byte  // the words of the terms, back to back
	spans []span  // the terms, as spans of words
	slots []int32 // hash table of the terms: 1 + index into spans, 0 if free
	terms []Term  // the result of Terms
}

type span struct {
	start, end     int32
	title, summary int32
}

// Terms returns the index terms of an article (TermOptions) with their
// counts in the title and in the summary, in order of first occurrence.
// The result, words included, is valid until the next call.
func (e *TermCounter) Terms(title, summary string) []Term {
	if !e.init {
		e.tok, e.seed, e.init = text.NewTokenizer(TermOptions), maphash.MakeSeed(), true
	}
	e.words, e.spans = e.words[:0], e.spans[:0]
	size := 16
	for size <= len(title)+len(summary) { // more than the tokens
		size <<= 1
	}
	if cap(e.slots) < size {
		e.slots = make([]int32, size)
	}
	e.slots = e.slots[:size]
	clear(e.slots)
	e.count(title, true)
	e.count(summary, false)
	e.terms = e.terms[:0]
	for _, s := range e.spans {
		e.terms = append(e.terms, Term{Word: e.words[s.start:s.end:s.end], Title: int(s.title), Summary: int(s.summary)})
	}
	return e.terms
}

// count counts the tokens of s in the title or the summary.
func (e *TermCounter) count(s string, title bool) {
	mask := uint64(len(e.slots) - 1)
	e.tok.Reset(s)
	for e.tok.Next() {
		w := e.tok.Token()
		for i := maphash.Bytes(e.seed, w) & mask; ; i = (i + 1) & mask {
			k := e.slots[i] - 1
			if k < 0 {
				e.slots[i] = int32(len(e.spans) + 1)
				start := int32(len(e.words))
				e.words = append(e.words, w...)
				e.spans = append(e.spans, span{start: start, end: int32(len(e.words))})
				k = int32(len(e.spans) - 1)
			} else if sp := e.spans[k]; string(e.words[sp.start:sp.end]) != string(w) {
				continue
			}
			if title {
				e.spans[k].title++
			} else {
				e.spans[k].summary++
			}
			break
		}
	}
}

// Compute returns the features of an article, for its record.
func (e *Extractor) Compute(title, summary string) *schema.Features {
	d := e.Doc(title, summary)
	e.enc = AppendTerms(e.enc[:0], e.Terms(title, summary))
	return &schema.Features{
		Version: Version,
		SimHash: FormatSimHash(d.FP),
		MinHash: AppendMinHash(nil, d.Sig),
		Terms:   string(e.enc),
	}
}

// FormatSimHash returns a fingerprint as schema.Features holds it: 16
// lower-case hex digits.
func FormatSimHash(fp uint64) string {
	var b [16]byte
	s := strconv.AppendUint(b[:0], fp, 16)
	return string(append([]byte("0000000000000000"[:16-len(s)]), s...))
}

// ParseSimHash parses FormatSimHash's form.
func ParseSimHash(s []byte) (uint64, error) {
	if len(s) != 16 {
		return 0, errors.New("simhash: not 16 hex digits")
	}
	var fp uint64
	for _, c := range s {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		default:
			return 0, errors.New("simhash: not 16 lower-case hex digits")
		}
		fp = fp<<4 | uint64(d)
	}
	return fp, nil
}

// AppendMinHash appends a signature as schema.Features holds it (before
// JSON's base64): its values as little-endian uint32s.
func AppendMinHash(dst []byte, sig []uint32) []byte {
	for _, v := range sig {
		dst = binary.LittleEndian.AppendUint32(dst, v)
	}
	return dst
}

// AppendTerms appends the encoding of terms that schema.Features.Terms
// holds: an entry per term, separated by single spaces, each the word, a
// colon, its count in the title, a colon and its count in the summary
// ("rate:1:2 hike:0:1"). Words are tokens, which never hold a space or a
// colon.
func AppendTerms(dst []byte, terms []Term) []byte {
	for i, t := range terms {
		if i > 0 {
			dst = append(dst, ' ')
		}
		dst = append(dst, t.Word...)
		dst = append(dst, ':')
		dst = strconv.AppendInt(dst, int64(t.Title), 10)
		dst = append(dst, ':')
		dst = strconv.AppendInt(dst, int64(t.Summary), 10)
	}
	return dst
}

// ParseTerms appends the terms of AppendTerms's encoding s to dst. Words
// refer to s. A word must not be empty or hold a colon, a space or an ASCII
// control character; every term must occur; the counts in the title may
// add up to at most maxTitle, those in the summary to at most maxSummary
// (the text's length in bytes bounds its tokens).
func ParseTerms(dst []Term, s []byte, maxTitle, maxSummary int) ([]Term, error) {
	var sumT, sumS int
	for i := 0; i < len(s); {
		if i > 0 {
			i++ // the space after the last entry
			if i == len(s) {
				return dst, errors.New("terms: trailing space")
			}
		}
		start := i
		for i < len(s) && s[i] != ':' {
			if s[i] <= ' ' {
				return dst, fmt.Errorf("terms: byte %#x in a word", s[i])
			}
			i++
		}
		if i == start || i == len(s) {
			return dst, errors.New("terms: an entry without a word or counts")
		}
		t := Term{Word: s[start:i:i]}
		var err error
		if t.Title, i, err = parseCount(s, i+1, ':'); err != nil {
			return dst, err
		}
		if t.Summary, i, err = parseCount(s, i+1, ' '); err != nil {
			return dst, err
		}
		if t.Title+t.Summary == 0 {
			return dst, fmt.Errorf("terms: %q occurs nowhere", t.Word)
		}
		sumT += t.Title
		sumS += t.Summary
		if sumT > maxTitle || sumS > maxSummary {
			return dst, errors.New("terms: more occurrences than the text has room for")
		}
		dst = append(dst, t)
	}
	return dst, nil
}

// parseCount parses the count at s[i:], up to the end or the separator
// sep: decimal digits without a needless leading zero, below a million.
// It returns the count and the index of the separator (or len(s)).
func parseCount(s []byte, i int, sep byte) (int, int, error) {
	start, n := i, 0
	for ; i < len(s) && s[i] != sep; i++ {
		c := s[i]
		if c < '0' || c > '9' || i-start == 6 || (i > start && s[start] == '0') {
			return 0, i, fmt.Errorf("terms: bad count at byte %d", start)
		}
		n = n*10 + int(c-'0')
	}
	if i == start || (sep == ':' && i == len(s)) {
		return 0, i, fmt.Errorf("terms: missing count at byte %d", start)
	}
	return n, i, nil
}

// Decoder decodes the features of records. It is not safe for concurrent
// use; the Doc it returns refers to its scratch space and to the encoded
// terms until the next call.
type Decoder struct {
	raw   []byte
	terms []Term
}

// Decode returns the features of an article of the given title and summary
// as a record holds them: the SimHash (16 hex digits), the MinHash (base64
// of its little-endian values) and the terms (AppendTerms). ok is false when
// they are of another version, or malformed: the caller then computes
// them. Sig is newly allocated; Terms refer to terms.
func (d *Decoder) Decode(version int, simhash, minhash, terms []byte, title, summary string) (doc Doc, ok bool) {
	if version != Version {
		return Doc{}, false
	}
	fp, err := ParseSimHash(simhash)
	if err != nil {
		return Doc{}, false
	}
	if len(minhash) != base64.StdEncoding.EncodedLen(4*Permutations) {
		return Doc{}, false
	}
	if d.raw == nil {
		d.raw = make([]byte, base64.StdEncoding.DecodedLen(len(minhash)))
	}
	n, err := base64.StdEncoding.Decode(d.raw, minhash)
	if err != nil || n != 4*Permutations {
		return Doc{}, false
	}
	sig := make([]uint32, Permutations)
	for i := range sig {
		sig[i] = binary.LittleEndian.Uint32(d.raw[4*i:])
	}
	if d.terms, err = ParseTerms(d.terms[:0], terms, len(title), len(summary)); err != nil {
		return Doc{}, false
	}
	return Doc{Near: neardup.Doc{FP: fp, Sig: sig}, Terms: d.terms}, true
}
