package query_test

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/newsflow/newsflow/crawl"
	"github.com/newsflow/newsflow/internal/meta"
	"github.com/newsflow/newsflow/internal/testutil"
	"github.com/newsflow/newsflow/node"

	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/engine/eventlog/embedded"
	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/operators/idempotency"
	"github.com/newsflow/newsflow/operators/interest"
	"github.com/newsflow/newsflow/operators/readstate"
	"github.com/newsflow/newsflow/operators/search"
	"github.com/newsflow/newsflow/operators/story"
	"github.com/newsflow/newsflow/operators/trending"
	"github.com/newsflow/newsflow/query"
	"github.com/newsflow/newsflow/query/auth"
	"github.com/newsflow/newsflow/state"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"
	"go.uber.org/goleak"
	"golang.org/x/crypto/bcrypt"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// fasthttp's idle-connection and worker cleaners sleep up to 10s
		// before they notice that their client or server is gone.
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*Client).mCleaner"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*TCPDialer).tcpAddrsClean"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"),
		// A process-wide ticker fasthttp starts once and never stops.
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
		// Bleve's process-wide analysis workers, started at init.
		goleak.IgnoreTopFunction("github.com/blevesearch/bleve_index_api.AnalysisWorker"),
	)
}

// testAdminToken is the admin token of test nodes.
const testAdminToken = "test-admin-token"

// testIngestToken is the ingestion token of test nodes.
const testIngestToken = "test-ingest-token"

// baseTime is the injected "now" of every test node: a fixed instant, so
// that window buckets and time limits are the same on every run.
var baseTime = time.Date(2025, 11, 21, 12, 0, 0, 0, time.UTC)

// testClock is a settable clock shared by a test's nodes.
type testClock struct{ *testutil.Clock }

func newTestClock() *testClock { return &testClock{testutil.NewClock(baseTime)} }

// ms returns now+d in milliseconds since the epoch.
func (c *testClock) ms(d time.Duration) int64 { return c.Now().Add(d).UnixMilli() }

// nodeOptions configures newTestNode.
type nodeOptions struct {
	dir        string // data directory; default a new t.TempDir()
	clock      *testClock
	partitions int32
	query      query.Options
	trending   trending.OperatorOptions
	// wrapLog wraps the log the server appends to (not the engine's).
	wrapLog func(eventlog.Log) eventlog.Log
	// noEngine leaves the engine stopped: never ready, no partitions.
	noEngine bool
	// articles registers the article pipeline (articles, stories, search).
	articles bool
	stories  story.OperatorOptions
	// replay lists operators to rebuild from offset 0 before the engine runs.
	replay []string
	// cluster, if set, is the node's cluster membership.
	cluster query.Cluster
	// brokers, if set, put the node's log on Kafka and run its engine in
	// cluster mode with the partitions of assign (see clusterNet).
	brokers []string
	assign  map[int32]uint64
	// meta, if set, holds the metadata (accounts, sessions, sources), as
	// the Raft-replicated store does in a cluster.
	meta *state.DB
	// listener, if set, is where the server listens, and the node's
	// client connects to it (TCP, for nodes that call each other).
	listener net.Listener
	// disk, if set, is the node's free-space guard.
	disk query.Disk
}

func withDir(dir string) func(*nodeOptions)        { return func(o *nodeOptions) { o.dir = dir } }
func withClock(c *testClock) func(*nodeOptions)    { return func(o *nodeOptions) { o.clock = c } }
func withQuery(q query.Options) func(*nodeOptions) { return func(o *nodeOptions) { o.query = q } }
func withTrending(o trending.OperatorOptions) func(*nodeOptions) {
	return func(no *nodeOptions) { no.trending = o }
}
func withDisk(d query.Disk) func(*nodeOptions) { return func(o *nodeOptions) { o.disk = d } }
func withoutEngine() func(*nodeOptions)        { return func(o *nodeOptions) { o.noEngine = true } }
func withArticles() func(*nodeOptions)         { return func(o *nodeOptions) { o.articles = true } }
func withCluster(c query.Cluster) func(*nodeOptions) {
	return func(o *nodeOptions) { o.cluster = c }
}
func withReplay(ops ...string) func(*nodeOptions) {
	return func(o *nodeOptions) { o.replay = ops }
}

