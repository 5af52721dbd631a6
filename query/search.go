package query

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/operators/search"
	"github.com/newsflow/newsflow/operators/searchindex"
	"github.com/valyala/fasthttp"
)

// searchPage is the response of /api/v1/search, and a node's answer to a
// fanned-out searchindex.
type searchPage struct {
	Hits []searchindex.Hit `json:"hits"`
	// Total counts the matches in the partitions that answered.
	Total uint64 `json:"total"`
	// Order is the hits' order: relevance (score descending, then id) for
	// a text query, newest (published descending, then id) without.
	Order searchindex.Order `json:"order"`
	// Next is the position after the last hit (searchindex.Cursor); every
	// node continues after it in its own partitions.
	Next *searchindex.Cursor `json:"next_cursor,omitempty"`
	// Partial is true when some partitions did not answer: Missing.
	Partial bool    `json:"partial"`
	Missing []int32 `json:"missing_partitions,omitempty"`
	// FailedNodes did not answer the fan-out (their partitions are in
	// Missing unless another node answered for them).
	FailedNodes []string `json:"failed_nodes,omitempty"`
}

// searchTimeout bounds a search of the local partitions.
const searchTimeout = 5 * time.Second

// handleSearch searches the articles of every partition. Parameters: q
// (text; empty lists the newest), topic, source (source id), from and to
// (RFC 3339 or ms; from inclusive, to exclusive), limit (1-100, default
// 20), cursor (from next_cursor), group ("story": one result per story,
// see groupByStory).
//
// In a cluster the node that receives the search sends it to every other
// member (fanOut, with HeaderForwarded: answer from your own partitions),
// searches its own partitions meanwhile, and merges the pages exactly as
// one node merges its partitions' (searchindex.Merge): the first limit hits in
// the order, the totals summed. The cursor is a position in that order
// (score or time, then id), not a position in a list, so the same cursor
// continues every node's partitions and a page through any node continues
// through any other. Partitions no node answered for are listed in
// missing_partitions (partial: true), and nodes that did not answer in
// failed_nodes.
func (s *Server) handleSearch(ctx *fasthttp.RequestCtx) {
	defer s.observeQuery(ctx, "search", nil)
	span := s.opts.Tracing.Search(ctx.Request.Header.Peek(engine.HeaderTraceParent))
	defer func() { span.EndHTTP(ctx.Response.StatusCode()) }()
	r, ok := searchRequest(ctx)
	if !ok {
		return
	}
	groups := 0 // the number of stories asked for, when grouping
	switch g := string(ctx.QueryArgs().Peek("group")); g {
	case "":
	case "story":
		groups, r.Limit = r.Limit, min(searchindex.MaxLimit, r.Limit*groupFetch)
	default:
		writeError(ctx, fasthttp.StatusBadRequest, fmt.Sprintf("group: only \"story\" is supported, got %q", g))
		return
	}
	fan := s.fansOut(ctx)
	var uri string
	var hdrs peerCredentials
	if fan {
		// The other nodes answer plain hits; this node groups them.
		args := &fasthttp.Args{}
		ctx.QueryArgs().CopyTo(args)
		args.Del("group")
		args.Set("limit", strconv.Itoa(r.Limit))
		uri = "/api/v1/search?" + args.String()
		// A traced search continues on the other nodes: their spans are
		// its children and link to the traces of their hits.
		if tp := span.TraceParent(); tp != nil {
			hdrs = peerCredentials{{engine.HeaderTraceParent, string(tp)}}
		}
	}
	timeout := searchTimeout
	if s.deps.Cluster != nil && !fan {
		timeout = min(timeout, s.opts.PeerTimeout) // the asking node waits no longer
	}
	page, err := s.searchAll(context.Background(), r, uri, hdrs, timeout)
	var refused *peerRefused
	switch {
	case errors.As(err, &refused):
		// A node with no open partition could not check the request.
		writeRaw(ctx, refused.status, refused.body)
		return
	case errors.Is(err, searchindex.ErrBadRequest):
		writeError(ctx, fasthttp.StatusBadRequest, err.Error())
		return
	case errors.Is(err, search.ErrUnavailable):
		writeError(ctx, fasthttp.StatusServiceUnavailable, err.Error())
		return
	case err != nil:
		writeError(ctx, fasthttp.StatusInternalServerError, err.Error())
		return
	}
	if s.deps.Cluster == nil || fan {
		warnPartial(ctx, page.Missing, page.FailedNodes) // not on answers to another node
	}
	if len(page.Missing) == int(s.enginePartitions()) && fan {
		// Not one partition answered. (A node asked by another answers
		// that it has none.)
		writeJSON(ctx, fasthttp.StatusServiceUnavailable, map[string]any{"error": "search: no node answered for any partition",
			"missing_partitions": page.Missing, "failed_nodes": page.FailedNodes})
		return
	}
	if s.deps.Stories != nil && (s.deps.Cluster == nil || fan) {
		// Articles are indexed with the story they joined; that story may
		// have merged into another since. (A node answering a fan-out
		// leaves that to the node that merges.)
		for i := range page.Hits {
			if id := page.Hits[i].StoryID; id != "" {
				page.Hits[i].StoryID = s.deps.Stories.Resolve(id)
			}
		}
	}
	for _, h := range page.Hits {
		span.Link(h.TraceParent) // the traces of the hits indexed while traced
	}
	if groups > 0 {
		writeJSON(ctx, fasthttp.StatusOK, groupByStory(page, groups))
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, page)
}

