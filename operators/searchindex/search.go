package searchindex

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/document"
	bsearch "github.com/blevesearch/bleve/v2/search"
	"github.com/blevesearch/bleve/v2/search/highlight"
	htmlformat "github.com/blevesearch/bleve/v2/search/highlight/format/html"
	"github.com/blevesearch/bleve/v2/search/highlight/fragmenter/simple"
	simplehl "github.com/blevesearch/bleve/v2/search/highlight/highlighter/simple"
	"github.com/blevesearch/bleve/v2/search/query"
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
	// Sources, when set, keeps only documents of one of these source ids
	// (at most MaxSources; with Source, both apply).
	Sources []string
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
	Score    float64  `json:"score"`
	Title    string   `json:"title"`
	Summary  string   `json:"summary,omitempty"`
	URL      string   `json:"url,omitempty"`
	Source   string   `json:"source,omitempty"`
	SourceID string   `json:"source_id,omitempty"`
	StoryID  string   `json:"story_id,omitempty"`
	Topics   []string `json:"topics,omitempty"`
	// PublishedAt is sent as milliseconds since the epoch, the time format
	// of every other endpoint (see MarshalJSON).
	PublishedAt time.Time `json:"published_at"`
	// FirstSeen is the document's Doc.FirstSeen, PublishedAt for a
	// document without one (not sent).
	FirstSeen time.Time `json:"-"`
	// Highlights maps "title" and "summary", when the query matched them, to
	// one fragment of HTML: the text escaped, matched words in <mark> tags.
	// The plain fields above are not escaped.
	Highlights map[string][]string `json:"highlights,omitempty"`
	// TraceParent is the document's Doc.TraceParent (not sent: tracing
	// links a search to it).
	TraceParent string `json:"-"`
}

// hitJSON is Hit on the wire: the published time in ms since the epoch.
type hitJSON struct {
	hitAlias
	PublishedAt int64 `json:"published_at"`
}

type hitAlias Hit

// MarshalJSON writes the hit with published_at in milliseconds since the
// epoch, as every endpoint writes times.
func (h Hit) MarshalJSON() ([]byte, error) {
	return json.Marshal(hitJSON{hitAlias: hitAlias(h), PublishedAt: h.PublishedAt.UnixMilli()})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (h *Hit) UnmarshalJSON(b []byte) error {
	var j hitJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*h = Hit(j.hitAlias)
	h.PublishedAt = time.UnixMilli(j.PublishedAt).UTC()
	return nil
}

// Result is one page of hits.
type Result struct {
	Hits []Hit `json:"hits"`
	// Total counts every document that matches the request, regardless of
	// After. For requests without text it is counted by a second search, so
	// a concurrent Apply can make it disagree with Hits by that batch.
	Total uint64 `json:"total"`
	// Order is the order of Hits; Merge needs it.
	Order Order `json:"order"`
	// Next continues after the last hit; nil on the last page.
	Next *Cursor `json:"next,omitempty"`
}

// storedFields are loaded for every hit.
var storedFields = []string{fieldTitle, fieldSummary, fieldURL, fieldSource, fieldSourceID, fieldStoryID, fieldTopics, fieldPublished, fieldTraceParent, fieldSeen}

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
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.mu.closed {
		return nil, ErrClosed
	}
	out := &Result{Order: p.order}
	var dms []*bsearch.DocumentMatch
	switch {
	case p.order == OrderRelevance && p.text == nil: // nothing can match
		return out, nil
	case p.order == OrderRelevance:
		if dms, out.Total, err = ix.relevant(ctx, p); err != nil {
			return nil, err
		}
	default:
		res, err := ix.newest(ctx, p)
		if err != nil {
			return nil, err
		}
		dms = res.Hits
		if out.Total, err = ix.count(ctx, p); err != nil {
			return nil, err
		}
	}
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
	order Order
	limit int
	text  query.Query     // OrderRelevance; nil if the text has no term
	terms map[string]bool // the analyzed query terms, for highlighting
	// tokens are the analyzed text's terms in order, with their positions.
	tokens    []string
	positions []int
	keywords  []query.Query // topic and source
	// keywordTerms are the field and term of each of keywords but the
	// disjunction of Request.Sources (anySource).
	keywordTerms [][2]string
	anySource    bool
	from, to     time.Time
	after        *Cursor
}

