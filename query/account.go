package query

import (
	"bytes"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/newsflow/newsflow/internal/jsontime"
	"github.com/newsflow/newsflow/operators/interest"
	"github.com/newsflow/newsflow/query/auth"
	"github.com/newsflow/newsflow/query/rank"
	"github.com/valyala/fasthttp"
)

// SessionCookie is the cookie that carries a session token; clients may
// send the token as "Authorization: Bearer TOKEN" instead.
const SessionCookie = "nf_session"

type credentials struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

type sessionBody struct {
	User    auth.User       `json:"user"`
	Token   string          `json:"token"`
	Expires jsontime.Millis `json:"expires_at"`
}

// decodeJSON reads a JSON object body strictly into v, answering 400 if
// it cannot.
func decodeJSON(ctx *fasthttp.RequestCtx, v any) bool {
	if err := decodeStrict(ctx.PostBody(), v); err != nil {
		writeError(ctx, fasthttp.StatusBadRequest, err.Error())
		return false
	}
	return true
}

// clientIP is the client's address: the one resolveClient found (the peer,
// or from X-Forwarded-For through a trusted proxy), or the peer's.
func clientIP(ctx *fasthttp.RequestCtx) string {
	if ip, ok := ctx.UserValue(clientKey).(string); ok {
		return ip
	}
	return peerIP(ctx)
}

// peerIP is the address of the connection's other end.
func peerIP(ctx *fasthttp.RequestCtx) string {
	if a, ok := ctx.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	return ctx.RemoteAddr().String()
}

func (s *Server) startSession(ctx *fasthttp.RequestCtx, status int, u auth.User) {
	mctx, cancel := s.metaCtx()
	defer cancel()
	token, sess, err := s.deps.Auth.NewSession(mctx, u.ID)
	if err != nil {
		metaError(ctx, "create session", err)
		return
	}
	c := fasthttp.AcquireCookie()
	defer fasthttp.ReleaseCookie(c)
	c.SetKey(SessionCookie)
	c.SetValue(token)
	c.SetPath("/")
	c.SetHTTPOnly(true)
	c.SetSameSite(fasthttp.CookieSameSiteLaxMode)
	c.SetSecure(s.opts.CookieSecure || ctx.IsTLS())
	c.SetExpire(sess.Expires.Time)
	ctx.Response.Header.SetCookie(c)
	writeJSON(ctx, status, sessionBody{User: u, Token: token, Expires: sess.Expires})
}

// handleRegister creates an account and logs it in.
func (s *Server) handleRegister(ctx *fasthttp.RequestCtx) {
	var c credentials
	if !decodeJSON(ctx, &c) {
		return
	}
	if ok, retry := s.deps.Limiter.Allow(clientIP(ctx), ""); !ok {
		tooMany(ctx, retry, "too many attempts; retry later")
		return
	}
	mctx, cancel := s.metaCtx()
	defer cancel()
	u, err := s.deps.Auth.Register(mctx, c.Username, c.Password)
	switch {
	case errors.Is(err, auth.ErrUsernameTaken):
		writeError(ctx, fasthttp.StatusConflict, err.Error())
		return
	case errors.Is(err, auth.ErrInvalidUsername), errors.Is(err, auth.ErrWeakPassword):
		writeError(ctx, fasthttp.StatusBadRequest, err.Error())
		return
	case err != nil:
		metaError(ctx, "register", err)
		return
	}
	s.startSession(ctx, fasthttp.StatusCreated, u)
}

// handleLogin checks credentials and opens a session; attempts are
// limited per client address, and failures back off per username and
// client address (auth.Limiter): another client's failures on a username
// never refuse its owner.
func (s *Server) handleLogin(ctx *fasthttp.RequestCtx) {
	var c credentials
	if !decodeJSON(ctx, &c) {
		return
	}
	ip := clientIP(ctx)
	if ok, retry := s.deps.Limiter.Allow(ip, c.Username); !ok {
		tooMany(ctx, retry, "too many attempts; retry later")
		return
	}
	mctx, cancel := s.metaCtx()
	defer cancel()
	u, err := s.deps.Auth.Authenticate(mctx, c.Username, c.Password)
	switch {
	case errors.Is(err, auth.ErrBadCredentials):
		s.deps.Limiter.Failed(ip, c.Username)
		writeError(ctx, fasthttp.StatusUnauthorized, "wrong username or password")
		return
	case err != nil:
		metaError(ctx, "log in", err)
		return
	}
	s.deps.Limiter.Succeeded(ip, c.Username)
	s.startSession(ctx, fasthttp.StatusOK, u)
}

