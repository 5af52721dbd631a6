package query_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/crawl"
	"github.com/newsflow/newsflow/internal/fetch"
	"github.com/newsflow/newsflow/internal/opml"
	"github.com/newsflow/newsflow/query"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
)

// TestSourcesAdminAPI is one scenario checked step by step (cyclomatic 35): the steps
// depend on each other's state, so they stay in order in one function.
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
	status, b := adminCall(h, fasthttp.MethodPost, "/api/v1/admin/sources"+query, body)
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("answer %d: %v", status, err)
	}
	return status, v
}

// adminCall sends a request with the admin token to handler h and returns
// the status and body of the answer.
func adminCall(h fasthttp.RequestHandler, method, uri, body string) (int, []byte) {
	var req fasthttp.Request
	req.Header.SetMethod(method)
	req.SetRequestURI(uri)
	req.Header.Set("Authorization", "Bearer "+testAdminToken)
	req.SetBodyString(body)
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}, nil)
	h(&ctx)
	return ctx.Response.StatusCode(), ctx.Response.Body()
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
	// ?discover=false takes the URL as given, unfetched, but never on an
	// address the guard refuses, in any of its forms.
	port := farm.Listener.Addr().(*net.TCPAddr).Port
	for _, host := range []string{"127.0.0.1", "2130706433", "0x7f.1", "017700000001", "127.1", "[::1]", "[::ffff:127.0.0.1]", "localhost",
		"169.254.169.254", "10.0.0.1", "[fe80::1]", "0"} {
		u := fmt.Sprintf("http://%s:%d/page", host, port)
		status, v := addSource(t, guarded, "?discover=false", `{"feed_url":"`+u+`"}`)
		if msg, _ := v["error"].(string); status != http.StatusBadRequest || v["reason"] != "blocked_address" || !strings.Contains(msg, "SSRF guard") {
			t.Errorf("add %s unchecked on a guarded node: %d %v", u, status, v)
		}
	}
	status, v = addSource(t, open, "?discover=false", `{"feed_url":"`+farm.URL+`/page"}`)
	if status != http.StatusCreated || v["warning"] != nil {
		t.Fatalf("add unchecked where the configuration allows the address: %d %v", status, v)
	}
	status, v = addSource(t, guarded, "?discover=false", `{"feed_url":"http://nowhere.invalid/feed"}`)
	if w, _ := v["warning"].(string); status != http.StatusCreated || !strings.Contains(w, "cannot be fetched now") {
		t.Fatalf("add unchecked at a name that does not resolve: %d %v", status, v)
	}

	// An OPML import reports the feeds on refused addresses and adds the
	// others.
	list := opml.Entry{FeedURL: "http://2130706433:" + strconv.Itoa(port) + "/news.xml"}
	var body strings.Builder
	if err := opml.Write(&body, "feeds", []opml.Entry{list, {FeedURL: "https://news.example/rss"}}); err != nil {
		t.Fatal(err)
	}
	status, b := adminCall(guarded, fasthttp.MethodPost, "/api/v1/admin/sources/import", body.String())
	var res crawl.ImportResult
	if err := json.Unmarshal(b, &res); err != nil || status != http.StatusBadRequest || res.Added != 1 || len(res.Errors) != 1 ||
		res.Errors[0].FeedURL != list.FeedURL || !strings.Contains(res.Errors[0].Error, "loopback") {
		t.Fatalf("import with a loopback feed on a guarded node: %d %s", status, b)
	}
}

// msOf reads a time an answer carries, failing unless it is an integer:
// ms since the epoch.
func msOf(t *testing.T, what string, raw json.RawMessage) int64 {
	t.Helper()
	ms, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		t.Fatalf("%s is %s, not ms since the epoch", what, raw)
	}
	return ms
}

// crawlTimes are the times of a source's crawl state as the API writes
// them.
type crawlTimes struct {
	LastCrawl  json.RawMessage `json:"last_crawl"`
	NextCrawl  json.RawMessage `json:"next_crawl"`
	LastResult struct {
		At json.RawMessage `json:"at"`
	} `json:"last_result"`
	Circuit struct {
		OpenedAt  json.RawMessage `json:"opened_at"`
		OpenUntil json.RawMessage `json:"open_until"`
	} `json:"circuit"`
}