// groupFetch is how many hits a grouped search reads per story asked for.
const groupFetch = 4

// storyHit is a search result grouped by story: the best hit of the story
// and the story's other hits on the page, in the search's order.
type storyHit struct {
	searchindex.Hit
	Also []searchindex.Hit `json:"also,omitempty"`
}

// MarshalJSON writes the hit's fields and also beside them (the embedded
// Hit's own MarshalJSON would otherwise stand for the whole value).
func (h storyHit) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(h.Hit)
	if err != nil || len(h.Also) == 0 {
		return b, err
	}
	also, err := json.Marshal(h.Also)
	if err != nil {
		return nil, err
	}
	return append(append(append(b[:len(b)-1], `,"also":`...), also...), '}'), nil
}

// groupedPage is the response of /api/v1/search?group=story.
type groupedPage struct {
	searchPage
	Hits []storyHit `json:"hits"`
}

// groupByStory folds the page's hits into at most n results, one per
// story (an article without a story is its own), each led by the story's
// first hit in the order. Reading stops before the hit that would start
// story n+1, and the cursor continues from the last hit read, so no hit
// is lost between pages; a story already shown can come back on a later
// page, and a reader folds it under the first (the web reader does).
func groupByStory(page searchPage, n int) groupedPage {
	out := groupedPage{searchPage: page, Hits: []storyHit{}}
	at := map[string]int{}
	for i, h := range page.Hits {
		key := h.StoryID
		if key == "" {
			key = "article:" + h.ID
		}
		if j, ok := at[key]; ok {
			out.Hits[j].Also = append(out.Hits[j].Also, h)
			continue
		}
		if len(out.Hits) == n {
			out.Next = searchindex.CursorAfter(page.Order, &page.Hits[i-1])
			break
		}
		at[key] = len(out.Hits)
		out.Hits = append(out.Hits, storyHit{Hit: h})
	}
	out.searchPage.Hits = nil
	return out
}

// mergeSearch merges this node's page (nil when it has no partition open)
// with the other nodes' pages of the same request. A partition is missing
// when no page answered for it. An article lives in one partition, but
// while a partition moves its old and new owner may both answer for it:
// a hit is kept once (Total may then count it twice).
func (s *Server) mergeSearch(r searchindex.Request, local *searchPage, peers []searchPage) searchPage {
	order := searchOrder(r)
	all := make([]int32, s.enginePartitions())
	for p := range all {
		all[p] = int32(p)
	}
	missing := [][]int32{all}
	var results []*searchindex.Result
	seen := map[string]bool{}
	pages := []*searchPage{local}
	for i := range peers {
		pages = append(pages, &peers[i])
	}
	for _, pg := range pages {
		if pg == nil {
			continue
		}
		missing = append(missing, pg.Missing)
		res := &searchindex.Result{Total: pg.Total, Order: order, Next: pg.Next}
		for _, h := range pg.Hits {
			if !seen[h.ID] {
				seen[h.ID] = true
				res.Hits = append(res.Hits, h)
			}
		}
		results = append(results, res)
	}
	m := searchindex.Merge(r.Limit, results...)
	page := searchPage{Hits: m.Hits, Total: m.Total, Order: order, Next: m.Next, Missing: unanswered(missing...)}
	if page.Hits == nil {
		page.Hits = []searchindex.Hit{}
	}
	page.Partial = len(page.Missing) > 0
	return page
}

// searchOrder is the order of r's hits (searchindex.Request): by relevance for
// a query with text, newest first without. A node without partitions
// answers in it too, so that every page of a fan-out has the same order.
func searchOrder(r searchindex.Request) searchindex.Order {
	if strings.TrimSpace(r.Query) != "" {
		return searchindex.OrderRelevance
	}
	return searchindex.OrderNewest
}