// token returns the session token of a request: the bearer token of the
// Authorization header if there is one, else the session cookie's. An
// Authorization header of another scheme (Basic) leaves the cookie the
// identity, which crossSite then checks.
func token(ctx *fasthttp.RequestCtx) string {
	if t, ok := bearer(ctx); ok {
		return t
	}
	return string(ctx.Request.Header.Cookie(SessionCookie))
}

// bearer returns the token of an "Authorization: Bearer TOKEN" header (the
// scheme in any case) and whether the request has one.
func bearer(ctx *fasthttp.RequestCtx) (string, bool) {
	h := ctx.Request.Header.Peek(fasthttp.HeaderAuthorization)
	const scheme = "bearer "
	if len(h) < len(scheme) || !strings.EqualFold(string(h[:len(scheme)]), scheme) {
		return "", false
	}
	return strings.TrimSpace(string(h[len(scheme):])), true
}

// sessionUser is a request's resolved session, kept as a user value so
// that the rate limiter, the admin guard and the handler look it up once.
type sessionUser struct {
	u  auth.User
	ok bool
}

const userKey = "session_user"

// user returns the logged-in user of a request, if any.
func (s *Server) user(ctx *fasthttp.RequestCtx) (auth.User, bool) {
	if su, ok := ctx.UserValue(userKey).(sessionUser); ok {
		return su.u, su.ok
	}
	var su sessionUser
	if t := token(ctx); s.deps.Auth != nil && t != "" {
		// A write only to delete an expired session: bounded as one.
		mctx, cancel := s.metaCtx()
		_, u, err := s.deps.Auth.Lookup(mctx, t)
		cancel()
		su = sessionUser{u, err == nil}
	}
	ctx.SetUserValue(userKey, su)
	return su.u, su.ok
}

// adminToken reports whether the request carries the configured admin
// token (compared in constant time).
func (s *Server) adminToken(ctx *fasthttp.RequestCtx) bool {
	at, t := s.opts.AdminToken, token(ctx)
	return at != "" && t != "" && subtle.ConstantTimeCompare([]byte(t), []byte(at)) == 1
}

// requireUser answers 401 unless the request carries a live session.
func (s *Server) requireUser(h func(ctx *fasthttp.RequestCtx, u auth.User)) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		u, ok := s.user(ctx)
		if !ok {
			writeError(ctx, fasthttp.StatusUnauthorized, "log in first (session cookie or Authorization: Bearer)")
			return
		}
		h(ctx, u)
	}
}

// handleLogout revokes the request's session.
// handleLogout ends the request's session; with ?everywhere=true it logs
// the session's account out everywhere (auth.Store.RevokeAll: every
// session and every API key), which needs a live session (401 without).
func (s *Server) handleLogout(ctx *fasthttp.RequestCtx) {
	everywhere := false
	switch v := string(ctx.QueryArgs().Peek("everywhere")); v {
	case "", "false":
	case "true":
		everywhere = true
	default:
		writeError(ctx, fasthttp.StatusBadRequest, fmt.Sprintf("everywhere %q: want true or false", v))
		return
	}
	mctx, cancel := s.metaCtx()
	defer cancel()
	t := token(ctx)
	switch {
	case everywhere:
		_, u, err := s.deps.Auth.Lookup(mctx, t)
		switch {
		case errors.Is(err, auth.ErrNoSession):
			writeError(ctx, fasthttp.StatusUnauthorized, "log in to log out everywhere")
			return
		case err != nil:
			metaError(ctx, "log out", err)
			return
		}
		if err := s.deps.Auth.RevokeAll(mctx, u.ID); err != nil {
			metaError(ctx, "log out everywhere", err)
			return
		}
		s.opts.Logger.Info("logged out everywhere: every session ended and every API key revoked", "user", u.ID)
	case t != "":
		if err := s.deps.Auth.Revoke(mctx, t); err != nil {
			metaError(ctx, "log out", err)
			return
		}
	}
	ctx.Response.Header.DelClientCookie(SessionCookie)
	ctx.SetStatusCode(fasthttp.StatusNoContent)
}

