package query

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/newsflow/newsflow/internal/lru"
	"github.com/newsflow/newsflow/operators/story"
	"github.com/newsflow/newsflow/operators/trending"
	"github.com/newsflow/newsflow/query/rank"
	"github.com/valyala/fasthttp"
)

// feedTTL is how long a computed feed serves the pages of one reader.
const feedTTL = 60 * time.Second

// feedCacheSize bounds the number of cached feeds.
const feedCacheSize = 10000

// A feed ranks the preselectTop best stories by the non-personal score and
// the preselectPerTopic best of each of the reader's topics.
const (
	preselectTop      = 1000
	preselectPerTopic = 300
)

// feedList is one reader's ranked feed.
type feedList struct {
	id      uint64 // distinguishes lists in cursors
	items   []rank.Item
	stories map[string]*story.Story
	at      time.Time
	// version is what the list was computed from (the reader's profile
	// and preferences); a different version recomputes it.
	version string
	// view is the story view it ranked (Stories.ViewVersion): a first
	// page asked after the view changed is ranked again.
	view uint64
}

// feedCache keeps the latest feed of each reader: at most feedCacheSize
// of them, the least recently used dropped first, each for feedTTL.
type feedCache struct {
	mu struct {
		sync.Mutex
		lists *lru.Cache[string, *feedList]
		next  uint64
	}
	trendMu struct {
		sync.Mutex
		at    time.Time
		score map[string]float64
		// cluster is the whole cluster's top of the 1h window (in a
		// cluster, kept by refreshClusterTrend), taken at clusterAt.
		cluster   *trending.Result
		clusterAt time.Time
	}
}

func newFeedCache() *feedCache {
	c := &feedCache{}
	c.mu.lists = lru.New[string, *feedList](feedCacheSize, 0)
	return c
}

// get returns the cached list of a reader if it is fresh and of version.
func (c *feedCache) get(key, version string, now time.Time) *feedList {
	c.mu.Lock()
	defer c.mu.Unlock()
	l, ok := c.mu.lists.Get(key, now)
	if !ok || l.version != version || now.Sub(l.at) >= feedTTL {
		return nil
	}
	return l
}

func (c *feedCache) put(key string, l *feedList) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.next++
	l.id = c.mu.next
	c.mu.lists.Add(key, l, l.at)
}

// invalidate drops a reader's list (their preferences or reads changed).
func (c *feedCache) invalidate(key string) {
	c.mu.Lock()
	c.mu.lists.Remove(key)
	c.mu.Unlock()
}

// trending returns share activity per story over the last hour,
// normalized to a maximum of 1, recomputed at most once a second.
func (s *Server) storyTrending(now time.Time) map[string]float64 {
	c := s.feeds
	c.trendMu.Lock()
	defer c.trendMu.Unlock()
	if c.trendMu.score != nil && now.Sub(c.trendMu.at) < time.Second {
		return c.trendMu.score
	}
	score := map[string]float64{}
	var res trending.Result
	var err error
	if cl := c.trendMu.cluster; cl != nil && time.Since(c.trendMu.clusterAt) < clusterTrendMaxAge {
		// In a cluster the shares of articles in other nodes'
		// partitions count too; a feed never waits for the peers.
		res = *cl
	} else {
		res, err = s.deps.Trending.Top("1h", "", trendTopK)
	}
	if err == nil {
		var top float64
		for _, it := range res.Items {
			if id, ok := s.deps.Stories.StoryOfArticle(it.ArticleID); ok {
				score[id] += float64(it.Count)
				top = max(top, score[id])
			}
		}
		for id, v := range score {
			score[id] = v / top
		}
	}
	c.trendMu.at, c.trendMu.score = now, score
	return score
}

// The feed's trending signal is the top trendTopK articles of the 1h
// window. In a cluster the owner of the story partition (which ranks the
// feeds) refreshes the whole cluster's top every clusterTrendEvery in the
// background and uses it while it is younger than clusterTrendMaxAge (its
// own partitions' top otherwise).
const (
	trendTopK          = 100
	clusterTrendEvery  = time.Second
	clusterTrendMaxAge = 10 * time.Second
)

