package search

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/document"
	bsearch "github.com/blevesearch/bleve/v2/search"
	htmlformat "github.com/blevesearch/bleve/v2/search/highlight/format/html"
	"github.com/blevesearch/bleve/v2/search/highlight/fragmenter/simple"
	simplehl "github.com/blevesearch/bleve/v2/search/highlight/highlighter/simple"
	"github.com/blevesearch/bleve/v2/search/query"
	"github.com/blevesearch/bleve/v2/search/searcher"
)

// Relevance weights. A title match counts three times a summary or content
// match; the whole query appearing as a phrase in the title adds the title's
// weight again.
const (
	titleBoost   = 3.0
	summaryBoost = 1.0
	contentBoost = 1.0
)

// Request is one search of one index (or, through Merge, of all partitions).
type Request struct {
	// Query is the user's text, matched against title, summary and content
	// with English analysis (stemming, stop words). Empty: every document
	// that passes the filters, newest first.
	Query string
	// Topic and Source, when set, keep only documents with that topic and
	// that source id (exact match).
	Topic, Source string
	// From (inclusive) and To (exclusive), when set, bound the published
	// time.
	From, To time.Time
	// Limit is the page size: zero means DefaultLimit, above MaxLimit means
	// MaxLimit, negative is a bad request.
	Limit int
	// After continues a previous page: the hits strictly after it in the
	// result's order.
	After *Cursor
}

// Hit is one matching document.
type Hit struct {
	ID string `json:"id"`
	// Score is the relevance score (OrderRelevance only; 0 otherwise).
	Score       float64   `json:"score"`
	Title       string    `json:"title"`
	Summary     string    `json:"summary,omitempty"`
	URL         string    `json:"url,omitempty"`
	Source      string    `json:"source,omitempty"`
	SourceID    string    `json:"source_id,omitempty"`
	StoryID     string    `json:"story_id,omitempty"`
	Topics      []string  `json:"topics,omitempty"`
	PublishedAt time.Time `json:"published_at"`
	// Highlights maps "title" and "summary", when the query matched them, to
	// one fragment of HTML: the text escaped, matched words in <mark> tags.
	// The plain fields above are not escaped.
	Highlights map[string][]string `json:"highlights,omitempty"`
}

// Result is one page of hits.
type Result struct {
	Hits []Hit `json:"hits"`
	// Total counts every document that matches the request, regardless of
	// After.
	Total uint64 `json:"total"`
	// Order is the order of Hits; Merge needs it.
	Order Order `json:"order"`
	// Next continues after the last hit; nil on the last page.
	Next *Cursor `json:"next,omitempty"`
}

// storedFields are loaded for every hit.
var storedFields = []string{fieldTitle, fieldSummary, fieldURL, fieldSource, fieldSourceID, fieldStoryID, fieldTopics, fieldPublished}

// Search runs r. Invalid requests return an error wrapping ErrBadRequest;
// a cancelled ctx stops the search and returns ctx's error.
func (ix *Index) Search(ctx context.Context, r Request) (*Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p, err := ix.plan(r)
	if err != nil {
		return nil, err
	}
	out := &Result{Order: p.order}
	if p.req == nil { // nothing can match
		return out, nil
	}

	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.mu.closed {
		return nil, ErrClosed
	}
	res, err := ix.bi.SearchInContext(ctx, p.req)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr
		}
		return nil, fmt.Errorf("search: %w", err)
	}
	out.Total = res.Total
	dms := res.Hits
	more := len(dms) > p.limit
	if more {
		dms = dms[:p.limit]
	}
	out.Hits = make([]Hit, len(dms))
	for i, dm := range dms {
		out.Hits[i] = ix.hit(dm, p)
	}
	if more {
		out.Next = cursorAt(p.order, &out.Hits[len(out.Hits)-1])
	}
	return out, nil
}

// plan is a validated request.
type plan struct {
	req   *bleve.SearchRequest // nil if nothing can match
	order Order
	limit int
	terms map[string]bool // the analyzed query terms, for highlighting
}