// TestSourceTimesAfterCrawl reads the times of a crawled source as the
// admin console does: ms since the epoch.
func TestSourceTimesAfterCrawl(t *testing.T) {
	feed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/rss+xml")
		io.WriteString(w, `<?xml version="1.0"?><rss version="2.0"><channel><title>Local News</title><link>http://local.example/</link>`+
			`<item><title>One</title><link>http://local.example/1</link></item></channel></rss>`)
	}))
	defer feed.Close()
	h := sourcesNode(t, fetch.Options{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	status, added := addSource(t, h, "", `{"feed_url":"`+feed.URL+`/news.xml"}`)
	if status != http.StatusCreated {
		t.Fatalf("add: %d %v", status, added)
	}
	// The test node's clock.
	if got, ok := added["created_at"].(float64); !ok || int64(got) != baseTime.UnixMilli() || added["updated_at"] != got {
		t.Fatalf("added source's created_at %v and updated_at %v, want %d", added["created_at"], added["updated_at"], baseTime.UnixMilli())
	}
	id, _ := added["id"].(string)

	before := time.Now().UnixMilli()
	status, b := adminCall(h, fasthttp.MethodPost, "/api/v1/admin/sources/"+id+"/crawl", "")
	var rec struct {
		At json.RawMessage `json:"at"`
	}
	// Any outcome will do: this node has no articles topic, so the crawl
	// fetches the feed and fails to append its items.
	if err := json.Unmarshal(b, &rec); err != nil || status != http.StatusOK {
		t.Fatalf("crawl now: %d %s", status, b)
	}
	at := msOf(t, "the crawl's at", rec.At)
	if after := time.Now().UnixMilli(); at < before || at > after {
		t.Fatalf("the crawl's at %d is not from %d to %d", at, before, after)
	}

	status, b = adminCall(h, fasthttp.MethodGet, "/api/v1/admin/sources/"+id+"/status", "")
	var st struct {
		Crawl crawlTimes `json:"crawl"`
	}
	if err := json.Unmarshal(b, &st); err != nil || status != http.StatusOK {
		t.Fatalf("status: %d %s", status, b)
	}
	if last, next := msOf(t, "last_crawl", st.Crawl.LastCrawl), msOf(t, "next_crawl", st.Crawl.NextCrawl); last != at || next <= last ||
		msOf(t, "last_result.at", st.Crawl.LastResult.At) != at {
		t.Fatalf("status after a crawl at %d: %s", at, b)
	}
}

// TestSourceTimesOldRecord lists a source an earlier version stored, with
// RFC 3339 times, with the same times in ms.
func TestSourceTimesOldRecord(t *testing.T) {
	n := newTestNode(t)
	ctx := context.Background()
	const old = `{"id":"src-0ld","feed_url":"https://old.example/feed.xml","name":"Old","authority":0.7,` +
		`"min_interval":"5m0s","max_interval":"1h0m0s","status":"active","full_text":"auto",` +
		`"created_at":"2025-11-02T10:00:00.123456789Z","updated_at":"2025-11-20T10:30:00+01:00",` +
		`"crawl":{"interval":"10m0s","last_crawl":"2025-11-21T11:00:00.5Z","next_crawl":"2025-11-21T11:10:00.5Z","consecutive_errors":5,` +
		`"last_result":{"at":"2025-11-21T11:00:00.5Z","outcome":"error","status":502,"duration":"1.5s","bytes":0,"items_seen":0,"items_new":0},` +
		`"circuit":{"state":"open","consecutive_failures":5,"opened_at":"2025-11-21T11:00:00.5Z","open_until":"2025-11-21T11:05:00.5Z"}}}`
	if err := n.auth.Meta().Put(ctx, crawl.Collection, "src-0ld", []byte(old)); err != nil {
		t.Fatal(err)
	}
	ms := func(s string) int64 {
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return tm.UnixMilli()
	}
	checkCrawl := func(what string, c crawlTimes) {
		t.Helper()
		for _, f := range []struct {
			name string
			raw  json.RawMessage
			want int64
		}{
			{"last_crawl", c.LastCrawl, ms("2025-11-21T11:00:00.5Z")},
			{"next_crawl", c.NextCrawl, ms("2025-11-21T11:10:00.5Z")},
			{"last_result.at", c.LastResult.At, ms("2025-11-21T11:00:00.5Z")},
			{"circuit.opened_at", c.Circuit.OpenedAt, ms("2025-11-21T11:00:00.5Z")},
			{"circuit.open_until", c.Circuit.OpenUntil, ms("2025-11-21T11:05:00.5Z")},
		} {
			if got := msOf(t, what+" crawl."+f.name, f.raw); got != f.want {
				t.Errorf("%s crawl.%s = %d, want %d", what, f.name, got, f.want)
			}
		}
	}
	type source struct {
		Name      string          `json:"name"`
		CreatedAt json.RawMessage `json:"created_at"`
		UpdatedAt json.RawMessage `json:"updated_at"`
		Crawl     crawlTimes      `json:"crawl"`
	}
	check := func(what string, body []byte, updated int64) {
		t.Helper()
		var s source
		if err := json.Unmarshal(body, &s); err != nil {
			t.Fatalf("%s: %s: %v", what, body, err)
		}
		if got, want := msOf(t, what+" created_at", s.CreatedAt), ms("2025-11-02T10:00:00.123Z"); got != want {
			t.Errorf("%s created_at = %d, want %d", what, got, want)
		}
		if got := msOf(t, what+" updated_at", s.UpdatedAt); got != updated {
			t.Errorf("%s updated_at = %d, want %d", what, got, updated)
		}
		checkCrawl(what, s.Crawl)
	}
	oldUpdated := ms("2025-11-20T09:30:00Z")
	var list struct {
		Sources []json.RawMessage `json:"sources"`
	}
	if err := json.Unmarshal(n.get(t, "/api/v1/admin/sources").body, &list); err != nil || len(list.Sources) != 1 {
		t.Fatalf("list: %+v, %v", list, err)
	}
	check("listed", list.Sources[0], oldUpdated)
	check("got", n.get(t, "/api/v1/admin/sources/src-0ld").body, oldUpdated)
	var st struct {
		Crawl crawlTimes `json:"crawl"`
	}
	if err := json.Unmarshal(n.get(t, "/api/v1/admin/sources/src-0ld/status").body, &st); err != nil {
		t.Fatal(err)
	}
	checkCrawl("status", st.Crawl)

	// A change keeps the times and is stored in ms.
	r := n.do(t, fasthttp.MethodPatch, "/api/v1/admin/sources/src-0ld", []byte(`{"name":"Old news"}`))
	if r.status != fasthttp.StatusOK || !strings.Contains(string(r.body), `"name":"Old news"`) {
		t.Fatalf("patch: %s", r)
	}
	check("patched", r.body, baseTime.UnixMilli())
	stored, _, err := n.auth.Meta().Get(ctx, crawl.Collection, "src-0ld")
	if err != nil || strings.Contains(string(stored), `":"20`) || !strings.Contains(string(stored), `"Old news"`) {
		t.Fatalf("stored after the change: %s, %v", stored, err)
	}
}

// resolverAddr is where a Go DNS error names the resolver it asked.
var resolverAddr = regexp.MustCompile(`lookup \S+ on \S+:\d+`)

// A source at a name that does not resolve: what the API answers says so,
// and names neither the node's DNS resolver nor any other address of the
// node: the warning of its addition, the crawl record, the source list,
// the source and its status, and the setup status.
func TestSourceErrorsNameNoResolver(t *testing.T) {
	h := sourcesNode(t, fetch.Options{})
	const feedURL = "http://nowhere.invalid/feed"
	status, v := addSource(t, h, "", `{"feed_url":"`+feedURL+`"}`)
	w, _ := v["warning"].(string)
	id, _ := v["id"].(string)
	if status != http.StatusCreated || !strings.Contains(w, "nowhere.invalid") || resolverAddr.MatchString(w) {
		t.Fatalf("add: %d %v", status, v)
	}
	answers := map[string][]byte{}
	status, answers["crawl"] = adminCall(h, fasthttp.MethodPost, "/api/v1/admin/sources/"+id+"/crawl", "")
	if status != http.StatusOK || !strings.Contains(string(answers["crawl"]), "no such host") {
		t.Fatalf("crawl: %d %s", status, answers["crawl"])
	}
	for name, path := range map[string]string{"list": "/api/v1/admin/sources", "source": "/api/v1/admin/sources/" + id,
		"status": "/api/v1/admin/sources/" + id + "/status", "setup": "/api/v1/setup"} {
		status, answers[name] = adminCall(h, fasthttp.MethodGet, path, "")
		if status != http.StatusOK {
			t.Fatalf("%s: %d %s", name, status, answers[name])
		}
	}
	for name, b := range answers {
		if m := resolverAddr.Find(b); m != nil {
			t.Errorf("%s names the resolver (%s): %s", name, m, b)
		}
	}
	if !strings.Contains(string(answers["list"]), "no such host") || !strings.Contains(string(answers["setup"]), `"reason":"dns"`) {
		t.Errorf("the answers do not say the name does not resolve: %s\n%s", answers["list"], answers["setup"])
	}
}
