package query

import (
	"context"
	"errors"
	"time"

	"github.com/newsflow/newsflow/operators/indexer"
	"github.com/newsflow/newsflow/state/search"
	"github.com/valyala/fasthttp"
)

// searchPage is the response of /api/v1/search.
type searchPage struct {
	Hits    []search.Hit `json:"hits"`
	Total   uint64       `json:"total"`
	Next    string       `json:"next_cursor,omitempty"`
	Partial bool         `json:"partial"`
	Missing []int32      `json:"missing_partitions,omitempty"`
}

// handleSearch searches the articles of every partition. Parameters: q
// (text; empty lists the newest), topic, source (source id), from and to
// (RFC 3339 or ms; from inclusive, to exclusive), limit (1-100, default
// 20), cursor (from next_cursor).
func (s *Server) handleSearch(ctx *fasthttp.RequestCtx) {
	args := ctx.QueryArgs()
	r := search.Request{Query: string(args.Peek("q")), Topic: string(args.Peek("topic")), Source: string(args.Peek("source"))}
	var err error
	if r.Limit, err = intArg(ctx, "limit", 20, 1, 100); err != nil {
		writeError(ctx, fasthttp.StatusBadRequest, err.Error())
		return
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
			return
		}
		*b.dst = time.UnixMilli(ms).UTC()
	}
	if !r.From.IsZero() && !r.To.IsZero() && !r.From.Before(r.To) {
		writeError(ctx, fasthttp.StatusBadRequest, "from must be before to")
		return
	}
	if c := args.Peek("cursor"); len(c) > 0 {
		if r.After, err = search.DecodeCursor(string(c)); err != nil {
			writeError(ctx, fasthttp.StatusBadRequest, "cursor: "+err.Error())
			return
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := s.deps.Search.Search(sctx, r)
	switch {
	case errors.Is(err, search.ErrBadRequest):
		writeError(ctx, fasthttp.StatusBadRequest, err.Error())
		return
	case errors.Is(err, indexer.ErrUnavailable):
		writeError(ctx, fasthttp.StatusServiceUnavailable, err.Error())
		return
	case err != nil:
		writeError(ctx, fasthttp.StatusInternalServerError, err.Error())
		return
	}
	page := searchPage{Hits: res.Hits, Total: res.Total, Partial: res.Partial, Missing: res.Missing}
	if s.deps.Stories != nil {
		// Articles are indexed with the story they joined; that story may
		// have merged into another since.
		for i := range page.Hits {
			if id := page.Hits[i].StoryID; id != "" {
				page.Hits[i].StoryID = s.deps.Stories.Resolve(id)
			}
		}
	}
	if page.Hits == nil {
		page.Hits = []search.Hit{}
	}
	if res.Next != nil {
		page.Next = res.Next.Encode()
	}
	writeJSON(ctx, fasthttp.StatusOK, page)
}