// testConfig is the configuration of a test node: the defaults, with
// what the options say, a log that keeps everything (the test clock is in
// 2025), no crawling and fast commits.
func testConfig(o nodeOptions) node.Config {
	cfg := node.Default()
	cfg.DataDir = o.dir
	cfg.Log.Partitions = o.partitions
	cfg.Log.Embedded.Fsync = embedded.FsyncNever
	cfg.Log.Embedded.RetentionAge = embedded.KeepForever
	if o.brokers != nil {
		cfg.Log.Backend, cfg.Log.Brokers = "kafka", o.brokers
		e := &cfg.Engine
		e.Cluster, e.CommitInterval, e.RestartBackoff, e.MaxRestartBackoff = true, 20*time.Millisecond, 5*time.Millisecond, 50*time.Millisecond
	}
	cfg.Crawl.Enabled = false
	cfg.Trending.OperatorOptions = o.trending
	if cfg.Trending.SnapshotInterval == 0 {
		// Top-K answers are at most this stale; keep polls short.
		cfg.Trending.SnapshotInterval = time.Millisecond
	}
	if o.trending.MaxK != 0 {
		// The server's TrendingChanges are the test's; the node's only
		// need to be valid.
		cfg.Trending.Changes.K = min(cfg.Trending.Changes.K, o.trending.MaxK)
	}
	cfg.Stories = o.stories
	cfg.Search.CommitInterval = time.Millisecond
	cfg.Auth.BcryptCost, cfg.Auth.AllowWeakCostForTests = bcrypt.MinCost, true
	// The server's own options are the test's (node.Run would take them
	// from the configuration).
	cfg.HTTP = o.query
	return cfg
}

// testNodeOptions are what a test node is given beyond its configuration.
func testNodeOptions(o nodeOptions) node.Options {
	no := node.Options{Logger: slog.New(slog.DiscardHandler), Now: o.clock.Now}
	if !o.articles {
		no.Operators = []string{trending.Name, idempotency.Name, readstate.Name}
	}
	if o.meta != nil {
		no.Meta = meta.NewLocal(o.meta)
	}
	return no
}

func withLogWrapper(w func(eventlog.Log) eventlog.Log) func(*nodeOptions) {
	return func(o *nodeOptions) { o.wrapLog = w }
}

// testNode is a whole node in-process: embedded log, state, engine with the
// trending operator, and the HTTP server on an in-memory listener.
type testNode struct {
	node     *node.Node
	sources  *crawl.Sources
	dir      string
	clock    *testClock
	reg      *prometheus.Registry
	log      eventlog.Log
	db       *state.DB
	eng      *engine.Engine
	op       *trending.Operator
	stories  *story.Operator
	search   *search.Operator
	interest *interest.Operator
	auth     *auth.Store
	srv      *query.Server
	ln       *fasthttputil.InmemoryListener
	client   *fasthttp.Client

	stopOnce sync.Once
	stopFn   func()
}

