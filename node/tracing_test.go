package node_test

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/newsflow/newsflow/crawl"
	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/eventlog/embedded"
	"github.com/newsflow/newsflow/internal/feedfarm"
	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/internal/testutil"
	"github.com/newsflow/newsflow/internal/tracing"
	"github.com/newsflow/newsflow/node"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"
)

const (
	traceAdminToken  = "trace-admin-token"
	traceIngestToken = "trace-ingest-token"
	// incomingTrace is the trace of the requests that come with a
	// traceparent; each uses its own parent span id.
	incomingTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	feedItems     = 4
)

// span is an exported span as the receiver decoded it.
type span struct {
	trace, id, parent, name string
	attrs                   map[string]string
	links                   []string // trace/span
}

// otlpReceiver is an OTLP/HTTP collector: it takes POST /v1/traces with a
// protobuf ExportTraceServiceRequest, gzipped or not, and keeps the spans.
type otlpReceiver struct {
	*httptest.Server
	mu    sync.Mutex
	spans []span
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.Close)
	return r
}

func (r *otlpReceiver) serve(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		http.Error(w, "want POST /v1/traces", http.StatusNotFound)
		return
	}
	body := io.Reader(req.Body)
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var msg coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range msg.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				sp := span{trace: hex.EncodeToString(s.TraceId), id: hex.EncodeToString(s.SpanId),
					parent: hex.EncodeToString(s.ParentSpanId), name: s.Name, attrs: map[string]string{}}
				for _, a := range s.Attributes {
					switch v := a.Value.Value.(type) {
					case *commonpb.AnyValue_StringValue:
						sp.attrs[a.Key] = v.StringValue
					case *commonpb.AnyValue_IntValue:
						sp.attrs[a.Key] = strconv.FormatInt(v.IntValue, 10)
					}
				}
				for _, l := range s.Links {
					sp.links = append(sp.links, hex.EncodeToString(l.TraceId)+"/"+hex.EncodeToString(l.SpanId))
				}
				r.spans = append(r.spans, sp)
			}
		}
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
}

func (r *otlpReceiver) all() []span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]span(nil), r.spans...)
}

// tracedNode is a node running in-process that crawls a feed farm's feed,
// with the tracing given.
type tracedNode struct {
	*node.Node
	base   string // http://addr
	source string // the farm feed's source id
	stop   func() // stops Run
	close  func() // stops Run and closes the node
}

func runTracedNode(t *testing.T, to tracing.Options) *tracedNode {
	t.Helper()
	farm := httptest.NewServer(feedfarm.New(feedfarm.Options{Items: feedItems}))
	t.Cleanup(farm.Close)
	cfg := node.Default()
	cfg.DataDir = t.TempDir()
	cfg.Log.Partitions = 2
	cfg.Log.Embedded.Fsync = embedded.FsyncNever
	cfg.Crawl.Enabled, cfg.Crawl.SeedOPML, cfg.Crawl.IgnoreRobots = true, "", true
	cfg.Crawl.Fetch.AllowPrivate = true // the farm is on 127.0.0.1
	cfg.Search.CommitInterval = time.Millisecond
	cfg.Auth.AdminToken, cfg.Auth.IngestToken = traceAdminToken, traceIngestToken
	cfg.Tracing = to
	n, err := node.Open(context.Background(), cfg, node.Options{})
	if err != nil {
		t.Fatal(err)
	}
	src, err := n.Sources().Add(context.Background(), crawl.Source{FeedURL: farm.URL + "/gen/0.xml", Name: "Farm"})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx, ln) }()
	stop := sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("node Run: %v", err)
		}
	})
	closeNode := sync.OnceFunc(func() {
		stop()
		if err := n.Close(); err != nil {
			t.Errorf("close node: %v", err)
		}
	})
	t.Cleanup(closeNode)
	return &tracedNode{Node: n, base: "http://" + ln.Addr().String(), source: src.ID, stop: stop, close: closeNode}
}

// do sends a request with the header pairs hdr and returns the answer's
// status and body.
func (n *tracedNode) do(t *testing.T, method, path, body string, hdr ...string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, n.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// search returns the ids of the hits of a search.
func (n *tracedNode) search(t *testing.T, args string, hdr ...string) []string {
	t.Helper()
	code, b := n.do(t, http.MethodGet, "/api/v1/search?limit=100&"+args, "", hdr...)
	var page struct {
		Hits []struct {
			ID string `json:"id"`
		} `json:"hits"`
	}
	if code != http.StatusOK || json.Unmarshal(b, &page) != nil {
		return nil
	}
	var ids []string
	for _, h := range page.Hits {
		ids = append(ids, h.ID)
	}
	return ids
}

// ingestAndCrawl posts an article with a traceparent (parent span
// 00f067aa0ba902b7 of incomingTrace) and waits until it and the crawled
// items are searchable.
func (n *tracedNode) ingestAndCrawl(t *testing.T) {
	t.Helper()
	body := `{"url":"https://posted.example/quokka","source_id":"posted","title":"Quokka census counts record numbers","published_at":"2025-12-31T12:00:00Z"}`
	code, b := n.do(t, http.MethodPost, "/api/v1/articles", body, "Authorization", "Bearer "+traceIngestToken,
		"Content-Type", "application/json", "traceparent", "00-"+incomingTrace+"-00f067aa0ba902b7-01")
	if code != http.StatusAccepted {
		t.Fatalf("post article: %d %s", code, b)
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		if got := n.search(t, "source="+n.source); len(got) != feedItems {
			return fmt.Errorf("crawled items searchable: %v", got)
		}
		if got := n.search(t, "q=quokka"); len(got) != 1 {
			return fmt.Errorf("posted article searchable: %v", got)
		}
		return nil
	})
}

