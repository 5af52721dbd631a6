package query_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/internal/testutil"
	"github.com/newsflow/newsflow/operators/trending"
	"github.com/newsflow/newsflow/query"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
)

// postShares posts one share per (article, count) pair at now, in one batch,
// in the order given.
func postShares(t testing.TB, n *testNode, prefix string, shares ...any) int {
	t.Helper()
	var lines []string
	for i := 0; i+1 < len(shares); i += 2 {
		id, c := shares[i].(string), shares[i+1].(int)
		for j := range c {
			lines = append(lines, share(fmt.Sprintf("%s-%s-%d", prefix, id, j), id, n.clock.ms(0)))
		}
	}
	n.postShareBatch(t, lines)
	return len(lines)
}

func TestTrendingRanking(t *testing.T) {
	n := newTestNode(t)
	// Twelve articles tie with two shares each; they span every partition
	// and are posted in reverse id order.
	args := []any{"low", 1, "top", 3}
	var ties []string
	for i := 11; i >= 0; i-- {
		id := fmt.Sprintf("tie-%02d", i)
		args = append(args, id, 2)
		ties = append([]string{id + ":2"}, ties...)
	}
	postShares(t, n, "r", args...)

	all := "top:3 " + strings.Join(ties, " ") + " low:1"
	n.waitTrending(t, "?window=1h&k=100", all)
	n.waitTrending(t, "?window=1m&k=14", all)
	n.waitTrending(t, "?window=24h&k=14", all)
	// The default k is 10.
	n.waitTrending(t, "?window=1h", "top:3 "+strings.Join(ties[:9], " "))
	// Ties at the cut are broken by article id.
	n.waitTrending(t, "?k=3", "top:3 tie-00:2 tie-01:2")
	n.waitTrending(t, "?k=1", "top:3")
}

func TestTrendingCategory(t *testing.T) {
	n := newTestNode(t)
	now := n.clock.ms(0)
	var lines []string
	add := func(article, category string, count int) {
		for range count {
			lines = append(lines, share(fmt.Sprintf("e%d", len(lines)), article, now, "category", category))
		}
	}
	add("c-0", "", 5) // no category
	add("c-1", "tech", 3)
	add("c-2", "tech", 1)
	add("c-2", "sport", 2)
	add("c-3", "sport", 1)
	n.postShareBatch(t, lines)
	n.waitTrending(t, "", "c-0:5 c-1:3 c-2:3 c-3:1")
	res := n.waitTrending(t, "?category=tech", "c-1:3 c-2:1")
	if res.Category != "tech" || res.Window != "1h" {
		t.Fatalf("%+v", res)
	}
	n.waitTrending(t, "?category=sport&window=24h", "c-2:2 c-3:1")
	n.waitTrending(t, "?category=sport&k=1", "c-2:2")
	// An unknown category has no items: an empty list, not null.
	n.waitTrending(t, "?category=politics", "")
	if r := n.get(t, "/api/v1/trending?category=politics"); !strings.Contains(string(r.body), `"items":[]`) {
		t.Fatalf("empty category: %s", r)
	}
	// Per-article counts are over all categories.
	n.waitShares(t, "c-2", counts(3, 3, 3))
}

func TestTrendingWindows(t *testing.T) {
	n := newTestNode(t)
	// Newest first: a share counts in every window that holds it, in any
	// arrival order.
	body := strings.Join([]string{
		share("w4", "win", n.clock.ms(-10*time.Second)),
		share("w2", "win", n.clock.ms(-30*time.Minute)),
		share("w1", "win", n.clock.ms(-2*time.Hour)),
		share("w3", "win", n.clock.ms(-30*time.Minute)),
	}, "\n")
	if r := n.post(t, pathBatch, body); r.status != fasthttp.StatusAccepted {
		t.Fatalf("%s", r)
	}
	n.waitShares(t, "win", counts(1, 3, 4))
	n.waitTrending(t, "?window=1m", "win:1")
	n.waitTrending(t, "?window=1h", "win:3")
	n.waitTrending(t, "?window=24h", "win:4")
}

