package readerapi

import (
	"cmp"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"github.com/newsflow/newsflow/query/httpkit"
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

// The Google Reader API in the dialect FreshRSS, Inoreader and FeedHQ
// serve, and the Atom streams of FeedHQ and TheOldReader, which Debian's
// newsboat reads. A client logs in with ClientLogin (Email = username,
// Passwd = one of the reader's API keys) and sends the Auth it gets back as
// "Authorization: GoogleLogin auth=..."; Auth is the API key itself, so
// revoking the key logs the client out. Writes answer "OK" in plain text.
//
// Ids: a feed is "feed/<feed number>"; an item is its entry number, in
// the long form "tag:google.com,2005:reader/item/<16 hex digits>" (what
// contents and Atom give) or the short form (signed decimal, what
// stream/items/ids gives); every request takes either. Streams are
// user/-/state/com.google/reading-list (every subscription), .../starred,
// .../read, user/-/label/<folder>, and feed/<n>. Continuations are
// offsets into a listing (the newest maxScan entries of its selection).

const (
	stateReadingList = "user/-/state/com.google/reading-list"
	stateRead        = "user/-/state/com.google/read"
	stateStarred     = "user/-/state/com.google/starred"
	stateKeptUnread  = "user/-/state/com.google/kept-unread"
	labelPrefix      = "user/-/label/"
	itemPrefix       = "tag:google.com,2005:reader/item/"
)

// greaderRoutes are the Google Reader API's routes.
func (a *API) greaderRoutes() []httpkit.Route {
	return []httpkit.Route{
		{Method: "POST", Path: "/accounts/ClientLogin", Name: "greader_login", Handler: a.grLogin, Doc: httpkit.Doc{Tag: "greader", Summary: "Google Reader API: log in (form Email = username, Passwd = an API key); text/plain SID, LSID and Auth (output=json: JSON). 401 Error=BadAuthentication", OK: 200, Errs: []int{401}}},
		{Method: "GET", Path: "/reader/api/0/token", Name: "greader_token", Handler: a.greaderAuth(a.grToken), Doc: httpkit.Doc{Tag: "greader", Auth: "greader", Summary: "Google Reader API: the action token T (text/plain)", OK: 200, Errs: []int{401}}},
		{Method: "GET", Path: "/reader/api/0/user-info", Name: "greader_user_info", Handler: a.greaderAuth(a.grUserInfo), Doc: httpkit.Doc{Tag: "greader", Auth: "greader", Summary: "Google Reader API: userId, userName, userProfileId, userEmail", OK: 200, Errs: []int{401}}},
		{Method: "GET", Path: "/reader/api/0/subscription/list", Name: "greader_subscriptions", Handler: a.greaderAuth(a.grSubscriptions), Doc: httpkit.Doc{Tag: "greader", Auth: "greader", Summary: "Google Reader API: the reader's subscriptions ({subscriptions: [{id: feed/<n>, title, categories: [{id: user/-/label/<folder>, label}], url, htmlUrl, iconUrl}]})", OK: 200, Errs: []int{401}}},
		{Method: "GET", Path: "/reader/api/0/tag/list", Name: "greader_tags", Handler: a.greaderAuth(a.grTags), Doc: httpkit.Doc{Tag: "greader", Auth: "greader", Summary: "Google Reader API: the starred state and the reader's folders as labels", OK: 200, Errs: []int{401}}},
		{Method: "POST", Path: "/reader/api/0/edit-tag", Name: "greader_edit_tag", Handler: a.greaderAuth(a.grEditTag), Doc: httpkit.Doc{Tag: "greader", Auth: "greader", Summary: "Google Reader API: add (a) or remove (r) user/-/state/com.google/read or starred on items (i: long or short form, repeatable); other tags are accepted and ignored; text/plain OK", OK: 200, Errs: []int{400, 401}}},
		{Method: "POST", Path: "/reader/api/0/mark-all-as-read", Name: "greader_mark_all_read", Handler: a.greaderAuth(a.grMarkAllRead), Doc: httpkit.Doc{Tag: "greader", Auth: "greader", Summary: "Google Reader API: mark a stream (s) read up to ts (microseconds; default now); text/plain OK", OK: 200, Errs: []int{400, 401}}},
		{Method: "GET", Path: "/reader/api/0/stream/items/ids", Name: "greader_item_ids", Handler: a.greaderAuth(a.grItemIDs), Doc: httpkit.Doc{Tag: "greader", Auth: "greader", Summary: "Google Reader API: the item ids (short form) of a stream (s: feed/<n>, user/-/label/<folder>, user/-/state/com.google/reading-list, starred, read), newest first (r=o: oldest), n, ot, nt, xt, it, c (continuation)", OK: 200, Errs: []int{400, 401}}},
		{Method: "POST", Path: "/reader/api/0/stream/items/contents", Name: "greader_item_contents", Handler: a.greaderAuth(a.grItemContents), Doc: httpkit.Doc{Tag: "greader", Auth: "greader", Summary: "Google Reader API: the items named by i (repeatable, either form)", OK: 200, Errs: []int{400, 401}}},
		{Method: "GET", Path: "/reader/api/0/stream/contents", Name: "greader_stream", Handler: a.greaderAuth(a.grStream), Doc: httpkit.Doc{Tag: "greader", Auth: "greader", Summary: "Google Reader API: the items of the stream s (the parameters of stream/items/ids); {id, updated, items, continuation}", OK: 200, Errs: []int{400, 401}}},
		{Method: "GET", Path: "/reader/api/0/stream/contents/{stream:*}", Name: "greader_stream", Handler: a.greaderAuth(a.grStream), Doc: httpkit.Doc{Tag: "greader", Auth: "greader", Summary: "Google Reader API: the items of the stream in the path", OK: 200, Errs: []int{400, 401}}},
		{Method: "GET", Path: "/reader/api/0/unread-count", Name: "greader_unread_count", Handler: a.greaderAuth(a.grUnreadCount), Doc: httpkit.Doc{Tag: "greader", Auth: "greader", Summary: "Google Reader API: unread items per feed, label and the reading list ({max, unreadcounts: [{id, count, newestItemTimestampUsec}]})", OK: 200, Errs: []int{401}}},
		{Method: "POST", Path: "/reader/api/0/subscription/quickadd", Name: "greader_quickadd", Handler: a.greaderAuth(a.grQuickAdd), Doc: httpkit.Doc{Tag: "greader", Auth: "greader", Summary: "Google Reader API: subscribe to a feed URL (quickadd; a source no one added is added when auth.readers_add_sources allows, or for an admin): {numResults, query, streamId, streamName}; numResults 0 with error when refused", OK: 200, OKSchema: "Object", Errs: []int{401}}},
		{Method: "POST", Path: "/reader/api/0/subscription/edit", Name: "greader_subscription_edit", Handler: a.greaderAuth(a.grEditSubscription), Doc: httpkit.Doc{Tag: "greader", Auth: "greader", Summary: "Google Reader API: ac subscribe, unsubscribe or edit feeds s (feed/<n> or feed/<url>, repeatable) with title t, into label a (created) or out of label r; text/plain OK", OK: 200, Errs: []int{400, 401}}},
		{Method: "GET", Path: "/reader/atom/{stream:*}", Name: "greader_atom", Handler: a.greaderAuth(a.grAtom), Doc: httpkit.Doc{Tag: "greader", Auth: "greader", Summary: "Google Reader API (FeedHQ, TheOldReader): a stream as Atom, each entry with the Google Reader categories (label=\"read\" when read); no validators", OK: 200, Errs: []int{400, 401}}},
	}
}

// grLogin is ClientLogin: Email and Passwd (form or query).
func (a *API) grLogin(ctx *fasthttp.RequestCtx) {
	arg := func(name string) string {
		if v := ctx.PostArgs().Peek(name); len(v) > 0 {
			return string(v)
		}
		return string(ctx.QueryArgs().Peek(name))
	}
	bctx, cancel := a.bounded()
	defer cancel()
	_, _, err := a.deps.Auth.LookupAPIKey(bctx, arg("Email"), arg("Passwd"))
	if err != nil {
		status := fasthttp.StatusUnauthorized
		if !errors.Is(err, auth.ErrNoAPIKey) {
			status = fasthttp.StatusInternalServerError
		}
		ctx.SetStatusCode(status)
		ctx.SetContentType("text/plain; charset=utf-8")
		ctx.SetBodyString("Error=BadAuthentication\n")
		return
	}
	secret := strings.TrimSpace(arg("Passwd"))
	if string(ctx.QueryArgs().Peek("output")) == "json" {
		writeJSON(ctx, fasthttp.StatusOK, map[string]string{"SID": secret, "LSID": "null", "Auth": secret})
		return
	}
	ctx.SetContentType("text/plain; charset=utf-8")
	ctx.SetBodyString("SID=" + secret + "\nLSID=null\nAuth=" + secret + "\n")
}

// greaderAuth authenticates "Authorization: GoogleLogin auth=<key>".
func (a *API) greaderAuth(h func(*fasthttp.RequestCtx, auth.User)) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		hdr := string(ctx.Request.Header.Peek(fasthttp.HeaderAuthorization))
		const prefix = "googlelogin auth="
		secret := ""
		if len(hdr) > len(prefix) && strings.EqualFold(hdr[:len(prefix)], prefix) {
			secret = hdr[len(prefix):]
		}
		bctx, cancel := a.bounded()
		defer cancel()
		_, u, err := a.deps.Auth.LookupAPIKey(bctx, "", secret)
		switch {
		case errors.Is(err, auth.ErrNoAPIKey):
			ctx.SetStatusCode(fasthttp.StatusUnauthorized)
			ctx.SetContentType("text/plain; charset=utf-8")
			ctx.SetBodyString("Unauthorized\n")
		case err != nil:
			grServerError(ctx, err)
		default:
			h(ctx, u)
		}
	}
}