// A crawled article is traced from its crawl through the log to the
// search index, each stage's span the child of the one before it, and a
// search that finds it links to that trace; an ingestion request with a
// traceparent continues the caller's trace.
func TestNodeTracesArticles(t *testing.T) {
	rcv := newOTLPReceiver(t)
	n := runTracedNode(t, tracing.Options{Exporter: tracing.ExporterOTLP, Endpoint: rcv.URL, SampleRatio: 1})
	n.ingestAndCrawl(t)
	if got := n.search(t, "source="+n.source, "traceparent", "00-"+incomingTrace+"-0000000000000abc-01"); len(got) != feedItems {
		t.Fatalf("search: %v", got)
	}
	// Run stops, the engine commits, Close flushes every span.
	n.close()
	spans := rcv.all()
	byID := map[string]span{}
	children := map[string][]span{}
	for _, s := range spans {
		byID[s.id] = s
		children[s.parent] = append(children[s.parent], s)
	}
	// child returns the child of parent called name (in parent's trace).
	child := func(parent span, name string) span {
		t.Helper()
		for _, c := range children[parent.id] {
			if c.name == name {
				if c.trace != parent.trace {
					t.Fatalf("%s in trace %s, its parent %s in %s", c.name, c.trace, parent.name, parent.trace)
				}
				return c
			}
		}
		var names []string
		for _, c := range children[parent.id] {
			names = append(names, c.name)
		}
		t.Fatalf("%s %s has no child %q; children %v", parent.name, parent.id, name, names)
		return span{}
	}

	// The crawl, its items, and for each item the stages' spans.
	var crawlSpan span
	for _, s := range spans {
		if s.name == "crawl Farm" && s.attrs["newsflow.crawl.outcome"] == "ok" {
			crawlSpan = s
		}
	}
	if crawlSpan.id == "" || crawlSpan.parent != "" {
		t.Fatalf("no root span of the farm's crawl among %d spans", len(spans))
	}
	indexed := map[string]bool{} // search apply spans, trace/span
	items := 0
	for _, item := range children[crawlSpan.id] {
		if item.name != "crawl item" {
			continue
		}
		items++
		articles := child(item, "articles apply")
		stories := child(articles, "stories apply")
		search := child(stories, "search apply")
		if articles.attrs["newsflow.key"] == "" || search.attrs["newsflow.topic"] != schema.TopicArticlesIndexed {
			t.Errorf("apply span attributes: %v, %v", articles.attrs, search.attrs)
		}
		for _, s := range children[stories.id] {
			if s.name == "search apply" {
				indexed[s.trace+"/"+s.id] = true
			}
		}
	}
	if items != feedItems {
		t.Errorf("%d item spans under the crawl, want %d", items, feedItems)
	}

	// The search with a traceparent is its child, and links to each hit's
	// indexing.
	var searchSpan span
	for _, s := range children["0000000000000abc"] {
		if s.name == "search" {
			searchSpan = s
		}
	}
	if searchSpan.trace != incomingTrace {
		t.Fatalf("no search span in the caller's trace")
	}
	linked := 0
	for _, l := range searchSpan.links {
		if indexed[l] {
			linked++
		}
	}
	if linked != feedItems {
		t.Errorf("search links %v: %d to the items' indexing, want %d", searchSpan.links, linked, feedItems)
	}

	// The ingestion request continues its caller's trace down the stages.
	var ingest span
	for _, s := range children["00f067aa0ba902b7"] {
		if s.name == "ingest article" {
			ingest = s
		}
	}
	if ingest.trace != incomingTrace || ingest.attrs["http.response.status_code"] != "202" {
		t.Fatalf("ingestion span %+v", ingest)
	}
	child(child(child(ingest, "articles apply"), "stories apply"), "search apply")
}

// With the exporter none, no record carries a traceparent: neither the
// crawled items nor a request's that came with one, in any topic of the
// article pipeline.
func TestNodeUntracedRecords(t *testing.T) {
	n := runTracedNode(t, tracing.Options{})
	n.ingestAndCrawl(t)
	n.stop()
	for _, topic := range []string{schema.TopicArticlesRaw, schema.TopicArticles, schema.TopicArticlesIndexed} {
		recs := testutil.ReadTopic(t, n.Log(), topic)
		if len(recs) < feedItems+1 {
			t.Errorf("%s: %d records, want %d at least", topic, len(recs), feedItems+1)
		}
		for _, r := range recs {
			if v, ok := r.Header(engine.HeaderTraceParent); ok {
				t.Errorf("%s@%d has traceparent %s", topic, r.Offset, v)
			}
		}
	}
}
