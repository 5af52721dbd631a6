package tracing

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/internal/option"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Exporters Options.Exporter names.
const (
	ExporterNone = "none"
	ExporterOTLP = "otlp"
)

// Options configure tracing. The zero value is the default: no tracing.
type Options struct {
	// Exporter is where spans go: "none" (the default: nothing is traced)
	// or "otlp" (OTLP/HTTP to Endpoint).
	Exporter string `yaml:"exporter"`
	// Endpoint is the base URL of the OTLP/HTTP receiver; spans are POSTed
	// to <endpoint>/v1/traces, over TLS for https (default
	// http://localhost:4318). A URL that already ends in /v1/traces is
	// used as it is. The exporter's standard variables that this does not
	// set still apply, e.g. OTEL_EXPORTER_OTLP_HEADERS for an API key.
	Endpoint string `yaml:"endpoint"`
	// SampleRatio is the share of the traces that start here (crawls, and
	// requests without a traceparent) that are recorded, at most 1
	// (default 0.01: one crawl, ingestion request or search in a hundred).
	// A span with a parent follows its parent's decision. Negative records
	// none of newsflow's own: only requests that come with a sampled
	// traceparent are traced.
	SampleRatio float64 `yaml:"sample_ratio"`
	// ServiceName is the service.name of the spans (default newsflow).
	ServiceName string `yaml:"service_name"`
	// InstanceID, if set, is their service.instance.id (a node sets its
	// cluster id).
	InstanceID string `yaml:"-"`
}

// DefaultOptions returns the defaults the zero value stands for.
func DefaultOptions() Options {
	return Options{Exporter: ExporterNone, Endpoint: "http://localhost:4318", SampleRatio: 0.01, ServiceName: "newsflow"}
}

// Validate reports invalid option values.
func (o Options) Validate() error {
	var errs []error
	switch o.Exporter {
	case "", ExporterNone, ExporterOTLP:
	default:
		errs = append(errs, fmt.Errorf("exporter %q: want none or otlp", o.Exporter))
	}
	if math.IsNaN(o.SampleRatio) || o.SampleRatio > 1 {
		errs = append(errs, fmt.Errorf("sample_ratio %v: want at most 1", o.SampleRatio))
	}
	if o.Endpoint != "" {
		if u, err := url.Parse(o.Endpoint); err != nil {
			errs = append(errs, fmt.Errorf("endpoint: %w", err))
		} else if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("endpoint %q: want an http:// or https:// URL", o.Endpoint))
		}
	}
	return option.Join("tracing", errs...)
}

// tracesURL is the URL spans are POSTed to.
func (o Options) tracesURL() (string, error) {
	if strings.HasSuffix(strings.TrimSuffix(o.Endpoint, "/"), "/v1/traces") {
		return o.Endpoint, nil
	}
	return url.JoinPath(o.Endpoint, "v1/traces")
}

// Tracing starts newsflow's spans and exports them. A nil *Tracing, or
// one opened with the exporter "none", traces nothing; its methods cost a
// nil check. Its methods are safe for concurrent use.
type Tracing struct {
	provider *sdktrace.TracerProvider // nil: off
	tracer   trace.Tracer
}

// Open starts tracing as opts say: with the exporter "otlp", a tracer
// provider whose batch span processor exports to opts.Endpoint; export
// failures are logged to logger (at most one line a minute). Shutdown
// flushes and stops it.
func Open(opts Options, logger *slog.Logger) (*Tracing, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	option.Fill(&opts, DefaultOptions())
	if opts.Exporter == ExporterNone {
		return &Tracing{}, nil
	}
	u, err := opts.tracesURL()
	if err != nil {
		return nil, fmt.Errorf("tracing: endpoint: %w", err)
	}
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(u),
		otlptracehttp.WithCompression(otlptracehttp.GzipCompression))
	if err != nil {
		return nil, fmt.Errorf("tracing: otlp exporter: %w", err)
	}
	logger = cmp.Or(logger, slog.New(slog.DiscardHandler))
	logger.Info("tracing", "exporter", opts.Exporter, "endpoint", u, "sample_ratio", opts.SampleRatio)
	return newTracing(opts, sdktrace.WithBatcher(&loggedExporter{SpanExporter: exp, log: logger})), nil
}

// newTracing returns tracing that hands its spans to sp (tests export to
// memory, synchronously).
func newTracing(opts Options, sp sdktrace.TracerProviderOption) *Tracing {
	option.Fill(&opts, DefaultOptions())
	attrs := []attribute.KeyValue{attribute.String("service.name", opts.ServiceName)}
	if opts.InstanceID != "" {
		attrs = append(attrs, attribute.String("service.instance.id", opts.InstanceID))
	}
	// Both are schemaless or of one schema: they merge.
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(attrs...))
	if err != nil {
		res = resource.NewSchemaless(attrs...)
	}
	p := sdktrace.NewTracerProvider(sp, sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(max(opts.SampleRatio, 0)))))
	return &Tracing{provider: p, tracer: p.Tracer("github.com/newsflow/newsflow")}
}