func grOK(ctx *fasthttp.RequestCtx) {
	ctx.SetContentType("text/plain; charset=utf-8")
	ctx.SetBodyString("OK")
}

func grBad(ctx *fasthttp.RequestCtx, msg string) {
	ctx.SetStatusCode(fasthttp.StatusBadRequest)
	ctx.SetContentType("text/plain; charset=utf-8")
	ctx.SetBodyString(msg + "\n")
}

// grToken is the action token T. Writes accept it, an empty one or none
// (clients differ); it is not a secret.
func (a *API) grToken(ctx *fasthttp.RequestCtx, u auth.User) {
	ctx.SetContentType("text/plain; charset=utf-8")
	ctx.SetBodyString(fmt.Sprintf("%016x", userNum(u.ID)) + "\n")
}

func (a *API) grUserInfo(ctx *fasthttp.RequestCtx, u auth.User) {
	id := strconv.FormatInt(userNum(u.ID), 10)
	writeJSON(ctx, fasthttp.StatusOK, map[string]string{"userId": id, "userName": u.Username, "userProfileId": id, "userEmail": u.Username})
}

// grSub is a subscription in subscription/list.
type grSub struct {
	ID         string       `json:"id"`
	Title      string       `json:"title"`
	Categories []grCategory `json:"categories"`
	URL        string       `json:"url"`
	HTMLURL    string       `json:"htmlUrl"`
	IconURL    string       `json:"iconUrl"`
}