// plan validates r.
func (ix *Index) plan(r Request) (plan, error) {
	bad := func(format string, args ...any) (plan, error) {
		return plan{}, fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ErrBadRequest)
	}
	if r.Limit < 0 {
		return bad("limit %d is negative", r.Limit)
	}
	if len(r.Query) > ix.opts.MaxQueryBytes {
		return bad("query of %d bytes, limit %d", len(r.Query), ix.opts.MaxQueryBytes)
	}
	if !utf8.ValidString(r.Query) {
		return bad("query is not UTF-8")
	}
	if len(r.Sources) > MaxSources {
		return bad("%d sources, limit %d", len(r.Sources), MaxSources)
	}
	fields := []struct{ name, v string }{{"topic", r.Topic}, {"source", r.Source}}
	for _, src := range r.Sources {
		fields = append(fields, struct{ name, v string }{"source", src})
	}
	for _, f := range fields {
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
	p := plan{limit: effectiveLimit(r.Limit), order: OrderNewest, from: r.From, to: r.To, after: r.After}
	text := strings.TrimSpace(r.Query)
	if text != "" {
		p.order = OrderRelevance
		p.text, p.terms, p.tokens, p.positions = ix.textQuery(text)
	}
	if r.After != nil && r.After.order != p.order {
		return bad("cursor is for %s order, request is in %s order", r.After.order, p.order)
	}
	// Filters have boost 0 (see relevant).
	for _, kw := range [][2]string{{fieldTopics, r.Topic}, {fieldSourceID, r.Source}} {
		if kw[1] != "" {
			p.keywords = append(p.keywords, termQuery(kw[0], kw[1], 0))
			p.keywordTerms = append(p.keywordTerms, kw)
		}
	}
	if len(r.Sources) > 0 {
		anyOf := make([]query.Query, len(r.Sources))
		for i, src := range r.Sources {
			anyOf[i] = termQuery(fieldSourceID, src, 0)
		}
		p.keywords = append(p.keywords, disjunction(anyOf))
		p.anySource = true
	}
	return p, nil
}

// MaxSources bounds Request.Sources.
const MaxSources = 5000

// filter is the conjunction of p's filters, nil if it has none.
func (p plan) filter() query.Query {
	return p.windowFilter(p.from, p.to)
}

// windowFilter is p's filters with the published time in [from, to) (a
// zero bound is open).
func (p plan) windowFilter(from, to time.Time) query.Query {
	qs := slices.Clip(p.keywords)
	if !from.IsZero() || !to.IsZero() {
		qs = append(qs, timeRange(from, to))
	}
	return conjunction(qs)
}

// relevant returns the next page (one hit more than the limit, if there
// is one) of a request with text, and the number of matching documents.
func (ix *Index) relevant(ctx context.Context, p plan) ([]*bsearch.DocumentMatch, uint64, error) {
	if !ix.bleveOnly {
		dms, total, err := ix.relevantTopK(ctx, p)
		if !errors.Is(err, errNotTopK) {
			if err != nil {
				if cerr := ctx.Err(); cerr != nil {
					return nil, 0, cerr
				}
				return nil, 0, fmt.Errorf("search: %w", err)
			}
			return dms, total, nil
		}
	}
	return ix.relevantBleve(ctx, p)
}