func TestTrendingBadArguments(t *testing.T) {
	n := newTestNode(t)
	for _, q := range []string{"k=0", "k=101", "k=abc", "k=-1", "k=1.5", "k=10x", "window=1h&k=99999999999999999999"} {
		t.Run(q, func(t *testing.T) {
			wantError(t, n.get(t, "/api/v1/trending?"+q), fasthttp.StatusBadRequest, "k must be an integer from 1 to 100")
		})
	}
	for _, q := range []string{"k=1", "k=100", "k="} {
		if r := n.get(t, "/api/v1/trending?"+q); r.status != fasthttp.StatusOK {
			t.Fatalf("%s: %s", q, r)
		}
	}
	for _, w := range []string{"5m", "1H", "24%20h", "%00", "%zz"} {
		r := n.get(t, "/api/v1/trending?window="+w)
		wantError(t, r, fasthttp.StatusBadRequest, "unknown window")
		got := decodeStrict[struct {
			Error   string   `json:"error"`
			Windows []string `json:"windows"`
		}](t, r.body)
		if !slices.Equal(got.Windows, []string{"1m", "1h", "24h"}) {
			t.Fatalf("window %q: windows %v", w, got.Windows)
		}
	}
}

func TestTrendingMaxK(t *testing.T) {
	n := newTestNode(t, withTrending(trending.OperatorOptions{MaxK: 5}))
	postShares(t, n, "k", "a", 1, "b", 1, "c", 1, "d", 1, "e", 1, "f", 1)
	n.waitTrending(t, "?k=5", "a:1 b:1 c:1 d:1 e:1")
	wantError(t, n.get(t, "/api/v1/trending?k=6"), fasthttp.StatusBadRequest, "from 1 to 5")
	// The default k is capped too.
	n.waitTrending(t, "", "a:1 b:1 c:1 d:1 e:1")
}

func TestArticleShares(t *testing.T) {
	n := newTestNode(t)
	postShares(t, n, "s", "art", 2)
	n.waitShares(t, "art", counts(2, 2, 2))

	// Unknown articles count 0.
	n.waitShares(t, "never-shared", counts(0, 0, 0))
	r := n.get(t, "/api/v1/articles/never-shared/shares?window=24h")
	if r.status != fasthttp.StatusOK || !strings.Contains(string(r.body), `"count":0`) {
		t.Fatalf("%s", r)
	}
	for _, w := range []string{"5m", "1H"} {
		r := n.get(t, "/api/v1/articles/art/shares?window="+w)
		wantError(t, r, fasthttp.StatusBadRequest, "unknown window "+w)
		if !strings.Contains(string(r.body), `"windows":["1m","1h","24h"]`) {
			t.Fatalf("%s", r)
		}
	}
	wantError(t, n.get(t, "/api/v1/articles/"+strings.Repeat("x", 129)+"/shares"), fasthttp.StatusBadRequest, "1-128 bytes")
	if r := n.get(t, "/api/v1/articles/"+strings.Repeat("x", 128)+"/shares"); r.status != fasthttp.StatusOK {
		t.Fatalf("128-byte id: %s", r)
	}
	wantError(t, n.get(t, "/api/v1/articles//shares"), fasthttp.StatusBadRequest, "1-128 bytes")
}

// TestArticleSharesEscapedID looks up ids that must be percent-encoded in
// a path.
func TestArticleSharesEscapedID(t *testing.T) {
	n := newTestNode(t)
	ids := []string{"a b", "news/2025/11/story", "100%", "статья", "a?b#c"}
	for i, id := range ids {
		if r := n.post(t, pathShare, share(fmt.Sprint(i), id, n.clock.ms(0))); r.status != fasthttp.StatusAccepted {
			t.Fatalf("%s", r)
		}
	}
	n.waitCaughtUp(t)
	for _, id := range ids {
		r := n.get(t, "/api/v1/articles/"+url.PathEscape(id)+"/shares")
		if r.status != fasthttp.StatusOK {
			t.Errorf("%q: %s", id, r)
			continue
		}
		got := decodeStrict[articleShares](t, r.body)
		if got.ArticleID != id || got.Counts["1h"] != 1 {
			t.Errorf("%q: %s, want article_id %q with 1 share", id, r.body, id)
		}
	}
}

