package query_test

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/newsflow/newsflow/operators/crawl"
	"github.com/newsflow/newsflow/operators/crawl/fetch"
	"github.com/newsflow/newsflow/operators/crawl/opml"
	"github.com/newsflow/newsflow/query"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
)

func TestSourcesAdminAPI(t *testing.T) {
	n := newTestNode(t)
	const base = "/api/v1/admin/sources"
	r := n.post(t, base, `{"feed_url":"https://news.example/rss","name":"Example News","category":"World","authority":0.8,"min_interval":"10m"}`)
	if r.status != fasthttp.StatusCreated {
		t.Fatalf("add: %s", r)
	}
	var src struct {
		ID          string  `json:"id"`
		Category    string  `json:"category"`
		Authority   float64 `json:"authority"`
		MinInterval string  `json:"min_interval"`
		MaxInterval string  `json:"max_interval"`
		Status      string  `json:"status"`
	}
	if err := json.Unmarshal(r.body, &src); err != nil {
		t.Fatal(err)
	}
	if src.ID == "" || src.Category != "world" || src.Authority != 0.8 || src.MinInterval != "10m0s" || src.MaxInterval != "1h0m0s" || src.Status != "active" {
		t.Fatalf("added source: %s", r.body)
	}
	if r.header["Location"] != base+"/"+src.ID {
		t.Fatalf("Location = %q", r.header["Location"])
	}
	wantError(t, n.post(t, base, `{"feed_url":"https://news.example/rss"}`), fasthttp.StatusConflict, "exists")
	for body, want := range map[string]string{
		`{"name":"x"}`:                                  "feed_url is required",
		`{"feed_url":"gopher://x"}`:                     "absolute http or https",
		`{"feed_url":"https://x/f","authority":3}`:      "authority",
		`{"feed_url":"https://x/f","min_interval":600}`: "duration must be a string",
		`{"feed_url":"https://x/f","colour":"red"}`:     "unknown field",
		`{"feed_url":`:                                  "invalid JSON",
	} {
		wantError(t, n.post(t, base, body), fasthttp.StatusBadRequest, want)
	}

	r = n.do(t, fasthttp.MethodPatch, base+"/"+src.ID, []byte(`{"status":"paused","name":"Renamed"}`))
	if r.status != 200 || !strings.Contains(string(r.body), `"status":"paused"`) || !strings.Contains(string(r.body), `"name":"Renamed"`) {
		t.Fatalf("patch: %s", r)
	}
	wantError(t, n.do(t, fasthttp.MethodPatch, base+"/"+src.ID, []byte(`{"status":"gone"}`)), fasthttp.StatusBadRequest, "set active or paused")
	r = n.do(t, fasthttp.MethodPatch, base+"/"+src.ID, []byte(`{"full_text":"never"}`))
	if r.status != 200 || !strings.Contains(string(r.body), `"full_text":"never"`) {
		t.Fatalf("patch full_text: %s", r)
	}
	wantError(t, n.do(t, fasthttp.MethodPatch, base+"/"+src.ID, []byte(`{"full_text":"sometimes"}`)), fasthttp.StatusBadRequest, "want auto, always or never")
	wantError(t, n.do(t, fasthttp.MethodPatch, base+"/"+src.ID, []byte(`{"feed_url":"https://other/"}`)), fasthttp.StatusBadRequest, "cannot be changed")
	wantError(t, n.do(t, fasthttp.MethodPatch, base+"/nope", []byte(`{}`)), fasthttp.StatusNotFound, "not found")

	r = n.get(t, base+"/"+src.ID+"/status")
	if r.status != 200 || !strings.Contains(string(r.body), `"crawl"`) {
		t.Fatalf("status: %s", r)
	}

	// OPML import skips what exists and reports invalid feeds; export
	// round-trips.
	doc := `<opml version="2.0"><body><outline text="tech">
	  <outline text="A" xmlUrl="https://a.example/feed" authority="0.9"/>
	  <outline text="Dup" xmlUrl="https://news.example/rss"/>
	  <outline text="Bad" xmlUrl="mailto:x@y"/>
	</outline></body></opml>`
	r = n.post(t, base+"/import", doc)
	if r.status != fasthttp.StatusBadRequest || !strings.Contains(string(r.body), `"added":1,"skipped":1`) || !strings.Contains(string(r.body), "mailto:x@y") {
		t.Fatalf("import: %s", r)
	}
	wantError(t, n.post(t, base+"/import", "<html/>"), fasthttp.StatusBadRequest, "opml")
	r = n.get(t, base+"/export")
	if r.status != 200 || !strings.HasPrefix(r.header["Content-Type"], "text/x-opml") {
		t.Fatalf("export: %s", r)
	}
	es, err := opml.Parse(strings.NewReader(string(r.body)))
	if err != nil || len(es) != 2 {
		t.Fatalf("exported OPML: %v %v\n%s", es, err, r.body)
	}
	got := map[string]opml.Entry{}
	for _, e := range es {
		got[e.FeedURL] = e
	}
	if e := got["https://a.example/feed"]; e.Category != "tech" || e.Authority != 0.9 || e.Title != "A" {
		t.Fatalf("exported entry %+v", e)
	}
	if e := got["https://news.example/rss"]; e.Title != "Renamed" || e.Category != "world" || e.Authority != 0.8 {
		t.Fatalf("exported entry %+v", e)
	}

	r = n.get(t, base)
	if r.status != 200 || strings.Count(string(r.body), `"feed_url"`) != 2 {
		t.Fatalf("list: %s", r)
	}
	if r := n.do(t, fasthttp.MethodDelete, base+"/"+src.ID, nil); r.status != fasthttp.StatusNoContent {
		t.Fatalf("delete: %s", r)
	}
	wantError(t, n.get(t, base+"/"+src.ID), fasthttp.StatusNotFound, "not found")
}

