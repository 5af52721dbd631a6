package query_test

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/newsflow/newsflow/query"
	"github.com/valyala/fasthttp"
)

// The headers Chromium sends with a form a page of another origin submits
// to the node (what query/web/e2e/csrf.test.mjs drives a real browser
// to do).
func crossSiteForm(contentType string) []string {
	return []string{"Origin", "http://127.0.0.1:9999", "Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "navigate",
		"Sec-Fetch-Dest", "document", "Content-Type", contentType, "X-Anonymous", "1"}
}

// A page of another site cannot log the browser into an account of its
// choosing: login, register and setup are checked like cookie writes
// (without a session yet) and take JSON bodies only.
func TestLoginCSRFRefused(t *testing.T) {
	n := newTestNode(t)
	login(t, n, "/api/v1/auth/register", "mallory", "mallory's long=password")
	// A text/plain form with a field named `{"username":"mallory","password":"mallory's long`
	// and the value `password"}` posts name=value: Mallory's JSON login.
	plain := `{"username":"mallory","password":"mallory's long=password"}`
	form := "username=mallory&password=mallory%27s+long%3Dpassword"
	for _, c := range []struct {
		name, path, body string
		hdr              []string
	}{
		{"text/plain login", "/api/v1/auth/login", plain, crossSiteForm("text/plain")},
		{"urlencoded login", "/api/v1/auth/login", form, crossSiteForm("application/x-www-form-urlencoded")},
		{"text/plain register", "/api/v1/auth/register", strings.Replace(plain, "mallory", "mallory2", 1), crossSiteForm("text/plain")},
		{"text/plain login with the cookie of another session", "/api/v1/auth/login", plain,
			append(crossSiteForm("text/plain"), "Cookie", query.SessionCookie+"=whatever")},
		{"setup", "/api/v1/setup/admin", `{"token":"x","username":"eve","password":"eve's long password"}`, crossSiteForm("text/plain")},
		{"JSON from a foreign Origin, no Sec-Fetch-Site", "/api/v1/auth/login", plain,
			[]string{"Origin", "http://evil.example", "Content-Type", "application/json"}},
	} {
		r := n.post(t, c.path, c.body, c.hdr...)
		wantError(t, r, fasthttp.StatusForbidden, "cross-site request refused")
		if sc := r.header["Set-Cookie"]; sc != "" {
			t.Errorf("%s: refused request set a cookie: %q", c.name, sc)
		}
	}
	// From the node's own page, the body must still be JSON.
	same := []string{"Origin", "http://newsflow", "Sec-Fetch-Site", "same-origin"}
	wantError(t, n.post(t, "/api/v1/auth/login", plain, append(same, "Content-Type", "text/plain")...), fasthttp.StatusUnsupportedMediaType, "application/json")
	wantError(t, n.post(t, "/api/v1/auth/login", form, append(same, "Content-Type", "application/x-www-form-urlencoded")...), fasthttp.StatusUnsupportedMediaType)
	wantError(t, n.post(t, "/api/v1/auth/login", plain, "Content-Type", "multipart/form-data; boundary=x"), fasthttp.StatusUnsupportedMediaType)
	// The web UI's own post (fetch with Content-Type: application/json).
	if r := n.post(t, "/api/v1/auth/login", plain, append(same, "Content-Type", "application/json; charset=utf-8")...); r.status != fasthttp.StatusOK {
		t.Fatalf("same-origin JSON login: %s", r)
	}
}

// Only a valid bearer credential exempts a write from the cross-site
// check, and then the identity is the bearer's, never the cookie's.
func TestCrossSiteAuthorizationHeader(t *testing.T) {
	n := newTestNode(t)
	alice := login(t, n, "/api/v1/auth/register", "alice", "correct horse battery")
	bob := login(t, n, "/api/v1/auth/register", "bob", "a long enough password")
	aliceID, bobID := userID(t, n, alice), userID(t, n, bob)
	cookie := []string{"Cookie", query.SessionCookie + "=" + alice}
	foreign := []string{"Origin", "http://evil.example", "Sec-Fetch-Site", "cross-site", "Content-Type", "text/plain"}
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("alice:correct horse battery"))
	ts := n.clock.ms(0)
	for _, auth := range []string{basic, "GoogleLogin auth=whatever", "Bearer not-a-session", "Bearer "} {
		hdr := append(append([]string{"Authorization", auth}, cookie...), foreign...)
		wantError(t, n.post(t, "/api/v1/events/read", read("c1", aliceID, "a1", "s", ts), hdr...), fasthttp.StatusForbidden, "cross-site request refused")
		wantError(t, n.do(t, "PUT", "/api/v1/preferences", []byte(`{"topics":["sports"]}`), hdr...), fasthttp.StatusForbidden, "cross-site")
	}
	if r := n.do(t, "GET", "/api/v1/preferences", nil, cookie...); !strings.Contains(string(r.body), `"topics":[]`) {
		t.Fatalf("preferences changed by a refused request: %s", r)
	}
	if got := readsOnLog(t, n); len(got) != 0 {
		t.Fatalf("refused reads reached the log: %v", got)
	}
	// Bob's bearer token with Alice's cookie: Bob writes, as Bob only.
	hdr := append(append(bearer(bob), cookie...), foreign...)
	if r := n.post(t, "/api/v1/events/read", read("c2", bobID, "a1", "s", ts), hdr...); r.status != fasthttp.StatusAccepted {
		t.Fatalf("bearer read with a foreign Origin: %s", r)
	}
	wantError(t, n.post(t, "/api/v1/events/read", read("c3", aliceID, "a1", "s", ts), hdr...), fasthttp.StatusForbidden, "not the logged-in user")
}
