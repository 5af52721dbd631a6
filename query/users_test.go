package query_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/newsflow/newsflow/query"
	"github.com/newsflow/newsflow/query/auth"
	"github.com/valyala/fasthttp"
)

// Admins list accounts, end an account's sessions and delete accounts;
// the last admin stays.
func TestAdminManagesUsers(t *testing.T) {
	n := newTestNode(t, withQuery(query.Options{SetupToken: testSetupToken}))
	alice := login(t, n, "/api/v1/auth/register", "alice", "correct horse battery")
	bob := login(t, n, "/api/v1/auth/register", "bob", "a long enough password")
	r := n.post(t, "/api/v1/admin/users", `{"username":"root","password":"a good long password","role":"admin"}`)
	if r.status != fasthttp.StatusCreated {
		t.Fatalf("add admin: %s", r)
	}
	root := decodeStrict[auth.User](t, r.body)

	// Only admins.
	wantError(t, n.do(t, "GET", "/api/v1/admin/users", nil, "X-Anonymous", "1"), fasthttp.StatusUnauthorized)
	wantError(t, n.do(t, "GET", "/api/v1/admin/users", nil, bearer(alice)...), fasthttp.StatusForbidden, "not an admin")

	r = n.get(t, "/api/v1/admin/users")
	if r.status != fasthttp.StatusOK {
		t.Fatalf("list: %s", r)
	}
	page := decodeStrict[struct {
		Users []auth.User `json:"users"`
	}](t, r.body)
	var names []string
	ids := map[string]string{}
	for _, u := range page.Users {
		names = append(names, u.Username+":"+string(u.Role))
		ids[u.Username] = u.ID
	}
	if got := strings.Join(names, " "); got != "alice:user bob:user root:admin" {
		t.Fatalf("users %q", got)
	}

	// Log bob out everywhere: his session ends, alice's does not.
	if r := n.do(t, "DELETE", "/api/v1/admin/users/"+ids["bob"]+"/sessions", nil); r.status != fasthttp.StatusNoContent {
		t.Fatalf("revoke: %s", r)
	}
	wantError(t, n.do(t, "GET", "/api/v1/me", nil, bearer(bob)...), fasthttp.StatusUnauthorized)
	if r := n.do(t, "GET", "/api/v1/me", nil, bearer(alice)...); r.status != fasthttp.StatusOK {
		t.Errorf("alice after bob's revocation: %s", r)
	}

	// Delete alice: her session ends, her name is free again.
	if r := n.do(t, "DELETE", "/api/v1/admin/users/"+ids["alice"], nil); r.status != fasthttp.StatusNoContent {
		t.Fatalf("delete: %s", r)
	}
	wantError(t, n.do(t, "GET", "/api/v1/me", nil, bearer(alice)...), fasthttp.StatusUnauthorized)
	wantError(t, n.do(t, "DELETE", "/api/v1/admin/users/"+ids["alice"], nil), fasthttp.StatusNotFound, "no user")
	wantError(t, n.do(t, "DELETE", "/api/v1/admin/users/"+ids["alice"]+"/sessions", nil), fasthttp.StatusNotFound)
	login(t, n, "/api/v1/auth/register", "alice", "another good password")

	// The last admin cannot be deleted; once there is another, it can.
	wantError(t, n.do(t, "DELETE", "/api/v1/admin/users/"+root.ID, nil), fasthttp.StatusConflict, "last admin")
	if r := n.post(t, "/api/v1/admin/users", `{"username":"root2","password":"a good long password","role":"admin"}`); r.status != fasthttp.StatusCreated {
		t.Fatalf("add second admin: %s", r)
	}
	if r := n.do(t, "DELETE", "/api/v1/admin/users/"+root.ID, nil); r.status != fasthttp.StatusNoContent {
		t.Fatalf("delete root with another admin: %s", r)
	}
}

// apiKey creates an API key with a session and returns its secret.
func apiKey(t *testing.T, n *testNode, session string) string {
	t.Helper()
	r := n.do(t, fasthttp.MethodPost, "/api/v1/me/api-keys", []byte(`{"name":"newsboat"}`), bearer(session)...)
	var k struct {
		Secret string `json:"secret"`
	}
	if r.status != fasthttp.StatusCreated || json.Unmarshal(r.body, &k) != nil || k.Secret == "" {
		t.Fatalf("create an API key: %s", r)
	}
	return k.Secret
}