// newTestNode starts a node (node.Open, as newsflow run opens one) and,
// unless withoutEngine, waits until it is ready. It is stopped in
// t.Cleanup, or earlier by stop.
func newTestNode(t testing.TB, opts ...func(*nodeOptions)) *testNode {
	t.Helper()
	o := nodeOptions{partitions: 4}
	for _, f := range opts {
		f(&o)
	}
	if o.dir == "" {
		o.dir = t.TempDir()
	}
	if o.clock == nil {
		o.clock = newTestClock()
	}
	nd, err := node.Open(context.Background(), testConfig(o), testNodeOptions(o))
	if err != nil {
		t.Fatalf("open node: %v", err)
	}
	n := &testNode{node: nd, dir: o.dir, clock: o.clock, reg: nd.Registry(), log: nd.Log(), db: nd.State(), eng: nd.Engine(),
		op: nd.Trending(), stories: nd.Stories(), search: nd.Search(), interest: nd.Interest(), auth: nd.Auth(), sources: nd.Sources()}
	fail := func(format string, args ...any) {
		t.Helper()
		nd.Close()
		t.Fatalf(format, args...)
	}
	if o.brokers != nil {
		n.eng.Assign(o.assign)
	}
	for _, op := range o.replay {
		if err := n.eng.Replay(context.Background(), op, func(eventlog.TopicPartition) (int64, error) { return 0, nil }); err != nil {
			fail("replay %s: %v", op, err)
		}
	}
	// Like the node: the shares topic exists before the server takes schema.
	for _, topic := range []string{schema.TopicShares, schema.TopicReads} {
		if _, err := eventlog.EnsureTopic(context.Background(), n.log, topic, n.eng.Partitions()); err != nil {
			fail("ensure topic: %v", err)
		}
	}

	qo := o.query
	qo.Registerer, qo.Gatherer, qo.Now = n.reg, n.reg, n.clock.Now
	qo.AdminToken = testAdminToken
	qo.IngestToken = cmp.Or(qo.IngestToken, testIngestToken)
	qo.DataDir = cmp.Or(qo.DataDir, o.dir)
	deps := nd.Deps()
	if o.wrapLog != nil {
		deps.Log = o.wrapLog(n.log)
	}
	deps.Cluster = o.cluster
	if o.disk != nil {
		deps.Disk = o.disk
	}
	if n.srv, err = query.New(deps, qo); err != nil {
		fail("query.New: %v", err)
	}

	engineCtx, stopEngine := context.WithCancel(context.Background())
	engineErr := make(chan error, 1)
	if o.noEngine {
		engineErr <- nil
	} else {
		go func() { engineErr <- n.eng.Run(engineCtx) }()
	}
	serverCtx, stopServer := context.WithCancel(context.Background())
	serverErr := make(chan error, 1)
	var ln net.Listener = o.listener
	dial := func(string) (net.Conn, error) { return net.Dial("tcp", ln.Addr().String()) }
	if ln == nil {
		n.ln = fasthttputil.NewInmemoryListener()
		ln, dial = n.ln, func(string) (net.Conn, error) { return n.ln.Dial() }
	}
	go func() { serverErr <- n.srv.Run(serverCtx, ln) }()
	n.client = &fasthttp.Client{
		Dial:                     dial,
		ReadTimeout:              10 * time.Second,
		WriteTimeout:             10 * time.Second,
		DisablePathNormalizing:   true,
		NoDefaultUserAgentHeader: true,
	}

	n.stopFn = func() {
		// Two phases, like the node: the server drains, then the engine
		// commits, then state and log close.
		stopServer()
		if err := <-serverErr; err != nil {
			t.Errorf("server Run: %v", err)
		}
		n.client.CloseIdleConnections()
		stopEngine()
		if err := <-engineErr; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("engine Run: %v", err)
		}
		if err := n.node.Close(); err != nil {
			t.Errorf("close node: %v", err)
		}
	}
	t.Cleanup(n.stop)
	// Run answers once it has loaded the idempotency keys.
	testutil.Eventually(t, 10*time.Second, func() error {
		if r := n.get(t, "/health/live"); r.status != fasthttp.StatusOK {
			return fmt.Errorf("/health/live: %s", r)
		}
		return nil
	})
	if !o.noEngine {
		n.waitReady(t)
	}
	return n
}

// stop shuts the node down; it is idempotent.
func (n *testNode) stop() { n.stopOnce.Do(n.stopFn) }

// response is an HTTP response, copied out of fasthttp's pooled objects.
type response struct {
	status int
	header map[string]string
	body   []byte
}

func (r response) String() string { return fmt.Sprintf("%d %s", r.status, r.body) }