type grCategory struct {
	ID    string `json:"id"`
	Label string `json:"label"`
}

func (a *API) grSubscriptions(ctx *fasthttp.RequestCtx, u auth.User) {
	c, cancel := a.bounded()
	defer cancel()
	subs, folders, err := a.subsAndFolders(c, u)
	if err != nil {
		grServerError(ctx, err)
		return
	}
	out := []grSub{}
	for _, sub := range subs {
		f, err := a.feedOf(c, u, sub, folders)
		if err != nil {
			grServerError(ctx, err)
			return
		}
		s := grSub{ID: fmt.Sprint("feed/", f.ID), Title: f.Title, Categories: []grCategory{}, URL: f.FeedURL, HTMLURL: f.SiteURL}
		if sub.Folder != readstate.DefaultFolder.ID {
			s.Categories = append(s.Categories, grCategory{ID: labelPrefix + f.Category.Title, Label: f.Category.Title})
		}
		out = append(out, s)
	}
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{"subscriptions": out})
}

func (a *API) grTags(ctx *fasthttp.RequestCtx, u auth.User) {
	bctx, cancel := a.bounded()
	defer cancel()
	folders, err := a.deps.Reads.Folders(bctx, u.ID)
	if err != nil {
		grServerError(ctx, err)
		return
	}
	tags := []map[string]string{{"id": stateStarred}}
	for _, f := range folders[1:] {
		tags = append(tags, map[string]string{"id": labelPrefix + f.Title, "type": "folder"})
	}
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{"tags": tags})
}

