package readerapi

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"html"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/newsflow/newsflow/operators/readstate"
	"github.com/newsflow/newsflow/query/auth"
	"github.com/valyala/fasthttp"
)

// Miniflux entries: listings with the documented filters, one entry, the
// status of many, the bookmark (star) toggle, counters, and marking a
// feed read.

// mfEntry is a Miniflux entry.
type mfEntry struct {
	ID          int64    `json:"id"`
	UserID      int64    `json:"user_id"`
	FeedID      int64    `json:"feed_id"`
	Status      string   `json:"status"`
	Hash        string   `json:"hash"`
	Title       string   `json:"title"`
	URL         string   `json:"url"`
	CommentsURL string   `json:"comments_url"`
	PublishedAt string   `json:"published_at"`
	CreatedAt   string   `json:"created_at"`
	ChangedAt   string   `json:"changed_at"`
	Content     string   `json:"content"`
	Author      string   `json:"author"`
	ShareCode   string   `json:"share_code"`
	Starred     bool     `json:"starred"`
	ReadingTime int      `json:"reading_time"`
	Enclosures  []any    `json:"enclosures"`
	Feed        mfFeed   `json:"feed"`
	Tags        []string `json:"tags"`
}

// mfEntries is the answer of the entry listings.
type mfEntries struct {
	Total   int       `json:"total"`
	Entries []mfEntry `json:"entries"`
}

// feedsCache describes subscriptions as feeds once per request; base is
// the server's address as the client names it, for links to story pages.
type feedsCache struct {
	a       *API
	u       auth.User
	base    string
	folders map[int64]readstate.Folder
	feeds   map[string]mfFeed
}

func (c *feedsCache) feed(ctx context.Context, sourceID string) (mfFeed, error) {
	if f, ok := c.feeds[sourceID]; ok {
		return f, nil
	}
	if c.folders == nil {
		var err error
		if c.folders, err = c.a.folderMap(ctx, c.u); err != nil {
			return mfFeed{}, err
		}
		c.feeds = map[string]mfFeed{}
	}
	sub, err := c.a.deps.Reads.Subscription(ctx, c.u.ID, sourceID)
	if errors.Is(err, readstate.ErrNotSubscribed) {
		sub, err = readstate.Subscription{SourceID: sourceID, Folder: readstate.DefaultFolder.ID}, nil
	}
	if err != nil {
		return mfFeed{}, err
	}
	f, err := c.a.feedOf(ctx, c.u, sub, c.folders)
	if err == nil {
		c.feeds[sourceID] = f
	}
	return f, err
}

func (c *feedsCache) entry(ctx context.Context, e entry) (mfEntry, error) {
	f, err := c.feed(ctx, e.SourceID)
	if err != nil {
		return mfEntry{}, err
	}
	status := "unread"
	if e.Read {
		status = "read"
	}
	published := rfc3339(time.UnixMilli(e.Published))
	content := ""
	if e.Summary != "" {
		content = "<p>" + html.EscapeString(e.Summary) + "</p>"
	}
	// The story the article is in: its page as the comments link, and a
	// tag, for clients that know nothing of stories.
	return mfEntry{
		ID: int64(e.Num), UserID: userNum(c.u.ID), FeedID: f.ID, Status: status, Hash: e.ID, Title: e.Title, URL: e.URL,
		CommentsURL: c.storyURL(e.StoryID), PublishedAt: published, CreatedAt: published, ChangedAt: published, Content: content,
		Starred: e.Starred, ReadingTime: readingTime(e.Summary), Enclosures: []any{}, Feed: f, Tags: []string{"story:" + e.StoryID},
	}, nil
}

// storyURL is the web reader's page of a story.
func (c *feedsCache) storyURL(id string) string {
	if id == "" {
		return ""
	}
	return c.base + "/stories/" + url.PathEscape(id)
}

// baseURL is the server's address as the request names it.
func baseURL(ctx *fasthttp.RequestCtx) string {
	scheme := "http"
	if ctx.IsTLS() {
		scheme = "https"
	}
	return scheme + "://" + string(ctx.Host())
}

// readingTime is minutes at 265 words a minute, as Miniflux counts.
func readingTime(text string) int {
	return (len(strings.Fields(text)) + 264) / 265
}

// entryPage is the page and order a listing asks for.
type entryPage struct {
	limit, offset     int
	order, direction  string
	afterID, beforeID int64 // entry numbers; 0 = open
}