// relevantBleve is relevant with Bleve's searchers and collector, which
// score every matching document.
func (ix *Index) relevantBleve(ctx context.Context, p plan) ([]*bsearch.DocumentMatch, uint64, error) {
	// Filters never change a score. A time range joins the text in a
	// conjunction (its queries have boost 0, so they add 0 to the score and
	// to the query norm); advancing through the text's matches to the
	// range's is cheaper than checking each text match against a range of
	// many terms. Topic and source, single terms, are cheapest as a filter.
	q := p.text
	if !p.from.IsZero() || !p.to.IsZero() {
		q = query.NewConjunctionQuery([]query.Query{q, timeRange(p.from, p.to)})
	}
	if len(p.keywords) > 0 {
		q = &filtered{q: q, filter: conjunction(p.keywords)}
	}
	// Bleve sorts by score alone (its default); relevanceTop breaks ties by
	// ID and applies the cursor.
	top := &relevanceTop{k: p.limit + 1, after: p.after}
	res, err := ix.bi.SearchInContext(top.withHandler(ctx), bleve.NewSearchRequestOptions(q, p.limit+1, 0, false))
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return nil, 0, cerr
		}
		return nil, 0, fmt.Errorf("search: %w", err)
	}
	dms := make([]*bsearch.DocumentMatch, len(top.page))
	for i, e := range top.page {
		dms[i] = &bsearch.DocumentMatch{ID: e.id, Score: e.score, Fields: e.fields}
	}
	return dms, res.Total, nil
}

// run searches for the next page of q, a query without text, newest first.
func (ix *Index) run(ctx context.Context, p plan, q query.Query) (*bleve.SearchResult, error) {
	req := bleve.NewSearchRequestOptions(q, p.limit+1, 0, false)
	req.SortByCustom(bsearch.SortOrder{
		&bsearch.SortField{Field: fieldPublished, Desc: true, Type: bsearch.SortFieldAsString},
		&bsearch.SortDocID{},
	})
	req.Score = "none"
	req.Fields = storedFields
	if p.after != nil {
		req.SearchAfter = p.after.searchAfter()
	}
	res, err := ix.bi.SearchInContext(ctx, req)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr
		}
		return nil, fmt.Errorf("search: %w", err)
	}
	return res, nil
}

// newestWindows are the spans of published time newest searches try in
// turn, each from the newest candidate back, until one holds a page; the
// last window is unbounded.
var newestWindows = []time.Duration{time.Hour, 8 * time.Hour, 64 * time.Hour, 512 * time.Hour, 4096 * time.Hour, 0}

// newest finds the next page of a request without text. Sorting every
// matching document by time costs time proportional to their number, so it
// searches a window of recent hours first and widens it until the window
// holds a full page. A full page from a window is the page: every document
// outside it is older than every document in it.
func (ix *Index) newest(ctx context.Context, p plan) (*bleve.SearchResult, error) {
	hi := time.Unix(0, ix.maxPublished.Load()).UTC() // no later document exists
	if !p.to.IsZero() && !p.to.After(hi) {
		hi = p.to.Add(-1)
	}
	if p.after != nil && p.after.published < hi.UnixNano() {
		hi = time.Unix(0, p.after.published).UTC()
	}
	lo := minTime // no earlier document exists
	if p.from.After(lo) {
		lo = p.from
	}
	if hi.Before(lo) {
		return &bleve.SearchResult{}, nil
	}
	// Windows end with hi's hour, or at To if it comes first, and start on
	// the hour (or at From), so that only the request's own bounds need an
	// exact check.
	to := hi.Truncate(time.Hour).Add(time.Hour)
	if !p.to.IsZero() && p.to.Before(to) {
		to = p.to
	}
	for _, w := range newestWindows {
		from := p.from
		last := w == 0 || !hi.Add(-w).After(lo)
		if start := hi.Add(-w).Truncate(time.Hour); !last && start.After(from) {
			from = start
		}
		res, err := ix.run(ctx, p, p.windowFilter(from, to))
		if err != nil {
			return nil, err
		}
		if last || len(res.Hits) > p.limit {
			return res, nil
		}
	}
	panic("unreachable: the last window is unbounded")
}