// parseItemID reads an item id in either form.
func parseItemID(s string) (int64, bool) {
	s = strings.TrimSpace(s)
	if rest, ok := strings.CutPrefix(s, itemPrefix); ok {
		n, err := strconv.ParseUint(rest, 16, 64)
		return int64(n), err == nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

func longItemID(num uint64) string { return fmt.Sprintf("%s%016x", itemPrefix, num) }

// args returns the values of a parameter from the form and the query.
func args(ctx *fasthttp.RequestCtx, name string) []string {
	var out []string
	for _, v := range ctx.PostArgs().PeekMulti(name) {
		out = append(out, string(v))
	}
	for _, v := range ctx.QueryArgs().PeekMulti(name) {
		out = append(out, string(v))
	}
	return out
}

func arg(ctx *fasthttp.RequestCtx, name string) string {
	if v := args(ctx, name); len(v) > 0 {
		return v[0]
	}
	return ""
}

// grEditTag adds (a) and removes (r) the read and starred states of items
// (i, repeatable); other tags (kept-unread, broadcast, labels) are
// accepted and ignored.
func (a *API) grEditTag(ctx *fasthttp.RequestCtx, u auth.User) {
	c, cancel := a.bounded()
	defer cancel()
	add, remove := args(ctx, "a"), args(ctx, "r")
	has := func(tags []string, t string) bool {
		for _, x := range tags {
			if strings.TrimSpace(x) == t || strings.HasSuffix(x, strings.TrimPrefix(t, "user/-")) && strings.HasPrefix(x, "user/") {
				return true
			}
		}
		return false
	}
	es, ok := a.itemEntries(ctx, u)
	if !ok {
		return
	}
	arts := make([]readstate.Article, len(es))
	for i, e := range es {
		arts[i] = readstateArticle(e)
	}
	var err error
	switch {
	case len(arts) == 0:
	case has(add, stateRead):
		err = a.deps.Reads.MarkArticles(c, u.ID, true, arts...)
	case has(remove, stateRead) || has(add, stateKeptUnread):
		err = a.deps.Reads.MarkArticles(c, u.ID, false, arts...)
	}
	for _, art := range arts {
		if err != nil {
			break
		}
		switch {
		case has(add, stateStarred):
			_, err = a.deps.Reads.SetStar(c, u.ID, art, true)
		case has(remove, stateStarred):
			_, err = a.deps.Reads.SetStar(c, u.ID, art, false)
		}
	}
	if err != nil {
		grServerError(ctx, err)
		return
	}
	grOK(ctx)
}

// streamSelection maps a stream id to a selection; ok is false (and a 400
// answered) for one the reader has not.
func (a *API) streamSelection(ctx *fasthttp.RequestCtx, u auth.User, stream string) (selection, bool) {
	c, cancel := a.bounded()
	defer cancel()
	// A stream in the path may come escaped as one segment (feed%2F1).
	if un, err := url.PathUnescape(stream); err == nil {
		stream = un
	}
	stream = strings.TrimSpace(stream)
	if stream == "" {
		stream = stateReadingList
	}
	norm := stream
	if strings.HasPrefix(stream, "user/") {
		if _, rest, ok := strings.Cut(stream[len("user/"):], "/"); ok {
			norm = "user/-/" + rest
		}
	}
	subs, err := a.deps.Reads.Subscriptions(c, u.ID)
	if err != nil {
		grServerError(ctx, err)
		return selection{}, false
	}
	all := make([]string, len(subs))
	for i, s := range subs {
		all[i] = s.SourceID
	}
	switch {
	case norm == stateReadingList:
		return selection{sources: all}, true
	case norm == stateStarred:
		return selection{starredOnly: true}, true
	case norm == stateRead:
		return selection{sources: all, status: "read"}, true
	case strings.HasPrefix(norm, labelPrefix):
		f, err := a.deps.Reads.FolderByTitle(c, u.ID, norm[len(labelPrefix):])
		if err != nil {
			grBad(ctx, "unknown label "+norm)
			return selection{}, false
		}
		sel := selection{sources: []string{}}
		for _, s := range subs {
			if s.Folder == f.ID {
				sel.sources = append(sel.sources, s.SourceID)
			}
		}
		return sel, true
	case strings.HasPrefix(norm, "feed/"):
		num, err := strconv.ParseInt(norm[len("feed/"):], 10, 64)
		if err == nil {
			if src, ok, err := a.deps.Reads.SourceOfFeed(c, num); err == nil && ok {
				if _, err := a.deps.Reads.Subscription(c, u.ID, src); err == nil {
					return selection{sources: []string{src}}, true
				}
			}
		}
	}
	grBad(ctx, "unknown stream "+stream)
	return selection{}, false
}

// streamPage reads the stream parameters (s, n, r, ot, nt, xt, it, c) and
// returns the page of entries and the continuation ("" at the end).
func (a *API) streamPage(ctx *fasthttp.RequestCtx, u auth.User, stream string, maxN int) ([]entry, string, bool) {
	sel, ok := a.streamSelection(ctx, u, stream)
	if !ok {
		return nil, "", false
	}
	for _, x := range args(ctx, "xt") {
		switch {
		case strings.HasSuffix(x, "/state/com.google/read"):
			sel.status = cmpStatus(sel.status, "unread")
		case strings.HasSuffix(x, "/state/com.google/starred"):
			f := false
			sel.starred = &f
		}
	}
	for _, x := range args(ctx, "it") {
		switch {
		case strings.HasSuffix(x, "/state/com.google/read"):
			sel.status = cmpStatus(sel.status, "read")
		case strings.HasSuffix(x, "/state/com.google/starred"):
			t := true
			sel.starred = &t
		}
	}
	if v := arg(ctx, "ot"); v != "" {
		sec, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			grBad(ctx, "invalid ot")
			return nil, "", false
		}
		sel.after = sec*1000 - 1
	}
	if v := arg(ctx, "nt"); v != "" {
		sec, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			grBad(ctx, "invalid nt")
			return nil, "", false
		}
		sel.before = sec*1000 + 1000
	}
	n := 20
	if v := arg(ctx, "n"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			grBad(ctx, "invalid n")
			return nil, "", false
		}
	}
	n = min(n, maxN)
	offset := 0
	if v := arg(ctx, "c"); v != "" {
		var err error
		if offset, err = strconv.Atoi(v); err != nil || offset < 0 {
			grBad(ctx, "invalid continuation")
			return nil, "", false
		}
	}
	var es []entry
	if sel.status != "none" && (sel.starredOnly || len(sel.sources) > 0) {
		var err error
		bctx, cancel := a.bounded()
		defer cancel()
		if es, err = a.listEntries(bctx, u.ID, nil, sel); err != nil {
			grServerError(ctx, err)
			return nil, "", false
		}
	}
	if arg(ctx, "r") == "o" {
		slices.Reverse(es)
	}
	page := es[min(offset, len(es)):min(offset+n, len(es))]
	next := ""
	if offset+n < len(es) {
		next = strconv.Itoa(offset + n)
	}
	return page, next, true
}

