package tracing

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/eventlog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newTestTracing traces with ratio into an in-memory exporter, each span
// exported as it ends.
func newTestTracing(t *testing.T, ratio float64) (*Tracing, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tr := newTracing(Options{Exporter: ExporterOTLP, SampleRatio: ratio}, sdktrace.WithSyncer(exp))
	t.Cleanup(func() {
		if err := tr.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return tr, exp
}

// spanNamed returns the one ended span called name.
func spanNamed(t *testing.T, exp *tracetest.InMemoryExporter, name string) tracetest.SpanStub {
	t.Helper()
	var found []tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.Name == name {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d spans %q, want 1; all: %v", len(found), name, names(exp.GetSpans()))
	}
	return found[0]
}

func names(ss tracetest.SpanStubs) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Name)
	}
	return out
}

func attr(s tracetest.SpanStub, key string) attribute.Value {
	for _, a := range s.Attributes {
		if string(a.Key) == key {
			return a.Value
		}
	}
	return attribute.Value{}
}

func header(rec *eventlog.Record) string {
	v, _ := rec.Header(engine.HeaderTraceParent)
	return string(v)
}

// The engine's tracer starts a consumer span per traced record, the child
// of the record's traceparent, with the record's coordinates; the
// traceparent it returns names that span, and the span ends when the
// engine calls end: failed for an error.
func TestRecordTracer(t *testing.T) {
	tr, exp := newTestTracing(t, 1)
	req := tr.Ingest("article", nil)
	rec := &eventlog.Record{Topic: "articles.raw", Partition: 2, Offset: 41, Key: []byte("a1")}
	req.Stamp(rec)
	req.EndHTTP(202)
	parent := header(rec)
	if parent == "" {
		t.Fatal("a traced request put no traceparent on its record")
	}

	et := tr.Engine()
	child, end := et.Start("articles", 2, rec, []byte(parent))
	if child == nil || end == nil {
		t.Fatal("no span for a sampled record")
	}
	end(nil)
	ingest, apply := spanNamed(t, exp, "ingest article"), spanNamed(t, exp, "articles apply")
	if apply.Parent.SpanID() != ingest.SpanContext.SpanID() || apply.SpanContext.TraceID() != ingest.SpanContext.TraceID() {
		t.Errorf("apply span %v not a child of the request's %v", apply.Parent, ingest.SpanContext)
	}
	if sc := spanContextOf(string(child)); sc.SpanID() != apply.SpanContext.SpanID() || !sc.IsSampled() {
		t.Errorf("child traceparent %s does not name the apply span %s", child, apply.SpanContext.SpanID())
	}
	if apply.SpanKind != trace.SpanKindConsumer || apply.Status.Code == codes.Error {
		t.Errorf("apply span kind %v status %v", apply.SpanKind, apply.Status)
	}
	for k, want := range map[string]string{"newsflow.stage": "articles", "newsflow.topic": "articles.raw", "newsflow.key": "a1"} {
		if got := attr(apply, k).AsString(); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if attr(apply, "newsflow.offset").AsInt64() != 41 || attr(apply, "newsflow.partition").AsInt64() != 2 {
		t.Errorf("offset, partition attributes: %v", apply.Attributes)
	}

	// A batch that does not commit fails its spans.
	_, end = et.Start("stories", 0, &eventlog.Record{Topic: "articles", Key: []byte{0xff, 'x'}}, child)
	end(errors.New("batch not committed"))
	stories := spanNamed(t, exp, "stories apply")
	if stories.Status.Code != codes.Error || stories.Parent.SpanID() != apply.SpanContext.SpanID() {
		t.Errorf("failed apply: status %v, parent %v", stories.Status, stories.Parent)
	}
	if k := attr(stories, "newsflow.key").AsString(); k != "\uFFFDx" {
		t.Errorf("key attribute %q: want valid UTF-8", k)
	}

	// A parent not sampled, or not a traceparent, starts nothing.
	n := len(exp.GetSpans())
	for _, p := range []string{"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00", "garbage", ""} {
		if c, end := et.Start("articles", 0, rec, []byte(p)); c != nil || end != nil {
			t.Errorf("parent %q: got a span", p)
		}
	}
	if len(exp.GetSpans()) != n {
		t.Errorf("spans for records not sampled: %v", names(exp.GetSpans()))
	}
}

// A request with a traceparent continues its trace; without one it starts
// a root as the sampler decides; one whose caller did not sample it puts
// no trace context on its records.
func TestRequestSpans(t *testing.T) {
	const incoming = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	tr, exp := newTestTracing(t, 1)
	s := tr.Search([]byte(incoming))
	s.Link("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	s.Link("not a traceparent")
	s.EndHTTP(503)
	got := spanNamed(t, exp, "search")
	if got.SpanContext.TraceID().String() != "0af7651916cd43dd8448eb211c80319c" || got.Parent.SpanID().String() != "b7ad6b7169203331" || !got.Parent.IsRemote() {
		t.Errorf("search span %v, parent %v: not a child of the incoming traceparent", got.SpanContext, got.Parent)
	}
	if len(got.Links) != 1 || got.Links[0].SpanContext.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("links %+v", got.Links)
	}
	if got.Status.Code != codes.Error || attr(got, "http.response.status_code").AsInt64() != 503 || got.SpanKind != trace.SpanKindServer {
		t.Errorf("a 503 answer: status %v, attributes %v", got.Status, got.Attributes)
	}

	unsampled := tr.Ingest("share", []byte(strings.TrimSuffix(incoming, "01")+"00"))
	rec := &eventlog.Record{}
	unsampled.Stamp(rec)
	unsampled.EndHTTP(202)
	if h := header(rec); h != "" {
		t.Errorf("a request its caller did not sample stamped %q", h)
	}

	never, exp2 := newTestTracing(t, -1)
	root := never.Ingest("share", nil)
	root.Stamp(rec)
	root.EndHTTP(202)
	child := never.Ingest("share", []byte(incoming))
	child.EndHTTP(202)
	if h := header(rec); h != "" || len(exp2.GetSpans()) != 1 || exp2.GetSpans()[0].Parent.TraceID().String() != "0af7651916cd43dd8448eb211c80319c" {
		t.Errorf("sample_ratio < 0: root stamped %q; spans %v: want the sampled caller's only", h, names(exp2.GetSpans()))
	}
}

// The items of a traced crawl are its children, each on its record; a
// crawl not sampled traces no item.
func TestCrawlSpans(t *testing.T) {
	tr, exp := newTestTracing(t, 1)
	ctx, crawl := tr.Crawl(context.Background(), "src1", "Example News", "http://feeds.example/rss")
	var items Spans
	recs := []*eventlog.Record{{Key: []byte("a")}, {Key: []byte("b")}}
	for _, r := range recs {
		items.Add(tr.Item(ctx, string(r.Key), "http://example/"+string(r.Key)), r)
	}
	items.End(nil)
	crawl.End("ok", "", 2)
	c := spanNamed(t, exp, "crawl Example News")
	if attr(c, "newsflow.crawl.outcome").AsString() != "ok" || attr(c, "newsflow.crawl.items_new").AsInt64() != 2 || c.Parent.IsValid() {
		t.Errorf("crawl span %+v", c)
	}
	var ids []string
	for _, s := range exp.GetSpans() {
		if s.Name != "crawl item" {
			continue
		}
		if s.Parent.SpanID() != c.SpanContext.SpanID() || s.SpanKind != trace.SpanKindProducer {
			t.Errorf("item span parent %v kind %v", s.Parent, s.SpanKind)
		}
		ids = append(ids, s.SpanContext.SpanID().String())
	}
	if len(ids) != 2 {
		t.Fatalf("item spans %v", names(exp.GetSpans()))
	}
	for i, r := range recs {
		if sc := spanContextOf(header(r)); sc.SpanID().String() != ids[i] {
			t.Errorf("record %d traceparent %q, want span %s", i, header(r), ids[i])
		}
	}

	off, exp0 := newTestTracing(t, -1)
	ctx, crawl = off.Crawl(context.Background(), "src1", "", "http://feeds.example/rss")
	r := &eventlog.Record{}
	items = nil
	items.Add(off.Item(ctx, "a", "http://example/a"), r)
	items.End(nil)
	crawl.End("error", "boom", 0)
	if len(items) != 0 || header(r) != "" || len(exp0.GetSpans()) != 0 {
		t.Errorf("a crawl not sampled: items %d, header %q, spans %v", len(items), header(r), names(exp0.GetSpans()))
	}
}

// With the exporter none (the default), nothing is traced: no span, no
// engine tracer, no traceparent on any record, even for a request that
// came with one.
func TestNoneTracesNothing(t *testing.T) {
	none, err := Open(Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, tr := range map[string]*Tracing{"none": none, "nil": nil} {
		if tr.Enabled() || tr.Engine() != nil {
			t.Errorf("%s: enabled %v, engine tracer %v", name, tr.Enabled(), tr.Engine())
		}
		rec := &eventlog.Record{}
		ctx, crawl := tr.Crawl(context.Background(), "s", "n", "u")
		var items Spans
		items.Add(tr.Item(ctx, "a", "u"), rec)
		items.End(nil)
		crawl.End("ok", "", 1)
		in := tr.Ingest("article", []byte("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"))
		in.Stamp(rec)
		in.EndHTTP(202)
		s := tr.Search(nil)
		s.Link("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
		s.EndHTTP(200)
		if len(rec.Headers) != 0 || len(items) != 0 || in.TraceParent() != nil {
			t.Errorf("%s: headers %v", name, rec.Headers)
		}
		if err := tr.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, o := range []Options{{}, DefaultOptions(), {Exporter: "otlp", Endpoint: "https://otel.example:4318/", SampleRatio: -1}, {SampleRatio: 1}} {
		if err := o.Validate(); err != nil {
			t.Errorf("%+v: %v", o, err)
		}
	}
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{Exporter: "jaeger"}, `exporter "jaeger"`},
		{Options{SampleRatio: 1.5}, "sample_ratio 1.5"},
		{Options{Endpoint: "localhost:4318"}, "want an http:// or https:// URL"},
		{Options{Endpoint: "http://%zz"}, "endpoint"},
	} {
		if err := c.o.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.o, err, c.want)
		}
	}
	for base, want := range map[string]string{
		"http://localhost:4318":            "http://localhost:4318/v1/traces",
		"http://collector:4318/otlp/":      "http://collector:4318/otlp/v1/traces",
		"https://collector/api/v1/traces":  "https://collector/api/v1/traces",
		"https://collector/api/v1/traces/": "https://collector/api/v1/traces/",
	} {
		if got, err := (Options{Endpoint: base}).tracesURL(); err != nil || got != want {
			t.Errorf("endpoint %s: %s, %v; want %s", base, got, err, want)
		}
	}
}