// count returns the number of documents passing p's filters.
func (ix *Index) count(ctx context.Context, p plan) (uint64, error) {
	f := p.filter()
	if f == nil {
		n, err := ix.bi.DocCount()
		if err != nil {
			return 0, fmt.Errorf("count: %w", err)
		}
		return n, nil
	}
	if len(p.keywords) == 1 && !p.anySource && p.from.IsZero() && p.to.IsZero() {
		// One term: its document frequency, without visiting a posting.
		n, err := ix.termCount(ctx, p.keywordTerms[0][0], p.keywordTerms[0][1])
		if err != nil {
			return 0, fmt.Errorf("count: %w", err)
		}
		return n, nil
	}
	req := bleve.NewSearchRequestOptions(f, 0, 0, false)
	req.Score = "none"
	res, err := ix.bi.SearchInContext(ctx, req)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return 0, cerr
		}
		return 0, fmt.Errorf("count: %w", err)
	}
	return res.Total, nil
}

// termCount returns the number of live documents with term in field.
func (ix *Index) termCount(ctx context.Context, field, term string) (_ uint64, err error) {
	adv, err := ix.bi.Advanced()
	if err != nil {
		return 0, err
	}
	r, err := adv.Reader()
	if err != nil {
		return 0, err
	}
	defer func() {
		if cerr := r.Close(); err == nil {
			err = cerr
		}
	}()
	tfr, err := r.TermFieldReader(ctx, []byte(term), field, false, false, false)
	if err != nil {
		return 0, err
	}
	n := tfr.Count()
	return n, tfr.Close()
}

// timeRange selects the documents published in [from, to) (a zero bound
// is open). Documents are found by the hour of their published time; only
// those in the partial hours at unaligned bounds have their exact time
// checked (from doc values, which costs a microsecond or so per document).
func timeRange(from, to time.Time) query.Query {
	aligned := func(t time.Time) bool { return t.IsZero() || t.Truncate(time.Hour).Equal(t) }
	if aligned(from) && aligned(to) {
		return hourRange(from, to)
	}
	// Whole hours inside the range.
	coreFrom, coreTo := from, to
	var edges []query.Query
	if !aligned(from) {
		h := from.Truncate(time.Hour)
		coreFrom = h.Add(time.Hour)
		edges = append(edges, hourRange(h, coreFrom))
	}
	if !aligned(to) {
		h := to.Truncate(time.Hour)
		coreTo = h
		if aligned(from) || !h.Equal(from.Truncate(time.Hour)) {
			edges = append(edges, hourRange(h, h.Add(time.Hour)))
		}
	}
	lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
	if !from.IsZero() {
		lo = from.UnixNano()
	}
	if !to.IsZero() {
		hi = to.UnixNano()
	}
	exact := query.NewCustomFilterQueryWithFilter(disjunction(edges), func(_ context.Context, d *bsearch.DocumentMatch) (bool, error) {
		s, _ := d.Fields[fieldPublished].(string)
		ns, ok := parsePublishedKey(s)
		return ok && lo <= ns && ns < hi, nil
	}, []string{fieldPublished}, nil)
	if !coreTo.IsZero() && !coreFrom.Before(coreTo) {
		return exact // no whole hour inside
	}
	return disjunction([]query.Query{hourRange(coreFrom, coreTo), exact})
}

// hourRange selects the documents published in [from, to), two hours (or
// zero values, for an open bound).
func hourRange(from, to time.Time) query.Query {
	// Bleve's range search enumerates every representable term between the
	// bounds at their coarsest common precision; for a short range across
	// Unix time 0 (where the sign bit flips) that is millions of terms.
	// Split such a range at 0.
	if !from.IsZero() && !to.IsZero() && from.UnixNano() < 0 && to.UnixNano() > 0 {
		zero := time.Unix(0, 0)
		return disjunction([]query.Query{hourRange(from, zero), hourRange(zero, to)})
	}
	incl, excl := true, false
	q := query.NewDateRangeInclusiveQuery(from, to, &incl, &excl)
	q.SetField(fieldPublishedHour)
	q.SetBoost(0)
	return q
}

// termQuery matches term in field, with boost.
func termQuery(field, term string, boost float64) query.Query {
	q := query.NewTermQuery(term)
	q.SetField(field)
	q.SetBoost(boost)
	return q
}

func disjunction(qs []query.Query) query.Query {
	if len(qs) == 1 {
		return qs[0]
	}
	return query.NewDisjunctionQuery(qs)
}