// Enabled reports whether t traces.
func (t *Tracing) Enabled() bool { return t != nil && t.tracer != nil }

// Shutdown exports the spans that ended and stops exporting, giving up
// when ctx is done. Spans that end later are dropped.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if !t.Enabled() {
		return nil
	}
	if err := t.provider.Shutdown(ctx); err != nil {
		return fmt.Errorf("tracing: shutdown: %w", err)
	}
	return nil
}

// Engine returns the engine's tracer (engine.Options.Tracer), nil when t
// does not trace.
func (t *Tracing) Engine() engine.Tracer {
	if !t.Enabled() {
		return nil
	}
	return recordTracer{tracer: t.tracer}
}

// Crawl starts the span of one crawl of a source, a root. The items the
// crawl appends are its children (Item, with the context returned).
func (t *Tracing) Crawl(ctx context.Context, sourceID, name, feedURL string) (context.Context, CrawlSpan) {
	if !t.Enabled() {
		return ctx, CrawlSpan{}
	}
	ctx, s := t.tracer.Start(ctx, "crawl "+validString(cmp.Or(name, sourceID)), trace.WithNewRoot(), trace.WithAttributes(
		attribute.String("newsflow.source.id", validString(sourceID)), attribute.String("url.full", validString(feedURL))))
	return ctx, CrawlSpan{Span{s}}
}

// Item starts the span of a new item the crawl in ctx (Crawl) appends, if
// that crawl is traced; put it on the item's record with Stamp and end it
// once the record is appended.
func (t *Tracing) Item(ctx context.Context, articleID, articleURL string) Span {
	if !t.Enabled() || !trace.SpanContextFromContext(ctx).IsSampled() {
		return Span{}
	}
	_, s := t.tracer.Start(ctx, "crawl item", trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(
		attribute.String("newsflow.article.id", validString(articleID)), attribute.String("url.full", validString(articleURL))))
	return Span{s}
}

// Ingest starts the span of an HTTP request that appends events of kind
// (article, share, read): a child of traceparent, the request's header,
// when it holds a trace context, else a root.
func (t *Tracing) Ingest(kind string, traceparent []byte) Span {
	if !t.Enabled() {
		return Span{}
	}
	return t.request("ingest "+kind, traceparent)
}

// Search starts the span of a search request, as Ingest does.
func (t *Tracing) Search(traceparent []byte) Span {
	if !t.Enabled() {
		return Span{}
	}
	return t.request("search", traceparent)
}

func (t *Tracing) request(name string, traceparent []byte) Span {
	ctx := context.Background()
	if len(traceparent) > 0 {
		ctx = propagator.Extract(ctx, &carrier{v: string(traceparent)})
	}
	_, s := t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer))
	return Span{s}
}

// Span is a span newsflow started; the zero Span is one not traced, whose
// methods do nothing.
type Span struct{ s trace.Span }

// Traced reports whether the span is recorded (sampled).
func (s Span) Traced() bool { return s.s != nil && s.s.SpanContext().IsSampled() }

// TraceParent returns the span's W3C traceparent, the value of the
// records' engine.HeaderTraceParent; nil when it is not traced.
func (s Span) TraceParent() []byte {
	if !s.Traced() {
		return nil
	}
	return traceParentOf(s.s)
}

// Stamp puts the span's trace context on each of recs that has none, when
// the span is traced.
func (s Span) Stamp(recs ...*eventlog.Record) {
	tp := s.TraceParent()
	if tp == nil {
		return
	}
	for _, r := range recs {
		if _, ok := r.Header(engine.HeaderTraceParent); !ok {
			r.Headers = append(r.Headers, eventlog.Header{Key: engine.HeaderTraceParent, Value: tp})
		}
	}
}

// Link links the span to the span traceparent names (e.g. a search to the
// traces of the articles it found); an empty or invalid one is ignored.
func (s Span) Link(traceparent string) {
	if traceparent == "" || !s.Traced() {
		return
	}
	if sc := spanContextOf(traceparent); sc.IsValid() {
		s.s.AddLink(trace.Link{SpanContext: sc})
	}
}

// End ends the span; a non-nil err marks it failed.
func (s Span) End(err error) {
	if s.s == nil {
		return
	}
	end(s.s, err)
}

