package query_test

import (
	"strings"
	"testing"

	"github.com/newsflow/newsflow/internal/auth"
	"github.com/newsflow/newsflow/query"
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
