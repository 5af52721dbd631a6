package query

import (
	"fmt"
	"strconv"
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

func (s *Server) instrument(route string, h fasthttp.RequestHandler) fasthttp.RequestHandler {
	lat := s.m.latency.WithLabelValues(route)
	return func(ctx *fasthttp.RequestCtx) {
		start := time.Now()
		h(ctx)
		lat.Observe(time.Since(start).Seconds())
		s.m.requests.WithLabelValues(route, strconv.Itoa(ctx.Response.StatusCode())).Inc()
	}
}
