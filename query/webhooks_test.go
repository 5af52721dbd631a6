package query_test

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"

	"github.com/newsflow/newsflow/internal/fetch"
	"github.com/newsflow/newsflow/query"
	"github.com/newsflow/newsflow/query/images"
	"github.com/valyala/fasthttp"
)

// A webhook on an address the SSRF guard refuses is refused when it is
// registered, with the reason, in every numeric form of the address;
// what the node's configuration allows is registered.
func TestAddWebhookRefusesBlockedAddresses(t *testing.T) {
	n := newTestNode(t)
	ann := login(t, n, "/api/v1/auth/register", "ann", "correct horse battery")
	for _, u := range []string{"https://127.0.0.1/hook", "https://2130706433/hook", "https://0x7f.1:8443/hook", "https://[::1]/hook",
		"https://[::ffff:7f00:1]/hook", "https://localhost/hook", "https://169.254.169.254/latest", "https://10.1.2.3/hook",
		"https://192.168.0.1./hook", "https://[fd00::1]/hook", "https://user:pass@10.0.0.1/hook"} {
		r := n.post(t, "/api/v1/me/webhooks", `{"url":"`+u+`"}`, bearer(ann)...)
		v := decodeStrict[map[string]string](t, r.body)
		if r.status != fasthttp.StatusBadRequest || v["reason"] != "blocked_address" || !strings.Contains(v["error"], "SSRF guard") {
			t.Errorf("register %s: %s", u, r)
		}
		if strings.Contains(v["error"], "pass") {
			t.Errorf("register %s: the refusal repeats the credentials: %s", u, r)
		}
	}
	if r := n.post(t, "/api/v1/me/webhooks", `{"url":"https://hooks.example/newsflow"}`, bearer(ann)...); r.status != fasthttp.StatusCreated {
		t.Errorf("register a public name: %s", r)
	}
	var list struct {
		Webhooks []struct {
			URL string `json:"url"`
		} `json:"webhooks"`
	}
	r := n.get(t, "/api/v1/admin/webhooks")
	if err := json.Unmarshal(r.body, &list); err != nil || len(list.Webhooks) != 1 || list.Webhooks[0].URL != "https://hooks.example/newsflow" {
		t.Errorf("hooks registered: %s", r.body)
	}

	// A node whose configuration allows a range registers hooks there.
	open := newTestNode(t, withQuery(query.Options{Images: images.Options{Fetch: fetch.Options{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}}}))
	bob := login(t, open, "/api/v1/auth/register", "bob", "correct horse battery")
	if r := open.post(t, "/api/v1/me/webhooks", `{"url":"https://127.0.0.1:8443/hook"}`, bearer(bob)...); r.status != fasthttp.StatusCreated {
		t.Errorf("register an allowed address: %s", r)
	}
}
