// Package httpkit holds what the node's HTTP APIs share: the route table
// that both the router and the OpenAPI document are built from.
package httpkit

import (
	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"
)

// Route is one operation of an HTTP API, declared once: the router serves
// it and the OpenAPI document describes it from the same value, so the two
// cannot disagree.
type Route struct {
	Method, Path string
	// Name labels the route's metrics and logs ("" leaves it
	// uninstrumented).
	Name    string
	Handler fasthttp.RequestHandler
	Doc     Doc
}

// Doc describes a route for the OpenAPI document.
type Doc struct {
	Tag, Summary string
	// Auth is "", "user", "admin", "reader" (the session of the user the
	// events name, or the ingestion token), "ingest" (the ingestion token
	// or an admin), "apikey" (a reader's API key: the Miniflux API) or
	// "greader" (the Google Reader API's login).
	Auth string
	// Query lists query parameters as "name:type:description".
	Query []string
	// Body names the request body's schema (or "ndjson", "opml").
	Body string
	// OK is the success status and OKSchema its schema ("" for none).
	OK       int
	OKSchema string
	// Errs lists the error statuses the operation may answer.
	Errs []int
	// Batch marks a batch of lines, answered 207 when only some are
	// accepted.
	Batch bool
}

// Register adds routes to r, each handler wrapped by wrap with the
// route's name (wrap may be nil).
func Register(r *router.Router, routes []Route, wrap func(name string, h fasthttp.RequestHandler) fasthttp.RequestHandler) {
	for _, rt := range routes {
		h := rt.Handler
		if wrap != nil && rt.Name != "" {
			h = wrap(rt.Name, h)
		}
		r.Handle(rt.Method, rt.Path, h)
	}
}