// plan validates r and builds the Bleve request.
func (ix *Index) plan(r Request) (plan, error) {
	bad := func(format string, args ...any) (plan, error) {
		return plan{}, fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ErrBadRequest)
	}
	if r.Limit < 0 {
		return bad("limit %d is negative", r.Limit)
	}
	p := plan{limit: effectiveLimit(r.Limit), order: OrderNewest}
	if len(r.Query) > ix.opts.MaxQueryBytes {
		return bad("query of %d bytes, limit %d", len(r.Query), ix.opts.MaxQueryBytes)
	}
	if !utf8.ValidString(r.Query) {
		return bad("query is not UTF-8")
	}
	for _, f := range []struct{ name, v string }{{"topic", r.Topic}, {"source", r.Source}} {
		if len(f.v) > maxIDBytes {
			return bad("%s of %d bytes, limit %d", f.name, len(f.v), maxIDBytes)
		}
		if !utf8.ValidString(f.v) {
			return bad("%s is not UTF-8", f.name)
		}
	}
	for _, t := range []struct {
		name string
		v    time.Time
	}{{"from", r.From}, {"to", r.To}} {
		if !t.v.IsZero() && (t.v.Before(minTime) || t.v.After(maxTime)) {
			return bad("%s %s is outside %d–%d", t.name, t.v.Format(time.RFC3339), minTime.Year(), maxTime.Year())
		}
	}
	if !r.From.IsZero() && !r.To.IsZero() && !r.From.Before(r.To) {
		return bad("from %s is not before to %s", r.From.Format(time.RFC3339Nano), r.To.Format(time.RFC3339Nano))
	}
	text := strings.TrimSpace(r.Query)
	if text != "" {
		p.order = OrderRelevance
	}
	if r.After != nil && r.After.order != p.order {
		return bad("cursor is for %s order, request is in %s order", r.After.order, p.order)
	}

	var filters []query.Query
	if r.Topic != "" {
		q := query.NewTermQuery(r.Topic)
		q.SetField(fieldTopics)
		filters = append(filters, q)
	}
	if r.Source != "" {
		q := query.NewTermQuery(r.Source)
		q.SetField(fieldSourceID)
		filters = append(filters, q)
	}
	if !r.From.IsZero() || !r.To.IsZero() {
		filters = append(filters, hourRange(r.From, r.To))
	}
	var filter query.Query
	if len(filters) > 0 {
		filter = conjunction(filters)
		if exact := exactRange(r.From, r.To); exact != nil {
			filter = query.NewCustomFilterQueryWithFilter(filter, exact, []string{fieldPublished}, nil)
		}
	}

	var req *bleve.SearchRequest
	if p.order == OrderRelevance {
		var q query.Query
		q, p.terms = ix.textQuery(text)
		if q == nil {
			return p, nil
		}
		if filter != nil {
			// A Boolean filter selects without adding to the score.
			q = &query.BooleanQuery{Must: q, Filter: filter}
		}
		req = bleve.NewSearchRequestOptions(q, p.limit+1, 0, false)
		req.SortByCustom(bsearch.SortOrder{&bsearch.SortScore{Desc: true}, &bsearch.SortDocID{}})
	} else {
		// The filters are the query itself: they are cheaper to iterate
		// than every document, and nothing is scored.
		var q query.Query = query.NewMatchAllQuery()
		if filter != nil {
			q = filter
		}
		req = bleve.NewSearchRequestOptions(q, p.limit+1, 0, false)
		req.SortByCustom(bsearch.SortOrder{
			&bsearch.SortField{Field: fieldPublished, Desc: true, Type: bsearch.SortFieldAsString},
			&bsearch.SortDocID{},
		})
		req.Score = "none"
	}
	req.Fields = storedFields
	if r.After != nil {
		req.SearchAfter = r.After.searchAfter()
	}
	p.req = req
	return p, nil
}

// hourRange selects the hours that overlap [from, to) (a zero bound is
// open): a superset of the documents in the range, exact when both bounds
// fall on the hour.
func hourRange(from, to time.Time) query.Query {
	var start, end time.Time
	incl, inclEnd := true, true
	if !from.IsZero() {
		start = from.Truncate(time.Hour)
	}
	if !to.IsZero() {
		end = to.Truncate(time.Hour)
		if end.Equal(to) {
			inclEnd = false
		}
	}
	q := query.NewDateRangeInclusiveQuery(start, end, &incl, &inclEnd)
	q.SetField(fieldPublishedHour)
	return q
}

// exactRange returns the check of a document's exact published time
// against [from, to), or nil if hourRange is already exact.
func exactRange(from, to time.Time) searcher.CustomFilterFunc {
	lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
	exact := true
	if !from.IsZero() {
		lo = from.UnixNano()
		exact = exact && from.Truncate(time.Hour).Equal(from)
	}
	if !to.IsZero() {
		hi = to.UnixNano()
		exact = exact && to.Truncate(time.Hour).Equal(to)
	}
	if exact {
		return nil
	}
	return func(_ context.Context, d *bsearch.DocumentMatch) (bool, error) {
		s, _ := d.Fields[fieldPublished].(string)
		ns, ok := parsePublishedKey(s)
		return ok && lo <= ns && ns < hi, nil
	}
}

