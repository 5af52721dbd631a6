// Package tracing traces events through newsflow with OpenTelemetry,
// exported over OTLP/HTTP to a collector (Jaeger, Tempo, the otel
// collector: anything that takes OTLP on its HTTP port, 4318).
//
// # What is traced
//
// A trace starts where an event enters newsflow, and follows it through the
// log:
//
//   - the crawler's crawl of one source ("crawl <source>"), with a child span
//     per new item it appends to articles.raw ("crawl item");
//   - an HTTP ingestion request ("ingest <kind>": articles, shares, reads),
//     a child of the request's W3C traceparent header when it has one;
//   - a search query ("search"), likewise, with a link to the trace of each
//     hit that was indexed while traced.
//
// The span of an appended item or request travels on the records it
// appended, in their traceparent header (engine.HeaderTraceParent). The
// engine calls [Tracer] for every record it applies with that header: a
// span "<stage> apply" (kind consumer) starts before the operator
// processes the record and ends when the task commits the batch that holds
// it, so its length is the time until the record's effect became visible;
// the records the task emits meanwhile carry that span on to the next
// stage. A crawled article's trace is therefore crawl → item → articles
// apply → stories apply → search apply (and trending, reads-enrich apply,
// which also read articles.indexed), each span the parent of the next.
//
// # Sampling and cost
//
// Roots are sampled with probability Options.SampleRatio; everything else
// follows its parent (a parent-based ratio sampler). Only sampled spans
// put a traceparent on records: an event that is not traced carries no
// header, so the engine does nothing for it. With the exporter "none" (the
// default) nothing is traced at all: every method here returns at once,
// [Tracing.Engine] is nil, and records carry no trace context (a header
// another producer wrote passes through the engine unchanged).
//
// A crawl samples its items together: one crawl in 1/SampleRatio is traced
// with all its new items.
//
// # Attributes
//
// Apply spans: newsflow.stage, newsflow.topic, newsflow.partition,
// newsflow.offset, newsflow.key (the record key, at most 256 bytes).
// Crawl spans: newsflow.source.id, url.full (the feed), newsflow.crawl.outcome,
// newsflow.crawl.items_new. Item spans: newsflow.article.id, url.full.
// Request spans: http.response.status_code, and error status on 5xx.
package tracing