// EndHTTP ends the span of a request answered with status, failed when
// the status is 5xx.
func (s Span) EndHTTP(status int) {
	if s.s == nil {
		return
	}
	s.s.SetAttributes(attribute.Int("http.response.status_code", status))
	if status >= 500 {
		s.s.SetStatus(codes.Error, fmt.Sprintf("HTTP %d", status))
	}
	s.s.End()
}

// CrawlSpan is the span of one crawl of a source.
type CrawlSpan struct{ Span }

// End ends the crawl's span with its outcome (crawl.CrawlRecord's), failed
// when failure is set.
func (s CrawlSpan) End(outcome, failure string, itemsNew int) {
	if s.s == nil {
		return
	}
	s.s.SetAttributes(attribute.String("newsflow.crawl.outcome", outcome), attribute.Int("newsflow.crawl.items_new", itemsNew))
	if failure != "" {
		s.s.SetStatus(codes.Error, failure)
	}
	s.s.End()
}

// Spans ends a set of spans together (the items of one append).
type Spans []Span

// Add stamps recs with s and keeps s, if it is traced.
func (ss *Spans) Add(s Span, recs ...*eventlog.Record) {
	if !s.Traced() {
		return
	}
	s.Stamp(recs...)
	*ss = append(*ss, s)
}

// End ends every span, failed when err is not nil.
func (ss Spans) End(err error) {
	for _, s := range ss {
		s.End(err)
	}
}

func end(s trace.Span, err error) {
	if err != nil {
		s.SetStatus(codes.Error, err.Error())
	}
	s.End()
}

// recordTracer is the engine's Tracer: a span per traced record applied,
// ended at the commit of its batch.
type recordTracer struct{ tracer trace.Tracer }

// maxKeyBytes bounds the record key kept as an attribute.
const maxKeyBytes = 256

// Start implements engine.Tracer. A parent that is not sampled (written by
// another producer) starts nothing: its header passes on as it came.
func (r recordTracer) Start(stage string, partition int32, rec *eventlog.Record, parent []byte) ([]byte, func(error)) {
	ctx := propagator.Extract(context.Background(), &carrier{v: string(parent)})
	if !trace.SpanContextFromContext(ctx).IsSampled() {
		return nil, nil
	}
	_, s := r.tracer.Start(ctx, stage+" apply", trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
		attribute.String("newsflow.stage", stage),
		attribute.String("newsflow.topic", rec.Topic),
		attribute.Int("newsflow.partition", int(partition)),
		attribute.Int64("newsflow.offset", rec.Offset),
		attribute.String("newsflow.key", attrString(rec.Key)),
	))
	return traceParentOf(s), func(err error) { end(s, err) }
}

var _ engine.Tracer = recordTracer{}

// attrString is b as an attribute value: valid UTF-8 (OTLP refuses a batch
// with a string that is not), at most maxKeyBytes.
func attrString(b []byte) string {
	if len(b) > maxKeyBytes {
		b = b[:maxKeyBytes]
	}
	return validString(string(b))
}

// validString is s as OTLP takes a string: valid UTF-8 (a batch with one
// that is not is refused whole).
func validString(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// propagator reads and writes W3C traceparent values; it has no state.
var propagator propagation.TraceContext

// carrier holds one traceparent value for the propagator.
type carrier struct{ v string }

func (c carrier) Get(key string) string {
	if key == engine.HeaderTraceParent {
		return c.v
	}
	return ""
}

func (c *carrier) Set(key, value string) {
	if key == engine.HeaderTraceParent {
		c.v = value
	}
}

func (c carrier) Keys() []string { return []string{engine.HeaderTraceParent} }

// traceParentOf returns the traceparent of s.
func traceParentOf(s trace.Span) []byte {
	var c carrier
	propagator.Inject(trace.ContextWithSpan(context.Background(), s), &c)
	return []byte(c.v)
}

// spanContextOf parses a traceparent; the result is invalid when tp is.
func spanContextOf(tp string) trace.SpanContext {
	return trace.SpanContextFromContext(propagator.Extract(context.Background(), &carrier{v: tp}))
}

// loggedExporter logs failed exports (the collector is down or refuses
// them) to the node's logger, at most once a minute with the count of
// spans dropped since, instead of OpenTelemetry's global error handler.
type loggedExporter struct {
	sdktrace.SpanExporter
	log *slog.Logger
	mu  struct {
		sync.Mutex
		logged  time.Time
		dropped int
	}
}

// logEvery is how often failed exports are logged at most.
const logEvery = time.Minute

func (e *loggedExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := e.SpanExporter.ExportSpans(ctx, spans)
	if err == nil {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.mu.dropped += len(spans)
	if now := time.Now(); now.Sub(e.mu.logged) >= logEvery {
		e.log.Warn("tracing: export spans", "err", err, "dropped", e.mu.dropped)
		e.mu.logged, e.mu.dropped = now, 0
	}
	return nil
}
