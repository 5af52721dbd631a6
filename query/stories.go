package query

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"time"

	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/operators/story"
	"github.com/valyala/fasthttp"
)

// handleArticles ingests raw articles: one JSON object, or NDJSON with one
// article per line (Content-Type application/x-ndjson or ?batch=1). Fields
// are those of the raw article schema; "publisher" and "source" are
// accepted for source_id. Each line is cleaned and checked as the articles
// operator will (URL, title, times), so a line the operator would
// dead-letter is rejected here with the reason instead.
func (s *Server) handleArticles(ctx *fasthttp.RequestCtx) {
	batch := bytes.HasPrefix(ctx.Request.Header.ContentType(), []byte("application/x-ndjson")) ||
		string(ctx.QueryArgs().Peek("batch")) == "1"
	s.ingest(ctx, "article", batch, s.buildArticles)
}

// rawArticleIn is a raw article with the aliases ingestion accepts.
type rawArticleIn struct {
	schema.RawArticle
	Publisher string `json:"publisher"`
	Source    string `json:"source"`
}

func (s *Server) buildArticles(ctx *fasthttp.RequestCtx, body *bodyLines, batch bool, sink recordSink) (int, []byte, int, error) {
	parts, err := s.partitions(schema.TopicArticlesRaw)
	if err != nil {
		b, _ := json.Marshal(errorBody{Error: "articles topic unavailable: " + err.Error()})
		return fasthttp.StatusServiceUnavailable, b, 0, nil
	}
	now := s.opts.Now().UnixMilli()
	origin := engine.OriginHeader(time.Now())
	decode := func(line []byte) (*eventlog.Record, error) {
		var in rawArticleIn
		dec := json.NewDecoder(bytes.NewReader(line))
		if err := dec.Decode(&in); err != nil {
			return nil, errors.New("malformed JSON: " + err.Error())
		}
		raw := in.RawArticle
		if raw.SourceID == "" {
			raw.SourceID = in.Publisher
		}
		if raw.SourceID == "" {
			raw.SourceID = in.Source
		}
		if raw.FetchedAt == "" {
			raw.FetchedAt = schema.Time(time.UnixMilli(now).UTC().Format(time.RFC3339))
		}
		val, err := json.Marshal(raw)
		if err != nil {
			return nil, err
		}
		a, err := s.deps.Articles.Clean(val, now)
		if err != nil {
			return nil, err
		}
		// The record's time is the request's arrival, which the articles
		// stage takes for the article's first-seen time (its publish date
		// may be years old).
		k := []byte(a.ID)
		return &eventlog.Record{Topic: schema.TopicArticlesRaw, Partition: eventlog.PartitionFor(k, parts),
			Key: k, Value: val, Timestamp: now, Headers: []eventlog.Header{origin}}, nil
	}
	return decodeLines(body, batch, "article", decode, sink)
}

// storiesPage is the response of the story list endpoints.
type storiesPage struct {
	Stories []rankedItem `json:"stories"`
	// AsOf is the event time freshness is computed at, in ms since the
	// epoch (absent before the first article).
	AsOf int64  `json:"as_of,omitempty"`
	Next string `json:"next_cursor,omitempty"`
	// StalenessMS is how stale the story state the answer comes from is
	// (storyStaleness): 0 when current.
	StalenessMS int64 `json:"staleness_ms"`
}

// handleStories lists recent stories ranked by the non-personal score.
// Parameters: topic, since (RFC 3339 or ms), limit (1-100, default 20),
// cursor (from next_cursor).
func (s *Server) handleStories(ctx *fasthttp.RequestCtx) {
	args := ctx.QueryArgs()
	q := story.ListQuery{Topic: string(args.Peek("topic"))}
	var err error
	if q.Limit, err = intArg(ctx, "limit", 20, 1, 100); err != nil {
		writeError(ctx, fasthttp.StatusBadRequest, err.Error())
		return
	}
	if v := args.Peek("since"); len(v) > 0 {
		if q.Since, err = parseTimeArg(string(v)); err != nil {
			writeError(ctx, fasthttp.StatusBadRequest, "since: "+err.Error())
			return
		}
	}
	if c := args.Peek("cursor"); len(c) > 0 {
		if q.After, err = decodeStoryCursor(string(c)); err != nil {
			writeError(ctx, fasthttp.StatusBadRequest, "cursor: "+err.Error())
			return
		}
	}
	rs, err := s.readerState(ctx)
	if err != nil {
		metaError(ctx, "read state", err)
		return
	}
	hide := rs != nil && hideRead(ctx)
	page := storiesPage{Stories: []rankedItem{}, StalenessMS: s.storyStaleness()}
	// With hide_read, read stories are left out: list on until the page
	// is full or a bounded number of stories has been looked at.
	want := q.Limit
	for looked := 0; ; {
		res, err := s.deps.Stories.List(q)
		if err != nil {
			writeError(ctx, fasthttp.StatusBadRequest, err.Error())
			return
		}
		page.AsOf = res.AsOf
		for _, r := range res.Stories {
			it := rankedItem{Ranked: r}
			if rs != nil {
				n, _, err := s.unreadIn(rs, r.Story)
				if err != nil {
					writeError(ctx, fasthttp.StatusInternalServerError, err.Error())
					return
				}
				it.Unread = &n
			}
			if !hide || *it.Unread > 0 {
				it.Coverage = s.coverage(r.Story, r.SourceID)
				page.Stories = append(page.Stories, it)
			}
		}
		looked += len(res.Stories)
		page.Next = ""
		if res.More {
			q.After = &res.Stories[len(res.Stories)-1]
			page.Next = encodeStoryCursor(*q.After)
		}
		if !hide || !res.More || len(page.Stories) >= want || looked >= maxHiddenScan {
			break
		}
		q.Limit = want - len(page.Stories)
	}
	writeJSON(ctx, fasthttp.StatusOK, page)
}