func TestRoutes(t *testing.T) {
	n := newTestNode(t)
	cases := []struct {
		method, path string
		status       int
		want         string
	}{
		{"GET", "/api/v1/nope", 404, "no route for GET /api/v1/nope"},
		{"GET", "/nope.js", 404, "not found"},
		{"POST", "/api/v1/nope", 404, "no route for POST /api/v1/nope"},
		{"DELETE", "/", 404, "no route for DELETE /"},
		{"POST", "/api/v1/trending", 405, "method POST not allowed on /api/v1/trending"},
		{"GET", pathShare, 405, "method GET not allowed on " + pathShare},
		{"PUT", pathBatch, 405, "method PUT not allowed on " + pathBatch},
		{"DELETE", "/api/v1/articles/a1/shares", 405, "not allowed"},
		{"POST", "/health/live", 405, "not allowed"},
		{"POST", "/metrics", 405, "not allowed"},
	}
	for _, c := range cases {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			r := n.do(t, c.method, c.path, nil)
			wantError(t, r, c.status, c.want)
			if c.status == 405 && r.header["Allow"] == "" {
				t.Fatalf("405 without Allow: %v", r.header)
			}
		})
	}
}

func TestHealth(t *testing.T) {
	n := newTestNode(t)
	if r := n.get(t, "/health/live"); r.status != 200 || string(r.body) != `{"status":"live"}` {
		t.Fatalf("live: %s", r)
	}
	if r := n.get(t, "/health/ready"); r.status != 200 || string(r.body) != `{"status":"ready"}` {
		t.Fatalf("ready: %s", r)
	}
}

// TestNotReady serves from a node whose engine is not running.
func TestNotReady(t *testing.T) {
	n := newTestNode(t, withoutEngine())
	if r := n.get(t, "/health/live"); r.status != 200 {
		t.Fatalf("live: %s", r)
	}
	r := n.get(t, "/health/ready")
	got := decodeStrict[map[string]string](t, r.body)
	if r.status != fasthttp.StatusServiceUnavailable || got["status"] != "not ready" || got["error"] == "" {
		t.Fatalf("ready: %s", r)
	}
	wantError(t, n.get(t, "/api/v1/articles/a1/shares"), fasthttp.StatusServiceUnavailable, "partition unavailable")
	r = n.get(t, "/api/v1/trending")
	res := decodeStrict[trendingResult](t, r.body)
	if r.status != 200 || len(res.Items) != 0 || !slices.Equal(res.Partial, []int32{0, 1, 2, 3}) {
		t.Fatalf("trending: %s", r)
	}
	p := decodeStrict[progress](t, n.get(t, "/api/v1/admin/progress").body)
	if p.Ready || p.CaughtUp {
		t.Fatalf("progress: %+v", p)
	}
}

func TestProgressAndTopology(t *testing.T) {
	n := newTestNode(t)
	total := postShares(t, n, "p", "p1", 3, "p2", 4, "p3", 5)
	p := n.waitCaughtUp(t)
	if !p.Ready {
		t.Fatalf("caught up but not ready: %+v", p)
	}
	committed := map[string]int64{}
	for _, in := range p.Inputs {
		if in.Lag != 0 {
			t.Fatalf("caught up with lag: %+v", in)
		}
		committed[in.Stage+" "+in.Topic] += in.Committed
	}
	rt := engine.RepartitionTopic(trending.Name, schema.TopicShares)
	want := map[string]int64{
		"trending " + schema.TopicShares:                    int64(total),
		"trending " + rt:                                    0,
		"trending.shares.repartition " + schema.TopicShares: int64(total),
	}
	for k, v := range want {
		if committed[k] != v {
			t.Errorf("committed %s = %d, want %d (all: %v)", k, committed[k], v, committed)
		}
	}

	r := n.get(t, "/api/v1/admin/topology")
	var stages []engine.Stage
	if err := json.Unmarshal(r.body, &stages); r.status != 200 || err != nil {
		t.Fatalf("topology: %s (%v)", r, err)
	}
	var names []string
	for _, s := range stages {
		names = append(names, s.Kind+":"+s.Name)
	}
	if !slices.Contains(names, "operator:trending") || !slices.Contains(names, "repartition:trending.shares.repartition") {
		t.Fatalf("topology stages %v", names)
	}
}

