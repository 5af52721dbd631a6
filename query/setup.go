package query

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/newsflow/newsflow/crawl"
	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/query/auth"
	"github.com/valyala/fasthttp"
)

// The first run: GET /api/v1/setup tells the web page what a new node
// lacks (an admin, sources that can be fetched, articles), and POST
// /api/v1/setup/admin creates the first admin with the one-time setup
// token the node printed at start (Options.SetupToken).

// NewSetupToken returns a random one-time setup token (192 bits, URL-safe).
func NewSetupToken() (string, error) {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("read random: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// SetupURL is the page of the web UI that creates the first admin with
// token, on the node whose base URL is base ("http://127.0.0.1:8080").
func SetupURL(base, token string) string { return base + "/setup?token=" + token }

// setupGate holds the one-time setup token: only its SHA-256, compared in
// constant time. It dies when it has created an admin, or is shown while
// an admin exists.
type setupGate struct {
	hash [sha256.Size]byte
	live atomic.Bool
	// creating serialises the check-and-create of the first admin, so
	// that one token creates one admin.
	creating sync.Mutex
}

// newSetupGate returns the gate of token; "" means no token (a gate that
// is never open).
func newSetupGate(token string) *setupGate {
	g := &setupGate{}
	if token != "" {
		g.hash = sha256.Sum256([]byte(token))
		g.live.Store(true)
	}
	return g
}

func (g *setupGate) open() bool { return g.live.Load() }

// matches compares token with the gate's in constant time.
func (g *setupGate) matches(token string) bool {
	h := sha256.Sum256([]byte(token))
	return subtle.ConstantTimeCompare(h[:], g.hash[:]) == 1
}

func (g *setupGate) close() { g.live.Store(false) }

// setupLimiterKey is the name the setup attempts are limited under, in
// the login limiter: a wrong token backs off per client address, on top of
// the limit per client address.
const setupLimiterKey = "setup.token"

// adminCacheFor is how long "an admin exists" is believed without
// listing the users again.
const adminCacheFor = 10 * time.Second

// SetupStatus is the answer of GET /api/v1/setup. It holds no secret: no
// token, no feed URL, no error text beyond its class.
type SetupStatus struct {
	// Accounts says whether the node has accounts; without, there is no
	// admin to create (admin endpoints are open to whoever reaches them).
	Accounts bool `json:"accounts"`
	// AdminExists: at least one account has the admin role.
	AdminExists bool `json:"admin_exists"`
	// SetupTokenActive: the one-time setup link this node printed at
	// start may still create the first admin. A node with an admin token
	// prints none.
	SetupTokenActive bool `json:"setup_token_active"`
	// Ready: every task of the engine has restored its state.
	Ready    bool          `json:"ready"`
	Sources  SetupSources  `json:"sources"`
	Articles SetupArticles `json:"articles"`
	// Done: an admin exists and articles have arrived.
	Done bool `json:"done"`
	// NextSteps are what to do next, most urgent first (empty when done).
	NextSteps []SetupStep `json:"next_steps"`
	AsOf      int64       `json:"as_of"` // ms since the epoch
}

// SetupSources counts the sources and why they fail.
type SetupSources struct {
	Total  int `json:"total"`
	Active int `json:"active"` // not paused or gone
	// Crawled: active sources crawled at least once; OK: those whose last
	// crawl succeeded (new items or not modified).
	Crawled int `json:"crawled"`
	OK      int `json:"ok"`
	// Failing: active sources whose last crawl failed; Reasons groups
	// them by class, most common first.
	Failing int           `json:"failing"`
	Reasons []SetupReason `json:"reasons"`
}

// SetupReason is one class of crawl failure and how many sources fail so.
type SetupReason struct {
	Reason  string `json:"reason"`  // e.g. "dns", "timeout", "http_404"
	Message string `json:"message"` // e.g. "cannot resolve host names — is this machine offline?"
	Sources int    `json:"sources"`
}

// SetupArticles says whether articles have arrived.
type SetupArticles struct {
	// Received counts the raw articles articles.raw holds (appended by the
	// crawler or ingestion, less what retention removed).
	Received int64 `json:"received"`
	Any      bool  `json:"any"`
	// Stories is how many recent stories the node shows; absent in a
	// cluster, where the story view lives on one node.
	Stories *int `json:"stories,omitempty"`
}

// SetupStep is one thing to do next. ID is stable (create_admin,
// log_in, offline, fix_sources, add_source, wait, demo); Command, when set,
// is a shell command, Path a page of the web UI.
type SetupStep struct {
	ID      string `json:"id"`
	Text    string `json:"text"`
	Command string `json:"command,omitempty"`
	Path    string `json:"path,omitempty"`
}

// adminExists reports whether any account has the admin role. A yes is
// remembered for adminCacheFor.
func (s *Server) adminExists(ctx context.Context) (bool, error) {
	if t := s.adminSeen.Load(); t != 0 && time.Since(time.Unix(0, t)) < adminCacheFor {
		return true, nil
	}
	ok, err := s.deps.Auth.HasAdmin(ctx)
	if ok {
		s.adminSeen.Store(time.Now().UnixNano())
	}
	return ok, err
}

// setupStatus gathers the setup status.
func (s *Server) setupStatus(ctx context.Context) (SetupStatus, error) {
	st := SetupStatus{Accounts: s.deps.Auth != nil, Ready: s.deps.Engine.Ready(), NextSteps: []SetupStep{},
		Sources: SetupSources{Reasons: []SetupReason{}}, AsOf: s.opts.Now().UnixMilli()}
	if st.Accounts {
		var err error
		if st.AdminExists, err = s.adminExists(ctx); err != nil {
			return st, err
		}
		if st.AdminExists {
			s.setup.close()
		}
		st.SetupTokenActive = s.setup.open()
	}
	if s.deps.Sources != nil {
		list, err := s.deps.Sources.List(ctx)
		if err != nil {
			return st, fmt.Errorf("list sources: %w", err)
		}
		st.Sources = summarizeSources(list)
	}
	n, err := topicRecords(ctx, s.deps.Log, schema.TopicArticlesRaw)
	if err != nil {
		return st, fmt.Errorf("read offsets: %w", err)
	}
	st.Articles = SetupArticles{Received: n, Any: n > 0}
	if s.deps.Stories != nil && s.deps.Cluster == nil {
		recent, _ := s.deps.Stories.Recent()
		stories := len(recent)
		st.Articles.Stories = &stories
	}
	st.Done = (!st.Accounts || st.AdminExists) && st.Articles.Any
	st.NextSteps = setupSteps(st)
	return st, nil
}

// summarizeSources counts sources and groups the failing ones by reason.
func summarizeSources(list []crawl.Source) SetupSources {
	out := SetupSources{Total: len(list), Reasons: []SetupReason{}}
	byKey := map[string]*SetupReason{}
	for i := range list {
		src := &list[i]
		if src.Status != crawl.StatusActive {
			continue
		}
		out.Active++
		if !src.Crawl.LastCrawl.IsZero() {
			out.Crawled++
		}
		if r := src.Crawl.LastResult; r != nil && (r.Outcome == "ok" || r.Outcome == "not_modified") {
			out.OK++
		}
		f, failing := crawl.SourceFailure(src)
		if !failing {
			continue
		}
		out.Failing++
		if byKey[f.Key] == nil {
			byKey[f.Key] = &SetupReason{Reason: f.Key, Message: f.Hint}
		}
		byKey[f.Key].Sources++
	}
	for _, r := range byKey {
		out.Reasons = append(out.Reasons, *r)
	}
	slices.SortFunc(out.Reasons, func(a, b SetupReason) int {
		return cmp.Or(cmp.Compare(b.Sources, a.Sources), cmp.Compare(a.Reason, b.Reason))
	})
	return out
}

// offline reports whether the reasons say the machine cannot reach the
// internet.
func offline(r SetupReason) bool { return r.Reason == "dns" || r.Reason == "unreachable" }

// setupSteps says what to do next, most urgent first.
func setupSteps(st SetupStatus) []SetupStep {
	steps := []SetupStep{}
	if st.Accounts && !st.AdminExists {
		if st.SetupTokenActive {
			steps = append(steps, SetupStep{ID: "create_admin",
				Text: "Create the first admin account: open the one-time setup link the node printed when it started " +
					"(on its standard error, not in its log: /setup?token=...), or pass its token to the command below.",
				Command: "newsflow user add --admin --setup-token TOKEN NAME"})
		} else {
			steps = append(steps, SetupStep{ID: "create_admin",
				Text: "Create the first admin account with the node's admin token (auth.admin_token; a node that has one prints no setup link), " +
					"restart a node without one for a new one-time setup link, or stop it and run the command below " +
					"(the password is read from standard input).",
				Command: "newsflow user add --admin NAME"})
		}
	}
	src := st.Sources
	// Offline: no crawled source fetched, most for want of a network.
	isOffline := src.Failing > 0 && src.OK == 0 && offline(src.Reasons[0])
	switch {
	case src.Total == 0:
		steps = append(steps, SetupStep{ID: "add_source",
			Text:    "Add a source: as an admin in the admin console, or import a list of feeds (OPML) into the running node.",
			Command: "newsflow sources import FILE.opml", Path: "/admin"})
	case isOffline:
		steps = append(steps, SetupStep{ID: "offline",
			Text:    fmt.Sprintf("No source can be fetched: %s Connect the machine to the internet, or run the demo, which needs none.", upperFirstStr(src.Reasons[0].Message)),
			Command: "make demo"})
	case src.Failing > 0:
		steps = append(steps, SetupStep{ID: "fix_sources",
			Text: fmt.Sprintf("%d of %d active sources fail (most often: %s). The admin console lists each source's last error.",
				src.Failing, src.Active, src.Reasons[0].Message),
			Path: "/admin"})
	case src.Active == 0:
		steps = append(steps, SetupStep{ID: "add_source",
			Text: "Every source is paused or gone: resume one or add a source in the admin console.", Path: "/admin"})
	}
	if !st.Articles.Any {
		if src.Active > 0 && src.Failing < src.Active && !isOffline {
			steps = append(steps, SetupStep{ID: "wait",
				Text: "Sources are crawled within a minute of being added; stories appear as their articles arrive."})
		}
		if !slices.ContainsFunc(steps, func(s SetupStep) bool { return s.Command == "make demo" }) {
			steps = append(steps, SetupStep{ID: "demo",
				Text:    "To see newsflow at work without the internet, run the demo: generated news from local feeds and simulated readers.",
				Command: "make demo"})
		}
	}
	if st.Accounts && st.AdminExists && len(steps) > 0 {
		steps = append(steps, SetupStep{ID: "log_in", Text: "Log in as an admin to manage sources.", Path: "/admin"})
	}
	return steps
}

func upperFirstStr(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

// handleSetup answers the setup status.
func (s *Server) handleSetup(ctx *fasthttp.RequestCtx) {
	mctx, cancel := s.metaCtx()
	defer cancel()
	st, err := s.setupStatus(mctx)
	if err != nil {
		metaError(ctx, "setup status", err)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, st)
}

// setupAdminRequest is the body of POST /api/v1/setup/admin.
type setupAdminRequest struct {
	Token    string `json:"token"`
	Username string `json:"username"`
	Password string `json:"password"`
}

// handleSetupAdmin creates the first admin account with the one-time
// setup token and logs it in. The token dies with the admin it created, or
// when an admin exists; a refused username or password leaves it alive.
// Attempts are limited like logins.
func (s *Server) handleSetupAdmin(ctx *fasthttp.RequestCtx) {
	var req setupAdminRequest
	if !decodeJSON(ctx, &req) {
		return
	}
	if ok, retry := s.deps.Limiter.Allow(clientIP(ctx), setupLimiterKey); !ok {
		tooMany(ctx, retry, "too many attempts; retry later")
		return
	}
	g := s.setup
	g.creating.Lock()
	defer g.creating.Unlock()
	switch {
	case !g.open():
		s.deps.Limiter.Failed(clientIP(ctx), setupLimiterKey)
		writeError(ctx, fasthttp.StatusForbidden, "no setup token is active on this node: it was used, or an admin exists; log in as an admin (with no admin, restart the node for a new setup link)")
		return
	case req.Token == "" || !g.matches(req.Token):
		s.deps.Limiter.Failed(clientIP(ctx), setupLimiterKey)
		writeError(ctx, fasthttp.StatusForbidden, "wrong setup token: use the one-time link the node printed when it started")
		return
	}
	bg, cancel := s.metaCtx()
	defer cancel()
	if exists, err := s.adminExists(bg); err != nil {
		metaError(ctx, "look for an admin", err)
		return
	} else if exists {
		g.close()
		writeError(ctx, fasthttp.StatusConflict, "an admin account exists already: log in as an admin")
		return
	}
	u, err := s.deps.Auth.AddUser(bg, req.Username, req.Password, auth.RoleAdmin)
	if !s.accountError(ctx, err) {
		return
	}
	g.close()
	s.adminSeen.Store(time.Now().UnixNano())
	s.opts.Logger.Info("first admin account created with the setup token; the token is no longer valid", "username", u.Username, "id", u.ID)
	s.startSession(ctx, fasthttp.StatusCreated, u)
}

// accountError answers the error of creating an account (400, 409, 500)
// and reports whether there was none.
func (s *Server) accountError(ctx *fasthttp.RequestCtx, err error) bool {
	switch {
	case err == nil:
		return true
	case errors.Is(err, auth.ErrUsernameTaken):
		writeError(ctx, fasthttp.StatusConflict, err.Error())
	case errors.Is(err, auth.ErrInvalidUsername), errors.Is(err, auth.ErrWeakPassword), errors.Is(err, auth.ErrInvalidRole):
		writeError(ctx, fasthttp.StatusBadRequest, err.Error())
	default:
		metaError(ctx, "create account", err)
	}
	return false
}

// newUserRequest is the body of POST /api/v1/admin/users.
type newUserRequest struct {
	Username string    `json:"username"`
	Password string    `json:"password"`
	Role     auth.Role `json:"role"`
}

// handleAddUser creates an account with a role (default user), for admins
// (newsflow user add against a running node).
func (s *Server) handleAddUser(ctx *fasthttp.RequestCtx) {
	var req newUserRequest
	if !decodeJSON(ctx, &req) {
		return
	}
	mctx, cancel := s.metaCtx()
	defer cancel()
	u, err := s.deps.Auth.AddUser(mctx, req.Username, req.Password, cmp.Or(req.Role, auth.RoleUser))
	if !s.accountError(ctx, err) {
		return
	}
	if u.Role == auth.RoleAdmin {
		s.setup.close()
		s.adminSeen.Store(time.Now().UnixNano())
	}
	writeJSON(ctx, fasthttp.StatusCreated, u)
}