// entryQuery reads the documented filters of a listing into sel and the
// page: status (repeatable: read, unread; removed matches nothing here),
// starred, after/before and published_after/published_before (unix
// seconds), after_entry_id/before_entry_id, limit (default 100), offset,
// order (published_at, id; default published_at) and direction (asc,
// default, or desc). It answers 400 and returns false on a bad value.
func entryQuery(ctx *fasthttp.RequestCtx, sel *selection) (entryPage, bool) {
	args := ctx.QueryArgs()
	p, err := parseEntryQuery(args, sel)
	if err != nil {
		mfError(ctx, fasthttp.StatusBadRequest, err.Error())
		return entryPage{}, false
	}
	return p, true
}

// parseEntryQuery is entryQuery without the answer: the error is the
// message for the client.
func parseEntryQuery(args *fasthttp.Args, sel *selection) (entryPage, error) {
	if err := statusFilter(args, sel); err != nil {
		return entryPage{}, err
	}
	if v := args.Peek("starred"); len(v) > 0 {
		b, err := strconv.ParseBool(string(v))
		if err != nil {
			return entryPage{}, errors.New("invalid starred value")
		}
		sel.starred = &b
	}
	if err := timeBound(args, &sel.after, true, "after", "published_after"); err != nil {
		return entryPage{}, err
	}
	if err := timeBound(args, &sel.before, false, "before", "published_before"); err != nil {
		return entryPage{}, err
	}
	return pageQuery(args)
}

// statusFilter reads the status arguments into sel.status.
func statusFilter(args *fasthttp.Args, sel *selection) error {
	statuses := args.PeekMulti("status")
	wantRead, wantUnread := false, false
	for _, st := range statuses {
		switch string(st) {
		case "read":
			wantRead = true
		case "unread":
			wantUnread = true
		case "removed":
		default:
			return errors.New("invalid entry status: " + string(st))
		}
	}
	switch {
	case len(statuses) == 0 || wantRead && wantUnread:
	case wantRead:
		sel.status = "read"
	case wantUnread:
		sel.status = "unread"
	default:
		sel.status = "none" // only removed: nothing is removed here
	}
	return nil
}

// timeBound narrows *dst (ms; 0 = open), a lower bound if after, else an
// upper one, by the arguments names (unix seconds).
func timeBound(args *fasthttp.Args, dst *int64, after bool, names ...string) error {
	for _, name := range names {
		v := args.Peek(name)
		if len(v) == 0 {
			continue
		}
		sec, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			return errors.New("invalid " + name + " value")
		}
		ms := sec * 1000
		if *dst == 0 || after && ms > *dst || !after && ms < *dst {
			*dst = ms
		}
	}
	return nil
}

// pageQuery reads the page, the entry-number bounds and the order.
func pageQuery(args *fasthttp.Args) (entryPage, error) {
	var p entryPage
	l, ok := queryNum(args, "limit", 100)
	if !ok {
		return entryPage{}, errors.New("invalid limit value")
	}
	o, ok := queryNum(args, "offset", 0)
	if !ok {
		return entryPage{}, errors.New("invalid offset value")
	}
	if p.afterID, ok = queryNum(args, "after_entry_id", 0); !ok {
		return entryPage{}, errors.New("invalid after_entry_id value")
	}
	if p.beforeID, ok = queryNum(args, "before_entry_id", 0); !ok {
		return entryPage{}, errors.New("invalid before_entry_id value")
	}
	p.order = cmp.Or(string(args.Peek("order")), "published_at")
	if p.order != "published_at" && p.order != "id" {
		return entryPage{}, errors.New(`invalid order, valid values are: "published_at", "id"`)
	}
	p.direction = cmp.Or(string(args.Peek("direction")), "asc")
	if p.direction != "asc" && p.direction != "desc" {
		return entryPage{}, errors.New(`invalid direction, valid values are: "asc", "desc"`)
	}
	if l == 0 {
		l = 100
	}
	p.limit, p.offset = int(min(l, maxScan)), int(min(o, maxScan))
	return p, nil
}

