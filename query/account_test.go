package query_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/internal/testutil"
	"github.com/newsflow/newsflow/query"
	"github.com/newsflow/newsflow/query/auth"
	"github.com/valyala/fasthttp"
)

// login registers (or logs in) a user and returns the session token.
func login(t *testing.T, n *testNode, path, user, pass string) string {
	t.Helper()
	r := n.post(t, path, fmt.Sprintf(`{"username":%q,"password":%q}`, user, pass))
	if r.status != fasthttp.StatusCreated && r.status != fasthttp.StatusOK {
		t.Fatalf("%s %s: %s", path, user, r)
	}
	var s struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal(r.body, &s); err != nil || s.Token == "" {
		t.Fatalf("%s: no token in %s", path, r)
	}
	if !strings.Contains(r.header["Set-Cookie"], "nf_session="+s.Token) || !strings.Contains(strings.ToLower(r.header["Set-Cookie"]), "httponly") {
		t.Errorf("session cookie %q", r.header["Set-Cookie"])
	}
	return s.Token
}

func bearer(tok string) []string { return []string{"Authorization", "Bearer " + tok} }

func TestAccountsSessionsAndPreferences(t *testing.T) {
	n := newTestNode(t, withArticles())
	alice := login(t, n, "/api/v1/auth/register", "alice", "correct horse battery")
	if r := n.post(t, "/api/v1/auth/register", `{"username":"Alice","password":"another good one"}`); r.status != fasthttp.StatusConflict {
		t.Errorf("second alice: %s", r)
	}
	if r := n.post(t, "/api/v1/auth/register", `{"username":"bob","password":"short"}`); r.status != fasthttp.StatusBadRequest {
		t.Errorf("weak password: %s", r)
	}
	bob := login(t, n, "/api/v1/auth/register", "bob", "a long enough password")
	if r := n.do(t, "GET", "/api/v1/me", nil, bearer(alice)...); r.status != fasthttp.StatusOK || !strings.Contains(string(r.body), `"username":"alice"`) {
		t.Errorf("me: %s", r)
	}
	for _, path := range []string{"/api/v1/me", "/api/v1/preferences", "/api/v1/history"} {
		if r := n.get(t, path); r.status != fasthttp.StatusUnauthorized {
			t.Errorf("%s without a session: %s", path, r)
		}
		if r := n.do(t, "GET", path, nil, bearer("garbage")...); r.status != fasthttp.StatusUnauthorized {
			t.Errorf("%s with a bad token: %s", path, r)
		}
	}
	// Preferences belong to the session's user only.
	r := n.do(t, "PUT", "/api/v1/preferences", []byte(`{"topics":["sports"],"preferred_sources":["sport"],"excluded_sources":["tv"]}`), bearer(alice)...)
	if r.status != fasthttp.StatusOK {
		t.Fatalf("put preferences: %s", r)
	}
	if r := n.do(t, "GET", "/api/v1/preferences", nil, bearer(bob)...); strings.Contains(string(r.body), "sports") {
		t.Errorf("bob sees alice's preferences: %s", r)
	}
	if r := n.do(t, "PUT", "/api/v1/preferences", []byte(`{"preferred_sources":["x"],"excluded_sources":["x"]}`), bearer(bob)...); r.status != fasthttp.StatusBadRequest {
		t.Errorf("contradictory preferences: %s", r)
	}
	if r := n.do(t, "PUT", "/api/v1/preferences", []byte(`{"colour":"blue"}`), bearer(bob)...); r.status != fasthttp.StatusBadRequest {
		t.Errorf("unknown field: %s", r)
	}

	// The feed is personal: alice prefers sports and excludes tv.
	ingestFixture(t, n, articleFixture)
	var feed struct {
		Stories []struct {
			SourceID string `json:"source_id"`
			Topics   []struct{ Topic string }
		} `json:"stories"`
	}
	json.Unmarshal(n.do(t, "GET", "/api/v1/feed?limit=100", nil, bearer(alice)...).body, &feed)
	if len(feed.Stories) == 0 || feed.Stories[0].Topics[0].Topic != "sports" {
		t.Errorf("alice's feed does not start with sports: %+v", feed.Stories)
	}
	for _, st := range feed.Stories {
		if st.SourceID == "tv" {
			t.Errorf("excluded source in alice's feed")
		}
	}

	// History is the session user's own.
	var me struct {
		ID string `json:"id"`
	}
	json.Unmarshal(n.do(t, "GET", "/api/v1/me", nil, bearer(alice)...).body, &me)
	readID := assignmentsByID(t, n)[0].id
	if r := n.post(t, "/api/v1/events/read", read("h1", me.ID, readID, "s", n.clock.ms(0))); r.status != fasthttp.StatusAccepted {
		t.Fatalf("read: %s", r)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if r := n.do(t, "GET", "/api/v1/history", nil, bearer(alice)...); !strings.Contains(string(r.body), readID) {
			return fmt.Errorf("alice's history: %s", r)
		}
		return nil
	})
	if r := n.do(t, "GET", "/api/v1/history", nil, bearer(bob)...); r.status != fasthttp.StatusOK || strings.Contains(string(r.body), readID) {
		t.Errorf("bob's history: %s", r)
	}

	// Logout revokes the session.
	if r := n.do(t, "POST", "/api/v1/auth/logout", nil, bearer(alice)...); r.status != fasthttp.StatusNoContent {
		t.Fatalf("logout: %s", r)
	}
	if r := n.do(t, "GET", "/api/v1/me", nil, bearer(alice)...); r.status != fasthttp.StatusUnauthorized {
		t.Errorf("me after logout: %s", r)
	}
	if login(t, n, "/api/v1/auth/login", "alice", "correct horse battery") == alice {
		t.Error("a new login returned the revoked token")
	}
	// Sessions expire.
	n.clock.Advance(8 * 24 * time.Hour)
	if r := n.do(t, "GET", "/api/v1/me", nil, bearer(bob)...); r.status != fasthttp.StatusUnauthorized {
		t.Errorf("me after the session expired: %s", r)
	}
}

