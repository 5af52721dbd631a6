package searchindex

import (
	"container/heap"
	"context"
	"errors"
	"slices"

	bsearch "github.com/blevesearch/bleve/v2/search"
	bleveindex "github.com/blevesearch/bleve_index_api"
)

// relevanceTop collects the first k hits of a relevance search in the order
// (score descending, ID ascending), after an optional cursor.
//
// Bleve's own collector, asked to sort by score and then by ID, loads the ID
// of every matching document; with hundreds of thousands of matches those
// random reads into the stored section took half the time of a search.
// relevanceTop plugs into Bleve's collector as its document match handler
// (search.MakeDocumentMatchHandlerKey) with a score-only sort, and loads an
// ID only for a hit that can enter the page or that ties with the cursor or
// the page's last hit. It also loads the stored fields of the page while the
// search's index reader is still open.
type relevanceTop struct {
	k     int
	after *Cursor
	top   topHeap // worst entry first
	page  []entry // best first, with stored fields, once the search is done
}

type entry struct {
	score  float64
	id     string
	fields map[string]any
}

// better reports whether a comes before b.
func (a *entry) better(b *entry) bool {
	if a.score != b.score {
		return a.score > b.score
	}
	return a.id < b.id
}

// topHeap is a heap of entries whose root is the worst entry.
type topHeap []entry

func (h topHeap) Len() int           { return len(h) }
func (h topHeap) Less(i, j int) bool { return h[j].better(&h[i]) }
func (h topHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *topHeap) Push(x any)        { *h = append(*h, x.(entry)) }
func (h *topHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

var errDocMissing = errors.New("hit without a stored document")

// withHandler returns ctx carrying the handler for Bleve's collector.
func (c *relevanceTop) withHandler(ctx context.Context) context.Context {
	return context.WithValue(ctx, bsearch.MakeDocumentMatchHandlerKey, bsearch.MakeDocumentMatchHandler(c.handler))
}

func (c *relevanceTop) handler(sctx *bsearch.SearchContext) (bsearch.DocumentMatchHandler, bool, error) {
	r := sctx.IndexReader
	return func(d *bsearch.DocumentMatch) error {
		if d == nil {
			return c.finish(r)
		}
		defer sctx.DocumentMatchPool.Put(d)
		e := entry{score: d.Score}
		loadID := func() error {
			var err error
			e.id, err = r.ExternalID(d.IndexInternalID)
			return err
		}
		if c.after != nil && e.score >= c.after.score {
			if e.score > c.after.score {
				return nil // before the cursor
			}
			if err := loadID(); err != nil {
				return err
			}
			if e.id <= c.after.id {
				return nil
			}
		}
		if len(c.top) == c.k && e.score <= c.top[0].score {
			if e.score < c.top[0].score {
				return nil // cannot enter the page
			}
			if e.id == "" {
				if err := loadID(); err != nil {
					return err
				}
			}
			if e.id > c.top[0].id {
				return nil
			}
		}
		if e.id == "" {
			if err := loadID(); err != nil {
				return err
			}
		}
		heap.Push(&c.top, e)
		if len(c.top) > c.k {
			heap.Pop(&c.top)
		}
		return nil
	}, false, nil
}

// finish orders the page and loads its stored fields.
func (c *relevanceTop) finish(r bleveindex.IndexReader) error {
	c.page = slices.Clone(c.top)
	slices.SortFunc(c.page, func(a, b entry) int {
		switch {
		case a.better(&b):
			return -1
		case b.better(&a):
			return 1
		}
		return 0
	})
	for i := range c.page {
		doc, err := r.Document(c.page[i].id)
		if err != nil {
			return err
		}
		if doc == nil {
			return errDocMissing
		}
		c.page[i].fields = storedFieldsOf(doc)
	}
	return nil
}

// storedFieldsOf returns doc's stored text fields the way Bleve fills
// DocumentMatch.Fields: a string, or []any for a repeated field.
func storedFieldsOf(doc bleveindex.Document) map[string]any {
	fields := make(map[string]any, len(storedFields))
	doc.VisitFields(func(f bleveindex.Field) {
		tf, ok := f.(bleveindex.TextField)
		if !ok {
			return
		}
		v := tf.Text()
		switch old := fields[f.Name()].(type) {
		case nil:
			fields[f.Name()] = v
		case string:
			fields[f.Name()] = []any{old, v}
		case []any:
			fields[f.Name()] = append(old, v)
		}
	})
	return fields
}
