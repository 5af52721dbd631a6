package bench

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"testing"

	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/internal/tracing"
)

// benchTracing reads NEWSFLOW_BENCH_TRACE, the sample ratio of the article
// pipeline's traces (0 to 1). Set, the node traces, exporting over
// OTLP/HTTP to a local receiver that reads and drops what it gets, and the
// stream's records carry trace context as the crawler's would (see
// traceRecords); unset, tracing is off, as by default.
func benchTracing(b *testing.B) (tracing.Options, bool) {
	v := os.Getenv("NEWSFLOW_BENCH_TRACE")
	if v == "" {
		return tracing.Options{}, false
	}
	ratio, err := strconv.ParseFloat(v, 64)
	if err != nil || ratio < 0 || ratio > 1 {
		b.Fatalf("NEWSFLOW_BENCH_TRACE=%q: want a ratio from 0 to 1", v)
	}
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	b.Cleanup(rcv.Close)
	if ratio == 0 {
		ratio = -1 // tracing.Options: 0 is the default ratio, negative none
	}
	return tracing.Options{Exporter: tracing.ExporterOTLP, Endpoint: rcv.URL, SampleRatio: ratio}, true
}

// traceRecords puts trace context on the stream as the crawler does with
// tracing o: each batch is one crawl, sampled or not, and each record of a
// sampled one carries the span of its item.
func traceRecords(b *testing.B, batches [][]*eventlog.Record, o tracing.Options) {
	b.Helper()
	tr, err := tracing.Open(o, nil)
	if err != nil {
		b.Fatal(err)
	}
	traced := 0
	for _, batch := range batches {
		ctx, crawl := tr.Crawl(context.Background(), "bench", "bench", "")
		var items tracing.Spans
		for _, r := range batch {
			items.Add(tr.Item(ctx, string(r.Key), ""), r)
		}
		items.End(nil)
		traced += len(items)
		crawl.End("ok", "", len(batch))
	}
	if err := tr.Shutdown(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Logf("%d records of %d batches traced", traced, len(batches))
}
