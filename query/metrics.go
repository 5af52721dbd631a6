package query

import (
	"fmt"
	"maps"
	"strconv"
	"strings"
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
	groups   *prometheus.CounterVec
	query    *prometheus.HistogramVec
	// queryObs are query's series by query (feed, search) and cache state
	// (hit), bound once: they are observed on every feed and search.
	queryObs map[[2]string]prometheus.Observer
}

// routeGroups are the endpoint groups availability is measured by: each
// route belongs to the first group whose prefix its name has; the web
// UI's pages are "ui"; the rest "other".
var routeGroups = []struct{ prefix, group string }{
	{"feed", "feed"},
	{"search", "search"},
	{"stories", "stories"}, {"story", "stories"}, {"breaking", "stories"}, {"topics", "stories"}, {"image", "stories"}, {"stream", "stories"},
	{"trending", "trending"}, {"article_shares", "trending"},
	{"ingest_", "ingest"},
	{"greader_", "reader_api"}, {"miniflux_", "reader_api"},
	{"live", "health"}, {"ready", "health"}, {"health_", "health"},
	{"admin_", "admin"}, {"cluster", "admin"}, {"users_", "admin"}, {"user_interest", "admin"}, {"sources_", "admin"},
	{"stats", "admin"}, {"topology", "admin"}, {"progress", "admin"}, {"slo", "admin"}, {"stages_", "admin"},
	{"register", "account"}, {"login", "account"}, {"logout", "account"}, {"me", "account"}, {"preferences_", "account"},
	{"api_keys", "account"}, {"history", "account"}, {"my_interest", "account"}, {"unread", "account"}, {"mark_", "account"},
	{"star", "account"}, {"unstar", "account"}, {"webhooks", "account"}, {"setup", "account"},
}

// endpointGroups lists every group, for their series to exist from the start.
var endpointGroups = []string{"feed", "search", "stories", "trending", "ingest", "reader_api", "account", "admin", "health", "ui", "other"}

func routeGroup(route string) string {
	for _, g := range routeGroups {
		if strings.HasPrefix(route, g.prefix) {
			return g.group
		}
	}
	return "other"
}

// statusClasses are the status classes counted per group.
var statusClasses = [...]string{"1xx", "2xx", "3xx", "4xx", "5xx"}

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
		groups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "newsflow_http_group_requests_total", Help: "HTTP requests by endpoint group (feed, search, stories, trending, ingest, reader_api, account, admin, health, ui, other) and status class: the availability objective counts the 5xx.",
		}, []string{"group", "class"}),
		query: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "newsflow_query_seconds", Help: "Latency of successful feed and search answers, by whether the answer came from the cache (search has no result cache: always miss).",
			Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
		}, []string{"query", "cache"}),
	}
	for _, g := range endpointGroups {
		for _, c := range statusClasses[1:] {
			m.groups.WithLabelValues(g, c)
		}
	}
	m.queryObs = map[[2]string]prometheus.Observer{}
	for _, q := range []string{"feed", "search"} {
		for _, c := range []string{"hit", "miss"} {
			m.queryObs[[2]string{q, c}] = m.query.WithLabelValues(q, c)
		}
	}
	for _, c := range []prometheus.Collector{m.requests, m.latency, m.ingested, m.peerErrs, m.streams, m.groups, m.query} {
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
	group := s.groupCounter(routeGroup(route))
	return func(ctx *fasthttp.RequestCtx) {
		start := requestStart(ctx)
		defer func() {
			if r := recover(); r != nil {
				// The router's panic handler answers 500.
				if !s.peerRequest(ctx) {
					group(fasthttp.StatusInternalServerError)
				}
				panic(r)
			}
		}()
		h(ctx)
		lat.Observe(time.Since(start).Seconds())
		code := ctx.Response.StatusCode()
		codes.counter(code).Inc()
		if !s.peerRequest(ctx) {
			group(code)
		}
	}
}

// groupCounter returns the function that counts a request of group by its
// status code.
func (s *Server) groupCounter(group string) func(code int) {
	var byClass [len(statusClasses)]prometheus.Counter
	for i, c := range statusClasses {
		byClass[i] = s.m.groups.WithLabelValues(group, c)
	}
	return func(code int) {
		i := 4 // an invalid code counts as a server error
		if code >= 100 && code < 600 {
			i = code/100 - 1
		}
		byClass[i].Inc()
	}
}

// peerRequest reports whether another node of the cluster sent the
// request (a fan-out or a routed request): the objectives count what users
// ask, once, at the node they asked.
func (s *Server) peerRequest(ctx *fasthttp.RequestCtx) bool {
	return len(ctx.Request.Header.Peek(HeaderPeer)) > 0 && s.fromPeer(ctx)
}

// requestStart is when the server began handling the request (fasthttp's
// RequestCtx.Time, taken before the middleware).
func requestStart(ctx *fasthttp.RequestCtx) time.Time {
	if start := ctx.Time(); !start.IsZero() {
		return start
	}
	return time.Now() // a RequestCtx not from a server (tests)
}

// observeQuery observes the latency of a successful feed or search answer
// by cache state; handlers call it deferred.
func (s *Server) observeQuery(ctx *fasthttp.RequestCtx, query string, hit *bool) {
	if ctx.Response.StatusCode() >= 300 || s.peerRequest(ctx) {
		return
	}
	cache := "miss"
	if hit != nil && *hit {
		cache = "hit"
	}
	s.m.queryObs[[2]string{query, cache}].Observe(time.Since(requestStart(ctx)).Seconds())
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