func TestLoginBruteForceIsLimited(t *testing.T) {
	n := newTestNode(t)
	login(t, n, "/api/v1/auth/register", "carol", "carol's long password")
	limited := false
	for i := range 20 {
		r := n.post(t, "/api/v1/auth/login", `{"username":"carol","password":"wrong guess `+fmt.Sprint(i)+`"}`)
		if r.status == fasthttp.StatusTooManyRequests {
			if r.header["Retry-After"] == "" {
				t.Fatal("429 without Retry-After")
			}
			limited = true
			break
		}
		if r.status != fasthttp.StatusUnauthorized {
			t.Fatalf("wrong password: %s", r)
		}
	}
	if !limited {
		t.Fatal("20 wrong passwords and no 429")
	}
	// Even the right password waits, from the client that failed.
	if r := n.post(t, "/api/v1/auth/login", `{"username":"carol","password":"carol's long password"}`); r.status != fasthttp.StatusTooManyRequests {
		t.Errorf("right password during the lockout: %s", r)
	}
	n.clock.Advance(10 * time.Minute)
	login(t, n, "/api/v1/auth/login", "carol", "carol's long password")
}

// TestAdminEndpointsNeedAdmin: anonymous callers get 401 and users 403 on
// every admin endpoint; an admin account and the admin token pass.
func TestAdminEndpointsNeedAdmin(t *testing.T) {
	n := newTestNode(t, withArticles())
	user := login(t, n, "/api/v1/auth/register", "dave", "dave's long password")
	if _, err := n.auth.AddUser(context.Background(), "root", "root's long password", auth.RoleAdmin); err != nil {
		t.Fatal(err)
	}
	admin := login(t, n, "/api/v1/auth/login", "root", "root's long password")
	for _, ep := range []struct{ method, path string }{
		{"GET", "/api/v1/admin/progress"}, {"GET", "/api/v1/admin/topology"}, {"GET", "/api/v1/admin/sources"},
		{"POST", "/api/v1/admin/sources"}, {"GET", "/api/v1/admin/sources/export"}, {"DELETE", "/api/v1/admin/sources/x"},
		{"GET", "/api/v1/admin/users/dave/interest"},
	} {
		if r := n.do(t, ep.method, ep.path, nil, "X-Anonymous", "1"); r.status != fasthttp.StatusUnauthorized {
			t.Errorf("%s %s anonymous: %s", ep.method, ep.path, r)
		}
		if r := n.do(t, ep.method, ep.path, nil, bearer(user)...); r.status != fasthttp.StatusForbidden {
			t.Errorf("%s %s as a user: %s", ep.method, ep.path, r)
		}
		if r := n.do(t, ep.method, ep.path, nil, bearer("wrong-admin-token")...); r.status != fasthttp.StatusUnauthorized {
			t.Errorf("%s %s with a wrong token: %s", ep.method, ep.path, r)
		}
	}
	for _, tok := range []string{admin, testAdminToken} {
		if r := n.do(t, "GET", "/api/v1/admin/progress", nil, bearer(tok)...); r.status != fasthttp.StatusOK {
			t.Errorf("progress as admin: %s", r)
		}
	}
}

