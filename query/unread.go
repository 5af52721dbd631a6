package query

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"

	"github.com/newsflow/newsflow/operators/readstate"
	"github.com/newsflow/newsflow/operators/story"
	"github.com/newsflow/newsflow/query/auth"
	"github.com/valyala/fasthttp"
)

// The reader's read state (package readstate): unread counts, marks and
// stars. Every handler here needs the story view (articles' sources and
// stories), so in a cluster they are routed to the story owner; the state
// itself is in the replicated metadata store.

// readerState loads the logged-in reader's read state once per request;
// nil for an anonymous request or a node without accounts.
func (s *Server) readerState(ctx *fasthttp.RequestCtx) (*readstate.State, error) {
	if s.reads == nil {
		return nil, nil
	}
	if st, ok := ctx.UserValue(readStateKey).(*readstate.State); ok {
		return st, nil
	}
	u, ok := s.user(ctx)
	if !ok {
		return nil, nil
	}
	mctx, cancel := s.metaCtx()
	defer cancel()
	st, err := s.reads.Load(mctx, u.ID)
	if err != nil {
		return nil, err
	}
	ctx.SetUserValue(readStateKey, st)
	return st, nil
}

const readStateKey = "newsflow.readstate"

// unreadIn counts the unread articles of a story for a reader.
func (s *Server) unreadIn(rs *readstate.State, st *story.Story) (int, map[string]int, error) {
	return rs.Unread(st, func() (*story.Detail, error) { return s.deps.Stories.Get(st.ID) })
}

// unreadTotals are the unread counts of the reading list: every story of
// the story view.
type unreadTotals struct {
	Total   unreadCount         `json:"total"`
	Topics  []unreadTopic       `json:"topics"`
	Sources []unreadSourceCount `json:"sources"`
	// AsOf is the story view's latest event time (ms); what is published
	// up to it is what "mark all as read" marks by default.
	AsOf int64 `json:"as_of,omitempty"`
}

type unreadCount struct {
	Stories  int `json:"stories"`
	Articles int `json:"articles"`
}

type unreadTopic struct {
	Topic string `json:"topic"`
	unreadCount
}

type unreadSourceCount struct {
	SourceID string `json:"source_id"`
	Articles int    `json:"articles"`
}

// handleUnread answers the reader's unread counts: in total, per topic
// (stories with an unread article, and unread articles) and per source
// (unread articles), over the stories of the story view.
func (s *Server) handleUnread(ctx *fasthttp.RequestCtx, _ auth.User) {
	rs, err := s.readerState(ctx)
	if err != nil {
		metaError(ctx, "read state", err)
		return
	}
	recent, wm := s.deps.Stories.Recent()
	out := unreadTotals{Topics: []unreadTopic{}, Sources: []unreadSourceCount{}, AsOf: wm}
	topics := map[string]*unreadTopic{}
	sources := map[string]int{}
	for _, st := range recent {
		n, per, err := s.unreadIn(rs, st)
		if err != nil {
			writeError(ctx, fasthttp.StatusInternalServerError, err.Error())
			return
		}
		if n == 0 {
			continue
		}
		out.Total.Stories++
		out.Total.Articles += n
		for _, l := range st.Topics {
			t := topics[l.Topic]
			if t == nil {
				t = &unreadTopic{Topic: l.Topic}
				topics[l.Topic] = t
			}
			t.Stories++
			t.Articles += n
		}
		for src, k := range per {
			sources[src] += k
		}
	}
	for _, t := range topics {
		out.Topics = append(out.Topics, *t)
	}
	slices.SortFunc(out.Topics, func(a, b unreadTopic) int { return cmp.Compare(a.Topic, b.Topic) })
	for src, n := range sources {
		out.Sources = append(out.Sources, unreadSourceCount{SourceID: src, Articles: n})
	}
	slices.SortFunc(out.Sources, func(a, b unreadSourceCount) int { return cmp.Compare(a.SourceID, b.SourceID) })
	writeJSON(ctx, fasthttp.StatusOK, out)
}

