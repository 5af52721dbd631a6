package query_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// TestAPIKeysInSettings: a reader creates API keys with their session,
// sees each secret once, lists them without secrets, and revokes them;
// another reader can neither list nor revoke them, and without a session
// nothing answers.
func TestAPIKeysInSettings(t *testing.T) {
	n := newTestNode(t)
	ann := login(t, n, "/api/v1/auth/register", "ann", "correct horse battery")
	bob := login(t, n, "/api/v1/auth/register", "bob", "another good password")
	r := n.do(t, fasthttp.MethodPost, "/api/v1/me/api-keys", []byte(`{"name":"newsboat"}`), bearer(ann)...)
	var created struct {
		ID, Name, Secret string
	}
	if r.status != fasthttp.StatusCreated || json.Unmarshal(r.body, &created) != nil || created.Secret == "" || created.Name != "newsboat" ||
		r.header["Cache-Control"] != "no-store" {
		t.Fatalf("create: %s", r)
	}
	r = n.do(t, fasthttp.MethodGet, "/api/v1/me/api-keys", nil, bearer(ann)...)
	if r.status != fasthttp.StatusOK || !strings.Contains(string(r.body), created.ID) || strings.Contains(string(r.body), created.Secret) {
		t.Fatalf("list: %s", r)
	}
	if r := n.do(t, fasthttp.MethodGet, "/api/v1/me/api-keys", nil, bearer(bob)...); strings.Contains(string(r.body), created.ID) {
		t.Errorf("bob lists ann's key: %s", r)
	}
	if r := n.do(t, fasthttp.MethodDelete, "/api/v1/me/api-keys/"+created.ID, nil, bearer(bob)...); r.status != fasthttp.StatusNotFound {
		t.Errorf("bob revokes ann's key: %s", r)
	}
	for _, body := range []string{`{"name":""}`, `{"name":"` + strings.Repeat("x", 65) + `"}`, `{"nam":"x"}`, `not json`} {
		if r := n.do(t, fasthttp.MethodPost, "/api/v1/me/api-keys", []byte(body), bearer(ann)...); r.status != fasthttp.StatusBadRequest {
			t.Errorf("create with %s: %s", body, r)
		}
	}
	if r := n.do(t, fasthttp.MethodPost, "/api/v1/me/api-keys", []byte(`{"name":"x"}`)); r.status != fasthttp.StatusUnauthorized {
		t.Errorf("create without a session: %s", r)
	}
	// An API key is not a session: it cannot manage keys.
	if r := n.do(t, fasthttp.MethodGet, "/api/v1/me/api-keys", nil, bearer(created.Secret)...); r.status != fasthttp.StatusUnauthorized {
		t.Errorf("list with an API key as the bearer: %s", r)
	}
	if r := n.do(t, fasthttp.MethodDelete, "/api/v1/me/api-keys/"+created.ID, nil, bearer(ann)...); r.status != fasthttp.StatusNoContent {
		t.Fatalf("revoke: %s", r)
	}
	if r := n.do(t, fasthttp.MethodGet, "/api/v1/me/api-keys", nil, bearer(ann)...); strings.Contains(string(r.body), created.ID) {
		t.Errorf("revoked key still listed: %s", r)
	}
}
