package readerapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"github.com/newsflow/newsflow/query/httpkit"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/fasthttp/router"
	"github.com/newsflow/newsflow/crawl"
	"github.com/newsflow/newsflow/internal/meta"
	"github.com/newsflow/newsflow/operators/readstate"
	"github.com/newsflow/newsflow/query/auth"
	"github.com/newsflow/newsflow/state/statetest"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"
	"golang.org/x/crypto/bcrypt"
)

// fakeSources serves fixed sources.
type fakeSources []crawl.Source

func (f fakeSources) Get(_ context.Context, id string) (crawl.Source, error) {
	for _, s := range f {
		if s.ID == id {
			return s, nil
		}
	}
	return crawl.Source{}, crawl.ErrSourceNotFound
}

func (f fakeSources) List(context.Context) ([]crawl.Source, error) { return f, nil }

// apiEnv is the reader APIs over a real metadata store, with two readers
// and their API keys, served on an in-memory listener.
type apiEnv struct {
	t              *testing.T
	client         *fasthttp.Client
	annKey, bobKey string
	ann, bob       auth.User
	sources        fakeSources
}

func newAPIEnv(t *testing.T) *apiEnv { return newAPIEnvWith(t, nil) }

// newAPIEnvWith is newAPIEnv whose deps (reads ready, the readers
// registered) setup may complete before the server starts.
func newAPIEnvWith(t *testing.T, setup func(e *apiEnv, d *Deps)) *apiEnv {
	t.Helper()
	m := meta.NewLocal(statetest.Open(t))
	as, err := auth.NewStore(m, time.Now, auth.Options{BcryptCost: bcrypt.MinCost, AllowWeakCostForTests: true})
	if err != nil {
		t.Fatal(err)
	}
	e := &apiEnv{t: t, sources: fakeSources{
		{ID: "wire", Name: "The Wire", FeedURL: "https://wire.example/feed.xml", Homepage: "https://wire.example/", Status: crawl.StatusActive},
		{ID: "daily", Name: "Daily News", FeedURL: "https://daily.example/rss", Status: crawl.StatusActive},
	}}
	ctx := t.Context()
	if e.ann, err = as.Register(ctx, "ann", "ann's long password"); err != nil {
		t.Fatal(err)
	}
	if e.bob, err = as.Register(ctx, "bob", "bob's long password"); err != nil {
		t.Fatal(err)
	}
	if e.annKey, _, err = as.NewAPIKey(ctx, e.ann.ID, "newsboat"); err != nil {
		t.Fatal(err)
	}
	if e.bobKey, _, err = as.NewAPIKey(ctx, e.bob.ID, "reeder"); err != nil {
		t.Fatal(err)
	}
	d := Deps{Auth: as, Reads: readstate.New(m, nil), Sources: e.sources}
	if setup != nil {
		setup(e, &d)
	}
	r := router.New()
	httpkit.Register(r, New(d).Routes(), nil)
	ln := fasthttputil.NewInmemoryListener()
	srv := &fasthttp.Server{Handler: r.Handler}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	e.client = &fasthttp.Client{Dial: func(string) (net.Conn, error) { return ln.Dial() }}
	return e
}