// do sends one request; hdr is a list of header name, value pairs.
func (n *testNode) do(t testing.TB, method, uri string, body []byte, hdr ...string) response {
	t.Helper()
	r, err := n.tryDo(method, uri, body, hdr...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// asyncResult is the outcome of a request made by doAsync.
type asyncResult struct {
	r   response
	err error
}

// doAsync makes a request (as tryDo) in the background; its outcome
// arrives on the channel.
func (n *testNode) doAsync(method, uri string, body []byte, hdr ...string) <-chan asyncResult {
	done := make(chan asyncResult, 1)
	go func() {
		r, err := n.tryDo(method, uri, body, hdr...)
		done <- asyncResult{r, err}
	}()
	return done
}

// tryDo is do for goroutines other than the test's: it returns the error.
func (n *testNode) tryDo(method, uri string, body []byte, hdr ...string) (response, error) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod(method)
	req.SetRequestURI("http://newsflow" + uri)
	req.URI().DisablePathNormalizing = true
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	// Admin endpoints are called as the admin, and reads and articles are
	// written as a trusted service (the ingestion token), unless the test
	// says who.
	if len(req.Header.Peek("Authorization")) == 0 && !slices.Contains(hdr, "X-Anonymous") && len(req.Header.Cookie(query.SessionCookie)) == 0 {
		switch {
		case strings.HasPrefix(uri, "/api/v1/admin/"):
			req.Header.Set("Authorization", "Bearer "+testAdminToken)
		case strings.HasPrefix(uri, "/api/v1/events/read"), uri == "/api/v1/articles":
			req.Header.Set("Authorization", "Bearer "+testIngestToken)
		}
	}
	if body != nil {
		req.SetBody(body)
		if len(req.Header.Peek("Content-Type")) == 0 {
			// fasthttp's default is a form: the API's bodies are JSON.
			req.Header.SetContentType("application/json")
		}
	}
	if err := n.client.DoTimeout(req, resp, 10*time.Second); err != nil {
		return response{}, fmt.Errorf("%s %s: %w", method, uri, err)
	}
	return copyResponse(resp), nil
}

func copyResponse(resp *fasthttp.Response) response {
	r := response{status: resp.StatusCode(), header: map[string]string{}, body: bytes.Clone(resp.Body())}
	for k, v := range resp.Header.All() {
		r.header[http1Canonical(string(k))] = string(v)
	}
	return r
}

// http1Canonical is the canonical form of a header name (content-type →
// Content-Type), whatever form fasthttp hands back.
func http1Canonical(s string) string {
	b := []byte(strings.ToLower(s))
	up := true
	for i, c := range b {
		if up && c >= 'a' && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
		up = c == '-'
	}
	return string(b)
}

func (n *testNode) get(t testing.TB, uri string) response {
	t.Helper()
	return n.do(t, fasthttp.MethodGet, uri, nil)
}

func (n *testNode) post(t testing.TB, uri, body string, hdr ...string) response {
	t.Helper()
	return n.do(t, fasthttp.MethodPost, uri, []byte(body), hdr...)
}

// postShareBatch posts share events, one JSON object a line, as one batch
// and fails the test unless the node accepts all of them.
func (n *testNode) postShareBatch(t testing.TB, lines []string) {
	t.Helper()
	if r := n.post(t, pathBatch, strings.Join(lines, "\n")); r.status != fasthttp.StatusAccepted {
		t.Fatalf("post shares: %s", r)
	}
}

// rawRequest writes raw bytes on a new connection and reads one response,
// for requests a well-behaved client would not send whole.
func (n *testNode) rawRequest(t testing.TB, raw string) response {
	t.Helper()
	conn, err := n.ln.Dial()
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write([]byte(raw)); err != nil {
		t.Fatalf("write: %v", err)
	}
	var resp fasthttp.Response
	if err := resp.Read(bufio.NewReader(conn)); err != nil {
		t.Fatalf("read response: %v", err)
	}
	return copyResponse(&resp)
}

func (n *testNode) waitReady(t testing.TB) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, func() error {
		if r := n.get(t, "/health/ready"); r.status != fasthttp.StatusOK {
			return fmt.Errorf("/health/ready: %s", r)
		}
		return nil
	})
}

// progress is the body of GET /api/v1/admin/progress.
type progress struct {
	Ready    bool `json:"ready"`
	CaughtUp bool `json:"caught_up"`
	Inputs   []struct {
		Stage     string `json:"stage"`
		Topic     string `json:"topic"`
		Partition int32  `json:"partition"`
		Committed int64  `json:"committed"`
		Lag       int64  `json:"lag"`
	} `json:"inputs"`
}

// waitCaughtUp polls the progress endpoint until the engine has applied
// everything in the log.
func (n *testNode) waitCaughtUp(t testing.TB) progress {
	t.Helper()
	var p progress
	testutil.Eventually(t, 10*time.Second, func() error {
		r := n.get(t, "/api/v1/admin/progress")
		if r.status != fasthttp.StatusOK {
			return fmt.Errorf("progress: %s", r)
		}
		p = decodeStrict[progress](t, r.body)
		if !p.CaughtUp {
			return fmt.Errorf("not caught up: %s", r.body)
		}
		return nil
	})
	return p
}

// appended returns how many records the shares topic holds.
func (n *testNode) appended(t testing.TB) int64 {
	t.Helper()
	ctx := context.Background()
	parts, err := n.log.Partitions(ctx, schema.TopicShares)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for p := range parts {
		o, err := n.log.Offsets(ctx, eventlog.TopicPartition{Topic: schema.TopicShares, Partition: p})
		if err != nil {
			t.Fatal(err)
		}
		sum += o.End - o.Start
	}
	return sum
}

// articleShares is the body of GET /api/v1/articles/{id}/shares.
type articleShares struct {
	ArticleID string            `json:"article_id"`
	Counts    map[string]uint64 `json:"counts"`
	AsOf      int64             `json:"as_of"`
}

// shares returns the counts of an article in every window. id goes into
// the path as it is.
func (n *testNode) shares(t testing.TB, id string) articleShares {
	t.Helper()
	r := n.get(t, "/api/v1/articles/"+id+"/shares")
	if r.status != fasthttp.StatusOK {
		t.Fatalf("shares of %q: %s", id, r)
	}
	return decodeStrict[articleShares](t, r.body)
}

