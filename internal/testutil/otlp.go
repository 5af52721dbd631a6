package testutil

import (
	"compress/gzip"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"
)

// Span is an exported span as an OTLPReceiver decoded it: ids in hex,
// string and integer attributes, links as trace/span.
type Span struct {
	Trace, ID, Parent, Name string
	Attrs                   map[string]string
	Links                   []string
}

// OTLPReceiver is an OTLP/HTTP collector for tests: it takes POST
// /v1/traces with a protobuf ExportTraceServiceRequest, gzipped or not,
// and keeps the spans. Its URL is the endpoint to export to.
type OTLPReceiver struct {
	*httptest.Server
	mu    sync.Mutex
	spans []Span
}

// NewOTLPReceiver starts a receiver, closed when the test ends.
func NewOTLPReceiver(tb testing.TB) *OTLPReceiver {
	r := &OTLPReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(r.serve))
	tb.Cleanup(r.Close)
	return r
}

func (r *OTLPReceiver) serve(w http.ResponseWriter, req *http.Request) {
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
				sp := Span{Trace: hex.EncodeToString(s.TraceId), ID: hex.EncodeToString(s.SpanId),
					Parent: hex.EncodeToString(s.ParentSpanId), Name: s.Name, Attrs: map[string]string{}}
				for _, a := range s.Attributes {
					switch v := a.Value.Value.(type) {
					case *commonpb.AnyValue_StringValue:
						sp.Attrs[a.Key] = v.StringValue
					case *commonpb.AnyValue_IntValue:
						sp.Attrs[a.Key] = strconv.FormatInt(v.IntValue, 10)
					}
				}
				for _, l := range s.Links {
					sp.Links = append(sp.Links, hex.EncodeToString(l.TraceId)+"/"+hex.EncodeToString(l.SpanId))
				}
				r.spans = append(r.spans, sp)
			}
		}
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
}

// Spans returns the spans received so far.
func (r *OTLPReceiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}