func TestSecurityHeadersAndRequestIDs(t *testing.T) {
	n := newTestNode(t)
	a, b := n.get(t, "/api/v1/trending?window=1h"), n.get(t, "/api/v1/trending?window=1h")
	for _, r := range []response{a, b} {
		for h, want := range map[string]string{"X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer", "Cache-Control": "no-store"} {
			if r.header[h] != want {
				t.Errorf("%s: %q, want %q", h, r.header[h], want)
			}
		}
	}
	if a.header["X-Request-Id"] == "" || a.header["X-Request-Id"] == b.header["X-Request-Id"] {
		t.Errorf("request ids %q and %q", a.header["X-Request-Id"], b.header["X-Request-Id"])
	}
	if r := n.do(t, "GET", "/api/v1/trending?window=1h", nil, "X-Request-Id", "client-42"); r.header["X-Request-Id"] != "client-42" {
		t.Errorf("client request id not echoed: %q", r.header["X-Request-Id"])
	}
	if r := n.do(t, "GET", "/api/v1/trending?window=1h", nil, "X-Request-Id", "bad id\x01"); r.header["X-Request-Id"] == "bad id\x01" {
		t.Error("a request id with control characters echoed")
	}
}

func TestHealthDetailed(t *testing.T) {
	n := newTestNode(t, withArticles())
	ingestFixture(t, n, articleFixture[:3])
	r := n.get(t, "/health/detailed")
	var h struct {
		Status string
		Checks struct {
			Engine struct {
				Ready bool `json:"ready"`
			}
			Stories struct {
				Recent    int    `json:"recent"`
				Source    string `json:"source"`
				Staleness *int64 `json:"staleness_ms"`
			}
			Search struct {
				Articles int `json:"articles"`
			}
		}
	}
	if err := json.Unmarshal(r.body, &h); err != nil || r.status != fasthttp.StatusOK || h.Status != "ok" || !h.Checks.Engine.Ready ||
		h.Checks.Stories.Recent == 0 || h.Checks.Stories.Source != "task" || h.Checks.Stories.Staleness == nil || *h.Checks.Stories.Staleness != 0 || h.Checks.Search.Articles != 3 {
		t.Errorf("health: %s", r)
	}
}

func TestRateLimits(t *testing.T) {
	n := newTestNode(t, withQuery(query.Options{RateLimits: query.RateLimits{PerIP: 1, BurstIP: 5, PerUser: 1, BurstUser: 3}}))
	limited := 0
	for range 10 {
		r := n.do(t, "GET", "/api/v1/trending?window=1h", nil, "X-Anonymous", "1")
		if r.status == fasthttp.StatusTooManyRequests {
			if r.header["Retry-After"] == "" || !strings.Contains(string(r.body), `"error"`) {
				t.Fatalf("429 without Retry-After or JSON: %s", r)
			}
			limited++
		}
	}
	if limited < 4 {
		t.Errorf("%d of 10 quick requests limited with a burst of 5", limited)
	}
	// Health checks are never limited.
	if r := n.get(t, "/health/live"); r.status != fasthttp.StatusOK {
		t.Errorf("health while limited: %s", r)
	}
}

func TestRateLimitPerUser(t *testing.T) {
	n := newTestNode(t, withQuery(query.Options{RateLimits: query.RateLimits{PerUser: 1, BurstUser: 3}}))
	tok := login(t, n, "/api/v1/auth/register", "fred", "fred's long password")
	limited := 0
	for range 8 {
		if r := n.do(t, "GET", "/api/v1/trending?window=1h", nil, bearer(tok)...); r.status == fasthttp.StatusTooManyRequests {
			limited++
		}
	}
	if limited < 4 {
		t.Errorf("%d of 8 quick requests of one user limited with a burst of 3", limited)
	}
	// Anonymous requests from the same address are not limited per user.
	for range 8 {
		if r := n.do(t, "GET", "/api/v1/trending?window=1h", nil, "X-Anonymous", "1"); r.status != fasthttp.StatusOK {
			t.Fatalf("anonymous request limited: %s", r)
		}
	}
}

