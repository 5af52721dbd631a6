package tracing

import (
	"context"
	"fmt"
	"testing"

	"github.com/newsflow/newsflow/engine/eventlog"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// discard is an exporter that drops what it is given: the benchmarks
// measure newsflow's side of tracing, the batch span processor included,
// not a collector.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// benchTracing traces with ratio through a batch span processor into
// discard; ratio 0 stands for "off" (a nil *Tracing, as a node without
// tracing has).
func benchTracing(b *testing.B, ratio float64) *Tracing {
	if ratio == 0 {
		return nil
	}
	tr := newTracing(Options{Exporter: ExporterOTLP, SampleRatio: ratio}, sdktrace.WithBatcher(discard{}))
	b.Cleanup(func() { tr.Shutdown(context.Background()) })
	return tr
}

// One record applied by a stage: what the engine calls per traced record
// (Start before Process, end at the commit), for a parent sampled and one
// not. Records without a traceparent never reach the tracer.
func BenchmarkRecordTracer(b *testing.B) {
	for _, c := range []struct{ name, parent string }{
		{"sampled", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		{"not-sampled", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"},
	} {
		b.Run(c.name, func(b *testing.B) {
			et := benchTracing(b, 1).Engine()
			rec := &eventlog.Record{Topic: "articles", Partition: 3, Offset: 12345, Key: []byte("4b1c2a9e0f1d4c7f8e2a1b3c4d5e6f70")}
			parent := []byte(c.parent)
			b.ReportAllocs()
			for b.Loop() {
				_, end := et.Start("stories", 0, rec, parent)
				if end != nil {
					end(nil)
				}
			}
		})
	}
}

// One ingestion request of 50 records: its span, the records stamped, the
// span ended; off, and on with every request or none sampled.
func BenchmarkIngestRequest(b *testing.B) {
	for _, ratio := range []float64{0, -1, 1} {
		b.Run(ratioName(ratio), func(b *testing.B) {
			tr := benchTracing(b, ratio)
			recs := make([]*eventlog.Record, 50)
			b.ReportAllocs()
			for b.Loop() {
				for i := range recs {
					recs[i] = &eventlog.Record{}
				}
				s := tr.Ingest("article", nil)
				s.Stamp(recs...)
				s.EndHTTP(202)
			}
		})
	}
}

// One crawl of a feed that appends 50 new items: the crawl's span and an
// item span per record.
func BenchmarkCrawl(b *testing.B) {
	for _, ratio := range []float64{0, -1, 1} {
		b.Run(ratioName(ratio), func(b *testing.B) {
			tr := benchTracing(b, ratio)
			recs := make([]*eventlog.Record, 50)
			b.ReportAllocs()
			for b.Loop() {
				ctx, crawl := tr.Crawl(context.Background(), "src-1", "Example", "https://example.com/feed.xml")
				var spans Spans
				for i := range recs {
					recs[i] = &eventlog.Record{}
					spans.Add(tr.Item(ctx, "4b1c2a9e0f1d4c7f8e2a1b3c4d5e6f70", "https://example.com/a"), recs[i])
				}
				spans.End(nil)
				crawl.End("ok", "", len(recs))
			}
		})
	}
}

// ratioName names a sub-benchmark by its sample ratio; 0 is tracing off.
func ratioName(ratio float64) string {
	if ratio == 0 {
		return "off"
	}
	return fmt.Sprintf("ratio=%v", ratio)
}