// refreshClusterTrend keeps the cluster's top of the 1h window for the
// feed while this node answers feeds itself (storiesHere), until ctx is
// done.
func (s *Server) refreshClusterTrend(ctx context.Context) {
	t := time.NewTicker(clusterTrendEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !s.storiesHere() {
			continue // feeds are ranked on another node
		}
		local, err := s.deps.Trending.Top("1h", "", trendTopK)
		if err != nil {
			continue
		}
		res, _ := s.clusterTop(local, "1h", "", trendTopK)
		c := s.feeds
		c.trendMu.Lock()
		c.trendMu.cluster, c.trendMu.clusterAt = &res, time.Now()
		c.trendMu.Unlock()
	}
}

// feedFor computes (or reuses) the ranked feed of a reader; reader (nil
// for anonymous) is called only to compute. A first page (first) reuses a
// list only while the story view is the one it ranked; the pages after it
// keep to their list.
func (s *Server) feedFor(key string, reader func() *rank.Reader, version string, first bool) (l *feedList, cached bool) {
	now := s.opts.Now()
	view := s.deps.Stories.ViewVersion()
	if l = s.feeds.get(key, version, now); l != nil && (!first || l.view == view) {
		return l, true
	}
	var r *rank.Reader
	if reader != nil {
		r = reader()
	}
	// Ranking every recent story for every reader costs too much with tens
	// of thousands of stories: rank the best by the non-personal score and
	// the best of each topic the reader cares about.
	var topics []string
	if r != nil {
		for t := range r.Interest {
			topics = append(topics, t)
		}
		topics = append(topics, r.Topics...)
		slices.Sort(topics)
		topics = slices.Compact(topics)
	}
	recent, wm := s.deps.Stories.Preselect(preselectTop, preselectPerTopic, topics)
	trend := s.storyTrending(now)
	cands := make([]rank.Candidate, 0, len(recent))
	byID := make(map[string]*story.Story, len(recent))
	for _, st := range recent {
		byID[st.ID] = st
		c := rank.Candidate{StoryID: st.ID, SourceID: st.SourceID, Authority: st.Authority, LastSeen: st.LastSeen,
			Lambda: st.Lambda, Breaking: st.Breaking, Trending: trend[st.ID]}
		for _, src := range st.Sources {
			c.Sources = append(c.Sources, src.SourceID)
		}
		for _, t := range st.Topics {
			c.Topics = append(c.Topics, rank.Topic{Topic: t.Topic, Weight: t.Confidence})
		}
		cands = append(cands, c)
	}
	l = &feedList{items: rank.Rank(cands, r, wm, s.opts.Rank), stories: byID, at: now, version: version, view: view}
	s.feeds.put(key, l)
	return l, false
}

// feedItem is one story of a feed page.
type feedItem struct {
	*story.Story
	Score   float64       `json:"score"`
	Explain *rank.Explain `json:"explain,omitempty"`
	// Unread counts the story's unread articles (a logged-in reader).
	Unread *int `json:"unread,omitempty"`
	// Coverage lists other outlets' headlines of the story.
	Coverage []coverageItem `json:"coverage,omitempty"`
}

type feedPage struct {
	Stories []feedItem `json:"stories"`
	Next    string     `json:"next_cursor,omitempty"`
	// Partial is true when the reader's interest profile could not be
	// read (interest "unavailable"): the feed is ranked with their
	// preferences alone.
	Partial bool `json:"partial"`
	// StalenessMS: see storiesPage.
	StalenessMS int64 `json:"staleness_ms"`
	feedInterest
}

