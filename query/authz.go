package query

import (
	"bytes"
	"crypto/subtle"
	"fmt"
	"net/url"
	"slices"

	"github.com/valyala/fasthttp"
)

// Who may write what:
//
//   - A read event names a user; its history and interest profile are that
//     user's. It is accepted with that user's session, or with the
//     ingestion token (Options.IngestToken) of a trusted service, which may
//     write for anyone. Anonymous reads get 401, reads for another user 403
//     (a line error in a batch).
//   - Shares stay open to anonymous clients (they only count), but a
//     request made with a user session may only share as that user.
//   - Articles reach every reader: they need the ingestion token or an
//     admin (session or admin token).
//
// A node without accounts (no Auth) has no one to ask and lets everything
// through, like guardAdmin. Producers that write the Kafka topics directly
// are trusted: the broker's ACLs guard the topics.

// errForbidden marks an event the request's credentials may not write.
type errForbidden struct{ msg string }

func (e *errForbidden) Error() string { return e.msg }

// writer is who writes the events of a request.
type writer struct {
	trusted bool   // the ingestion token (or no accounts): any user
	user    string // the session's user id, "" for anonymous
}

// ingestToken reports whether the request carries the ingestion token.
func (s *Server) ingestToken(ctx *fasthttp.RequestCtx) bool {
	it, t := s.opts.IngestToken, token(ctx)
	return it != "" && t != "" && subtle.ConstantTimeCompare([]byte(t), []byte(it)) == 1
}

func (s *Server) writer(ctx *fasthttp.RequestCtx) writer {
	if s.deps.Auth == nil || s.ingestToken(ctx) {
		return writer{trusted: true}
	}
	u, _ := s.user(ctx)
	return writer{user: u.ID}
}

// mayWrite returns an error unless w may write an event of kind ("read",
// "share") for userID.
func (w writer) mayWrite(kind, userID string) error {
	switch {
	case w.trusted, w.user == "" && kind == "share", w.user == userID:
		return nil
	case w.user == "":
		return &errForbidden{fmt.Sprintf("a %s for user %q needs that user's session or the ingestion token", kind, userID)}
	default:
		return &errForbidden{fmt.Sprintf("user_id %q is not the logged-in user: a session may only write its own %ss", userID, kind)}
	}
}

// requireReader answers 401 to a read ingestion request that carries
// neither a session nor the ingestion token.
func (s *Server) requireReader(h fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		if w := s.writer(ctx); !w.trusted && w.user == "" {
			writeError(ctx, fasthttp.StatusUnauthorized, "read events need the reader's session (log in) or the ingestion token (Authorization: Bearer)")
			return
		}
		h(ctx)
	}
}

// requireIngest answers 401 or 403 unless the request carries the
// ingestion token or comes from an admin.
func (s *Server) requireIngest(h fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		if s.deps.Auth == nil || s.ingestToken(ctx) ||
			s.isAdmin(ctx, "article ingestion", "send the ingestion token or log in as an admin (Authorization: Bearer)") {
			h(ctx)
		}
	}
}

// cookieRoutes are the writes that answer with a session cookie: they
// have no session yet, but a page of another site that could post them
// would log the victim's browser into an account of its choosing (login
// CSRF). They are checked like cookie-authenticated writes and take JSON
// bodies only, which a cross-site form cannot send.
var cookieRoutes = map[string]bool{
	"/api/v1/auth/login":    true,
	"/api/v1/auth/register": true,
	"/api/v1/setup/admin":   true,
}

// crossSite refuses (403) a state-changing request whose identity comes, or
// would come, from the session cookie when the browser says it comes from
// another site: Sec-Fetch-Site other than same-origin or none, or, from
// browsers that do not send it, an Origin other than the node's own (by
// Host) or a trusted one. That is every write carrying the cookie and the
// writes that set it (cookieRoutes), which also answer 415 to a body that
// is not application/json. A request is exempt only when it carries a
// valid bearer credential (bearerCredential): then token takes the identity
// from it and never from the cookie. Any other Authorization header (Basic,
// a reader app's) exempts nothing. The session cookie is SameSite=Lax as
// well; this is the second line.
func (s *Server) crossSite(next fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		if ctx.IsGet() || ctx.IsHead() || ctx.IsOptions() {
			next(ctx)
			return
		}
		setsCookie := cookieRoutes[string(ctx.Path())]
		if !setsCookie && len(ctx.Request.Header.Cookie(SessionCookie)) == 0 || s.bearerCredential(ctx) {
			next(ctx)
			return
		}
		if reason := s.crossSiteReason(ctx); reason != "" {
			writeError(ctx, fasthttp.StatusForbidden, "cross-site request refused: "+reason+
				" (a cookie-authenticated change must come from this site; send a bearer token instead)")
			return
		}
		if setsCookie && !isJSON(ctx.Request.Header.ContentType()) {
			writeError(ctx, fasthttp.StatusUnsupportedMediaType, string(ctx.Path())+" takes a JSON body (Content-Type: application/json)")
			return
		}
		next(ctx)
	}
}

// bearerCredential reports whether the request carries a bearer token the
// node accepts: the admin or ingestion token, or a live session's token.
// Such a request's identity is the token's (token prefers the header to
// the cookie).
func (s *Server) bearerCredential(ctx *fasthttp.RequestCtx) bool {
	if _, ok := bearer(ctx); !ok {
		return false
	}
	if s.adminToken(ctx) || s.ingestToken(ctx) {
		return true
	}
	_, ok := s.user(ctx)
	return ok
}

// isJSON reports whether a Content-Type is application/json (with any
// parameters, such as a charset).
func isJSON(ct []byte) bool {
	if i := bytes.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	return bytes.EqualFold(bytes.TrimSpace(ct), []byte("application/json"))
}

// crossSiteReason says why a request looks cross-site, or "".
func (s *Server) crossSiteReason(ctx *fasthttp.RequestCtx) string {
	origin := string(ctx.Request.Header.Peek("Origin"))
	trusted := origin != "" && slices.Contains(s.opts.TrustedOrigins, origin)
	switch site := string(ctx.Request.Header.Peek("Sec-Fetch-Site")); site {
	case "same-origin", "none":
		return ""
	case "":
	default:
		if trusted {
			return ""
		}
		return "Sec-Fetch-Site: " + site
	}
	if origin == "" || trusted {
		return "" // not a browser, or one that sends neither header
	}
	if u, err := url.Parse(origin); err == nil && u.Host != "" && bytes.Equal([]byte(u.Host), ctx.Host()) {
		return ""
	}
	return "Origin " + origin + " is not this site"
}