// An app logged in with an API key answers 200 until its account is
// logged out everywhere, then 401; other accounts' keys go on.
func TestLogOutEverywhereRevokesAPIKeys(t *testing.T) {
	n := newTestNode(t)
	ann := login(t, n, "/api/v1/auth/register", "ann", "correct horse battery")
	bob := login(t, n, "/api/v1/auth/register", "bob", "a long enough password")
	annKey, bobKey := apiKey(t, n, ann), apiKey(t, n, bob)
	me := func(key string) int { return n.do(t, fasthttp.MethodGet, "/v1/me", nil, "X-Auth-Token", key).status }
	if a, b := me(annKey), me(bobKey); a != fasthttp.StatusOK || b != fasthttp.StatusOK {
		t.Fatalf("the apps before: %d %d", a, b)
	}
	u := decodeStrict[auth.User](t, n.do(t, fasthttp.MethodGet, "/api/v1/me", nil, bearer(ann)...).body)
	if r := n.do(t, fasthttp.MethodDelete, "/api/v1/admin/users/"+u.ID+"/sessions", nil); r.status != fasthttp.StatusNoContent {
		t.Fatalf("log ann out everywhere: %s", r)
	}
	if got := me(annKey); got != fasthttp.StatusUnauthorized {
		t.Errorf("ann's API key after logging out everywhere: %d, want 401", got)
	}
	wantError(t, n.do(t, fasthttp.MethodGet, "/api/v1/me", nil, bearer(ann)...), fasthttp.StatusUnauthorized)
	if got := me(bobKey); got != fasthttp.StatusOK {
		t.Errorf("bob's API key after ann logged out everywhere: %d", got)
	}
}

// A deleted account leaves no webhook and no API key behind.
func TestDeleteUserRemovesHooksAndKeys(t *testing.T) {
	n := newTestNode(t)
	ann := login(t, n, "/api/v1/auth/register", "ann", "correct horse battery")
	bob := login(t, n, "/api/v1/auth/register", "bob", "a long enough password")
	annKey := apiKey(t, n, ann)
	for _, tok := range []string{ann, ann, bob} {
		if r := n.post(t, "/api/v1/me/webhooks", `{"url":"https://hooks.example/newsflow"}`, bearer(tok)...); r.status != fasthttp.StatusCreated {
			t.Fatalf("register a webhook: %s", r)
		}
	}
	u := decodeStrict[auth.User](t, n.do(t, fasthttp.MethodGet, "/api/v1/me", nil, bearer(ann)...).body)
	if r := n.do(t, fasthttp.MethodDelete, "/api/v1/admin/users/"+u.ID, nil); r.status != fasthttp.StatusNoContent {
		t.Fatalf("delete ann: %s", r)
	}
	var list struct {
		Webhooks []struct {
			Owner string `json:"owner"`
		} `json:"webhooks"`
	}
	if r := n.get(t, "/api/v1/admin/webhooks"); json.Unmarshal(r.body, &list) != nil || len(list.Webhooks) != 1 || list.Webhooks[0].Owner == u.ID {
		t.Errorf("webhooks after deleting ann: %s", r)
	}
	if got := n.do(t, fasthttp.MethodGet, "/v1/me", nil, "X-Auth-Token", annKey).status; got != fasthttp.StatusUnauthorized {
		t.Errorf("a deleted account's API key: %d, want 401", got)
	}
}

// A reader logs out everywhere: every session of the account ends, and
// every API key; other readers' go on. Without a session it is refused.
func TestReaderLogsOutEverywhere(t *testing.T) {
	n := newTestNode(t)
	ann1 := login(t, n, "/api/v1/auth/register", "ann", "correct horse battery")
	ann2 := login(t, n, "/api/v1/auth/login", "ann", "correct horse battery")
	bob := login(t, n, "/api/v1/auth/register", "bob", "a long enough password")
	annKey, bobKey := apiKey(t, n, ann1), apiKey(t, n, bob)
	me := func(key string) int { return n.do(t, fasthttp.MethodGet, "/v1/me", nil, "X-Auth-Token", key).status }

	wantError(t, n.do(t, fasthttp.MethodPost, "/api/v1/auth/logout?everywhere=true", nil, bearer("not-a-session")...), fasthttp.StatusUnauthorized)
	wantError(t, n.do(t, fasthttp.MethodPost, "/api/v1/auth/logout?everywhere=yes", nil, bearer(ann1)...), fasthttp.StatusBadRequest, "want true or false")
	if got := me(annKey); got != fasthttp.StatusOK {
		t.Fatalf("ann's key after refused requests: %d", got)
	}
	if r := n.do(t, fasthttp.MethodPost, "/api/v1/auth/logout?everywhere=true", nil, bearer(ann2)...); r.status != fasthttp.StatusNoContent {
		t.Fatalf("log out everywhere: %s", r)
	}
	for _, tok := range []string{ann1, ann2} {
		wantError(t, n.do(t, fasthttp.MethodGet, "/api/v1/me", nil, bearer(tok)...), fasthttp.StatusUnauthorized)
	}
	if got := me(annKey); got != fasthttp.StatusUnauthorized {
		t.Errorf("ann's API key after she logged out everywhere: %d, want 401", got)
	}
	if got := me(bobKey); got != fasthttp.StatusOK {
		t.Errorf("bob's API key: %d", got)
	}
	if r := n.do(t, fasthttp.MethodGet, "/api/v1/me", nil, bearer(bob)...); r.status != fasthttp.StatusOK {
		t.Errorf("bob's session: %s", r)
	}
}
