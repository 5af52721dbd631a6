package text

import "strings"

// StopWords is a set of tokens a Tokenizer drops (Options.Stop). It is
// immutable once built and safe for concurrent use; the zero value is
// empty.
type StopWords struct {
	m map[string]struct{}
}

// NewStopWords returns the set of the whitespace-separated words in list.
// Words are compared with tokens as the tokenizer builds them, before
// plural folding, so list them lower-case (and without accents when
// accents are folded).
func NewStopWords(list string) StopWords {
	m := map[string]struct{}{}
	for _, w := range strings.Fields(list) {
		m[w] = struct{}{}
	}
	return StopWords{m: m}
}

// Has reports whether w is in the set.
func (s StopWords) Has(w string) bool {
	_, ok := s.m[w]
	return ok
}
