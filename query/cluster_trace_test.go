package query_test

import (
	"context"
	"testing"
	"time"

	"github.com/newsflow/newsflow/internal/testutil"
	"github.com/newsflow/newsflow/internal/tracing"
	"github.com/newsflow/newsflow/query"
	"github.com/valyala/fasthttp"
)

// A traced search continues on every node it fans out to: each other
// node's search span is a child of the asked node's, in the caller's trace.
func TestClusterSearchTraceContinues(t *testing.T) {
	rcv := testutil.NewOTLPReceiver(t)
	tr, err := tracing.Open(tracing.Options{Exporter: tracing.ExporterOTLP, Endpoint: rcv.URL, SampleRatio: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := newClusterNet(t, map[string][]int32{"a": {0, 2}, "b": {1, 3}}, withQuery(query.Options{PeerTimeout: time.Second, Tracing: tr}))
	const trace, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	r := c.node("a").do(t, "GET", "/api/v1/search?q=lisbon", nil, "traceparent", "00-"+trace+"-"+parent+"-01")
	if r.status != fasthttp.StatusOK {
		t.Fatalf("search: %s", r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tr.Shutdown(ctx); err != nil { // flushes the spans
		t.Fatal(err)
	}
	var asked testutil.Span
	var others []testutil.Span
	for _, s := range rcv.Spans() {
		switch {
		case s.Name != "search" || s.Trace != trace:
		case s.Parent == parent:
			asked = s
		default:
			others = append(others, s)
		}
	}
	if asked.ID == "" {
		t.Fatalf("no search span under the caller's among %d spans", len(rcv.Spans()))
	}
	if len(others) != 1 || others[0].Parent != asked.ID {
		t.Fatalf("the other node's search spans %+v, want one, the child of the asked node's %s", others, asked.ID)
	}
}