func conjunction(qs []query.Query) query.Query {
	if len(qs) == 1 {
		return qs[0]
	}
	return query.NewConjunctionQuery(qs)
}

// textQuery is the relevance query for text: a match (any term) in title,
// summary or content, plus a phrase match in the title when the text has
// more than one term. It also returns the text's analyzed terms. The query
// is nil if the text has no searchable term (only stop words or
// punctuation).
func (ix *Index) textQuery(text string) (query.Query, map[string]bool) {
	tokens := ix.en.Analyze([]byte(text))
	if len(tokens) == 0 {
		return nil, nil
	}
	terms := make(map[string]bool, len(tokens))
	for _, t := range tokens {
		terms[string(t.Term)] = true
	}
	match := func(field string, boost float64) query.Query {
		q := query.NewMatchQuery(text)
		q.SetField(field)
		q.SetBoost(boost)
		return q
	}
	qs := []query.Query{
		match(fieldTitle, titleBoost),
		match(fieldSummary, summaryBoost),
		match(fieldContent, contentBoost),
	}
	if len(tokens) > 1 {
		q := query.NewMatchPhraseQuery(text)
		q.SetField(fieldTitle)
		q.SetBoost(titleBoost)
		qs = append(qs, q)
	}
	return query.NewDisjunctionQuery(qs), terms
}

// hit converts a Bleve hit.
func (ix *Index) hit(dm *bsearch.DocumentMatch, p plan) Hit {
	h := Hit{ID: dm.ID}
	if p.order == OrderRelevance {
		h.Score = dm.Score
	}
	str := func(field string) string {
		s, _ := dm.Fields[field].(string)
		return s
	}
	h.Title = str(fieldTitle)
	h.Summary = str(fieldSummary)
	h.URL = str(fieldURL)
	h.Source = str(fieldSource)
	h.SourceID = str(fieldSourceID)
	h.StoryID = str(fieldStoryID)
	switch v := dm.Fields[fieldTopics].(type) {
	case string:
		h.Topics = []string{v}
	case []any:
		h.Topics = make([]string, 0, len(v))
		for _, t := range v {
			if s, ok := t.(string); ok {
				h.Topics = append(h.Topics, s)
			}
		}
	}
	// The indexed instant exactly (cursors depend on it).
	if ns, ok := parsePublishedKey(str(fieldPublished)); ok {
		h.PublishedAt = time.Unix(0, ns).UTC()
	}
	if p.terms != nil {
		h.Highlights = ix.hl.highlight(dm.ID, p.terms, h.Title, h.Summary)
	}
	return h
}

// highlighter marks the query's terms in titles and summaries with Bleve's
// simple highlighter: the best fragment by number of matched terms, HTML
// escaped by Bleve's html formatter, with <mark> around each match. Instead
// of term vectors from the index it analyzes the stored text again (the same
// analyzer finds the same terms at the same offsets): a few microseconds per
// hit at query time instead of term vectors for every indexed summary.
type highlighter struct {
	en analysis.Analyzer
	h  *simplehl.Highlighter
}

func newHighlighter(en analysis.Analyzer, fragmentSize int) *highlighter {
	return &highlighter{en: en, h: simplehl.NewHighlighter(
		simple.NewFragmenter(fragmentSize),
		htmlformat.NewFragmentFormatter("<mark>", "</mark>"),
		simplehl.DefaultSeparator,
	)}
}

// highlight returns the highlights of the query terms in title and summary,
// nil if neither has one.
func (hl *highlighter) highlight(id string, terms map[string]bool, title, summary string) map[string][]string {
	var out map[string][]string
	for _, f := range []struct{ name, text string }{{fieldTitle, title}, {fieldSummary, summary}} {
		locs := bsearch.TermLocationMap{}
		for _, tok := range hl.en.Analyze([]byte(f.text)) {
			if term := string(tok.Term); terms[term] {
				locs[term] = append(locs[term], &bsearch.Location{
					Pos: uint64(tok.Position), Start: uint64(tok.Start), End: uint64(tok.End),
				})
			}
		}
		if len(locs) == 0 {
			continue
		}
		dm := &bsearch.DocumentMatch{ID: id, Locations: bsearch.FieldTermLocationMap{f.name: locs}}
		doc := document.NewDocument(id)
		doc.AddField(document.NewTextField(f.name, nil, []byte(f.text)))
		frags := hl.h.BestFragmentsInField(dm, doc, f.name, 1)
		if len(frags) == 0 {
			continue
		}
		if out == nil {
			out = make(map[string][]string, 2)
		}
		out[f.name] = frags
	}
	return out
}
