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
	"github.com/newsflow/newsflow/internal/webhook"
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
