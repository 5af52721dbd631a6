package query

import (
	"fmt"
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
)

type httpMetrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	ingested *prometheus.CounterVec
	peerErrs prometheus.Counter
	streams  prometheus.Gauge
}

func newHTTPMetrics(reg prometheus.Registerer) (*httpMetrics, error) {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "newsflow_http_requests_total", Help: "HTTP requests by route and status code.",
		}, []string{"route", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "newsflow_http_request_seconds", Help: "HTTP request latency by route.",
			Buckets: prometheus.ExponentialBuckets(0.00005, 2, 18),
		}, []string{"route"}),
		ingested: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "newsflow_ingested_events_total", Help: "Events accepted or rejected by HTTP ingestion.",
		}, []string{"type", "result"}),
		peerErrs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "newsflow_peer_request_errors_total", Help: "Requests to other cluster nodes (routed or fanned-out queries) that failed or timed out.",
		}),
		streams: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "newsflow_http_streams_open", Help: "Open server-sent event streams (GET /api/v1/stream).",
		}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.latency, m.ingested, m.peerErrs, m.streams} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("query: register metrics: %w", err)
		}
	}
	return m, nil
}

// instrument counts a route's requests by status code and observes their
// latency, from when the server began handling the request (fasthttp's
// RequestCtx.Time, taken before the middleware).
func (s *Server) instrument(route string, h fasthttp.RequestHandler) fasthttp.RequestHandler {
	lat := s.m.latency.WithLabelValues(route)
	codes := &routeCodes{vec: s.m.requests, route: route}
	codes.byCode.Store(&map[int]prometheus.Counter{})
	return func(ctx *fasthttp.RequestCtx) {
		start := ctx.Time()
		if start.IsZero() { // a RequestCtx not from a server (tests)
			start = time.Now()
		}
		h(ctx)
		lat.Observe(time.Since(start).Seconds())
		codes.counter(ctx.Response.StatusCode()).Inc()
	}
}

// routeCodes are one route's request counters by status code, each looked
// up in the vector once (a lookup hashes the labels and takes the
// vector's lock).
type routeCodes struct {
	vec    *prometheus.CounterVec
	route  string
	mu     sync.Mutex                                 // serialises adding a code
	byCode atomic.Pointer[map[int]prometheus.Counter] // replaced whole when a code is added
}

func (rc *routeCodes) counter(code int) prometheus.Counter {
	if c, ok := (*rc.byCode.Load())[code]; ok {
		return c
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	old := *rc.byCode.Load()
	if c, ok := old[code]; ok {
		return c
	}
	c := rc.vec.WithLabelValues(rc.route, strconv.Itoa(code))
	m := maps.Clone(old)
	m[code] = c
	rc.byCode.Store(&m)
	return c
}