func (s *Server) handleMe(ctx *fasthttp.RequestCtx, u auth.User) {
	writeJSON(ctx, fasthttp.StatusOK, u)
}

func (s *Server) handleGetPreferences(ctx *fasthttp.RequestCtx, u auth.User) {
	mctx, cancel := s.metaCtx()
	defer cancel()
	p, err := s.deps.Auth.GetPreferences(mctx, u.ID)
	if err != nil {
		metaError(ctx, "read preferences", err)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, p)
}

func (s *Server) handlePutPreferences(ctx *fasthttp.RequestCtx, u auth.User) {
	var p auth.Preferences
	if !decodeJSON(ctx, &p) {
		return
	}
	mctx, cancel := s.metaCtx()
	defer cancel()
	p, err := s.deps.Auth.PutPreferences(mctx, u.ID, p)
	switch {
	case errors.Is(err, auth.ErrInvalidPreferences):
		writeError(ctx, fasthttp.StatusBadRequest, err.Error())
		return
	case err != nil:
		metaError(ctx, "save preferences", err)
		return
	}
	s.feeds.invalidate(u.ID)
	writeJSON(ctx, fasthttp.StatusOK, p)
}

// handleHistory answers the logged-in user's latest reads, newest first,
// with each article's title and story (from this node's story state, how
// stale in staleness_ms). In a cluster the profile comes from the owner of
// the user's partition (userProfile).
func (s *Server) handleHistory(ctx *fasthttp.RequestCtx, u auth.User) {
	body := map[string]any{"history": []interest.HistoryEntry{}, "staleness_ms": s.storyStaleness()}
	if s.deps.Interest != nil {
		p, gap := s.userProfile(ctx, u, s.opts.Now().UnixMilli())
		if gap != nil {
			writeJSON(ctx, fasthttp.StatusServiceUnavailable, gap.errorBody())
			return
		}
		type entry struct {
			interest.HistoryEntry
			articleRef
		}
		h := make([]entry, len(p.History))
		for i, e := range p.History {
			h[i] = entry{e, s.articleRef(e.ArticleID)}
		}
		body["history"] = h
	}
	writeJSON(ctx, fasthttp.StatusOK, body)
}

// How a reader's interest profile entered their feed.
const (
	interestApplied     = "applied"     // the profile ranked the feed
	interestNone        = "none"        // the reader has no reads yet
	interestUnavailable = "unavailable" // it could not be read: preferences only
)

// feedInterest is what a feed page says about the reader's interest
// profile (nothing for an anonymous reader).
type feedInterest struct {
	Interest string `json:"interest,omitempty"`
	*interestGap
}

// readerOf returns a version string that changes when the user's profile
// or preferences do (or the profile becomes readable), a function that
// builds the ranking's view of the user (called only when the cached feed
// is stale: it looks up the story of every read in the history), and how
// the profile enters the feed. The profile comes from the owner of the
// user's partition (userProfile), decayed to the story view's watermark;
// when it cannot be read the feed ranks with the preferences alone.
func (s *Server) readerOf(ctx *fasthttp.RequestCtx, u auth.User) (string, func() *rank.Reader, feedInterest) {
	mctx, cancel := s.metaCtx()
	prefs, prefsErr := s.deps.Auth.GetPreferences(mctx, u.ID)
	cancel()
	var prof *profileBody
	version := ""
	if prefsErr == nil {
		version += prefs.Updated.String()
	}
	fi := feedInterest{Interest: interestNone}
	if s.deps.Interest != nil {
		p, gap := s.userProfile(ctx, u, s.deps.Stories.Watermark())
		switch {
		case gap != nil:
			fi = feedInterest{Interest: interestUnavailable, interestGap: gap}
			version += "/" + interestUnavailable
		case p.Updated != 0:
			prof, fi.Interest = &p, interestApplied
			version += "/" + strconv.FormatInt(p.Updated, 10) + "/" + strconv.Itoa(p.Reads)
		}
	}
	build := func() *rank.Reader {
		r := &rank.Reader{Interest: map[string]float64{}, Preferred: map[string]bool{}, Excluded: map[string]bool{}, Read: map[string]bool{}}
		if prefsErr == nil {
			r.Topics = prefs.Topics
			for _, src := range prefs.PreferredSources {
				r.Preferred[src] = true
			}
			for _, src := range prefs.ExcludedSources {
				r.Excluded[src] = true
			}
		}
		if prof != nil {
			for _, w := range prof.Topics {
				r.Interest[w.Topic] = w.Weight
			}
			for _, h := range prof.History {
				if id, ok := s.deps.Stories.StoryOfArticle(h.ArticleID); ok {
					r.Read[id] = true
				}
			}
		}
		return r
	}
	return version, build, fi
}

