package readerapi

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"github.com/newsflow/newsflow/query/httpkit"
	"strconv"
	"strings"
	"time"

	"github.com/newsflow/newsflow/crawl"
	"github.com/newsflow/newsflow/operators/readstate"
	"github.com/newsflow/newsflow/query/auth"
	"github.com/valyala/fasthttp"
)

// The Miniflux v1 API (https://miniflux.app/docs/api.html), the subset
// its clients use. Errors are {"error_message": ...}, as Miniflux writes
// them; ids are integers; times are RFC 3339.

// minifluxRoutes are the Miniflux API's routes; the entries need the
// story view and search.
func (a *API) minifluxRoutes() []httpkit.Route {
	routes := []httpkit.Route{
		{Method: "GET", Path: "/v1/me", Name: "miniflux_me", Handler: a.minifluxAuth(a.mfMe), Doc: httpkit.Doc{Tag: "miniflux", Auth: "apikey", Summary: "Miniflux API: the reader (id, username, is_admin, display settings)", OK: 200, OKSchema: "Object", Errs: []int{401}}},
		{Method: "GET", Path: "/v1/categories", Name: "miniflux_categories", Handler: a.minifluxAuth(a.mfCategories), Doc: httpkit.Doc{Tag: "miniflux", Auth: "apikey", Summary: "Miniflux API: the reader's folders as categories ({id, title, user_id, hide_globally}; 1 is \"All\")", OK: 200, OKSchema: "Object", Errs: []int{401}}},
		{Method: "POST", Path: "/v1/categories", Name: "miniflux_category_create", Handler: a.minifluxAuth(a.mfCreateCategory), Doc: httpkit.Doc{Tag: "miniflux", Auth: "apikey", Summary: "Miniflux API: create a category ({\"title\"})", Body: "Object", OK: 201, OKSchema: "Object", Errs: []int{400, 401}}},
		{Method: "GET", Path: "/v1/feeds", Name: "miniflux_feeds", Handler: a.minifluxAuth(a.mfFeeds), Doc: httpkit.Doc{Tag: "miniflux", Auth: "apikey", Summary: "Miniflux API: the reader's subscriptions as feeds", OK: 200, OKSchema: "Object", Errs: []int{401}}},
		{Method: "POST", Path: "/v1/feeds", Name: "miniflux_feed_create", Handler: a.minifluxAuth(a.mfCreateFeed), Doc: httpkit.Doc{Tag: "miniflux", Auth: "apikey", Summary: "Miniflux API: subscribe to the source of a feed URL ({\"feed_url\", \"category_id\"}; 201 {\"feed_id\"}); a URL no source has is added when auth.readers_add_sources allows (or for an admin), checked as an admin's addition is, else 403", Body: "Object", OK: 201, OKSchema: "Object", Errs: []int{400, 401, 403}}},
		{Method: "GET", Path: "/v1/feeds/{id}", Name: "miniflux_feed", Handler: a.minifluxAuth(a.mfFeed), Doc: httpkit.Doc{Tag: "miniflux", Auth: "apikey", Summary: "Miniflux API: one subscribed feed", OK: 200, OKSchema: "Object", Errs: []int{400, 401, 404}}},
		{Method: "DELETE", Path: "/v1/feeds/{id}", Name: "miniflux_feed_delete", Handler: a.minifluxAuth(a.mfDeleteFeed), Doc: httpkit.Doc{Tag: "miniflux", Auth: "apikey", Summary: "Miniflux API: unsubscribe", OK: 204, Errs: []int{400, 401, 404}}},
	}
	if a.deps.Stories == nil || a.deps.Search == nil {
		return routes
	}
	return append(routes, []httpkit.Route{
		{Method: "GET", Path: "/v1/entries", Name: "miniflux_entries", Handler: a.minifluxAuth(a.mfEntries), Doc: httpkit.Doc{Tag: "miniflux", Auth: "apikey", Summary: "Miniflux API: entries of the reader's subscriptions (feed_id or category_id to narrow), newest 2,000 of the selection at most: status (read, unread; repeatable), starred, after/before and published_after/published_before (unix s), after_entry_id/before_entry_id, order (published_at, id), direction (asc, default, or desc), limit (default 100), offset; {total, entries}", OK: 200, OKSchema: "Object", Errs: []int{400, 401, 404}}},
		{Method: "PUT", Path: "/v1/entries", Name: "miniflux_entries_update", Handler: a.minifluxAuth(a.mfUpdateEntries), Doc: httpkit.Doc{Tag: "miniflux", Auth: "apikey", Summary: "Miniflux API: set the status (read, unread) and/or starred of entries ({\"entry_ids\": [...], \"status\", \"starred\"}; the body is read as JSON whatever its Content-Type)", Body: "Object", OK: 204, Errs: []int{400, 401}}},
		{Method: "GET", Path: "/v1/entries/{entry}", Name: "miniflux_entry", Handler: a.minifluxAuth(a.mfEntry), Doc: httpkit.Doc{Tag: "miniflux", Auth: "apikey", Summary: "Miniflux API: one entry", OK: 200, OKSchema: "Object", Errs: []int{400, 401, 404}}},
		{Method: "PUT", Path: "/v1/entries/{entry}/bookmark", Name: "miniflux_entry_bookmark", Handler: a.minifluxAuth(a.mfToggleBookmark), Doc: httpkit.Doc{Tag: "miniflux", Auth: "apikey", Summary: "Miniflux API: toggle an entry's star", OK: 204, Errs: []int{400, 401, 404}}},
		{Method: "PUT", Path: "/v1/entries/{entry}/star", Name: "miniflux_entry_bookmark", Handler: a.minifluxAuth(a.mfToggleBookmark), Doc: httpkit.Doc{Tag: "miniflux", Auth: "apikey", Summary: "Miniflux API: toggle an entry's star (the newer name of bookmark)", OK: 204, Errs: []int{400, 401, 404}}}, // its newer name
		{Method: "GET", Path: "/v1/feeds/{id}/entries", Name: "miniflux_feed_entries", Handler: a.minifluxAuth(a.mfFeedEntries), Doc: httpkit.Doc{Tag: "miniflux", Auth: "apikey", Summary: "Miniflux API: the entries of one subscribed feed (the filters of /v1/entries)", OK: 200, OKSchema: "Object", Errs: []int{400, 401, 404}}},
		{Method: "GET", Path: "/v1/feeds/{id}/entries/{entry}", Name: "miniflux_feed_entry", Handler: a.minifluxAuth(a.mfEntry), Doc: httpkit.Doc{Tag: "miniflux", Auth: "apikey", Summary: "Miniflux API: one entry", OK: 200, OKSchema: "Object", Errs: []int{400, 401, 404}}},
		{Method: "PUT", Path: "/v1/feeds/{id}/mark-all-as-read", Name: "miniflux_feed_mark_read", Handler: a.minifluxAuth(a.mfMarkFeedRead), Doc: httpkit.Doc{Tag: "miniflux", Auth: "apikey", Summary: "Miniflux API: mark everything of a feed published until now read", OK: 204, Errs: []int{400, 401, 404}}},
		{Method: "GET", Path: "/v1/categories/{id}/entries", Name: "miniflux_category_entries", Handler: a.minifluxAuth(a.mfCategoryEntries), Doc: httpkit.Doc{Tag: "miniflux", Auth: "apikey", Summary: "Miniflux API: the entries of the feeds in one category (the filters of /v1/entries)", OK: 200, OKSchema: "Object", Errs: []int{400, 401, 404}}},
		{Method: "GET", Path: "/v1/feeds/counters", Name: "miniflux_feed_counters", Handler: a.minifluxAuth(a.mfCounters), Doc: httpkit.Doc{Tag: "miniflux", Auth: "apikey", Summary: "Miniflux API: read and unread entries per subscribed feed ({\"reads\": {feed id: n}, \"unreads\": {...}}, counts that are not zero)", OK: 200, OKSchema: "Object", Errs: []int{401}}},
	}...)
}