// cmpStatus combines two status filters: different ones keep nothing.
func cmpStatus(have, want string) string {
	if have == "" || have == want {
		return want
	}
	return "none"
}

func (a *API) grItemIDs(ctx *fasthttp.RequestCtx, u auth.User) {
	page, next, ok := a.streamPage(ctx, u, arg(ctx, "s"), 10000)
	if !ok {
		return
	}
	refs := make([]map[string]any, len(page))
	for i, e := range page {
		refs[i] = map[string]any{"id": strconv.FormatInt(int64(e.Num), 10), "directStreamIds": []string{},
			"timestampUsec": strconv.FormatInt(e.Published*1000, 10)}
	}
	out := map[string]any{"itemRefs": refs}
	if next != "" {
		out["continuation"] = next
	}
	writeJSON(ctx, fasthttp.StatusOK, out)
}

// grItem is an item of stream/contents and items/contents.
type grItem struct {
	ID            string              `json:"id"`
	CrawlTimeMsec string              `json:"crawlTimeMsec"`
	TimestampUsec string              `json:"timestampUsec"`
	Published     int64               `json:"published"`
	Updated       int64               `json:"updated"`
	Title         string              `json:"title"`
	Canonical     []map[string]string `json:"canonical"`
	Alternate     []map[string]string `json:"alternate"`
	Categories    []string            `json:"categories"`
	Origin        map[string]string   `json:"origin"`
	Summary       map[string]string   `json:"summary"`
	Author        string              `json:"author"`
	// Related links the story the article is in (the web reader's page);
	// StoryID names it.
	Related []map[string]string `json:"related,omitempty"`
	StoryID string              `json:"story_id,omitempty"`
}

func (a *API) items(ctx context.Context, u auth.User, base string, es []entry) ([]grItem, error) {
	cache := &feedsCache{a: a, u: u, base: base}
	out := make([]grItem, 0, len(es))
	for _, e := range es {
		f, err := cache.feed(ctx, e.SourceID)
		if err != nil {
			return nil, err
		}
		cats := []string{stateReadingList}
		if f.Category.ID != readstate.DefaultFolder.ID {
			cats = append(cats, labelPrefix+f.Category.Title)
		}
		if e.Read {
			cats = append(cats, stateRead)
		}
		if e.Starred {
			cats = append(cats, stateStarred)
		}
		content := ""
		if e.Summary != "" {
			content = "<p>" + html.EscapeString(e.Summary) + "</p>"
		}
		link := []map[string]string{{"href": e.URL, "type": "text/html"}}
		out = append(out, grItem{
			ID: longItemID(e.Num), CrawlTimeMsec: strconv.FormatInt(e.Published, 10), TimestampUsec: strconv.FormatInt(e.Published*1000, 10),
			Published: e.Published / 1000, Updated: e.Published / 1000, Title: e.Title, Canonical: link, Alternate: link, Categories: cats,
			Origin:  map[string]string{"streamId": fmt.Sprint("feed/", f.ID), "title": f.Title, "htmlUrl": f.SiteURL},
			Summary: map[string]string{"content": content}, Author: e.Source, StoryID: e.StoryID,
		})
		if link := cache.storyURL(e.StoryID); link != "" {
			out[len(out)-1].Related = []map[string]string{{"href": link, "type": "text/html"}}
		}
	}
	return out, nil
}

