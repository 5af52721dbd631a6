package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/newsflow/newsflow/internal/testutil"
	"github.com/newsflow/newsflow/operators/webhook"
)

// signUp registers user on n and returns the session token.
func signUp(t *testing.T, n *nodeProc, user string) string {
	t.Helper()
	resp, err := http.Post(n.URL("/api/v1/auth/register"), "application/json",
		strings.NewReader(`{"username":"`+user+`","password":"`+user+`'s long password"}`))
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("register %s: %v %v", user, err, resp)
	}
	defer resp.Body.Close()
	var sess struct{ Token string }
	if err := json.NewDecoder(resp.Body).Decode(&sess); err != nil {
		t.Fatal(err)
	}
	return sess.Token
}

// addWebhook registers a webhook to url for the session token's user.
func addWebhook(t *testing.T, n *nodeProc, token, url string) webhook.Hook {
	t.Helper()
	resp, err := tokenPost(token, n.URL("/api/v1/me/webhooks"), "application/json", strings.NewReader(`{"url":"`+url+`"}`))
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("register a webhook: %v %v", err, resp)
	}
	defer resp.Body.Close()
	var h webhook.Hook
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil || h.Secret == "" {
		t.Fatalf("webhook: %+v %v", h, err)
	}
	return h
}

// refusingReceiver answers 503 while refuse is set; it notes the
// delivery id of every try and the payloads it accepted, whose signature
// it checks.
type refusingReceiver struct {
	refuse atomic.Bool
	secret atomic.Pointer[string]
	mu     sync.Mutex
	tried  []string
	got    []webhook.Payload
	bad    []string
}

func (h *refusingReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.tried = append(h.tried, r.Header.Get("X-Newsflow-Delivery"))
	if h.refuse.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	ts, _ := strconv.ParseInt(r.Header.Get("X-Newsflow-Timestamp"), 10, 64) // a bad one fails the signature
	var p webhook.Payload
	if s := h.secret.Load(); s == nil || r.Header.Get("X-Newsflow-Signature") != webhook.Sign(*s, ts, body) {
		h.bad = append(h.bad, "bad signature")
	} else if err := json.Unmarshal(body, &p); err != nil || p.Delivery != r.Header.Get("X-Newsflow-Delivery") {
		h.bad = append(h.bad, fmt.Sprintf("payload %s: %v", body, err))
	}
	h.got = append(h.got, p)
}

func (h *refusingReceiver) state() (tried []string, got []webhook.Payload, bad []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.tried), slices.Clone(h.got), slices.Clone(h.bad)
}

// TestWebhookDeliveryOutlivesKill: a story becomes breaking while its
// webhook's receiver refuses; the node is SIGKILLed after a refused try,
// the receiver recovers, the node restarts: the receiver gets the
// delivery from the outbox, with the delivery id of the refused tries.
func TestWebhookDeliveryOutlivesKill(t *testing.T) {
	rcv := &refusingReceiver{}
	rcv.refuse.Store(true)
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	n := runNode(t, t.TempDir(), []string{"NEWSFLOW_CRAWL_ALLOW_CIDRS=127.0.0.1/32", "NEWSFLOW_WEBHOOKS_ALLOW_HTTP=true",
		"NEWSFLOW_WEBHOOKS_ATTEMPTS=100", "NEWSFLOW_WEBHOOKS_BACKOFF=100ms", "NEWSFLOW_WEBHOOKS_MAX_BACKOFF=200ms",
		"NEWSFLOW_STORIES_BREAKING_RATE=0.1"})
	h := addWebhook(t, n, signUp(t, n, "ann"), srv.URL+"/hook")
	rcv.secret.Store(&h.Secret)
	storyID := makeBreaking(t, n)
	var refused string
	testutil.Eventually(t, 10*time.Second, func() error {
		tried, _, _ := rcv.state()
		if len(tried) == 0 {
			return fmt.Errorf("no try yet")
		}
		refused = tried[0]
		return nil
	})
	n.Kill()
	rcv.refuse.Store(false)
	n.Start()
	n.WaitReady(60 * time.Second)
	took := testutil.Eventually(t, 30*time.Second, func() error {
		if _, got, _ := rcv.state(); len(got) == 0 {
			return fmt.Errorf("no delivery since the restart")
		}
		return nil
	})
	tried, got, bad := rcv.state()
	t.Logf("%d tries in all; delivered %v after the restart was ready", len(tried), took.Round(time.Millisecond))
	if len(bad) > 0 {
		t.Errorf("problems: %v", bad)
	}
	if p := got[0]; p.Delivery != refused || p.Story.ID != storyID || p.Hook != h.ID || p.Event != "story.breaking" {
		t.Errorf("delivered %+v, want story %s with the refused tries' delivery id %s", p, storyID, refused)
	}
	for _, id := range tried {
		if id != refused {
			t.Errorf("a try with delivery id %s, want only %s (one delivery)", id, refused)
		}
	}
}