// call sends a request with header pairs hdr and returns the status, the
// body and the response headers.
func (e *apiEnv) call(method, path, body string, hdr ...string) (int, string, map[string]string) {
	e.t.Helper()
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod(method)
	req.SetRequestURI("http://reader.test" + path)
	if body != "" {
		req.SetBodyString(body)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	if err := e.client.Do(req, resp); err != nil {
		e.t.Fatal(err)
	}
	h := map[string]string{}
	for k, v := range resp.Header.All() {
		h[string(k)] = string(v)
	}
	return resp.StatusCode(), string(resp.Body()), h
}

func token(key string) []string { return []string{"X-Auth-Token", key} }

func basic(user, pass string) []string {
	return []string{"Authorization", "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))}
}

// TestMinifluxAuth: API keys authenticate as X-Auth-Token or as the Basic
// password with their user's name; anything else is 401 with Miniflux's
// error body and a Basic challenge, and the login password is not an API
// key.
func TestMinifluxAuth(t *testing.T) {
	e := newAPIEnv(t)
	for _, hdr := range [][]string{token(e.annKey), basic("ann", e.annKey), basic("ANN", e.annKey)} {
		if code, body, _ := e.call("GET", "/v1/me", "", hdr...); code != 200 || !strings.Contains(body, `"username":"ann"`) {
			t.Errorf("%v: %d %s", hdr, code, body)
		}
	}
	for name, hdr := range map[string][]string{
		"none":               nil,
		"unknown token":      token(strings.Repeat("A", len(e.annKey))),
		"bob's name":         basic("bob", e.annKey),
		"login password":     basic("ann", "ann's long password"),
		"garbage basic":      {"Authorization", "Basic !!!"},
		"bearer":             {"Authorization", "Bearer " + e.annKey},
		"empty basic secret": basic("ann", ""),
	} {
		code, body, h := e.call("GET", "/v1/me", "", hdr...)
		if code != 401 || body != `{"error_message":"access unauthorized"}` || h["Www-Authenticate"] != `Basic realm="Restricted"` {
			t.Errorf("%s: %d %s %v", name, code, body, h)
		}
	}
}

// TestMinifluxMeCategoriesFeeds checks the shapes the Miniflux API
// documentation gives for /v1/me, categories and feeds, and that one
// reader's key never reads or changes another reader's subscriptions.
func TestMinifluxMeCategoriesFeeds(t *testing.T) {
	e := newAPIEnv(t)
	ann := token(e.annKey)
	code, body, h := e.call("GET", "/v1/me", "", ann...)
	var me map[string]any
	if code != 200 || json.Unmarshal([]byte(body), &me) != nil || !strings.HasPrefix(h["Content-Type"], "application/json") {
		t.Fatalf("me: %d %s", code, body)
	}
	for field, kind := range map[string]string{"id": "float64", "username": "string", "is_admin": "bool", "theme": "string",
		"language": "string", "timezone": "string", "entry_sorting_direction": "string", "entries_per_page": "float64"} {
		if got := fmt.Sprintf("%T", me[field]); got != kind {
			t.Errorf("me.%s is %s, want %s: %s", field, got, kind, body)
		}
	}

	code, body, _ = e.call("GET", "/v1/categories", "", ann...)
	if want := fmt.Sprintf(`[{"id":1,"title":"All","user_id":%d,"hide_globally":false}]`, userNum(e.ann.ID)); code != 200 || body != want {
		t.Fatalf("categories: %d %s, want %s", code, body, want)
	}
	code, body, _ = e.call("POST", "/v1/categories", `{"title":"Tech"}`, ann...)
	var tech mfCategory
	if code != 201 || json.Unmarshal([]byte(body), &tech) != nil || tech.ID != 2 || tech.Title != "Tech" {
		t.Fatalf("create category: %d %s", code, body)
	}
	for _, bad := range []string{`{"title":"tech"}`, `{"title":""}`, `not json`} {
		if code, body, _ := e.call("POST", "/v1/categories", bad, ann...); code != 400 || !strings.Contains(body, `"error_message"`) {
			t.Errorf("create category %s: %d %s", bad, code, body)
		}
	}

	// Subscribing: 201 {"feed_id"}; the feed URL as typed, any case of
	// host, a trailing slash.
	code, body, _ = e.call("POST", "/v1/feeds", `{"feed_url":"https://WIRE.example/feed.xml/","category_id":2}`, ann...)
	var created struct {
		FeedID int64 `json:"feed_id"`
	}
	if code != 201 || json.Unmarshal([]byte(body), &created) != nil || created.FeedID <= 0 {
		t.Fatalf("create feed: %d %s", code, body)
	}
	for _, c := range []struct{ body, want string }{
		{`{"feed_url":"https://wire.example/feed.xml","category_id":2}`, "This feed already exists."},
		{`{"feed_url":"https://daily.example/rss","category_id":7}`, "category does not exist"},
		{`{"category_id":1}`, "feed URL is required"},
	} {
		if code, body, _ := e.call("POST", "/v1/feeds", c.body, ann...); code != 400 || !strings.Contains(body, c.want) {
			t.Errorf("create feed %s: %d %s", c.body, code, body)
		}
	}
	// Without a policy that lets readers add sources, a URL no source has
	// is refused.
	if code, body, _ := e.call("POST", "/v1/feeds", `{"feed_url":"https://nowhere.example/feed"}`, ann...); code != 403 || !strings.Contains(body, "ask an admin") {
		t.Errorf("create a feed no source has: %d %s", code, body)
	}
	code, body, _ = e.call("GET", "/v1/feeds", "", ann...)
	var feeds []mfFeed
	if code != 200 || json.Unmarshal([]byte(body), &feeds) != nil || len(feeds) != 1 {
		t.Fatalf("feeds: %d %s", code, body)
	}
	f := feeds[0]
	if f.ID != created.FeedID || f.Title != "The Wire" || f.FeedURL != "https://wire.example/feed.xml" || f.SiteURL != "https://wire.example/" ||
		f.Category.ID != 2 || f.Category.Title != "Tech" || f.UserID != userNum(e.ann.ID) {
		t.Errorf("feed %+v", f)
	}
	for _, field := range []string{`"checked_at":"1970-01-01T00:00:00Z"`, `"parsing_error_count":0`, `"icon":null`, `"disabled":false`} {
		if !strings.Contains(body, field) {
			t.Errorf("feeds lack %s: %s", field, body)
		}
	}
	feedPath := fmt.Sprint("/v1/feeds/", created.FeedID)
	if code, body, _ := e.call("GET", feedPath, "", ann...); code != 200 || !strings.Contains(body, `"title":"The Wire"`) {
		t.Errorf("feed: %d %s", code, body)
	}

	// Bob sees none of it and can change none of it.
	bob := token(e.bobKey)
	if code, body, _ := e.call("GET", "/v1/feeds", "", bob...); code != 200 || body != "[]" {
		t.Errorf("bob's feeds: %d %s", code, body)
	}
	if code, body, _ := e.call("GET", "/v1/categories", "", bob...); code != 200 || strings.Contains(body, "Tech") {
		t.Errorf("bob's categories: %d %s", code, body)
	}
	for _, m := range []string{"GET", "DELETE"} {
		if code, body, _ := e.call(m, feedPath, "", bob...); code != 404 || body != `{"error_message":"resource not found"}` {
			t.Errorf("bob %s ann's feed: %d %s", m, code, body)
		}
	}
	if code, _, _ := e.call("GET", "/v1/feeds/abc", "", ann...); code != 400 {
		t.Errorf("feed id abc: %d", code)
	}
	if code, _, _ := e.call("DELETE", feedPath, "", ann...); code != 204 {
		t.Errorf("unsubscribe: %d", code)
	}
	if code, _, _ := e.call("GET", feedPath, "", ann...); code != 404 {
		t.Errorf("after unsubscribing: %d", code)
	}
}