// streamItems returns a page of up to 1,000 of stream's entries, their
// items and the continuation after them; ok false when it answered the
// request itself (a bad stream or continuation, or an error).
func (a *API) streamItems(ctx *fasthttp.RequestCtx, u auth.User, stream string) (page []entry, items []grItem, next string, ok bool) {
	page, next, ok = a.streamPage(ctx, u, stream, 1000)
	if !ok {
		return nil, nil, "", false
	}
	bctx, cancel := a.bounded()
	defer cancel()
	items, err := a.items(bctx, u, baseURL(ctx), page)
	if err != nil {
		grServerError(ctx, err)
		return nil, nil, "", false
	}
	return page, items, next, true
}

func (a *API) grStream(ctx *fasthttp.RequestCtx, u auth.User) {
	stream, _ := ctx.UserValue("stream").(string)
	if stream == "" {
		stream = arg(ctx, "s")
	}
	_, items, next, ok := a.streamItems(ctx, u, stream)
	if !ok {
		return
	}
	out := map[string]any{"id": cmp.Or(stream, stateReadingList), "updated": time.Now().Unix(), "items": items}
	if next != "" {
		out["continuation"] = next
	}
	writeJSON(ctx, fasthttp.StatusOK, out)
}

// grItemContents answers the items named by i (repeatable, either form).
func (a *API) grItemContents(ctx *fasthttp.RequestCtx, u auth.User) {
	es, ok := a.itemEntries(ctx, u)
	if !ok {
		return
	}
	bctx, cancel := a.bounded()
	defer cancel()
	items, err := a.items(bctx, u, baseURL(ctx), es)
	if err != nil {
		grServerError(ctx, err)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{"id": stateReadingList, "updated": time.Now().Unix(), "items": items})
}

// grMarkAllRead marks a stream read: everything published up to ts
// (microseconds; default now).
func (a *API) grMarkAllRead(ctx *fasthttp.RequestCtx, u auth.User) {
	before := time.Now().UnixMilli()
	if v := arg(ctx, "ts"); v != "" {
		us, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			grBad(ctx, "invalid ts")
			return
		}
		if us > 0 {
			before = us / 1000
		}
	}
	stream := arg(ctx, "s")
	sel, ok := a.streamSelection(ctx, u, stream)
	if !ok {
		return
	}
	c, cancel := a.bounded()
	defer cancel()
	scopes := []readstate.Scope{}
	if strings.HasSuffix(stream, "/state/com.google/reading-list") || stream == "" {
		scopes = append(scopes, readstate.Scope{Kind: readstate.ScopeAll})
	} else {
		for _, src := range sel.sources {
			scopes = append(scopes, readstate.Scope{Kind: readstate.ScopeSource, Value: src})
		}
	}
	for _, sc := range scopes {
		if err := a.deps.Reads.MarkScope(c, u.ID, sc, before); err != nil {
			grServerError(ctx, err)
			return
		}
	}
	grOK(ctx)
}

// grUnreadCount counts the unread entries per subscribed feed, per label
// and for the reading list.
func (a *API) grUnreadCount(ctx *fasthttp.RequestCtx, u auth.User) {
	c, cancel := a.bounded()
	defer cancel()
	subs, folders, err := a.subsAndFolders(c, u)
	var rs *readstate.State
	if err == nil {
		rs, err = a.deps.Reads.Load(c, u.ID)
	}
	if err != nil {
		grServerError(ctx, err)
		return
	}
	type count struct {
		ID     string `json:"id"`
		Count  int    `json:"count"`
		Newest string `json:"newestItemTimestampUsec"`
	}
	var counts []count
	labels := map[string]*count{}
	total := count{ID: stateReadingList}
	var newestAll int64
	for _, sub := range subs {
		es, err := a.listEntries(c, u.ID, rs, selection{sources: []string{sub.SourceID}, status: "unread"})
		if err != nil {
			grServerError(ctx, err)
			return
		}
		num, err := a.deps.Reads.FeedNum(c, sub.SourceID)
		if err != nil {
			grServerError(ctx, err)
			return
		}
		var newest int64
		for _, e := range es {
			newest = max(newest, e.Published)
		}
		newestAll = max(newestAll, newest)
		counts = append(counts, count{ID: fmt.Sprint("feed/", num), Count: len(es), Newest: strconv.FormatInt(newest*1000, 10)})
		total.Count += len(es)
		if sub.Folder != readstate.DefaultFolder.ID {
			id := labelPrefix + folders[sub.Folder].Title
			if labels[id] == nil {
				labels[id] = &count{ID: id}
			}
			labels[id].Count += len(es)
		}
	}
	for _, l := range labels {
		counts = append(counts, *l)
	}
	total.Newest = strconv.FormatInt(newestAll*1000, 10)
	counts = append(counts, total)
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{"max": maxScan, "unreadcounts": counts})
}