// markRequest is the body of POST /api/v1/me/read.
type markRequest struct {
	Articles []string `json:"articles"`
	Stories  []string `json:"stories"`
	// Read is false to mark unread; absent means read.
	Read *bool `json:"read"`
}

// maxMarks bounds the articles and stories of one mark request.
const maxMarks = 1000

// handleMark marks articles and whole stories read or unread. A story
// marked read is read up to its latest article now: an article that joins
// it later is unread. A story marked unread has every article unread.
// Unknown ids are listed in "unknown"; when none is known the answer is
// 404.
func (s *Server) handleMark(ctx *fasthttp.RequestCtx, u auth.User) {
	var req markRequest
	if !decodeJSON(ctx, &req) {
		return
	}
	n := len(req.Articles) + len(req.Stories)
	if n == 0 || n > maxMarks {
		writeError(ctx, fasthttp.StatusBadRequest, "give 1 to "+strconv.Itoa(maxMarks)+" ids in articles and stories")
		return
	}
	read := req.Read == nil || *req.Read
	bg, cancel := s.metaCtx()
	defer cancel()
	unknown := []string{}
	var arts []readstate.Article
	for _, id := range req.Articles {
		a, storyID, ok := s.deps.Stories.Article(id)
		if !ok {
			unknown = append(unknown, id)
			continue
		}
		arts = append(arts, readstate.ArticleOf(a.Article, storyID))
	}
	for _, id := range req.Stories {
		if id == "" {
			unknown = append(unknown, id)
			continue
		}
		storyArts, err := s.markStory(bg, u.ID, id, read)
		if errors.Is(err, story.ErrNotFound) {
			unknown = append(unknown, id)
			continue
		} else if err != nil {
			metaError(ctx, "mark story", err)
			return
		}
		arts = append(arts, storyArts...)
	}
	if len(unknown) == n {
		writeError(ctx, fasthttp.StatusNotFound, "no such article or story (the story view keeps recent ones)")
		return
	}
	if err := s.reads.MarkArticles(bg, u.ID, read, arts...); err != nil {
		metaError(ctx, "mark read", err)
		return
	}
	s.feeds.invalidate(u.ID)
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{"read": read, "unknown": unknown})
}

// markStory marks the story id read up to its latest article now, or
// unread: then it returns the story's articles, for MarkArticles. A story
// the view does not have is story.ErrNotFound.
func (s *Server) markStory(ctx context.Context, userID, id string, read bool) ([]readstate.Article, error) {
	if read {
		head, err := s.deps.Stories.Head(id)
		if err != nil {
			return nil, err
		}
		return nil, s.reads.MarkScope(ctx, userID, readstate.Scope{Kind: readstate.ScopeStory, Value: head.ID}, head.LastSeen)
	}
	d, err := s.deps.Stories.Get(id)
	if err != nil {
		return nil, err
	}
	for _, sid := range append([]string{d.ID}, d.MergedFrom...) {
		if err := s.reads.ClearScope(ctx, userID, readstate.Scope{Kind: readstate.ScopeStory, Value: sid}); err != nil {
			return nil, err
		}
	}
	arts := make([]readstate.Article, 0, len(d.Articles))
	for _, a := range d.Articles {
		arts = append(arts, readstate.ArticleOf(a.Article, d.ID))
	}
	return arts, nil
}

// markAllRequest is the body of POST /api/v1/me/read/all.
type markAllRequest struct {
	Topic  string `json:"topic"`
	Source string `json:"source"`
	// Before (ms): what is published at or before it is marked read;
	// absent means the story view's latest event time (as_of of
	// /api/v1/me/unread), so what arrives after it stays unread.
	Before int64 `json:"before"`
}