// searchRequest reads the parameters of a search; it answers 400 and
// returns false when they are invalid.
func searchRequest(ctx *fasthttp.RequestCtx) (searchindex.Request, bool) {
	args := ctx.QueryArgs()
	r := searchindex.Request{Query: string(args.Peek("q")), Topic: string(args.Peek("topic"))}
	// source may repeat: any of them.
	switch srcs := args.PeekMulti("source"); len(srcs) {
	case 0:
	case 1:
		r.Source = string(srcs[0])
	default:
		for _, s := range srcs {
			r.Sources = append(r.Sources, string(s))
		}
	}
	var err error
	if r.Limit, err = intArg(ctx, "limit", 20, 1, 100); err != nil {
		writeError(ctx, fasthttp.StatusBadRequest, err.Error())
		return r, false
	}
	for _, b := range []struct {
		name string
		dst  *time.Time
	}{{"from", &r.From}, {"to", &r.To}} {
		v := args.Peek(b.name)
		if len(v) == 0 {
			continue
		}
		ms, err := parseTimeArg(string(v))
		if err != nil {
			writeError(ctx, fasthttp.StatusBadRequest, b.name+": "+err.Error())
			return r, false
		}
		*b.dst = time.UnixMilli(ms).UTC()
	}
	if !r.From.IsZero() && !r.To.IsZero() && !r.From.Before(r.To) {
		writeError(ctx, fasthttp.StatusBadRequest, "from must be before to")
		return r, false
	}
	if c := args.Peek("cursor"); len(c) > 0 {
		if r.After, err = searchindex.DecodeCursor(string(c)); err != nil {
			writeError(ctx, fasthttp.StatusBadRequest, "cursor: "+err.Error())
			return r, false
		}
	}
	return r, true
}

// searchArgs encodes a search request as the query of GET /api/v1/search.
func searchArgs(r searchindex.Request) string {
	args := &fasthttp.Args{}
	if r.Query != "" {
		args.Set("q", r.Query)
	}
	if r.Topic != "" {
		args.Set("topic", r.Topic)
	}
	if r.Source != "" {
		args.Add("source", r.Source)
	}
	for _, src := range r.Sources {
		args.Add("source", src)
	}
	if !r.From.IsZero() {
		args.Set("from", strconv.FormatInt(r.From.UnixMilli(), 10))
	}
	if !r.To.IsZero() {
		args.Set("to", strconv.FormatInt(r.To.UnixMilli(), 10))
	}
	if r.Limit > 0 {
		args.Set("limit", strconv.Itoa(r.Limit))
	}
	if r.After != nil {
		args.Set("cursor", r.After.Encode())
	}
	return args.String()
}

// searchCluster runs a search over every partition of the cluster (this
// node's, and in a cluster the other nodes' through their search API) and
// merges the pages as handleSearch does. An answer that lacks partitions
// says so in Missing; when none answered it is an error.
func (s *Server) searchCluster(ctx context.Context, r searchindex.Request) (searchPage, error) {
	uri := ""
	if s.deps.Cluster != nil {
		uri = "/api/v1/search?" + searchArgs(r)
	}
	page, err := s.searchAll(ctx, r, uri, nil, searchTimeout)
	if err == nil && uri != "" && len(page.Missing) == int(s.enginePartitions()) {
		return searchPage{}, fmt.Errorf("search: no node answered for any partition: %w", search.ErrUnavailable)
	}
	return page, err
}

// peerRefused is a node's 4xx answer to a fanned-out search: it could not
// check the request (it has no open partition), so its answer is the
// answer.
type peerRefused struct {
	status int
	body   []byte
}

func (e *peerRefused) Error() string { return fmt.Sprintf("%d %s", e.status, e.body) }

// searchAll searches this node's partitions (within timeout) and, when
// uri is set, every other node's (GET uri with hdrs) at the same time, and
// merges the pages (mergeSearch). While the partitions no node answered
// for are moving between nodes it asks again (untilComplete). In a
// cluster a node with none of its partitions open leaves them to the
// others, and a local failure counts this node as failed; alone, it is the
// error.
func (s *Server) searchAll(ctx context.Context, r searchindex.Request, uri string, hdrs peerCredentials, timeout time.Duration) (page searchPage, err error) {
	once := func() []int32 {
		var peers []searchPage
		var failed []peerAnswer
		done := make(chan struct{})
		if uri != "" {
			go func() {
				defer close(done)
				peers, failed = gatherWith[searchPage](s, uri, hdrs)
			}()
		} else {
			close(done)
		}
		sctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		res, lerr := s.deps.Search.Search(sctx, r)
		<-done
		if errors.Is(lerr, searchindex.ErrBadRequest) {
			err = lerr
			return nil
		}
		for _, a := range failed {
			if a.status == fasthttp.StatusBadRequest {
				err = &peerRefused{status: a.status, body: a.body}
				return nil
			}
		}
		var local *searchPage
		switch {
		case lerr == nil:
			local = &searchPage{Hits: res.Hits, Total: res.Total, Next: res.Next, Missing: res.Missing}
		case s.deps.Cluster == nil:
			err = lerr
			return nil
		case errors.Is(lerr, search.ErrUnavailable):
			// No partition of the cluster's is open here: the others answer.
		case uri != "":
			// This node's partitions are missing, like a node's that failed.
			failed = append(failed, peerAnswer{node: s.deps.Cluster.ID(), err: lerr})
		default:
			err = lerr
			return nil
		}
		page = s.mergeSearch(r, local, peers)
		page.FailedNodes = nodesOf(failed)
		return page.Missing
	}
	if uri == "" {
		once()
	} else {
		s.untilComplete(once)
	}
	return page, err
}