// handleFeed answers a page of the reader's feed (personal for a logged-in
// user, the non-personal ranking otherwise): ?limit= (1-100, default
// 20), ?cursor= (from next_cursor), ?explain=1 (each story's signals).
// The first page computes the ranking (again when the stories changed),
// which serves the following pages for a minute unless the reader's
// profile changes; a cursor into a list
// that is gone continues after its last story in the new list. For a
// logged-in reader the page says how their interest profile entered the
// ranking (interest: applied, none or unavailable); when the profile's
// owner cannot answer, the feed is still served, ranked with the reader's
// preferences alone, with partial, interest_error, missing_partitions and
// failed_nodes saying so.
func (s *Server) handleFeed(ctx *fasthttp.RequestCtx) {
	var cached bool
	defer s.observeQuery(ctx, "feed", &cached)
	limit, err := intArg(ctx, "limit", 20, 1, 100)
	if err != nil {
		writeError(ctx, fasthttp.StatusBadRequest, err.Error())
		return
	}
	explain := string(ctx.QueryArgs().Peek("explain")) == "1"
	var cur *feedCursor
	if c := ctx.QueryArgs().Peek("cursor"); len(c) > 0 {
		if cur, err = decodeFeedCursor(string(c)); err != nil {
			writeError(ctx, fasthttp.StatusBadRequest, "cursor: "+err.Error())
			return
		}
	}
	key, version := "", ""
	var reader func() *rank.Reader
	var fi feedInterest
	if u, ok := s.user(ctx); ok {
		version, reader, fi = s.readerOf(ctx, u)
		key = u.ID
	}
	var l *feedList
	l, cached = s.feedFor(key, reader, version, cur == nil)
	start := 0
	if cur != nil {
		start = cur.offset
		if cur.list != l.id {
			// The list was recomputed: continue after the last story seen.
			start = 0
			for i, it := range l.items {
				if it.StoryID == cur.last {
					start = i + 1
					break
				}
			}
		}
	}
	rs, err := s.readerState(ctx)
	if err != nil {
		metaError(ctx, "read state", err)
		return
	}
	hide := rs != nil && hideRead(ctx)
	page := feedPage{Stories: []feedItem{}, Partial: fi.interestGap != nil, StalenessMS: s.storyStaleness(), feedInterest: fi}
	end := start
	// With hide_read, read stories are skipped (at most maxHiddenScan
	// looked at for one page).
	for ; end < len(l.items) && len(page.Stories) < limit && end-start < maxHiddenScan; end++ {
		it := l.items[end]
		fi := feedItem{Story: s.shownBy(l.stories[it.StoryID], it.Shown), Score: it.Explain.Score}
		if rs != nil {
			n, _, err := s.unreadIn(rs, l.stories[it.StoryID])
			if err != nil {
				writeError(ctx, fasthttp.StatusInternalServerError, err.Error())
				return
			}
			if hide && n == 0 {
				continue
			}
			fi.Unread = &n
		}
		if explain {
			e := it.Explain
			fi.Explain = &e
		}
		fi.Coverage = s.coverage(l.stories[it.StoryID], fi.SourceID)
		page.Stories = append(page.Stories, fi)
	}
	if end < len(l.items) && end > start {
		page.Next = encodeFeedCursor(feedCursor{list: l.id, offset: end, last: l.items[end-1].StoryID})
	}
	if g := fi.interestGap; g != nil {
		warnPartial(ctx, g.Missing, g.FailedNodes)
	}
	writeJSON(ctx, fasthttp.StatusOK, page)
}

// shownBy returns the story as its card shows it through source src's
// newest article (rank.Item.Shown), or st itself when src is empty or its
// article cannot be read here.
func (s *Server) shownBy(st *story.Story, src string) *story.Story {
	if src == "" || st == nil || s.deps.Stories == nil {
		return st
	}
	d, err := s.deps.Stories.Get(st.ID)
	if err != nil {
		return st
	}
	var best *story.ArticleRecord
	for i := range d.Articles {
		if a := &d.Articles[i]; a.SourceID == src && (best == nil || a.Published > best.Published) {
			best = a
		}
	}
	if best == nil {
		return st
	}
	c := *st
	c.Representative, c.Title, c.URL, c.SourceID, c.Source = best.ID, best.Title, best.URL, best.SourceID, best.Source
	if best.Image != "" {
		c.Image = best.Image
	}
	return &c
}

type feedCursor struct {
	list   uint64
	offset int
	last   string
}

func encodeFeedCursor(c feedCursor) string {
	b := binary.AppendUvarint(nil, c.list)
	b = binary.AppendUvarint(b, uint64(c.offset))
	return base64.RawURLEncoding.EncodeToString(append(b, c.last...))
}

var errBadFeedCursor = errors.New("not a cursor returned by this endpoint")

func decodeFeedCursor(s string) (*feedCursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) > 200 {
		return nil, errBadFeedCursor
	}
	var c feedCursor
	var n int
	if c.list, n = binary.Uvarint(b); n <= 0 {
		return nil, errBadFeedCursor
	}
	b = b[n:]
	off, n := binary.Uvarint(b)
	if n <= 0 || off > 1<<31 {
		return nil, errBadFeedCursor
	}
	c.offset, c.last = int(off), string(b[n:])
	if c.last == "" {
		return nil, errBadFeedCursor
	}
	return &c, nil
}