// adminPrefix is the path prefix of the endpoints only admins may call.
const adminPrefix = "/api/v1/admin/"

// guardAdmin answers 401 to admin endpoints without credentials and 403 to
// users without the admin role. Without accounts (no Auth) it lets
// everything through, as a node without users has no one to ask.
func (s *Server) guardAdmin(next fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		if s.deps.Auth == nil || !bytes.HasPrefix(ctx.Path(), []byte(adminPrefix)) ||
			s.isAdmin(ctx, "admin endpoint", "log in as an admin (session cookie or Authorization: Bearer)") {
			next(ctx)
		}
	}
}

// isAdmin reports whether the request carries the admin token or an admin
// session; if not, it answers 401 (no session: "what: login") or 403.
func (s *Server) isAdmin(ctx *fasthttp.RequestCtx, what, login string) bool {
	if s.adminToken(ctx) {
		return true
	}
	u, ok := s.user(ctx)
	switch {
	case !ok:
		writeError(ctx, fasthttp.StatusUnauthorized, what+": "+login)
	case u.Role != auth.RoleAdmin:
		writeError(ctx, fasthttp.StatusForbidden, what+": "+u.Username+" is not an admin")
	default:
		return true
	}
	return false
}

// secure sets the security headers of every response and gives every
// request an id (the client's X-Request-Id if it is sane), echoed in the
// response and available to handlers as the "request_id" user value.
// securityHeaders go on every response, apiHeaders on the API's too; in
// canonical form, so setting them needs no normalising per request.
var (
	securityHeaders = [][2][]byte{
		{[]byte("X-Content-Type-Options"), []byte("nosniff")},
		{[]byte("X-Frame-Options"), []byte("DENY")},
		{[]byte("Referrer-Policy"), []byte("no-referrer")},
		{[]byte("Cross-Origin-Opener-Policy"), []byte("same-origin")},
	}
	apiHeaders = [][2][]byte{
		{[]byte("Content-Security-Policy"), []byte("default-src 'none'; frame-ancestors 'none'")},
		{[]byte("Cache-Control"), []byte("no-store")},
	}
)

func (s *Server) secure(next fasthttp.RequestHandler) fasthttp.RequestHandler {
	var seq atomic.Uint64
	prefix := strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	return func(ctx *fasthttp.RequestCtx) {
		id := string(ctx.Request.Header.Peek("X-Request-Id"))
		if id == "" || len(id) > 64 || strings.ContainsFunc(id, func(r rune) bool { return r <= ' ' || r > '~' }) {
			id = prefix + "-" + strconv.FormatUint(seq.Add(1), 36)
		}
		ctx.SetUserValue("request_id", id)
		h := &ctx.Response.Header
		h.Set("X-Request-Id", id)
		for _, kv := range securityHeaders {
			h.SetCanonical(kv[0], kv[1])
		}
		if bytes.HasPrefix(ctx.Path(), []byte("/api/")) {
			for _, kv := range apiHeaders {
				h.SetCanonical(kv[0], kv[1])
			}
		}
		start := ctx.Time() // when fasthttp began the request
		next(ctx)
		// An access log line: debug for successes, warn for server errors.
		// Bodies (passwords, tokens) are never logged.
		status := ctx.Response.StatusCode()
		level := slog.LevelDebug
		if status >= 500 {
			level = slog.LevelWarn
		}
		if s.opts.Logger.Enabled(context.Background(), level) {
			s.opts.Logger.Log(context.Background(), level, "request", "request_id", id, "method", string(ctx.Method()),
				"path", string(ctx.Path()), "status", status, "duration", time.Since(start))
		}
	}
}
