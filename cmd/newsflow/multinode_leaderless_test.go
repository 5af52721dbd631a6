package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestClusterWithoutLeader: of three nodes, the leader and a follower are
// SIGKILLed, so the survivor has no quorum and no leader. A metadata write
// through it (registering an account, saving preferences, creating an API
// key, a Miniflux category, a source, an OPML import) answers 503 with a reason and Retry-After
// within 5 s instead of waiting for an election; reads of the metadata
// (the logged-in reader, their preferences, the source list, the Miniflux
// user of an API key whose first use would write its time of use) still
// answer 200 from its replica.
func TestClusterWithoutLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test skipped in -short mode")
	}
	tc := startTestCluster(t)
	v, _ := tc.waitView(10*time.Second, "led", func(v clusterView) bool { return v.Leader != "" })
	var survivor, follower string
	for _, id := range tc.ids {
		switch {
		case id == v.Leader:
		case survivor == "":
			survivor = id
		default:
			follower = id
		}
	}
	n := tc.nodes[survivor]
	do := func(method, path, body, bearer string) (*http.Response, string, time.Duration) {
		t.Helper()
		req, err := http.NewRequest(method, n.URL(path), strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		switch {
		case strings.HasPrefix(path, "/v1/"): // the Miniflux API, with an API key
			req.Header.Set("X-Auth-Token", bearer)
		case bearer != "":
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		start := time.Now()
		resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("%s %s: read body: %v", method, path, err)
		}
		return resp, string(b), time.Since(start)
	}

	resp, body, _ := do(http.MethodPost, "/api/v1/auth/register", `{"username":"erin","password":"correct horse battery staple"}`, "")
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("register with a leader: %d %s", resp.StatusCode, body)
	}
	var sess struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal([]byte(body), &sess); err != nil || sess.Token == "" {
		t.Fatalf("register answer %s: %v", body, err)
	}
	// An API key, never used yet: its first use writes its time of use.
	resp, body, _ = do(http.MethodPost, "/api/v1/me/api-keys", `{"name":"reader app"}`, sess.Token)
	var key struct {
		Secret string `json:"secret"`
	}
	if resp.StatusCode != http.StatusCreated || json.Unmarshal([]byte(body), &key) != nil || key.Secret == "" {
		t.Fatalf("create an API key with a leader: %d %s", resp.StatusCode, body)
	}

	const prefs = `{"topics":["technology"]}`
	if resp, body, _ := do(http.MethodPut, "/api/v1/preferences", prefs, sess.Token); resp.StatusCode != http.StatusOK {
		t.Fatalf("save preferences with a leader: %d %s", resp.StatusCode, body)
	}
	// The survivor's replica has them, and so the key written before,
	// before the others die (a read that misses catches up with the
	// leader).
	if resp, body, _ := do(http.MethodGet, "/api/v1/preferences", "", sess.Token); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"technology"`) {
		t.Fatalf("preferences with a leader: %d %s", resp.StatusCode, body)
	}

	tc.nodes[v.Leader].Kill()
	tc.nodes[follower].Kill()
	t.Logf("killed the leader %s and the follower %s; %s survives alone", v.Leader, follower, survivor)

	writes := []struct{ method, path, body, bearer string }{
		{http.MethodPost, "/api/v1/auth/register", `{"username":"frank","password":"another long passphrase"}`, ""},
		{http.MethodPut, "/api/v1/preferences", `{"topics":["science"]}`, sess.Token},
		{http.MethodPost, "/api/v1/me/api-keys", `{"name":"another app"}`, sess.Token},
		{http.MethodPost, "/v1/categories", `{"title":"News"}`, key.Secret},
		{http.MethodPost, "/api/v1/admin/sources?discover=false", `{"feed_url":"https://93.184.215.14/feed.xml"}`, testAdminToken},
		{http.MethodPost, "/api/v1/admin/sources/import", `<opml version="2.0"><body>` +
			`<outline type="rss" text="One" xmlUrl="https://93.184.215.14/one.xml"/>` +
			`<outline type="rss" text="Two" xmlUrl="https://93.184.215.14/two.xml"/></body></opml>`, testAdminToken},
	}
	for _, w := range writes {
		resp, body, took := do(w.method, w.path, w.body, w.bearer)
		t.Logf("%s %s without a leader: %d in %s: %s", w.method, w.path, resp.StatusCode, took.Round(time.Millisecond), body)
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "no leader") {
			t.Errorf("%s %s without a leader: %d %s, want 503 saying the cluster has no leader", w.method, w.path, resp.StatusCode, body)
		}
		if resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s %s without a leader: no Retry-After", w.method, w.path)
		}
		if took >= 5*time.Second {
			t.Errorf("%s %s without a leader answered after %s, want < 5s", w.method, w.path, took)
		}
	}

	reads := []string{"/api/v1/me", "/api/v1/preferences", "/api/v1/sources", "/v1/me"}
	for _, path := range reads {
		bearer := sess.Token
		if strings.HasPrefix(path, "/v1/") {
			bearer = key.Secret
		}
		resp, body, took := do(http.MethodGet, path, "", bearer)
		t.Logf("GET %s without a leader: %d in %s", path, resp.StatusCode, took.Round(time.Millisecond))
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s without a leader: %d %s, want 200 from the replica", path, resp.StatusCode, body)
		}
		if took >= 5*time.Second {
			t.Errorf("GET %s without a leader answered after %s, want < 5s", path, took)
		}
		if path == "/api/v1/preferences" && !strings.Contains(body, `"technology"`) {
			t.Errorf("preferences without a leader: %s, want those saved before (technology)", body)
		}
	}
}
