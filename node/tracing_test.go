package node_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/newsflow/newsflow/crawl"
	"github.com/newsflow/newsflow/demo/feedfarm"
	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/eventlog/embedded"
	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/internal/testutil"
	"github.com/newsflow/newsflow/internal/tracing"
	"github.com/newsflow/newsflow/node"
)

const (
	traceAdminToken  = "trace-admin-token"
	traceIngestToken = "trace-ingest-token"
	// incomingTrace is the trace of the requests that come with a
	// traceparent; each uses its own parent span id.
	incomingTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	feedItems     = 4
)

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
	rcv := testutil.NewOTLPReceiver(t)
	n := runTracedNode(t, tracing.Options{Exporter: tracing.ExporterOTLP, Endpoint: rcv.URL, SampleRatio: 1})
	n.ingestAndCrawl(t)
	if got := n.search(t, "source="+n.source, "traceparent", "00-"+incomingTrace+"-0000000000000abc-01"); len(got) != feedItems {
		t.Fatalf("search: %v", got)
	}
	// Run stops, the engine commits, Close flushes every span.
	n.close()
	spans := rcv.Spans()
	byID := map[string]testutil.Span{}
	children := map[string][]testutil.Span{}
	for _, s := range spans {
		byID[s.ID] = s
		children[s.Parent] = append(children[s.Parent], s)
	}
	// child returns the child of parent called name (in parent's trace).
	child := func(parent testutil.Span, name string) testutil.Span {
		t.Helper()
		for _, c := range children[parent.ID] {
			if c.Name == name {
				if c.Trace != parent.Trace {
					t.Fatalf("%s in trace %s, its parent %s in %s", c.Name, c.Trace, parent.Name, parent.Trace)
				}
				return c
			}
		}
		var names []string
		for _, c := range children[parent.ID] {
			names = append(names, c.Name)
		}
		t.Fatalf("%s %s has no child %q; children %v", parent.Name, parent.ID, name, names)
		return testutil.Span{}
	}

	// The crawl, its items, and for each item the stages' spans.
	var crawlSpan testutil.Span
	for _, s := range spans {
		if s.Name == "crawl Farm" && s.Attrs["newsflow.crawl.outcome"] == "ok" {
			crawlSpan = s
		}
	}
	if crawlSpan.ID == "" || crawlSpan.Parent != "" {
		t.Fatalf("no root span of the farm's crawl among %d spans", len(spans))
	}
	indexed := map[string]bool{} // search apply spans, trace/span
	items := 0
	for _, item := range children[crawlSpan.ID] {
		if item.Name != "crawl item" {
			continue
		}
		items++
		articles := child(item, "articles apply")
		stories := child(articles, "stories apply")
		search := child(stories, "search apply")
		if articles.Attrs["newsflow.key"] == "" || search.Attrs["newsflow.topic"] != schema.TopicArticlesIndexed {
			t.Errorf("apply span attributes: %v, %v", articles.Attrs, search.Attrs)
		}
		for _, s := range children[stories.ID] {
			if s.Name == "search apply" {
				indexed[s.Trace+"/"+s.ID] = true
			}
		}
	}
	if items != feedItems {
		t.Errorf("%d item spans under the crawl, want %d", items, feedItems)
	}

	// The search with a traceparent is its child, and links to each hit's
	// indexing.
	var searchSpan testutil.Span
	for _, s := range children["0000000000000abc"] {
		if s.Name == "search" {
			searchSpan = s
		}
	}
	if searchSpan.Trace != incomingTrace {
		t.Fatalf("no search span in the caller's trace")
	}
	linked := 0
	for _, l := range searchSpan.Links {
		if indexed[l] {
			linked++
		}
	}
	if linked != feedItems {
		t.Errorf("search links %v: %d to the items' indexing, want %d", searchSpan.Links, linked, feedItems)
	}

	// The ingestion request continues its caller's trace down the stages.
	var ingest testutil.Span
	for _, s := range children["00f067aa0ba902b7"] {
		if s.Name == "ingest article" {
			ingest = s
		}
	}
	if ingest.Trace != incomingTrace || ingest.Attrs["http.response.status_code"] != "202" {
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