// Atom streams (FeedHQ, TheOldReader): the same selection as
// stream/contents, as an Atom feed whose entries carry the Google Reader
// categories, read as label="read". Every field is text, escaped once as
// XML, except the content: the summary escaped as HTML, in type="html".

type atomFeed struct {
	XMLName xml.Name    `xml:"http://www.w3.org/2005/Atom feed"`
	ID      string      `xml:"id"`
	Title   string      `xml:"title"`
	Updated string      `xml:"updated"`
	Entries []atomEntry `xml:"entry"`
}

type atomEntry struct {
	ID         string         `xml:"id"`
	Title      atomText       `xml:"title"`
	Published  string         `xml:"published"`
	Updated    string         `xml:"updated"`
	Links      []atomLink     `xml:"link"`
	Categories []atomCategory `xml:"category"`
	Content    atomText       `xml:"content"`
	Author     *atomAuthor    `xml:"author,omitempty"`
}

type atomText struct {
	Type string `xml:"type,attr"`
	Body string `xml:",chardata"`
}

type atomLink struct {
	Rel  string `xml:"rel,attr"`
	Href string `xml:"href,attr"`
	Type string `xml:"type,attr"`
}

type atomCategory struct {
	Term   string `xml:"term,attr"`
	Scheme string `xml:"scheme,attr"`
	Label  string `xml:"label,attr"`
}

type atomAuthor struct {
	Name string `xml:"name"`
}

func (a *API) grAtom(ctx *fasthttp.RequestCtx, u auth.User) {
	stream, _ := ctx.UserValue("stream").(string)
	page, items, _, ok := a.streamItems(ctx, u, stream)
	if !ok {
		return
	}
	feed := atomFeed{ID: "tag:google.com,2005:reader/" + stream, Title: stream, Updated: time.Now().UTC().Format(time.RFC3339)}
	if len(items) > 0 {
		feed.Title = items[0].Origin["title"]
	}
	for i, it := range items {
		at := time.UnixMilli(page[i].Published).UTC().Format(time.RFC3339)
		// The title is text (a reader app would run markup in an html
		// title); the content is the summary as HTML, escaped by items.
		e := atomEntry{ID: it.ID, Title: atomText{Type: "text", Body: it.Title}, Published: at, Updated: at,
			Links: []atomLink{{Rel: "alternate", Href: page[i].URL, Type: "text/html"}}, Content: atomText{Type: "html", Body: it.Summary["content"]}}
		if len(it.Related) > 0 {
			e.Links = append(e.Links, atomLink{Rel: "related", Href: it.Related[0]["href"], Type: "text/html"})
		}
		if page[i].Source != "" {
			e.Author = &atomAuthor{Name: page[i].Source}
		}
		for _, c := range it.Categories {
			e.Categories = append(e.Categories, atomCategory{Term: c, Scheme: "http://www.google.com/reader/", Label: c[strings.LastIndexByte(c, '/')+1:]})
		}
		feed.Entries = append(feed.Entries, e)
	}
	b, err := xml.Marshal(feed)
	if err != nil {
		grServerError(ctx, err)
		return
	}
	// No validators: read and star changes must not hide behind a 304.
	ctx.Response.Header.Set("Cache-Control", "no-store")
	ctx.SetContentType("application/atom+xml; charset=utf-8")
	ctx.SetBody(append([]byte(xml.Header), b...))
}

// grQuickAdd subscribes to a feed URL (quickadd; a feed/ prefix is
// dropped): {numResults: 1, query, streamId, streamName}, or numResults 0
// with the error, as FreshRSS answers.
func (a *API) grQuickAdd(ctx *fasthttp.RequestCtx, u auth.User) {
	feedURL := strings.TrimPrefix(strings.TrimSpace(arg(ctx, "quickadd")), "feed/")
	c, cancel := a.bounded()
	defer cancel()
	fail := func(err error) {
		writeJSON(ctx, fasthttp.StatusOK, map[string]any{"numResults": 0, "query": feedURL, "error": err.Error()})
	}
	if feedURL == "" {
		fail(errors.New("quickadd: a feed URL is required"))
		return
	}
	src, err := a.sourceOf(c, u, feedURL)
	if err != nil {
		fail(err)
		return
	}
	sub, err := a.deps.Reads.Subscription(c, u.ID, src.ID)
	if errors.Is(err, readstate.ErrNotSubscribed) {
		sub, err = a.deps.Reads.Subscribe(c, u.ID, readstate.Subscription{SourceID: src.ID})
	}
	if err != nil {
		grServerError(ctx, err)
		return
	}
	num, err := a.deps.Reads.FeedNum(c, sub.SourceID)
	if err != nil {
		grServerError(ctx, err)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{"numResults": 1, "query": feedURL, "streamId": fmt.Sprint("feed/", num),
		"streamName": cmp.Or(sub.Title, src.Name)})
}