// TestWebhooksBlackHoleFairAndDeletedUser: a user's ten hooks point at an
// address that accepts connections and never answers; another user's
// delivery arrives within the try timeout (plus the 1 s check interval
// and a margin) of the story becoming breaking. Once an admin deletes the
// first user, the tries to the black hole end within the timeout and no
// new one starts, not for the deliveries pending in the outbox nor for
// the next breaking story, which the other user gets.
func TestWebhooksBlackHoleFairAndDeletedUser(t *testing.T) {
	const timeout = 2 * time.Second
	hole := testutil.NewBlackHole(t)
	rcv := &refusingReceiver{}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	n := runNode(t, t.TempDir(), []string{"NEWSFLOW_CRAWL_ALLOW_CIDRS=127.0.0.1/32", "NEWSFLOW_WEBHOOKS_ALLOW_HTTP=true",
		"NEWSFLOW_WEBHOOKS_ATTEMPTS=100", "NEWSFLOW_WEBHOOKS_BACKOFF=100ms", "NEWSFLOW_WEBHOOKS_MAX_BACKOFF=200ms",
		"NEWSFLOW_WEBHOOKS_TIMEOUT=" + timeout.String(), "NEWSFLOW_STORIES_BREAKING_RATE=0.1"})
	mallory := signUp(t, n, "mallory")
	var owner string
	for i := range webhook.MaxPerUser {
		owner = addWebhook(t, n, mallory, fmt.Sprintf("http://%s/hook/%d", hole.Addr(), i)).Owner
	}
	h := addWebhook(t, n, signUp(t, n, "bob"), srv.URL+"/hook")
	rcv.secret.Store(&h.Secret)

	first := makeBreaking(t, n)
	lag := testutil.Eventually(t, 30*time.Second, func() error {
		if _, got, _ := rcv.state(); len(got) == 0 {
			return fmt.Errorf("no delivery to bob (%d tries to the black hole)", hole.Accepted())
		}
		return nil
	})
	t.Logf("bob's delivery %v after the story was listed breaking; %d tries to the black hole meanwhile", lag.Round(time.Millisecond), hole.Accepted())
	if limit := timeout + 1500*time.Millisecond; lag > limit {
		t.Errorf("bob's delivery took %v with mallory's hooks black-holed, want at most %v (the try timeout, the check interval and a margin)", lag, limit)
	}
	testutil.Eventually(t, 3*timeout, func() error {
		if hole.Accepted() < 4 {
			return fmt.Errorf("%d tries to the black hole", hole.Accepted())
		}
		return nil
	})

	req, _ := http.NewRequest(http.MethodDelete, n.URL("/api/v1/admin/users/"+owner), nil)
	req.Header.Set("Authorization", "Bearer "+testAdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("delete mallory: %v %v", err, resp)
	}
	resp.Body.Close()
	ended := testutil.Eventually(t, timeout+2*time.Second, func() error {
		if o := hole.Open(); o > 0 {
			return fmt.Errorf("%d tries to the deleted user's hooks still open", o)
		}
		return nil
	})
	before := hole.Accepted()
	second := makeBreakingAbout(t, n, "dam", "Dam bursts in Valencia, thousands evacuated from flooded towns",
		"A dam burst in Valencia on Sunday; thousands were evacuated as the river flooded towns.", first)
	testutil.Eventually(t, 30*time.Second, func() error {
		if _, got, _ := rcv.state(); len(got) < 2 {
			return fmt.Errorf("bob has %d deliveries, want 2", len(got))
		}
		return nil
	})
	_, got, bad := rcv.state()
	t.Logf("the tries to the deleted user's hooks ended %v after the deletion; %d tries in all", ended.Round(time.Millisecond), before)
	if after := hole.Accepted(); after != before || hole.Open() != 0 {
		t.Errorf("%d tries to the deleted user's hooks after theirs ended", after-before)
	}
	if len(bad) > 0 || got[0].Story.ID != first || got[1].Story.ID != second {
		t.Errorf("bob got %s then %s, want %s then %s; problems %v", got[0].Story.ID, got[1].Story.ID, first, second, bad)
	}
}

