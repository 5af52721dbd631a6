package query_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/crawl"
	"github.com/newsflow/newsflow/internal/fetch"
	"github.com/newsflow/newsflow/query"
	"github.com/newsflow/newsflow/query/auth"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
)

// minifluxEntries is the answer of a Miniflux entry listing.
type minifluxEntries struct {
	Total   int `json:"total"`
	Entries []struct {
		ID          int64    `json:"id"`
		FeedID      int64    `json:"feed_id"`
		Status      string   `json:"status"`
		Title       string   `json:"title"`
		URL         string   `json:"url"`
		PublishedAt string   `json:"published_at"`
		Starred     bool     `json:"starred"`
		Hash        string   `json:"hash"`
		CommentsURL string   `json:"comments_url"`
		Tags        []string `json:"tags"`
		Feed        struct {
			ID    int64  `json:"id"`
			Title string `json:"title"`
		} `json:"feed"`
	} `json:"entries"`
}

// TestMinifluxEntries drives the Miniflux API as its clients do, over a
// node's real pipeline: a reader subscribes to two sources with an API
// key, lists entries (newsboat's request among them), marks one read with
// newsboat's body (JSON sent as a form), stars one, counts, marks a feed
// read; the web reader shows the same state, and another reader's key
// changes none of it.
func TestMinifluxEntries(t *testing.T) {
	n := newTestNode(t, withArticles())
	ctx := t.Context()
	var srcs []crawl.Source
	for _, s := range []struct{ url, name string }{{"https://wire.example/feed.xml", "The Wire"}, {"https://daily.example/rss", "Daily"}} {
		src, err := n.sources.Add(ctx, crawl.Source{FeedURL: s.url, Name: s.name, Status: crawl.StatusPaused})
		if err != nil {
			t.Fatal(err)
		}
		srcs = append(srcs, src)
	}
	arts := []fixtureArticle{
		{"quake", "https://wire.example/quake", srcs[0].ID, "Strong earthquake shakes Lisbon", "A magnitude 6.8 earthquake struck near Lisbon.", 0},
		{"rates", "https://wire.example/rates", srcs[0].ID, "Central bank raises interest rates", "Rates rise a quarter point.", 5},
		{"chips", "https://wire.example/chips", srcs[0].ID, "Chipmaker unveils faster processor", "The new chip doubles speed.", 10},
		{"quake", "https://daily.example/lisbon", srcs[1].ID, "Lisbon earthquake damages buildings", "Residents fled into the streets.", 3},
		{"match", "https://daily.example/cup", srcs[1].ID, "Striker scores twice in cup final", "A late goal decided the match.", 8},
	}
	ingestFixture(t, n, arts)
	ann := login(t, n, "/api/v1/auth/register", "ann", "correct horse battery")
	bob := login(t, n, "/api/v1/auth/register", "bob", "another good password")
	key := func(session string) []string {
		r := n.do(t, "POST", "/api/v1/me/api-keys", []byte(`{"name":"newsboat"}`), bearer(session)...)
		var k struct{ Secret string }
		if r.status != 201 || json.Unmarshal(r.body, &k) != nil {
			t.Fatalf("api key: %s", r)
		}
		return []string{"X-Auth-Token", k.Secret}
	}
	annKey, bobKey := key(ann), key(bob)
	call := func(hdr []string, method, path, body string, extra ...string) response {
		t.Helper()
		var b []byte
		if body != "" {
			b = []byte(body)
		}
		return n.do(t, method, path, b, append(append([]string{}, hdr...), extra...)...)
	}
	var feedIDs []int64
	for _, src := range srcs {
		r := call(annKey, "POST", "/v1/feeds", fmt.Sprintf(`{"feed_url":%q,"category_id":1}`, src.FeedURL))
		var c struct {
			FeedID int64 `json:"feed_id"`
		}
		if r.status != 201 || json.Unmarshal(r.body, &c) != nil {
			t.Fatalf("subscribe: %s", r)
		}
		feedIDs = append(feedIDs, c.FeedID)
	}
	list := func(hdr []string, path string) minifluxEntries {
		t.Helper()
		r := call(hdr, "GET", path, "")
		var l minifluxEntries
		if r.status != 200 || json.Unmarshal(r.body, &l) != nil {
			t.Fatalf("%s: %s", path, r)
		}
		return l
	}
	// newsboat's request: one feed, newest first.
	wire := list(annKey, fmt.Sprintf("/v1/feeds/%d/entries?order=published_at&direction=desc", feedIDs[0]))
	if wire.Total != 3 || len(wire.Entries) != 3 || wire.Entries[0].Title != "Chipmaker unveils faster processor" ||
		wire.Entries[2].Title != "Strong earthquake shakes Lisbon" {
		t.Fatalf("wire entries: %+v", wire)
	}
	for _, e := range wire.Entries {
		if e.Status != "unread" || e.FeedID != feedIDs[0] || e.Feed.Title != "The Wire" || !strings.HasSuffix(e.PublishedAt, "Z") {
			t.Errorf("entry %+v", e)
		}
	}
	// The default direction is ascending; limit and offset page.
	all := list(annKey, "/v1/entries?status=unread")
	if all.Total != 5 || all.Entries[0].Title != "Strong earthquake shakes Lisbon" || all.Entries[4].Title != "Chipmaker unveils faster processor" {
		t.Fatalf("all unread: %+v", all)
	}
	if page := list(annKey, "/v1/entries?limit=2&offset=2&direction=desc"); page.Total != 5 || len(page.Entries) != 2 || page.Entries[0].ID != all.Entries[2].ID {
		t.Errorf("page 2: %+v", page)
	}
	read, starred := wire.Entries[2], wire.Entries[1] // the earthquake; the rates

	// newsboat marks read with a JSON body labelled as a form.
	if r := call(annKey, "PUT", "/v1/entries", fmt.Sprintf(`{"entry_ids":[%d],"status":"read"}`, read.ID),
		"Content-Type", "application/x-www-form-urlencoded"); r.status != fasthttp.StatusNoContent {
		t.Fatalf("mark read: %s", r)
	}
	if r := call(annKey, "PUT", fmt.Sprintf("/v1/entries/%d/bookmark", starred.ID), ""); r.status != fasthttp.StatusNoContent {
		t.Fatalf("bookmark: %s", r)
	}
	if got := list(annKey, "/v1/entries?status=unread"); got.Total != 4 {
		t.Errorf("unread after marking one: %d", got.Total)
	}
	if got := list(annKey, "/v1/entries?starred=true"); got.Total != 1 || got.Entries[0].ID != starred.ID || !got.Entries[0].Starred {
		t.Errorf("starred: %+v", got)
	}
	r := call(annKey, "GET", fmt.Sprintf("/v1/entries/%d", read.ID), "")
	if r.status != 200 || !strings.Contains(string(r.body), `"status":"read"`) {
		t.Errorf("entry: %s", r)
	}
	r = call(annKey, "GET", "/v1/feeds/counters", "")
	if want := fmt.Sprintf(`{"reads":{"%d":1},"unreads":{"%d":2,"%d":2}}`, feedIDs[0], feedIDs[0], feedIDs[1]); r.status != 200 || string(r.body) != want {
		t.Errorf("counters: %s, want %s", r, want)
	}

	// The web reader shows the same state.
	var detail struct {
		Articles []struct {
			ID      string `json:"id"`
			Read    *bool  `json:"read"`
			Starred *bool  `json:"starred"`
		} `json:"articles"`
	}
	for _, st := range allStories(t, n) {
		rs := n.do(t, "GET", "/api/v1/stories/"+st.ID, nil, bearer(ann)...)
		if json.Unmarshal(rs.body, &detail) != nil {
			t.Fatal(rs)
		}
		for _, a := range detail.Articles {
			switch a.ID {
			case read.Hash:
				if a.Read == nil || !*a.Read {
					t.Errorf("the web reader shows %s unread", a.ID)
				}
			case starred.Hash:
				if a.Starred == nil || !*a.Starred || *a.Read {
					t.Errorf("the web reader shows %s not starred, or read", a.ID)
				}
			}
			// Each entry names the story its article is in.
			for _, e := range all.Entries {
				if e.Hash == a.ID && (!strings.HasSuffix(e.CommentsURL, "/stories/"+st.ID) || fmt.Sprint(e.Tags) != "[story:"+st.ID+"]") {
					t.Errorf("entry %d of story %s: comments_url %q, tags %v", e.ID, st.ID, e.CommentsURL, e.Tags)
				}
			}
		}
	}
	if r := n.do(t, "GET", "/api/v1/me/starred", nil, bearer(ann)...); !strings.Contains(string(r.body), starred.Hash) {
		t.Errorf("web reader's starred: %s", r)
	}

	// Bob's key changes none of Ann's state.
	if r := call(bobKey, "PUT", "/v1/entries", fmt.Sprintf(`{"entry_ids":[%d],"status":"read"}`, starred.ID)); r.status != fasthttp.StatusNoContent {
		t.Fatalf("bob marks: %s", r)
	}
	if got := list(annKey, "/v1/entries?status=unread"); got.Total != 4 {
		t.Errorf("ann's unread after bob marked: %d", got.Total)
	}
	if got := list(bobKey, "/v1/entries"); got.Total != 0 {
		t.Errorf("bob, subscribed to nothing, lists %d entries", got.Total)
	}
	if r := call(bobKey, "GET", fmt.Sprintf("/v1/feeds/%d/entries", feedIDs[0]), ""); r.status != 404 {
		t.Errorf("bob lists ann's feed: %s", r)
	}

	// Marking a feed read.
	if r := call(annKey, "PUT", fmt.Sprintf("/v1/feeds/%d/mark-all-as-read", feedIDs[1]), ""); r.status != fasthttp.StatusNoContent {
		t.Fatalf("mark feed read: %s", r)
	}
	if got := list(annKey, "/v1/entries?status=unread"); got.Total != 2 {
		t.Errorf("unread after marking the daily feed read: %d", got.Total)
	}
	for _, bad := range []string{"/v1/entries?status=gone", "/v1/entries?order=title", "/v1/entries?direction=up", "/v1/entries?limit=-1", "/v1/entries?starred=maybe"} {
		if r := call(annKey, "GET", bad, ""); r.status != 400 || !strings.Contains(string(r.body), "error_message") {
			t.Errorf("%s: %s", bad, r)
		}
	}
	for _, bad := range []string{`{"entry_ids":[],"status":"read"}`, `{"entry_ids":[1]}`, `{"entry_ids":[1],"status":"gone"}`, `nope`} {
		if r := call(annKey, "PUT", "/v1/entries", bad); r.status != 400 {
			t.Errorf("PUT %s: %s", bad, r)
		}
	}
	if r := call(annKey, "GET", "/v1/entries/999999", ""); r.status != 404 {
		t.Errorf("unknown entry: %s", r)
	}
}