// TestAccountTimesInMillis reads the account endpoints' times as a client
// does: integers, ms since the epoch, also for records an earlier version
// stored with RFC 3339 times; request bodies take either form.
func TestAccountTimesInMillis(t *testing.T) {
	n := newTestNode(t)
	ctx := context.Background()
	now := n.clock.ms(0)
	r := n.post(t, "/api/v1/auth/register", `{"username":"tina","password":"tina's long password"}`)
	var sess struct {
		User struct {
			ID      string          `json:"id"`
			Created json.RawMessage `json:"created_at"`
		} `json:"user"`
		Token   string          `json:"token"`
		Expires json.RawMessage `json:"expires_at"`
	}
	if err := json.Unmarshal(r.body, &sess); err != nil || r.status != fasthttp.StatusCreated {
		t.Fatalf("register: %s (%v)", r, err)
	}
	if got, want := string(sess.User.Created), fmt.Sprint(now); got != want {
		t.Errorf("created_at %s, want %s", got, want)
	}
	if got, want := string(sess.Expires), fmt.Sprint(now+auth.DefaultSessionTTL.Milliseconds()); got != want {
		t.Errorf("expires_at %s, want %s", got, want)
	}
	tina := bearer(sess.Token)
	r = n.do(t, "GET", "/api/v1/me", nil, tina...)
	if want := fmt.Sprintf(`"created_at":%d}`, now); !strings.HasSuffix(string(r.body), want) {
		t.Errorf("me: %s, want created_at %d", r, now)
	}
	// A client may send back what it read, in either form.
	n.clock.Advance(time.Second)
	for _, at := range []string{`"2020-01-02T03:04:05Z"`, `1577934245000`} {
		r = n.do(t, "PUT", "/api/v1/preferences", []byte(`{"topics":["science"],"updated_at":`+at+`}`), tina...)
		if want := fmt.Sprintf(`"updated_at":%d}`, now+1000); r.status != fasthttp.StatusOK || !strings.HasSuffix(string(r.body), want) {
			t.Errorf("put preferences with updated_at %s: %s, want %s", at, r, want)
		}
	}
	if r = n.do(t, "PUT", "/api/v1/preferences", []byte(`{"updated_at":"last week"}`), tina...); r.status != fasthttp.StatusBadRequest {
		t.Errorf("put preferences with updated_at \"last week\": %s", r)
	}

	// Records as an earlier version wrote them.
	m := n.auth.Meta()
	user, ok, err := m.Get(ctx, "users", sess.User.ID)
	if err != nil || !ok || !strings.Contains(string(user), fmt.Sprintf(`"created_at":%d`, now)) {
		t.Fatalf("stored user %s, %v", user, err)
	}
	old := strings.Replace(string(user), fmt.Sprintf(`"created_at":%d`, now), `"created_at":"2025-11-21T13:00:00.25+01:00"`, 1)
	if err := m.Put(ctx, "users", sess.User.ID, []byte(old)); err != nil {
		t.Fatal(err)
	}
	if err := m.Put(ctx, "prefs", sess.User.ID, []byte(`{"topics":["science"],"preferred_sources":[],"excluded_sources":[],"updated_at":"2025-11-21T12:00:00.999999999Z"}`)); err != nil {
		t.Fatal(err)
	}
	r = n.do(t, "GET", "/api/v1/me", nil, tina...)
	if want := fmt.Sprintf(`"created_at":%d}`, now+250); !strings.HasSuffix(string(r.body), want) {
		t.Errorf("me from an old record: %s, want %s", r, want)
	}
	r = n.do(t, "GET", "/api/v1/preferences", nil, tina...)
	if want := fmt.Sprintf(`"updated_at":%d}`, now+999); !strings.HasSuffix(string(r.body), want) {
		t.Errorf("preferences from an old record: %s, want %s", r, want)
	}
	if _, err := n.auth.Authenticate(ctx, "tina", "tina's long password"); err != nil {
		t.Errorf("log in with an old record: %v", err)
	}
}