func TestMetrics(t *testing.T) {
	n := newTestNode(t)
	now := n.clock.ms(0)
	n.post(t, pathShare, share("m1", "met", now))
	n.post(t, pathShare, `{}`)
	n.post(t, pathBatch, share("m2", "met", now)+"\n"+share("m3", "met", now)+"\nbad")
	n.get(t, "/api/v1/trending?k=0")
	n.waitShares(t, "met", counts(3, 3, 3))

	r := n.get(t, "/metrics")
	for _, family := range []string{
		"# TYPE newsflow_ingested_events_total counter",
		"# TYPE newsflow_http_requests_total counter",
		"# TYPE newsflow_http_request_seconds histogram",
		"# TYPE newsflow_records_in_total counter",
	} {
		if !strings.Contains(string(r.body), family) {
			t.Errorf("/metrics lacks %q", family)
		}
	}
	m := n.metrics(t)
	want := map[string]float64{
		`newsflow_ingested_events_total{result="accepted",type="share"}`:      3,
		`newsflow_ingested_events_total{result="rejected",type="share"}`:      2,
		`newsflow_http_requests_total{code="202",route="ingest_share"}`:       1,
		`newsflow_http_requests_total{code="400",route="ingest_share"}`:       1,
		`newsflow_http_requests_total{code="207",route="ingest_share_batch"}`: 1,
		`newsflow_http_requests_total{code="400",route="trending"}`:           1,
		`newsflow_http_request_seconds_count{route="ingest_share"}`:           2,
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %v, want %v", k, m[k], v)
		}
	}
	// The engine's own metrics are served too; the count is at least what
	// was ingested (exact accounting is the engine's business).
	if got := m[`newsflow_records_in_total{stage="trending"}`]; got < 3 {
		t.Errorf("newsflow_records_in_total{stage=\"trending\"} = %v, want >= 3", got)
	}
}

func TestNewValidates(t *testing.T) {
	n := newTestNode(t, withoutEngine())
	deps := query.Deps{Log: n.log, Engine: n.eng, Trending: n.op}
	for _, d := range []query.Deps{{}, {Log: n.log, Engine: n.eng}, {Log: n.log, Trending: n.op}, {Engine: n.eng, Trending: n.op}} {
		if _, err := query.New(d, query.Options{}); err == nil {
			t.Errorf("New(%+v) accepted missing dependencies", d)
		}
	}
	for _, o := range []query.Options{{MaxBodyBytes: -1}, {ReadTimeout: -1}, {MaxFuture: -time.Second}, {MaxPast: -1}, {IdempotencyTTL: -1}} {
		if err := o.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil", o)
		}
		if _, err := query.New(deps, o); err == nil {
			t.Errorf("New with %+v succeeded", o)
		}
	}
	if err := (query.Options{}).Validate(); err != nil {
		t.Fatal(err)
	}
	if err := query.DefaultOptions().Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestNewRegistersTwice creates two servers on one registry.
func TestNewRegistersTwice(t *testing.T) {
	n := newTestNode(t, withoutEngine())
	deps := query.Deps{Log: n.log, Engine: n.eng, Trending: n.op}
	reg := prometheus.NewRegistry()
	if _, err := query.New(deps, query.Options{Registerer: reg}); err != nil {
		t.Fatal(err)
	}
	var err error
	func() {
		defer func() {
			if v := recover(); v != nil {
				t.Fatalf("second New panicked: %v", v)
			}
		}()
		_, err = query.New(deps, query.Options{Registerer: reg})
	}()
	if err == nil {
		t.Fatal("second New on the same registry succeeded")
	}
}