// queryNum returns the argument name, a number not negative, or def if it
// is absent; false if it is not such a number.
func queryNum(args *fasthttp.Args, name string, def int64) (int64, bool) {
	v := args.Peek(name)
	if len(v) == 0 {
		return def, true
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	return n, err == nil && n >= 0
}

// listing answers an entry listing over the reader's subscriptions of
// sources (all of them when nil).
func (a *API) listing(ctx *fasthttp.RequestCtx, u auth.User, sources []string) {
	sel := selection{sources: sources}
	p, ok := entryQuery(ctx, &sel)
	if !ok {
		return
	}
	c, cancel := a.bounded()
	defer cancel()
	if sources == nil {
		subs, err := a.deps.Reads.Subscriptions(c, u.ID)
		if err != nil {
			mfServerError(ctx, err)
			return
		}
		for _, s := range subs {
			sel.sources = append(sel.sources, s.SourceID)
		}
	}
	var es []entry
	if sel.status != "none" && len(sel.sources) > 0 {
		var err error
		if es, err = a.listEntries(c, u.ID, nil, sel); err != nil {
			mfServerError(ctx, err)
			return
		}
	}
	es = slices.DeleteFunc(es, func(e entry) bool {
		return p.afterID > 0 && int64(e.Num) <= p.afterID || p.beforeID > 0 && int64(e.Num) >= p.beforeID
	})
	if p.order == "id" {
		slices.SortStableFunc(es, func(x, y entry) int { return cmp.Compare(y.Num, x.Num) })
	}
	if p.direction == "asc" {
		slices.Reverse(es)
	}
	out := mfEntries{Total: len(es), Entries: []mfEntry{}}
	cache := &feedsCache{a: a, u: u, base: baseURL(ctx)}
	for _, e := range es[min(p.offset, len(es)):min(p.offset+p.limit, len(es))] {
		me, err := cache.entry(c, e)
		if err != nil {
			mfServerError(ctx, err)
			return
		}
		out.Entries = append(out.Entries, me)
	}
	writeJSON(ctx, fasthttp.StatusOK, out)
}

func (a *API) mfEntries(ctx *fasthttp.RequestCtx, u auth.User) {
	var sources []string
	if v := ctx.QueryArgs().Peek("feed_id"); len(v) > 0 {
		sub, ok := a.subscription(ctx, u, string(v))
		if !ok {
			return
		}
		sources = []string{sub.SourceID}
	} else if v := ctx.QueryArgs().Peek("category_id"); len(v) > 0 {
		id, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			mfError(ctx, fasthttp.StatusBadRequest, "invalid category_id value")
			return
		}
		if sources = a.folderSources(ctx, u, id); sources == nil {
			return
		}
	}
	a.listing(ctx, u, sources)
}

func (a *API) mfFeedEntries(ctx *fasthttp.RequestCtx, u auth.User) {
	sub, ok := a.subscribedFeed(ctx, u)
	if !ok {
		return
	}
	a.listing(ctx, u, []string{sub.SourceID})
}

func (a *API) mfCategoryEntries(ctx *fasthttp.RequestCtx, u auth.User) {
	raw, _ := ctx.UserValue("id").(string)
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil {
		mfError(ctx, fasthttp.StatusBadRequest, "invalid category id")
		return
	}
	if sources := a.folderSources(ctx, u, id); sources != nil {
		a.listing(ctx, u, sources)
	}
}

// folderSources returns the sources the reader has in folder id (an empty,
// non-nil slice when none); it answers 404 and returns nil when the reader
// has no such folder.
func (a *API) folderSources(ctx *fasthttp.RequestCtx, u auth.User, id int64) []string {
	c, cancel := a.bounded()
	defer cancel()
	if _, err := a.deps.Reads.Folder(c, u.ID, id); err != nil {
		mfError(ctx, fasthttp.StatusNotFound, "resource not found")
		return nil
	}
	subs, err := a.deps.Reads.Subscriptions(c, u.ID)
	if err != nil {
		mfServerError(ctx, err)
		return nil
	}
	out := []string{}
	for _, s := range subs {
		if s.Folder == id {
			out = append(out, s.SourceID)
		}
	}
	return out
}

// entryOfPath returns the entry the {entry} path parameter names.
func (a *API) entryOfPath(ctx *fasthttp.RequestCtx, u auth.User, param string) (entry, bool) {
	raw, _ := ctx.UserValue(param).(string)
	num, err := strconv.ParseInt(raw, 10, 64)
	if err != nil {
		mfError(ctx, fasthttp.StatusBadRequest, "invalid entry id")
		return entry{}, false
	}
	bctx, cancel := a.bounded()
	defer cancel()
	e, err := a.entryByNum(bctx, u.ID, num)
	switch {
	case errors.Is(err, errNoEntry):
		mfError(ctx, fasthttp.StatusNotFound, "resource not found")
		return entry{}, false
	case err != nil:
		mfServerError(ctx, err)
		return entry{}, false
	}
	return e, true
}

func (a *API) mfEntry(ctx *fasthttp.RequestCtx, u auth.User) {
	e, ok := a.entryOfPath(ctx, u, "entry")
	if !ok {
		return
	}
	bctx, cancel := a.bounded()
	defer cancel()
	me, err := (&feedsCache{a: a, u: u, base: baseURL(ctx)}).entry(bctx, e)
	if err != nil {
		mfServerError(ctx, err)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, me)
}

