package query

import (
	"bytes"
	"fmt"

	"github.com/newsflow/newsflow/cluster"
	"github.com/valyala/fasthttp"
)

// Request bodies are limited per route before they are read: once the
// headers are in, fasthttp asks bodyConfig for the request's limit
// (Server.HeaderReceived); a Content-Length over it is refused at once
// without reading the body, a chunked body is cut when it passes it, and
// the answer is 413 (handleTransportError) on a closed connection. The
// limits:
//
//   - login, register and setup (cookieRoutes) and the Google Reader
//     ClientLogin: MaxAuthBodyBytes (4 KiB);
//   - the batch routes (largeBodyRoutes: articles, share and read batches,
//     the OPML import) and the cluster's internal routes: MaxBodyBytes
//     (32 MiB);
//   - every other route: MaxSmallBodyBytes (1 MiB).
//
// So a client that has not logged in makes the node hold at most 4 KiB per
// login request, and 32 MiB only on the ingestion routes.

// Defaults of the body limits (Options).
const (
	defaultMaxAuthBody  = 4 << 10
	defaultMaxSmallBody = 1 << 20
)

// clientLogin is the Google Reader API's login (readerapi): a form, no
// cookie, but a login all the same.
const clientLogin = "/accounts/ClientLogin"

// largeBodyRoutes take bodies up to MaxBodyBytes.
var largeBodyRoutes = map[string]bool{
	"/api/v1/articles":             true,
	"/api/v1/events/share/batch":   true,
	"/api/v1/events/read/batch":    true,
	"/api/v1/admin/sources/import": true,
	cluster.PathJoin:               true,
	cluster.PathApply:              true,
	cluster.PathIndex:              true,
}

// bodyLimit returns the largest body a request on path may carry.
func (s *Server) bodyLimit(path []byte) int {
	switch {
	case cookieRoutes[string(path)], string(path) == clientLogin:
		return min(s.opts.MaxAuthBodyBytes, s.opts.MaxBodyBytes)
	case largeBodyRoutes[string(path)]:
		return s.opts.MaxBodyBytes
	default:
		return min(s.opts.MaxSmallBodyBytes, s.opts.MaxBodyBytes)
	}
}

// bodyConfig returns the body limit of a request whose headers have been
// read. The path is taken as the router will see it (normalised: //, /./
// and %-escapes), so another spelling of a route has the route's limit.
func (s *Server) bodyConfig(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	path := h.RequestURI()
	if i := bytes.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	if bytes.Contains(path, []byte("//")) || bytes.Contains(path, []byte("/.")) || bytes.IndexByte(path, '%') >= 0 || !bytes.HasPrefix(path, []byte("/")) {
		u := fasthttp.AcquireURI()
		defer fasthttp.ReleaseURI(u)
		if err := u.Parse(nil, h.RequestURI()); err == nil {
			path = u.Path()
		}
	}
	return fasthttp.RequestConfig{MaxRequestBodySize: s.bodyLimit(path)}
}

// bodyTooLargeMessage is the 413 answer's error.
func (s *Server) bodyTooLargeMessage() string {
	return fmt.Sprintf("request body too large: login, register and setup take at most %d bytes, batches %d, other requests %d",
		s.bodyLimit([]byte("/api/v1/auth/login")), s.opts.MaxBodyBytes, s.bodyLimit(nil))
}