func mfError(ctx *fasthttp.RequestCtx, status int, msg string) {
	writeJSON(ctx, status, map[string]string{"error_message": msg})
}

// minifluxAuth authenticates a request with one of the reader's API keys:
// X-Auth-Token, else the password of HTTP Basic auth (with its username).
func (a *API) minifluxAuth(h func(*fasthttp.RequestCtx, auth.User)) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		username, secret := "", string(ctx.Request.Header.Peek("X-Auth-Token"))
		if secret == "" {
			var ok bool
			if username, secret, ok = basicAuth(ctx); !ok {
				username, secret = "", ""
			}
		}
		if secret == "" {
			ctx.Response.Header.Set("WWW-Authenticate", `Basic realm="Restricted"`)
			mfError(ctx, fasthttp.StatusUnauthorized, "access unauthorized")
			return
		}
		bctx, cancel := a.bounded()
		defer cancel()
		_, u, err := a.deps.Auth.LookupAPIKey(bctx, username, secret)
		switch {
		case errors.Is(err, auth.ErrNoAPIKey):
			ctx.Response.Header.Set("WWW-Authenticate", `Basic realm="Restricted"`)
			mfError(ctx, fasthttp.StatusUnauthorized, "access unauthorized")
		case err != nil:
			mfServerError(ctx, err)
		default:
			h(ctx, u)
		}
	}
}