// maxHiddenScan bounds the stories one page looks at to leave read ones
// out (hide_read): a page may come back short, with a next_cursor.
const maxHiddenScan = 500

// rankedItem is a listed story with, for a logged-in reader, its unread
// article count.
type rankedItem struct {
	story.Ranked
	Unread *int `json:"unread,omitempty"`
	// Coverage lists other outlets' headlines of the story.
	Coverage []coverageItem `json:"coverage,omitempty"`
}

// handleStory answers one story with all its articles and sources.
func (s *Server) handleStory(ctx *fasthttp.RequestCtx) {
	id, _ := ctx.UserValue("id").(string)
	if id == "" || len(id) > 128 {
		writeError(ctx, fasthttp.StatusBadRequest, "story id must be 1 to 128 bytes")
		return
	}
	d, err := s.deps.Stories.Get(id)
	switch {
	case errors.Is(err, story.ErrNotFound):
		writeError(ctx, fasthttp.StatusNotFound, "no story "+strconv.Quote(id))
		return
	case err != nil:
		writeError(ctx, fasthttp.StatusInternalServerError, err.Error())
		return
	}
	rs, err := s.readerState(ctx)
	if err != nil {
		metaError(ctx, "read state", err)
		return
	}
	out := withReadState(d, rs)
	out.StalenessMS = s.storyStaleness()
	writeJSON(ctx, fasthttp.StatusOK, out)
}

// handleBreaking lists the stories breaking now.
func (s *Server) handleBreaking(ctx *fasthttp.RequestCtx) {
	res := s.deps.Stories.Breaking()
	page := storiesPage{Stories: make([]rankedItem, len(res.Stories)), AsOf: res.AsOf, StalenessMS: s.storyStaleness()}
	for i, r := range res.Stories {
		page.Stories[i].Ranked = r
	}
	writeJSON(ctx, fasthttp.StatusOK, page)
}

// handleTopics lists the topics of recent stories with counts, and every
// topic the classifier can label (for choosing preferred topics).
func (s *Server) handleTopics(ctx *fasthttp.RequestCtx) {
	body := map[string]any{"topics": s.deps.Stories.Topics(), "staleness_ms": s.storyStaleness()}
	if s.deps.Articles != nil {
		body["labels"] = s.deps.Articles.Topics()
	}
	writeJSON(ctx, fasthttp.StatusOK, body)
}

// Story cursors encode the score bits and id of the last story of a page.
func encodeStoryCursor(r story.Ranked) string {
	b := binary.BigEndian.AppendUint64(nil, math.Float64bits(r.Score))
	return base64.RawURLEncoding.EncodeToString(append(b, r.ID...))
}

func decodeStoryCursor(c string) (*story.Ranked, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || len(b) < 9 || len(b) > 8+128 {
		return nil, errors.New("not a cursor returned by this endpoint")
	}
	score := math.Float64frombits(binary.BigEndian.Uint64(b))
	if math.IsNaN(score) || math.IsInf(score, 0) {
		return nil, errors.New("not a cursor returned by this endpoint")
	}
	return &story.Ranked{Story: &story.Story{ID: string(b[8:])}, Score: score}, nil
}

// parseTimeArg reads RFC 3339 or ms since the epoch.
func parseTimeArg(v string) (int64, error) {
	if ms, err := strconv.ParseInt(v, 10, 64); err == nil {
		return ms, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return 0, errors.New("must be RFC 3339 or ms since the epoch")
	}
	return t.UnixMilli(), nil
}