// handleMarkAll marks everything read, or everything of one topic or one
// source, up to a time.
func (s *Server) handleMarkAll(ctx *fasthttp.RequestCtx, u auth.User) {
	var req markAllRequest
	if len(ctx.PostBody()) > 0 && !decodeJSON(ctx, &req) {
		return
	}
	sc := readstate.Scope{Kind: readstate.ScopeAll}
	switch {
	case req.Topic != "" && req.Source != "":
		writeError(ctx, fasthttp.StatusBadRequest, "give topic or source, not both")
		return
	case req.Topic != "":
		sc = readstate.Scope{Kind: readstate.ScopeTopic, Value: req.Topic}
	case req.Source != "":
		sc = readstate.Scope{Kind: readstate.ScopeSource, Value: req.Source}
	}
	if req.Before < 0 {
		writeError(ctx, fasthttp.StatusBadRequest, "before must be a time in ms since the epoch")
		return
	}
	if req.Before == 0 {
		req.Before = s.deps.Stories.Watermark()
	}
	mctx, cancel := s.metaCtx()
	defer cancel()
	if err := s.reads.MarkScope(mctx, u.ID, sc, req.Before); err != nil {
		metaError(ctx, "mark read", err)
		return
	}
	s.feeds.invalidate(u.ID)
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{"scope": sc, "before": req.Before})
}

// handleStarred lists the reader's starred articles, the most recently
// starred first, each with the story it is in now.
func (s *Server) handleStarred(ctx *fasthttp.RequestCtx, u auth.User) {
	mctx, cancel := s.metaCtx()
	defer cancel()
	stars, err := s.reads.Stars(mctx, u.ID)
	if err != nil {
		metaError(ctx, "list stars", err)
		return
	}
	if stars == nil {
		stars = []readstate.Star{}
	}
	for i := range stars {
		if stars[i].StoryID != "" {
			stars[i].StoryID = s.deps.Stories.Resolve(stars[i].StoryID)
		}
	}
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{"articles": stars})
}

// handleStar stars (PUT) or unstars (DELETE) an article. Starring needs
// the article in the story view; unstarring does not.
func (s *Server) handleStar(ctx *fasthttp.RequestCtx, u auth.User) {
	id, _ := ctx.UserValue("id").(string)
	if id == "" || len(id) > 128 {
		writeError(ctx, fasthttp.StatusBadRequest, "article id must be 1 to 128 bytes")
		return
	}
	mctx, cancel := s.metaCtx()
	defer cancel()
	if ctx.IsDelete() {
		if _, err := s.reads.SetStar(mctx, u.ID, readstate.Article{ID: id}, false); err != nil {
			metaError(ctx, "unstar", err)
			return
		}
		ctx.SetStatusCode(fasthttp.StatusNoContent)
		return
	}
	a, storyID, ok := s.deps.Stories.Article(id)
	if !ok {
		writeError(ctx, fasthttp.StatusNotFound, "no article "+strconv.Quote(id))
		return
	}
	st, err := s.reads.SetStar(mctx, u.ID, readstate.ArticleOf(a.Article, storyID), true)
	if err != nil {
		metaError(ctx, "star", err)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, st)
}

// hideRead reports whether the request asks to leave read stories out
// (?hide_read=1).
func hideRead(ctx *fasthttp.RequestCtx) bool { return string(ctx.QueryArgs().Peek("hide_read")) == "1" }

// readArticle is a story's article with the reader's state.
type readArticle struct {
	story.ArticleRecord
	Read    *bool `json:"read,omitempty"`
	Starred *bool `json:"starred,omitempty"`
}

// storyDetail is a story with its articles and, for a logged-in reader,
// each article's read and starred state and the story's unread count.
type storyDetail struct {
	story.Story
	Articles []readArticle `json:"articles"`
	Unread   *int          `json:"unread,omitempty"`
	// StalenessMS: see storiesPage.
	StalenessMS int64 `json:"staleness_ms"`
}

// withReadState adds the reader's state to a story's detail (nothing for
// an anonymous reader).
func withReadState(d *story.Detail, rs *readstate.State) storyDetail {
	out := storyDetail{Story: d.Story, Articles: make([]readArticle, len(d.Articles))}
	unread := 0
	for i, a := range d.Articles {
		out.Articles[i].ArticleRecord = a
		if rs == nil {
			continue
		}
		read, starred := rs.Read(&d.Story, a.ID, a.SourceID, a.Published), rs.Starred(a.ID)
		out.Articles[i].Read, out.Articles[i].Starred = &read, &starred
		if !read {
			unread++
		}
	}
	if rs != nil {
		out.Unread = &unread
	}
	return out
}