func TestRunListenError(t *testing.T) {
	n := newTestNode(t, withoutEngine())
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	s, err := query.New(query.Deps{Log: n.log, Engine: n.eng, Trending: n.op}, query.Options{Addr: busy.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Run(context.Background(), nil)
	if err == nil || !strings.Contains(err.Error(), "listen") {
		t.Fatalf("Run on a busy address: %v", err)
	}
}

// TestServeTCP serves a second server over TCP to a net/http client.
func TestServeTCP(t *testing.T) {
	n := newTestNode(t)
	s, err := query.New(query.Deps{Log: n.log, Engine: n.eng, Trending: n.op, Keys: n.node.Deps().Keys}, query.Options{Now: n.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, ln) }()
	client := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
	defer func() {
		client.CloseIdleConnections()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	base := "http://" + ln.Addr().String()
	do := func(req *http.Request) (int, string) {
		t.Helper()
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(b)
	}
	req, _ := http.NewRequest("POST", base+pathShare, strings.NewReader(share("tcp1", "tcp", n.clock.ms(0))))
	req.Header.Set(query.HeaderIdempotencyKey, "tcp-key")
	if code, body := do(req); code != 202 || body != `{"accepted":1}` {
		t.Fatalf("POST: %d %s", code, body)
	}
	req, _ = http.NewRequest("POST", base+pathShare, strings.NewReader(share("tcp1", "tcp", n.clock.ms(0))))
	req.Header.Set(query.HeaderIdempotencyKey, "tcp-key")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 202 || resp.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %d %v", resp.StatusCode, resp.Header)
	}
	n.waitShares(t, "tcp", counts(1, 1, 1))
	req, _ = http.NewRequest("GET", base+"/api/v1/articles/tcp/shares?window=1m", nil)
	if code, body := do(req); code != 200 || !strings.Contains(body, `"count":1`) {
		t.Fatalf("GET: %d %s", code, body)
	}
}

// TestShutdownDrains stops the server while a request is appending: the
// request completes and its events are durable.
func TestShutdownDrains(t *testing.T) {
	dir, clock := t.TempDir(), newTestClock()
	g := &gateLog{}
	n := newTestNode(t, withDir(dir), withClock(clock), withGate(g))
	entered, release := g.holdNext()
	done := n.doAsync(fasthttp.MethodPost, pathShare, []byte(share("d1", "drain", clock.ms(0))))
	<-entered
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		n.stop()
	}()
	// Shutdown has begun once the listener refuses connections.
	testutil.Eventually(t, 10*time.Second, func() error {
		c, err := n.ln.Dial()
		if err == nil {
			c.Close()
			return errors.New("listener still accepting")
		}
		return nil
	})
	select {
	case <-stopped:
		t.Fatal("server stopped with a request in flight")
	default:
	}
	close(release)
	res := <-done
	<-stopped
	if res.err != nil || res.r.status != fasthttp.StatusAccepted {
		t.Fatalf("in-flight request: %v %v", res.r, res.err)
	}
	n = newTestNode(t, withDir(dir), withClock(clock))
	n.waitShares(t, "drain", counts(1, 1, 1))
}

// TestWebUIServed: the UI is served at / and for client-side routes, with
// its assets.
func TestWebUIServed(t *testing.T) {
	n := newTestNode(t)
	for _, p := range []string{"/", "/stories/abc", "/login", "/topics/world"} {
		r := n.get(t, p)
		if r.status != fasthttp.StatusOK || !strings.Contains(string(r.body), `<script type="module" src="/app.js">`) {
			t.Errorf("%s: %d %.80s", p, r.status, r.body)
		}
	}
	for p, ct := range map[string]string{"/app.js": "javascript", "/app.css": "text/css"} {
		if r := n.get(t, p); r.status != fasthttp.StatusOK || !strings.Contains(r.header["Content-Type"], ct) || len(r.body) < 500 {
			t.Errorf("%s: %d %q", p, r.status, r.header["Content-Type"])
		}
	}
}