// TestReaderAddsSource: subscribing in a reader app to a feed URL no
// source has adds the source when the node's policy lets the reader (or
// the reader is an admin), checked as an admin's addition is (feed
// discovery, the SSRF guard); otherwise it is refused with 403.
func TestReaderAddsSource(t *testing.T) {
	mux := http.NewServeMux()
	rss := func(title string) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/rss+xml")
			io.WriteString(w, `<?xml version="1.0"?><rss version="2.0"><channel><title>`+title+`</title><link>http://local.example/</link>`+
				`<item><title>One</title><link>http://local.example/1</link></item></channel></rss>`)
		}
	}
	mux.HandleFunc("/news.xml", rss("Local News"))
	mux.HandleFunc("/other.xml", rss("Other News"))
	mux.HandleFunc("/text", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "not a feed\n") })
	farm := httptest.NewServer(mux)
	defer farm.Close()
	for _, policy := range []bool{false, true} {
		t.Run(fmt.Sprint("readers_add_sources=", policy), func(t *testing.T) {
			n := newTestNode(t)
			cr, err := crawl.New(n.sources, n.log, n.db, crawl.Options{Partitions: n.eng.Partitions(), Registerer: prometheus.NewRegistry(),
				Fetch: fetch.Options{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}})
			if err != nil {
				t.Fatal(err)
			}
			lim, err := auth.NewLimiter(auth.DefaultLimiterOptions(), time.Now)
			if err != nil {
				t.Fatal(err)
			}
			srv, err := query.New(query.Deps{Log: n.log, Engine: n.eng, Trending: n.op, Sources: n.sources, Crawler: cr, Auth: n.auth, Limiter: lim},
				query.Options{AdminToken: testAdminToken, Now: n.clock.Now, ReadersAddSources: policy})
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			key := func(name string, role auth.Role) string {
				u, err := n.auth.AddUser(ctx, name, name+"'s long password", role)
				if err != nil {
					t.Fatal(err)
				}
				secret, _, err := n.auth.NewAPIKey(ctx, u.ID, "app")
				if err != nil {
					t.Fatal(err)
				}
				return secret
			}
			reader, admin := key("ann", auth.RoleUser), key("root", auth.RoleAdmin)
			subscribe := func(key, feedURL string) (int, string) {
				var req fasthttp.Request
				req.Header.SetMethod("POST")
				req.SetRequestURI("/v1/feeds")
				req.Header.Set("X-Auth-Token", key)
				req.SetBodyString(fmt.Sprintf(`{"feed_url":%q}`, feedURL))
				var c fasthttp.RequestCtx
				c.Init(&req, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}, nil)
				srv.Handler()(&c)
				return c.Response.StatusCode(), string(c.Response.Body())
			}
			code, body := subscribe(reader, farm.URL+"/news.xml")
			if !policy {
				if code != 403 || !strings.Contains(body, "ask an admin") {
					t.Fatalf("reader adds a source against the policy: %d %s", code, body)
				}
				if srcs, _ := n.sources.List(ctx); len(srcs) != 0 {
					t.Fatalf("sources after a refused addition: %+v", srcs)
				}
				// An admin may; then the reader subscribes to it.
				if code, body := subscribe(admin, farm.URL+"/news.xml"); code != 201 {
					t.Fatalf("admin adds a source: %d %s", code, body)
				}
				code, body = subscribe(reader, farm.URL+"/news.xml")
			}
			if code != 201 || !strings.Contains(body, `"feed_id"`) {
				t.Fatalf("reader subscribes: %d %s", code, body)
			}
			srcs, _ := n.sources.List(ctx)
			if len(srcs) != 1 || srcs[0].Name != "Local News" || srcs[0].FeedURL != farm.URL+"/news.xml" {
				t.Fatalf("sources: %+v", srcs)
			}
			if policy {
				if code, body := subscribe(reader, farm.URL+"/text"); code != 400 || !strings.Contains(body, "not a feed") {
					t.Errorf("reader adds a document that is no feed: %d %s", code, body)
				}
				if code, body := subscribe(reader, "ftp://example.org/feed"); code != 400 {
					t.Errorf("reader adds an ftp URL: %d %s", code, body)
				}
			}
		})
	}
}
