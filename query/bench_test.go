package query_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/query"
	"github.com/valyala/fasthttp"
)

// serveDirect runs one request through the server's handler, with the
// header pairs hdr.
func serveDirect(h fasthttp.RequestHandler, method, uri string, body []byte, hdr ...string) int {
	var req fasthttp.Request
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
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

// BenchmarkIngestBatchWithKey ingests 100-line batches with an
// Idempotency-Key: new, a new key each time (the lookup waits until the
// node's copy of the key's partition holds what the topic held, then the
// batch is appended whole with its marker); retry, the same key again
// (the stored response, nothing appended).
func BenchmarkIngestBatchWithKey(b *testing.B) {
	n := newTestNode(b)
	h := n.srv.Handler()
	lines := make([]string, 100)
	for i := range lines {
		lines[i] = share(fmt.Sprintf("e%d", i), fmt.Sprintf("article-%d", i%37), n.clock.ms(0), "category", "tech")
	}
	body := []byte(strings.Join(lines, "\n"))
	b.Run("new", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		i := 0
		for b.Loop() {
			i++
			if s := serveDirect(h, fasthttp.MethodPost, pathBatch, body, query.HeaderIdempotencyKey, fmt.Sprintf("k%d", i)); s != fasthttp.StatusAccepted {
				b.Fatalf("status %d", s)
			}
		}
	})
	b.Run("retry", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if s := serveDirect(h, fasthttp.MethodPost, pathBatch, body, query.HeaderIdempotencyKey, "k1"); s != fasthttp.StatusAccepted {
				b.Fatalf("status %d", s)
			}
		}
	})
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

// BenchmarkShareLimits posts anonymous 100-line share batches over HTTP
// (the in-memory listener) to two nodes, one with the anonymous share
// limit off and one with it on (a limit that admits every line, so both
// append the same), alternating, and reports each one's time per batch
// and their ratio: interleaved, the ratio holds on a busy machine.
func BenchmarkShareLimits(b *testing.B) {
	off := newTestNode(b, withoutEngine())
	on := newTestNode(b, withoutEngine(), withQuery(query.Options{RateLimits: query.RateLimits{SharesPerIP: 1e12, BurstSharesIP: 1 << 30}}))
	lines := make([]string, 100)
	for i := range lines {
		lines[i] = share(fmt.Sprintf("e%d", i), fmt.Sprintf("article-%d", i%37), off.clock.ms(0), "category", "tech")
	}
	body := []byte(strings.Join(lines, "\n"))
	post := func(n *testNode) time.Duration {
		start := time.Now()
		r, err := n.tryDo(fasthttp.MethodPost, pathBatch, body, "X-Anonymous", "1")
		if err != nil || r.status != fasthttp.StatusAccepted {
			b.Fatalf("%v %s", err, r)
		}
		return time.Since(start)
	}
	var tOff, tOn time.Duration
	i := 0
	for b.Loop() {
		if i++; i%2 == 0 {
			tOff += post(off)
			tOn += post(on)
		} else {
			tOn += post(on)
			tOff += post(off)
		}
	}
	b.ReportMetric(float64(tOff.Nanoseconds())/float64(i), "off-ns/batch")
	b.ReportMetric(float64(tOn.Nanoseconds())/float64(i), "on-ns/batch")
	b.ReportMetric(float64(tOn)/float64(tOff), "on/off")
}
