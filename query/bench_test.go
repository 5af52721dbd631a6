package query_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// serveDirect runs one request through the server's handler.
func serveDirect(h fasthttp.RequestHandler, method, uri string, body []byte) int {
	var req fasthttp.Request
	req.Header.SetMethod(method)
	req.SetRequestURI(uri)
	req.SetBody(body)
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, nil, discardLogger{})
	h(&ctx)
	return ctx.Response.StatusCode()
}

// BenchmarkIngestBatch ingests 100-line batches: validation, partitioning
// and the append to the embedded log (no fsync).
func BenchmarkIngestBatch(b *testing.B) {
	n := newTestNode(b, withoutEngine())
	h := n.srv.Handler()
	lines := make([]string, 100)
	for i := range lines {
		lines[i] = share(fmt.Sprintf("e%d", i), fmt.Sprintf("article-%d", i%37), n.clock.ms(0), "category", "tech")
	}
	body := []byte(strings.Join(lines, "\n"))
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if s := serveDirect(h, fasthttp.MethodPost, pathBatch, body); s != fasthttp.StatusAccepted {
			b.Fatalf("status %d", s)
		}
	}
}

// BenchmarkTrending answers top-10 queries over 1000 articles.
func BenchmarkTrending(b *testing.B) {
	n := newTestNode(b)
	var args []any
	for i := range 1000 {
		args = append(args, fmt.Sprintf("article-%04d", i), 1+i%7)
	}
	postShares(b, n, "bench", args...)
	n.waitCaughtUp(b)
	h := n.srv.Handler()
	for b.Loop() {
		if s := serveDirect(h, fasthttp.MethodGet, "/api/v1/trending?window=1h&k=10", nil); s != fasthttp.StatusOK {
			b.Fatalf("status %d", s)
		}
	}
}
