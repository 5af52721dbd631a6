package query

import (
	"crypto/subtle"
	"github.com/newsflow/newsflow/query/httpkit"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"
)

// The operator endpoints, /metrics and /health/detailed, tell much about a
// node (its stages, lag, cluster members, the size of its state). Two
// options guard them:
//
//   - OpsAddr (or OpsListener) serves them on a listener of their own,
//     with the probes /health/live and /health/ready; the API's listener
//     then answers 404 to them, so only the network that reaches the ops
//     address sees them.
//   - OpsToken makes them answer 401 unless the request carries
//     "Authorization: Bearer <OpsToken>", on whichever listener serves them.
//
// /health/live and /health/ready stay open everywhere: load balancers and
// orchestrators probe them without credentials.

// opsRoutes are the operator endpoints: metrics is the /metrics handler
// (nil without a Gatherer, and then the route is not served).
func (s *Server) opsRoutes(metrics fasthttp.RequestHandler) []httpkit.Route {
	routes := []httpkit.Route{
		{Method: "GET", Path: "/health/detailed", Handler: s.instrument("health_detailed", s.handleHealthDetailed), Doc: httpkit.Doc{Tag: "health", Summary: "The node's health: status ok, degraded (200, with reasons: a stage paused or far behind, a cluster member down, partitions without an owner up, the story state stale, search partitions missing, the log or state store failing, the disk nearly full) or restoring (503); dependencies (log, state store, cluster, crawler) and stages (running, restoring, paused, standby, not_here; tasks here, lag) with their state; checks: lag per stage, story and search views (the story state's source and staleness_ms), trending memory. With http.ops_token it needs Authorization: Bearer <ops_token> (401 otherwise); with http.ops_addr it is served only there (404 here)", OK: 200, OKSchema: "Object", Errs: []int{401, 404, 503}}},
	}
	if metrics != nil {
		routes = append(routes, httpkit.Route{Method: "GET", Path: "/metrics", Handler: metrics, Doc: httpkit.Doc{Tag: "health", Summary: "Prometheus metrics (text format). With http.ops_token it needs Authorization: Bearer <ops_token> (401 otherwise); with http.ops_addr it is served only there (404 here)", OK: 200, Errs: []int{401, 404}}})
	}
	return routes
}

// registerOps adds the operator endpoints to r. On the API's router with a
// separate ops listener they answer 404.
func (s *Server) registerOps(r *router.Router, ops []httpkit.Route, opsListener bool) {
	for _, rt := range ops {
		h := s.opsToken(rt.Handler)
		if s.separateOps() && !opsListener {
			h = func(ctx *fasthttp.RequestCtx) {
				writeError(ctx, fasthttp.StatusNotFound, rt.Path+" is served on the node's ops address (http.ops_addr), not here")
			}
		}
		r.Handle(rt.Method, rt.Path, h)
	}
}

// separateOps reports whether the operator endpoints have a listener of
// their own.
func (s *Server) separateOps() bool { return s.opts.OpsAddr != "" || s.opts.OpsListener != nil }

// opsToken answers 401 unless the request carries OpsToken (when set).
func (s *Server) opsToken(h fasthttp.RequestHandler) fasthttp.RequestHandler {
	want := []byte(s.opts.OpsToken)
	if len(want) == 0 {
		return h
	}
	return func(ctx *fasthttp.RequestCtx) {
		if t, ok := bearer(ctx); !ok || subtle.ConstantTimeCompare([]byte(t), want) != 1 {
			ctx.Response.Header.Set(fasthttp.HeaderWWWAuthenticate, `Bearer realm="newsflow ops"`)
			writeError(ctx, fasthttp.StatusUnauthorized, string(ctx.Path())+" needs the ops token (Authorization: Bearer <http.ops_token>)")
			return
		}
		h(ctx)
	}
}

// newOpsServer returns the server of the ops listener: the operator
// endpoints and the probes.
func (s *Server) newOpsServer(ops []httpkit.Route) *fasthttp.Server {
	r := router.New()
	r.GET("/health/live", s.instrument("live", s.handleLive))
	r.GET("/health/ready", s.instrument("ready", s.handleReady))
	s.registerOps(r, ops, true)
	r.NotFound = func(ctx *fasthttp.RequestCtx) {
		writeError(ctx, fasthttp.StatusNotFound, "the ops address serves /metrics, /health/detailed, /health/live and /health/ready only")
	}
	return &fasthttp.Server{
		Handler: s.secure(r.Handler), Name: "newsflow", MaxRequestBodySize: 4 << 10,
		ReadTimeout: s.opts.ReadTimeout, WriteTimeout: s.opts.WriteTimeout, IdleTimeout: s.opts.IdleTimeout,
		NoDefaultDate: true, Logger: fasthttpLogger{s.opts.Logger}, ErrorHandler: s.handleTransportError,
	}
}
