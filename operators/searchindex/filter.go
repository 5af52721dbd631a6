package searchindex

import (
	"context"

	"github.com/blevesearch/bleve/v2/mapping"
	bsearch "github.com/blevesearch/bleve/v2/search"
	"github.com/blevesearch/bleve/v2/search/query"
	"github.com/blevesearch/bleve/v2/search/searcher"
	bleveindex "github.com/blevesearch/bleve_index_api"
)

// filtered matches the documents of q that filter also matches, scored by
// q alone. It is Bleve's Boolean query with only Must and Filter, without
// the Boolean searcher Bleve wraps around Must, which cost a third of a
// filtered search's time; and it closes the filter's searcher.
type filtered struct {
	q, filter query.Query
}

func (f *filtered) Searcher(ctx context.Context, i bleveindex.IndexReader, m mapping.IndexMapping, options bsearch.SearcherOptions) (bsearch.Searcher, error) {
	s, err := f.q.Searcher(ctx, i, m, options)
	if err != nil {
		return nil, err
	}
	fs, err := f.filter.Searcher(ctx, i, m, bsearch.SearcherOptions{Score: "none"})
	if err != nil {
		_ = s.Close()
		return nil, err
	}
	// The filter's searcher moves forward only: it is advanced to each of
	// q's matches in turn, which arrive in index order.
	var ref *bsearch.DocumentMatch
	started, done := false, false
	accept := func(sctx *bsearch.SearchContext, d *bsearch.DocumentMatch) bool {
		if done {
			return false
		}
		var err error
		if !started {
			started = true
			if ref, err = fs.Next(sctx); err != nil || ref == nil {
				done = true
				return false
			}
		}
		if c := ref.IndexInternalID.Compare(d.IndexInternalID); c < 0 {
			sctx.DocumentMatchPool.Put(ref)
			if ref, err = fs.Advance(sctx, d.IndexInternalID); err != nil || ref == nil {
				done = true
				return false
			}
		}
		return ref.IndexInternalID.Equals(d.IndexInternalID)
	}
	return &filteringSearcher{FilteringSearcher: searcher.NewFilteringSearcher(ctx, s, accept), filter: fs}, nil
}

type filteringSearcher struct {
	*searcher.FilteringSearcher
	filter bsearch.Searcher
}

func (s *filteringSearcher) Close() error {
	err := s.FilteringSearcher.Close()
	if ferr := s.filter.Close(); err == nil {
		err = ferr
	}
	return err
}