// Open with the otlp exporter sends the spans, gzipped protobuf, to the
// endpoint's /v1/traces; Shutdown flushes them.
func TestOpenExportsOTLP(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := io.Reader(r.Body)
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		b, err := io.ReadAll(body)
		var req coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(b, &req)
		}
		if r.URL.Path != "/v1/traces" || err != nil {
			http.Error(w, r.URL.Path+": "+errString(err), http.StatusBadRequest)
			return
		}
		mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					got = append(got, s.Name)
				}
			}
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer srv.Close()
	tr, err := Open(Options{Exporter: ExporterOTLP, Endpoint: srv.URL, SampleRatio: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := tr.Ingest("share", nil)
	s.EndHTTP(202)
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0] != "ingest share" {
		t.Errorf("received spans %v", got)
	}
	srv.CloseClientConnections()
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// Failed exports are logged, once a minute at most, with what they dropped.
func TestExportFailuresLogged(t *testing.T) {
	var buf bytes.Buffer
	e := &loggedExporter{SpanExporter: failingExporter{}, log: slog.New(slog.NewTextHandler(&buf, nil))}
	for range 3 {
		if err := e.ExportSpans(context.Background(), make([]sdktrace.ReadOnlySpan, 2)); err != nil {
			t.Fatal(err)
		}
	}
	if n := strings.Count(buf.String(), "tracing: export spans"); n != 1 || !strings.Contains(buf.String(), "dropped=2") {
		t.Errorf("log:\n%s", buf.String())
	}
}

// failingExporter refuses every export, as a collector that is down.
type failingExporter struct{}

func (failingExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error {
	return errors.New("connection refused")
}

func (failingExporter) Shutdown(context.Context) error { return nil }