// basicAuth returns the username and password of an Authorization: Basic
// header.
func basicAuth(ctx *fasthttp.RequestCtx) (string, string, bool) {
	const prefix = "basic "
	h := string(ctx.Request.Header.Peek(fasthttp.HeaderAuthorization))
	if len(h) < len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return "", "", false
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(h[len(prefix):]))
	if err != nil {
		return "", "", false
	}
	user, pass, ok := strings.Cut(string(raw), ":")
	return user, pass, ok
}

// mfUser is GET /v1/me.
type mfUser struct {
	ID                     int64  `json:"id"`
	Username               string `json:"username"`
	IsAdmin                bool   `json:"is_admin"`
	Theme                  string `json:"theme"`
	Language               string `json:"language"`
	Timezone               string `json:"timezone"`
	EntrySortingDirection  string `json:"entry_sorting_direction"`
	EntrySortingOrder      string `json:"entry_sorting_order"`
	EntriesPerPage         int    `json:"entries_per_page"`
	KeyboardShortcuts      bool   `json:"keyboard_shortcuts"`
	ShowReadingTime        bool   `json:"show_reading_time"`
	EntrySwipe             bool   `json:"entry_swipe"`
	StyleSheet             string `json:"stylesheet"`
	GoogleID               string `json:"google_id"`
	OpenIDConnectID        string `json:"openid_connect_id"`
	DisplayMode            string `json:"display_mode"`
	DefaultReadingSpeed    int    `json:"default_reading_speed"`
	CJKReadingSpeed        int    `json:"cjk_reading_speed"`
	DefaultHomePage        string `json:"default_home_page"`
	CategoriesSortingOrder string `json:"categories_sorting_order"`
	MarkReadOnView         bool   `json:"mark_read_on_view"`
	LastLoginAt            string `json:"last_login_at"`
}

func (a *API) mfMe(ctx *fasthttp.RequestCtx, u auth.User) {
	writeJSON(ctx, fasthttp.StatusOK, mfUser{
		ID: userNum(u.ID), Username: u.Username, IsAdmin: u.Role == auth.RoleAdmin,
		Theme: "system_serif", Language: "en_US", Timezone: "UTC",
		EntrySortingDirection: "desc", EntrySortingOrder: "published_at", EntriesPerPage: 100,
		KeyboardShortcuts: true, DisplayMode: "standalone", DefaultReadingSpeed: 265, CJKReadingSpeed: 500,
		DefaultHomePage: "unread", CategoriesSortingOrder: "unread_count", MarkReadOnView: true,
		LastLoginAt: time.Now().UTC().Format(time.RFC3339),
	})
}

// mfCategory is a Miniflux category: one of the reader's folders.
type mfCategory struct {
	ID           int64  `json:"id"`
	Title        string `json:"title"`
	UserID       int64  `json:"user_id"`
	HideGlobally bool   `json:"hide_globally"`
}