// TestClusterWebhookFailover: in a cluster of three, a story becomes
// breaking while its webhook's receiver refuses; the node that runs the
// story writer is SIGKILLed after a refused try and the receiver
// recovers: the node that takes the writer role over delivers it from the
// replicated outbox, under the refused tries' delivery id.
func TestClusterWebhookFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test skipped in -short mode")
	}
	rcv := &refusingReceiver{}
	rcv.refuse.Store(true)
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	tc := startTestCluster(t, "NEWSFLOW_CRAWL_ALLOW_CIDRS=127.0.0.1/32", "NEWSFLOW_WEBHOOKS_ALLOW_HTTP=true",
		"NEWSFLOW_WEBHOOKS_ATTEMPTS=1000", "NEWSFLOW_WEBHOOKS_BACKOFF=100ms", "NEWSFLOW_WEBHOOKS_MAX_BACKOFF=200ms",
		"NEWSFLOW_STORIES_BREAKING_RATE=0.1")
	a := tc.nodes["a"]
	h := addWebhook(t, a, signUp(t, a, "ann"), srv.URL+"/hook")
	rcv.secret.Store(&h.Secret)
	storyID := makeBreaking(t, a)
	var refused string
	testutil.Eventually(t, 20*time.Second, func() error {
		tried, _, _ := rcv.state()
		if len(tried) == 0 {
			return fmt.Errorf("no try yet")
		}
		refused = tried[0]
		return nil
	})
	writer := ""
	for _, id := range tc.ids {
		var page struct {
			Stages []struct {
				Stage   string `json:"stage"`
				Running int    `json:"running"`
			} `json:"stages"`
		}
		if err := getJSON(tc.nodes[id].URL("/api/v1/admin/stages"), &page); err != nil {
			t.Fatal(err)
		}
		for _, st := range page.Stages {
			if st.Stage == "stories" && st.Running > 0 {
				writer = id
			}
		}
	}
	if writer == "" {
		t.Fatal("no node runs the story writer")
	}
	tc.nodes[writer].Kill()
	killed := time.Now()
	rcv.refuse.Store(false)
	testutil.Eventually(t, 90*time.Second, func() error {
		if _, got, _ := rcv.state(); len(got) == 0 {
			return fmt.Errorf("no delivery since the story writer's node %s was killed", writer)
		}
		return nil
	})
	tried, got, bad := rcv.state()
	t.Logf("the story writer's node %s killed after a refused try; delivered %v later by the next writer, %d tries in all",
		writer, time.Since(killed).Round(time.Millisecond), len(tried))
	if len(bad) > 0 {
		t.Errorf("problems: %v", bad)
	}
	if p := got[0]; p.Delivery != refused || p.Story.ID != storyID || p.Hook != h.ID {
		t.Errorf("delivered %+v, want story %s with the refused tries' delivery id %s", p, storyID, refused)
	}
}