func conjunction(qs []query.Query) query.Query {
	switch len(qs) {
	case 0:
		return nil
	case 1:
		return qs[0]
	}
	return query.NewConjunctionQuery(qs)
}

// textQuery is the relevance query for text. Each analyzed term matches in
// title (boost 3), summary or content; a document must match every term
// (Options.AnyTerm: any term), and one with the whole text as a phrase in its
// title scores higher. It also returns the terms. The query is nil if the
// text has no searchable term (only stop words or punctuation).
//
// All terms by default: besides being what news search users expect, it lets
// Bleve skip through the rarest term's matches instead of scoring every
// document with any of the terms (on a million documents, a query with a
// common word and a rare one costs a few milliseconds instead of a hundred).
func (ix *Index) textQuery(text string) (q query.Query, terms map[string]bool, tokenTerms []string, positions []int) {
	tokens := ix.en.Analyze([]byte(text))
	if len(tokens) == 0 {
		return nil, nil, nil, nil
	}
	terms = make(map[string]bool, len(tokens))
	var perTerm []query.Query
	for _, t := range tokens {
		term := string(t.Term)
		tokenTerms = append(tokenTerms, term)
		positions = append(positions, t.Position)
		if terms[term] {
			continue
		}
		terms[term] = true
		fields := make([]query.Query, 0, 3)
		for _, f := range []struct {
			name  string
			boost float64
		}{{fieldTitle, titleBoost}, {fieldSummary, summaryBoost}, {fieldContent, contentBoost}} {
			fields = append(fields, termQuery(f.name, term, f.boost))
		}
		perTerm = append(perTerm, query.NewDisjunctionQuery(fields))
	}
	switch {
	case len(perTerm) == 1:
		q = perTerm[0]
	case ix.opts.AnyTerm:
		q = query.NewDisjunctionQuery(perTerm)
	default:
		q = query.NewConjunctionQuery(perTerm)
	}
	if len(tokens) > 1 {
		phrase := query.NewMatchPhraseQuery(text)
		phrase.SetField(fieldTitle)
		phrase.SetBoost(titleBoost)
		// The phrase matches only documents q matches; in the disjunction
		// those score (q + phrase) and the others q/2.
		q = query.NewDisjunctionQuery([]query.Query{q, phrase})
	}
	return q, terms, tokenTerms, positions
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
	h.TraceParent = str(fieldTraceParent)
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
	h.FirstSeen = h.PublishedAt
	if ns, ok := parsePublishedKey(str(fieldSeen)); ok {
		h.FirstSeen = time.Unix(0, ns).UTC()
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
		wordFragmenter{simple.NewFragmenter(fragmentSize)},
		htmlformat.NewFragmentFormatter("<mark>", "</mark>"),
		simplehl.DefaultSeparator,
	)}
}

// wordFragmenter moves the ends of the inner fragmenter's fragments to word
// boundaries, so that a fragment neither starts nor ends in the middle of
// a word (the highlighter marks the cut with "…"). It never moves an end
// past a matched term inside the fragment.
type wordFragmenter struct{ inner highlight.Fragmenter }

func (w wordFragmenter) Fragment(orig []byte, ot highlight.TermLocations) []*highlight.Fragment {
	frags := w.inner.Fragment(orig, ot)
	const space = " \t\n\r"
	for _, f := range frags {
		lo, hi := f.End, f.Start // the matched terms inside the fragment
		for _, t := range ot {
			if t.Start >= f.Start && t.End <= f.End {
				lo, hi = min(lo, t.Start), max(hi, t.End)
			}
		}
		if f.Start > 0 && f.Start < lo && !bytes.ContainsAny(orig[f.Start-1:f.Start], space) {
			if i := bytes.IndexAny(orig[f.Start:lo], space); i >= 0 {
				f.Start += i + 1
			}
		}
		if f.End < len(orig) && hi < f.End && !bytes.ContainsAny(orig[f.End:f.End+1], space) {
			if i := bytes.LastIndexAny(orig[hi:f.End], space); i >= 0 {
				f.End = hi + i
			}
		}
	}
	return frags
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