func categoryOf(u auth.User, f readstate.Folder) mfCategory {
	return mfCategory{ID: f.ID, Title: f.Title, UserID: userNum(u.ID)}
}

func (a *API) mfCategories(ctx *fasthttp.RequestCtx, u auth.User) {
	bctx, cancel := a.bounded()
	defer cancel()
	folders, err := a.deps.Reads.Folders(bctx, u.ID)
	if err != nil {
		mfServerError(ctx, err)
		return
	}
	out := make([]mfCategory, len(folders))
	for i, f := range folders {
		out[i] = categoryOf(u, f)
	}
	writeJSON(ctx, fasthttp.StatusOK, out)
}

func (a *API) mfCreateCategory(ctx *fasthttp.RequestCtx, u auth.User) {
	var req struct {
		Title string `json:"title"`
	}
	if err := json.Unmarshal(ctx.PostBody(), &req); err != nil {
		mfError(ctx, fasthttp.StatusBadRequest, "invalid JSON body: "+err.Error())
		return
	}
	bctx, cancel := a.bounded()
	defer cancel()
	f, err := a.deps.Reads.AddFolder(bctx, u.ID, req.Title)
	switch {
	case errors.Is(err, readstate.ErrFolderExists):
		mfError(ctx, fasthttp.StatusBadRequest, "This category already exists.")
	case errors.Is(err, readstate.ErrInvalidFolderName), errors.Is(err, readstate.ErrTooMany):
		mfError(ctx, fasthttp.StatusBadRequest, err.Error())
	case err != nil:
		mfServerError(ctx, err)
	default:
		writeJSON(ctx, fasthttp.StatusCreated, categoryOf(u, f))
	}
}

// mfFeed is a Miniflux feed: a subscribed source.
type mfFeed struct {
	ID                  int64      `json:"id"`
	UserID              int64      `json:"user_id"`
	FeedURL             string     `json:"feed_url"`
	SiteURL             string     `json:"site_url"`
	Title               string     `json:"title"`
	CheckedAt           string     `json:"checked_at"`
	NextCheckAt         string     `json:"next_check_at"`
	EtagHeader          string     `json:"etag_header"`
	LastModifiedHeader  string     `json:"last_modified_header"`
	ParsingErrorMessage string     `json:"parsing_error_message"`
	ParsingErrorCount   int        `json:"parsing_error_count"`
	Disabled            bool       `json:"disabled"`
	HideGlobally        bool       `json:"hide_globally"`
	Crawler             bool       `json:"crawler"`
	Category            mfCategory `json:"category"`
	Icon                *struct{}  `json:"icon"`
	ScraperRules        string     `json:"scraper_rules"`
	RewriteRules        string     `json:"rewrite_rules"`
	BlocklistRules      string     `json:"blocklist_rules"`
	KeeplistRules       string     `json:"keeplist_rules"`
	UserAgent           string     `json:"user_agent"`
	Username            string     `json:"username"`
	Password            string     `json:"password"`
	IgnoreHTTPCache     bool       `json:"ignore_http_cache"`
	FetchViaProxy       bool       `json:"fetch_via_proxy"`
	AllowSelfSigned     bool       `json:"allow_self_signed_certificates"`
	Description         string     `json:"description"`
}

// rfc3339 writes a time as Miniflux does (UTC, seconds; a zero time as
// the epoch, never an empty string a client would fail to parse).
func rfc3339(t time.Time) string {
	if t.IsZero() {
		t = time.Unix(0, 0)
	}
	return t.UTC().Format(time.RFC3339)
}