// sourcesNode is the handler of a test node's server again, with a
// crawler (fetch options fo) behind its source admin API, for the checks
// made when a source is added.
func sourcesNode(t *testing.T, fo fetch.Options) fasthttp.RequestHandler {
	t.Helper()
	n := newTestNode(t)
	cr, err := crawl.New(n.sources, n.log, n.db, crawl.Options{Partitions: n.eng.Partitions(), Fetch: fo, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := query.New(query.Deps{Log: n.log, Engine: n.eng, Trending: n.op, Sources: n.sources, Crawler: cr},
		query.Options{AdminToken: testAdminToken, Now: n.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	return srv.Handler()
}

// addSource posts a source to handler h and returns the status and the
// decoded answer.
func addSource(t *testing.T, h fasthttp.RequestHandler, query, body string) (int, map[string]any) {
	t.Helper()
	var req fasthttp.Request
	req.Header.SetMethod(fasthttp.MethodPost)
	req.SetRequestURI("/api/v1/admin/sources" + query)
	req.Header.Set("Authorization", "Bearer "+testAdminToken)
	req.SetBodyString(body)
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}, nil)
	h(&ctx)
	var v map[string]any
	if err := json.Unmarshal(ctx.Response.Body(), &v); err != nil {
		t.Fatalf("answer %d: %v", ctx.Response.StatusCode(), err)
	}
	return ctx.Response.StatusCode(), v
}

// A source that cannot work is refused with its reason: an address the
// crawler's SSRF guard refuses (unless the node's configuration allows
// it, as the demo's and the tests' local feed servers need), a page that
// is no feed and links to none, a document that is no feed. One that
// cannot be fetched now is added with a warning.
func TestAddSourceChecks(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/page", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, `<!doctype html><html><head><title>A blog</title></head><body><p>No feed here.</p></body></html>`)
	})
	mux.HandleFunc("/text", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "just some text, not a feed\n")
	})
	mux.HandleFunc("/news.xml", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/rss+xml")
		io.WriteString(w, `<?xml version="1.0"?><rss version="2.0"><channel><title>Local News</title><link>http://local.example/</link>`+
			`<item><title>One</title><link>http://local.example/1</link></item></channel></rss>`)
	})
	farm := httptest.NewServer(mux)
	defer farm.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String() + "/news.xml" // nothing listens there
	ln.Close()

	// The guard as a default node has it: loopback is refused.
	guarded := sourcesNode(t, fetch.Options{})
	status, v := addSource(t, guarded, "", `{"feed_url":"`+farm.URL+`/news.xml"}`)
	if msg, _ := v["error"].(string); status != http.StatusBadRequest || v["reason"] != "blocked_address" ||
		!strings.Contains(msg, "127.0.0.1") || !strings.Contains(msg, "crawl.allow_cidrs") {
		t.Fatalf("add a loopback feed on a guarded node: %d %v", status, v)
	}

	// A node configured to crawl the loopback feed server.
	open := sourcesNode(t, fetch.Options{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	for _, path := range []string{"/page", "/text"} {
		status, v := addSource(t, open, "", `{"feed_url":"`+farm.URL+path+`"}`)
		if msg, _ := v["error"].(string); status != http.StatusBadRequest || v["reason"] != "no_feed" || !strings.Contains(msg, "not a feed") {
			t.Fatalf("add %s: %d %v", path, status, v)
		}
	}
	status, v = addSource(t, open, "", `{"feed_url":"`+farm.URL+`/news.xml"}`)
	if status != http.StatusCreated || v["name"] != "Local News" || v["warning"] != nil {
		t.Fatalf("add a feed: %d %v", status, v)
	}
	status, v = addSource(t, open, "", `{"feed_url":"`+down+`"}`)
	if w, _ := v["warning"].(string); status != http.StatusCreated || !strings.Contains(w, "cannot be fetched now") {
		t.Fatalf("add a feed that is down: %d %v", status, v)
	}
	// ?discover=false takes the URL as given, unchecked.
	status, v = addSource(t, guarded, "?discover=false", `{"feed_url":"`+farm.URL+`/page"}`)
	if status != http.StatusCreated || v["warning"] != nil {
		t.Fatalf("add unchecked: %d %v", status, v)
	}
}
