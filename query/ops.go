package query

import (
	"crypto/subtle"

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

// opsPaths are the operator endpoints.
var opsPaths = []string{"/metrics", "/health/detailed"}

// registerOps adds the operator endpoints to r: metrics is the /metrics
// handler (nil without a Gatherer). On the API's router with a separate
// ops listener they answer 404.
func (s *Server) registerOps(r *router.Router, metrics fasthttp.RequestHandler, opsListener bool) {
	handlers := map[string]fasthttp.RequestHandler{"/metrics": metrics, "/health/detailed": s.instrument("health_detailed", s.handleHealthDetailed)}
	for _, p := range opsPaths {
		h := handlers[p]
		switch {
		case h == nil:
			continue
		case s.separateOps() && !opsListener:
			h = func(ctx *fasthttp.RequestCtx) {
				writeError(ctx, fasthttp.StatusNotFound, p+" is served on the node's ops address (http.ops_addr), not here")
			}
		default:
			h = s.opsToken(h)
		}
		r.GET(p, h)
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
func (s *Server) newOpsServer(metrics fasthttp.RequestHandler) *fasthttp.Server {
	r := router.New()
	r.GET("/health/live", s.instrument("live", s.handleLive))
	r.GET("/health/ready", s.instrument("ready", s.handleReady))
	s.registerOps(r, metrics, true)
	r.NotFound = func(ctx *fasthttp.RequestCtx) {
		writeError(ctx, fasthttp.StatusNotFound, "the ops address serves /metrics, /health/detailed, /health/live and /health/ready only")
	}
	return &fasthttp.Server{
		Handler: s.secure(r.Handler), Name: "newsflow", MaxRequestBodySize: 4 << 10,
		ReadTimeout: s.opts.ReadTimeout, WriteTimeout: s.opts.WriteTimeout, IdleTimeout: s.opts.IdleTimeout,
		NoDefaultDate: true, Logger: fasthttpLogger{s.opts.Logger}, ErrorHandler: s.handleTransportError,
	}
}