// grEditSubscription is subscription/edit: ac subscribe, unsubscribe or
// edit the feeds s (repeatable: feed/<number> or feed/<url>), with a title
// t, into the folder of label a (created if needed) or out of the folder
// of label r.
func (a *API) grEditSubscription(ctx *fasthttp.RequestCtx, u auth.User) {
	c, cancel := a.bounded()
	defer cancel()
	action := arg(ctx, "ac")
	if action != "subscribe" && action != "unsubscribe" && action != "edit" {
		grBad(ctx, "ac must be subscribe, unsubscribe or edit")
		return
	}
	var folder int64
	if l := arg(ctx, "a"); l != "" {
		name, ok := labelName(l)
		if !ok {
			grBad(ctx, "a must be a label, user/-/label/<name>")
			return
		}
		f, err := a.deps.Reads.FolderByTitle(c, u.ID, name)
		if errors.Is(err, readstate.ErrNoFolder) {
			f, err = a.deps.Reads.AddFolder(c, u.ID, name)
		}
		if err != nil {
			grBad(ctx, err.Error())
			return
		}
		folder = f.ID
	} else if arg(ctx, "r") != "" {
		folder = readstate.DefaultFolder.ID
	}
	titles := args(ctx, "t")
	for i, stream := range args(ctx, "s") {
		src, err := a.streamSource(c, u, stream, action == "subscribe")
		if err != nil {
			grBad(ctx, err.Error())
			return
		}
		old, err := a.deps.Reads.Subscription(c, u.ID, src)
		switch {
		case action == "unsubscribe" && err == nil:
			err = a.deps.Reads.Unsubscribe(c, u.ID, src)
		case action == "unsubscribe", action == "edit" && err != nil:
			grBad(ctx, "not subscribed to "+stream)
			return
		default:
			sub := readstate.Subscription{SourceID: src, Title: old.Title, Folder: old.Folder}
			if i < len(titles) {
				sub.Title = titles[i]
			}
			if folder != 0 {
				sub.Folder = folder
			}
			_, err = a.deps.Reads.Subscribe(c, u.ID, sub)
		}
		if err != nil {
			grServerError(ctx, err)
			return
		}
	}
	grOK(ctx)
}

// labelName returns the name of a label stream id (user/<any>/label/<name>).
func labelName(id string) (string, bool) {
	if !strings.HasPrefix(id, "user/") {
		return "", false
	}
	_, rest, ok := strings.Cut(id[len("user/"):], "/label/")
	return rest, ok && rest != ""
}

// streamSource returns the source of a feed stream: feed/<number> names a
// feed; feed/<url> a feed URL, whose source is added (as the policy
// allows) when add is set.
func (a *API) streamSource(ctx context.Context, u auth.User, stream string, add bool) (string, error) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(stream), "feed/")
	if !ok || rest == "" {
		return "", fmt.Errorf("%q is not a feed stream", stream)
	}
	if num, err := strconv.ParseInt(rest, 10, 64); err == nil {
		src, ok, err := a.deps.Reads.SourceOfFeed(ctx, num)
		if err != nil || !ok {
			return "", fmt.Errorf("no feed %d", num)
		}
		return src, nil
	}
	if !add {
		srcs, err := a.deps.Sources.List(ctx)
		if err != nil {
			return "", err
		}
		for _, s := range srcs {
			if sameFeedURL(s.FeedURL, rest) {
				return s.ID, nil
			}
		}
		return "", fmt.Errorf("no feed %s", rest)
	}
	src, err := a.sourceOf(ctx, u, rest)
	return src.ID, err
}

// itemEntries returns the entries the items i (repeatable, either form)
// name, leaving out those gone; it answers the request and returns false
// on a malformed id or an error.
func (a *API) itemEntries(ctx *fasthttp.RequestCtx, u auth.User) ([]entry, bool) {
	c, cancel := a.bounded()
	defer cancel()
	var es []entry
	for _, raw := range args(ctx, "i") {
		num, ok := parseItemID(raw)
		if !ok {
			grBad(ctx, "invalid item id "+raw)
			return nil, false
		}
		e, err := a.entryByNum(c, u.ID, num)
		if errors.Is(err, errNoEntry) {
			continue
		}
		if err != nil {
			grServerError(ctx, err)
			return nil, false
		}
		es = append(es, e)
	}
	return es, true
}