// waitShares waits until the node has applied everything in the log and
// then checks an article's counts.
func (n *testNode) waitShares(t testing.TB, id string, want map[string]uint64) {
	t.Helper()
	n.waitCaughtUp(t)
	got := n.shares(t, id)
	if !maps.Equal(got.Counts, want) {
		t.Fatalf("counts of %q = %v, want %v", id, got.Counts, want)
	}
}

// counts builds the expected per-window counts 1m, 1h, 24h.
func counts(m, h, d uint64) map[string]uint64 {
	return map[string]uint64{"1m": m, "1h": h, "24h": d}
}

// trendingResult is the body of GET /api/v1/trending.
type trendingResult struct {
	Window   string `json:"window"`
	Category string `json:"category"`
	Items    []struct {
		Rank      int    `json:"rank"`
		ArticleID string `json:"article_id"`
		Count     uint64 `json:"count"`
	} `json:"items"`
	AsOf    int64   `json:"as_of"`
	Partial []int32 `json:"missing_partitions"`
}

// ranking renders the items as "id:count" in rank order, checking that the
// ranks are 1..n.
func (r trendingResult) ranking(t testing.TB) string {
	t.Helper()
	var parts []string
	for i, it := range r.Items {
		if it.Rank != i+1 {
			t.Fatalf("item %d has rank %d: %+v", i, it.Rank, r.Items)
		}
		parts = append(parts, it.ArticleID+":"+strconv.FormatUint(it.Count, 10))
	}
	return strings.Join(parts, " ")
}

// waitTrending polls the trending endpoint until its ranking is want.
func (n *testNode) waitTrending(t testing.TB, query, want string) trendingResult {
	t.Helper()
	n.waitCaughtUp(t)
	var res trendingResult
	testutil.Eventually(t, 5*time.Second, func() error {
		r := n.get(t, "/api/v1/trending"+query)
		if r.status != fasthttp.StatusOK {
			return fmt.Errorf("trending%s: %s", query, r)
		}
		res = decodeStrict[trendingResult](t, r.body)
		if got := res.ranking(t); got != want {
			return fmt.Errorf("trending%s = %q, want %q", query, got, want)
		}
		return nil
	})
	return res
}

// metrics returns the samples /metrics exposes, by series
// (name{label="value",...}, labels in exposition order).
func (n *testNode) metrics(t testing.TB) map[string]float64 {
	t.Helper()
	r := n.get(t, "/metrics")
	if r.status != fasthttp.StatusOK {
		t.Fatalf("/metrics: %s", r)
	}
	out, err := testutil.Series(r.body)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// decodeStrict decodes a JSON body into T, rejecting unknown fields and
// trailing data.
func decodeStrict[T any](t testing.TB, body []byte) T {
	t.Helper()
	var v T
	d := json.NewDecoder(bytes.NewReader(body))
	d.DisallowUnknownFields()
	if err := d.Decode(&v); err != nil {
		t.Fatalf("decode %T from %s: %v", v, body, err)
	}
	if d.More() {
		t.Fatalf("trailing data after %T in %s", v, body)
	}
	return v
}

// errorMessage checks that r is a JSON error response with the given status
// and returns its message.
func errorMessage(t testing.TB, r response, status int) string {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body %s", r.status, status, r.body)
	}
	if ct := r.header["Content-Type"]; ct != "application/json" {
		t.Fatalf("Content-Type %q, want application/json; body %q", ct, r.body)
	}
	var body map[string]json.RawMessage
	if err := json.Unmarshal(r.body, &body); err != nil {
		t.Fatalf("error body %q is not a JSON object: %v", r.body, err)
	}
	var msg string
	if err := json.Unmarshal(body["error"], &msg); err != nil || msg == "" {
		t.Fatalf("error body %s has no error message", r.body)
	}
	return msg
}

// wantError checks for a JSON error response whose message contains every
// one of parts.
func wantError(t testing.TB, r response, status int, parts ...string) {
	t.Helper()
	msg := errorMessage(t, r, status)
	for _, p := range parts {
		if !strings.Contains(msg, p) {
			t.Fatalf("error %q does not mention %q", msg, p)
		}
	}
}

// share renders a share event. ts is an int64 (milliseconds) or a string.
func share(eventID, articleID string, ts any, extra ...string) string {
	m := map[string]any{"event_id": eventID, "article_id": articleID, "user_id": "u-" + eventID, "timestamp": ts}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i]] = extra[i+1]
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return string(b)
}

const (
	pathShare = "/api/v1/events/share"
	pathBatch = "/api/v1/events/share/batch"
)