// feedOf describes a subscription as a Miniflux feed.
func (a *API) feedOf(ctx context.Context, u auth.User, sub readstate.Subscription, folders map[int64]readstate.Folder) (mfFeed, error) {
	num, err := a.deps.Reads.FeedNum(ctx, sub.SourceID)
	if err != nil {
		return mfFeed{}, err
	}
	f := mfFeed{ID: num, UserID: userNum(u.ID), Title: sub.SourceID, Category: categoryOf(u, folders[sub.Folder])}
	src, err := a.deps.Sources.Get(ctx, sub.SourceID)
	switch {
	case errors.Is(err, crawl.ErrSourceNotFound):
		// A source deleted since: the subscription stays, with its id.
		f.Disabled, f.ParsingErrorMessage = true, "the source was removed"
	case err != nil:
		return mfFeed{}, err
	default:
		f.FeedURL, f.SiteURL, f.Title = src.FeedURL, src.Homepage, src.Name
		f.CheckedAt, f.NextCheckAt = rfc3339(src.Crawl.LastCrawl), rfc3339(src.Crawl.NextCrawl)
		f.Disabled = src.Status != crawl.StatusActive
		f.ParsingErrorMessage = cmp.Or(src.StatusReason, src.Crawl.LastError)
		f.ParsingErrorCount = src.Crawl.ConsecutiveErrors
	}
	if sub.Title != "" {
		f.Title = sub.Title
	}
	if f.Title == "" {
		f.Title = f.FeedURL
	}
	if f.Category.Title == "" {
		f.Category = categoryOf(u, readstate.DefaultFolder)
	}
	return f, nil
}

// subsAndFolders returns the reader's subscriptions and folders by id.
func (a *API) subsAndFolders(ctx context.Context, u auth.User) ([]readstate.Subscription, map[int64]readstate.Folder, error) {
	subs, err := a.deps.Reads.Subscriptions(ctx, u.ID)
	if err != nil {
		return nil, nil, err
	}
	folders, err := a.folderMap(ctx, u)
	return subs, folders, err
}

// folderMap returns the reader's folders by id.
func (a *API) folderMap(ctx context.Context, u auth.User) (map[int64]readstate.Folder, error) {
	folders, err := a.deps.Reads.Folders(ctx, u.ID)
	if err != nil {
		return nil, err
	}
	m := make(map[int64]readstate.Folder, len(folders))
	for _, f := range folders {
		m[f.ID] = f
	}
	return m, nil
}

func (a *API) mfFeeds(ctx *fasthttp.RequestCtx, u auth.User) {
	c, cancel := a.bounded()
	defer cancel()
	subs, folders, err := a.subsAndFolders(c, u)
	if err != nil {
		mfServerError(ctx, err)
		return
	}
	out := make([]mfFeed, 0, len(subs))
	for _, sub := range subs {
		f, err := a.feedOf(c, u, sub, folders)
		if err != nil {
			mfServerError(ctx, err)
			return
		}
		out = append(out, f)
	}
	writeJSON(ctx, fasthttp.StatusOK, out)
}

// subscribedFeed returns the reader's subscription the {id} path
// parameter names; it answers 404 and returns false when there is none.
func (a *API) subscribedFeed(ctx *fasthttp.RequestCtx, u auth.User) (readstate.Subscription, bool) {
	raw, _ := ctx.UserValue("id").(string)
	return a.subscription(ctx, u, raw)
}

// subscription is subscribedFeed for the feed number raw.
func (a *API) subscription(ctx *fasthttp.RequestCtx, u auth.User, raw string) (readstate.Subscription, bool) {
	num, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || num <= 0 {
		mfError(ctx, fasthttp.StatusBadRequest, "invalid feed id")
		return readstate.Subscription{}, false
	}
	c, cancel := a.bounded()
	defer cancel()
	src, ok, err := a.deps.Reads.SourceOfFeed(c, num)
	if err == nil && ok {
		var sub readstate.Subscription
		if sub, err = a.deps.Reads.Subscription(c, u.ID, src); err == nil {
			return sub, true
		}
	}
	if err != nil && !errors.Is(err, readstate.ErrNotSubscribed) {
		mfServerError(ctx, err)
		return readstate.Subscription{}, false
	}
	mfError(ctx, fasthttp.StatusNotFound, "resource not found")
	return readstate.Subscription{}, false
}

func (a *API) mfFeed(ctx *fasthttp.RequestCtx, u auth.User) {
	sub, ok := a.subscribedFeed(ctx, u)
	if !ok {
		return
	}
	c, cancel := a.bounded()
	defer cancel()
	folders, err := a.folderMap(c, u)
	if err == nil {
		var f mfFeed
		if f, err = a.feedOf(c, u, sub, folders); err == nil {
			writeJSON(ctx, fasthttp.StatusOK, f)
			return
		}
	}
	mfServerError(ctx, err)
}

