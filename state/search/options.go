package search

import (
	"errors"
	"fmt"
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
	// dropped, cut at a UTF-8 boundary. Content is never stored. Default
	// 4 KiB; negative leaves content out of the index entirely.
	MaxContentBytes int
	// MaxQueryBytes bounds Request.Query; a longer query is a bad request.
	// Default 512.
	MaxQueryBytes int
	// FragmentSize is the length in characters of a highlighted fragment.
	// A title or summary no longer than this is highlighted whole; a longer
	// one is cut around its best-matching part and marked with "…".
	// Default 200.
	FragmentSize int
}

// DefaultOptions returns the options the zero value stands for.
func DefaultOptions() Options {
	return Options{
		MaxContentBytes: 4 << 10,
		MaxQueryBytes:   512,
		FragmentSize:    200,
	}
}

// Validate reports invalid option values. Zero values are valid and mean the
// default.
func (o Options) Validate() error {
	var errs []error
	if o.MaxQueryBytes < 0 {
		errs = append(errs, fmt.Errorf("max query bytes %d is negative", o.MaxQueryBytes))
	}
	if o.FragmentSize < 0 {
		errs = append(errs, fmt.Errorf("fragment size %d is negative", o.FragmentSize))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("search options: %w", err)
	}
	return nil
}

// withDefaults returns o with every zero field set to its default.
func (o Options) withDefaults() Options {
	d := DefaultOptions()
	if o.MaxContentBytes == 0 {
		o.MaxContentBytes = d.MaxContentBytes
	}
	if o.MaxQueryBytes == 0 {
		o.MaxQueryBytes = d.MaxQueryBytes
	}
	if o.FragmentSize == 0 {
		o.FragmentSize = d.FragmentSize
	}
	return o
}