// mfUpdateEntries is PUT /v1/entries {"entry_ids": [...], "status":
// "read"|"unread", "starred": bool}: the body is JSON whatever its
// Content-Type says (newsboat sends it as a form).
func (a *API) mfUpdateEntries(ctx *fasthttp.RequestCtx, u auth.User) {
	var req struct {
		EntryIDs []int64 `json:"entry_ids"`
		Status   string  `json:"status"`
		Starred  *bool   `json:"starred"`
	}
	if err := json.Unmarshal(ctx.PostBody(), &req); err != nil {
		mfError(ctx, fasthttp.StatusBadRequest, "invalid JSON body: "+err.Error())
		return
	}
	switch {
	case len(req.EntryIDs) == 0:
		mfError(ctx, fasthttp.StatusBadRequest, "The list of entries cannot be empty")
		return
	case req.Status == "" && req.Starred == nil:
		mfError(ctx, fasthttp.StatusBadRequest, "Either status or starred must be set")
		return
	case req.Status != "" && req.Status != "read" && req.Status != "unread":
		mfError(ctx, fasthttp.StatusBadRequest, "invalid entry status: "+req.Status)
		return
	}
	c, cancel := a.bounded()
	defer cancel()
	var arts []readstate.Article
	for _, id := range req.EntryIDs {
		e, err := a.entryByNum(c, u.ID, id)
		if errors.Is(err, errNoEntry) {
			continue // gone: nothing to mark
		}
		if err != nil {
			mfServerError(ctx, err)
			return
		}
		arts = append(arts, readstateArticle(e))
	}
	if req.Status != "" && len(arts) > 0 {
		if err := a.deps.Reads.MarkArticles(c, u.ID, req.Status == "read", arts...); err != nil {
			mfServerError(ctx, err)
			return
		}
	}
	if req.Starred != nil {
		for _, art := range arts {
			if _, err := a.deps.Reads.SetStar(c, u.ID, art, *req.Starred); err != nil {
				mfServerError(ctx, err)
				return
			}
		}
	}
	ctx.SetStatusCode(fasthttp.StatusNoContent)
}

// mfToggleBookmark is PUT /v1/entries/{entry}/bookmark: the star flips.
func (a *API) mfToggleBookmark(ctx *fasthttp.RequestCtx, u auth.User) {
	e, ok := a.entryOfPath(ctx, u, "entry")
	if !ok {
		return
	}
	bctx, cancel := a.bounded()
	defer cancel()
	if _, err := a.deps.Reads.SetStar(bctx, u.ID, readstateArticle(e), !e.Starred); err != nil {
		mfServerError(ctx, err)
		return
	}
	ctx.SetStatusCode(fasthttp.StatusNoContent)
}

// mfCounters is GET /v1/feeds/counters: read and unread entries per
// subscribed feed, only the counts that are not zero.
func (a *API) mfCounters(ctx *fasthttp.RequestCtx, u auth.User) {
	c, cancel := a.bounded()
	defer cancel()
	subs, err := a.deps.Reads.Subscriptions(c, u.ID)
	var rs *readstate.State
	if err == nil {
		rs, err = a.deps.Reads.Load(c, u.ID)
	}
	if err != nil {
		mfServerError(ctx, err)
		return
	}
	out := struct {
		Reads   map[string]int `json:"reads"`
		Unreads map[string]int `json:"unreads"`
	}{map[string]int{}, map[string]int{}}
	for _, sub := range subs {
		es, err := a.listEntries(c, u.ID, rs, selection{sources: []string{sub.SourceID}})
		if err == nil {
			var num int64
			num, err = a.deps.Reads.FeedNum(c, sub.SourceID)
			key := strconv.FormatInt(num, 10)
			for _, e := range es {
				if e.Read {
					out.Reads[key]++
				} else {
					out.Unreads[key]++
				}
			}
		}
		if err != nil {
			mfServerError(ctx, err)
			return
		}
	}
	writeJSON(ctx, fasthttp.StatusOK, out)
}

// mfMarkFeedRead is PUT /v1/feeds/{id}/mark-all-as-read: everything of
// the feed published until now is read.
func (a *API) mfMarkFeedRead(ctx *fasthttp.RequestCtx, u auth.User) {
	sub, ok := a.subscribedFeed(ctx, u)
	if !ok {
		return
	}
	sc := readstate.Scope{Kind: readstate.ScopeSource, Value: sub.SourceID}
	bctx, cancel := a.bounded()
	defer cancel()
	if err := a.deps.Reads.MarkScope(bctx, u.ID, sc, time.Now().UnixMilli()); err != nil {
		mfServerError(ctx, err)
		return
	}
	ctx.SetStatusCode(fasthttp.StatusNoContent)
}