func (a *API) mfDeleteFeed(ctx *fasthttp.RequestCtx, u auth.User) {
	sub, ok := a.subscribedFeed(ctx, u)
	if !ok {
		return
	}
	bctx, cancel := a.bounded()
	defer cancel()
	if err := a.deps.Reads.Unsubscribe(bctx, u.ID, sub.SourceID); err != nil {
		mfServerError(ctx, err)
		return
	}
	ctx.SetStatusCode(fasthttp.StatusNoContent)
}

// mfCreateFeed subscribes the reader to the source of a feed URL: POST
// /v1/feeds {"feed_url", "category_id"}, 201 {"feed_id"}. A URL no source
// has becomes a source when the node's policy lets the reader add one.
func (a *API) mfCreateFeed(ctx *fasthttp.RequestCtx, u auth.User) {
	var req struct {
		FeedURL    string `json:"feed_url"`
		CategoryID int64  `json:"category_id"`
	}
	if err := json.Unmarshal(ctx.PostBody(), &req); err != nil || strings.TrimSpace(req.FeedURL) == "" {
		mfError(ctx, fasthttp.StatusBadRequest, "the feed URL is required (a JSON body with feed_url)")
		return
	}
	c, cancel := a.bounded()
	defer cancel()
	if req.CategoryID != 0 {
		if _, err := a.deps.Reads.Folder(c, u.ID, req.CategoryID); err != nil {
			mfError(ctx, fasthttp.StatusBadRequest, "this category does not exist or does not belong to this user")
			return
		}
	}
	src, err := a.sourceOf(c, u, req.FeedURL)
	switch {
	case errors.Is(err, ErrMayNotAddSources):
		mfError(ctx, fasthttp.StatusForbidden, err.Error())
		return
	case errors.Is(err, ErrSourceRefused):
		mfError(ctx, fasthttp.StatusBadRequest, err.Error())
		return
	case err != nil:
		mfServerError(ctx, err)
		return
	}
	if _, err := a.deps.Reads.Subscription(c, u.ID, src.ID); err == nil {
		mfError(ctx, fasthttp.StatusBadRequest, "This feed already exists.")
		return
	}
	if _, err := a.deps.Reads.Subscribe(c, u.ID, readstate.Subscription{SourceID: src.ID, Folder: req.CategoryID}); err != nil {
		mfServerError(ctx, err)
		return
	}
	num, err := a.deps.Reads.FeedNum(c, src.ID)
	if err != nil {
		mfServerError(ctx, err)
		return
	}
	writeJSON(ctx, fasthttp.StatusCreated, map[string]int64{"feed_id": num})
}

// sourceOf returns the source whose feed URL is feedURL, adding it when
// there is none (AddSource decides whether the reader may).
func (a *API) sourceOf(ctx context.Context, u auth.User, feedURL string) (crawl.Source, error) {
	srcs, err := a.deps.Sources.List(ctx)
	if err != nil {
		return crawl.Source{}, err
	}
	for _, s := range srcs {
		if sameFeedURL(s.FeedURL, feedURL) {
			return s, nil
		}
	}
	if a.deps.AddSource == nil {
		return crawl.Source{}, ErrMayNotAddSources
	}
	return a.deps.AddSource(ctx, u, strings.TrimSpace(feedURL))
}

// sameFeedURL compares feed URLs as a reader types them: scheme and host
// without regard to case, a trailing slash ignored.
func sameFeedURL(a, b string) bool {
	norm := func(s string) string {
		s = strings.TrimSuffix(strings.TrimSpace(s), "/")
		if i := strings.Index(s, "://"); i >= 0 {
			if j := strings.IndexByte(s[i+3:], '/'); j >= 0 {
				return strings.ToLower(s[:i+3+j]) + s[i+3+j:]
			}
			return strings.ToLower(s)
		}
		return s
	}
	return norm(a) == norm(b)
}
