package searchindex

import (
	"github.com/newsflow/newsflow/internal/option"
)

// Limits of a Request, shared by Search and Merge.
const (
	// DefaultLimit is the page size of a Request whose Limit is zero.
	DefaultLimit = 20
	// MaxLimit is the largest page; a larger Limit is lowered to it.
	MaxLimit = 100
)

// Options configures an Index. The zero value of every field means its
// default (see DefaultOptions).
type Options struct {
	// MaxContentBytes is how much of Doc.Content is indexed; the rest is
	// dropped, cut at a UTF-8 boundary. Content is never stored. Indexing
	// costs roughly 0.3–0.4 ms of CPU per KiB of content, against about
	// 0.2 ms for a whole headline and summary, so the default is 1 KiB (the
	// lede); negative leaves content out of the index.
	MaxContentBytes int
	// MaxQueryBytes bounds Request.Query; a longer query is a bad request.
	// Default 512.
	MaxQueryBytes int
	// AnyTerm makes a query match documents with any of its terms, ranked
	// by how well they match, instead of only documents with all of them.
	// It is slower: every document with a common term gets scored.
	AnyTerm bool
	// FragmentSize is the length in characters of a highlighted fragment.
	// A title or summary no longer than this is highlighted whole; a longer
	// one is cut around its best-matching part and marked with "…".
	// Default 200.
	FragmentSize int
}

// DefaultOptions returns the options the zero value stands for.
func DefaultOptions() Options {
	return Options{
		MaxContentBytes: 1 << 10,
		MaxQueryBytes:   512,
		FragmentSize:    200,
	}
}

// Validate reports invalid option values. Zero values are valid and mean the
// default.
func (o Options) Validate() error {
	return option.Join("search",
		option.NotNegative("max query bytes", o.MaxQueryBytes),
		option.NotNegative("fragment size", o.FragmentSize))
}

// withDefaults returns o with every zero field set to its default.
func (o Options) withDefaults() Options {
	option.Fill(&o, DefaultOptions())
	return o
}
