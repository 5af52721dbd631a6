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

// hookReceiver is a local webhook receiver; status, when set, is its
// answer (a failing receiver).
type hookReceiver struct {
	status int
	secret atomic.Pointer[string]
	tries  atomic.Int32
	mu     sync.Mutex
	got    []webhook.Payload
	at     []time.Time
	bad    []string
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.tries.Add(1)
	body, _ := io.ReadAll(r.Body)
	ts, _ := strconv.ParseInt(r.Header.Get("X-Newsflow-Timestamp"), 10, 64)
	h.mu.Lock()
	defer h.mu.Unlock()
	if s := h.secret.Load(); s == nil || r.Header.Get("X-Newsflow-Signature") != webhook.Sign(*s, ts, body) {
		h.bad = append(h.bad, "bad signature: "+r.Header.Get("X-Newsflow-Signature"))
	}
	if h.status != 0 {
		w.WriteHeader(h.status)
		return
	}
	var p webhook.Payload
	if err := json.Unmarshal(body, &p); err != nil {
		h.bad = append(h.bad, err.Error())
	}
	h.got, h.at = append(h.got, p), append(h.at, time.Now())
}

// TestWebhooksDeliverBreakingNews: a reader registers two webhooks; when
// a story becomes breaking, the working receiver gets a signed payload
// about it within 5 s; the failing one is tried the configured number of
// times and the delivery is dead-lettered; the admin console's list shows
// both hooks' status, and the node stays ready.
func TestWebhooksDeliverBreakingNews(t *testing.T) {
	good, failing := &hookReceiver{}, &hookReceiver{status: http.StatusInternalServerError}
	goodSrv, failingSrv := httptest.NewServer(good), httptest.NewServer(failing)
	defer goodSrv.Close()
	defer failingSrv.Close()
	n := runNode(t, t.TempDir(), []string{"NEWSFLOW_CRAWL_ALLOW_CIDRS=127.0.0.1/32", "NEWSFLOW_WEBHOOKS_ATTEMPTS=3", "NEWSFLOW_WEBHOOKS_ALLOW_HTTP=true", "NEWSFLOW_WEBHOOKS_BACKOFF=200ms",
		// Seven articles in a few minutes make a story breaking (the default
		// rate wants more than 60 in 30 minutes).
		"NEWSFLOW_STORIES_BREAKING_RATE=0.1"})
	resp, err := http.Post(n.URL("/api/v1/auth/register"), "application/json", strings.NewReader(`{"username":"ann","password":"ann's long password"}`))
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("register: %v %v", err, resp)
	}
	var sess struct{ Token string }
	json.NewDecoder(resp.Body).Decode(&sess)
	resp.Body.Close()
	register := func(rcv *hookReceiver, url string) string {
		resp, err := tokenPost(sess.Token, n.URL("/api/v1/me/webhooks"), "application/json", strings.NewReader(`{"url":"`+url+`"}`))
		if err != nil || resp.StatusCode != http.StatusCreated {
			t.Fatalf("register a webhook: %v %v", err, resp)
		}
		defer resp.Body.Close()
		var h webhook.Hook
		if err := json.NewDecoder(resp.Body).Decode(&h); err != nil || h.Secret == "" {
			t.Fatalf("webhook: %+v %v", h, err)
		}
		rcv.secret.Store(&h.Secret)
		return h.ID
	}
	goodID, failingID := register(good, goodSrv.URL+"/hook"), register(failing, failingSrv.URL)

	storyID := makeBreaking(t, n)
	breakingAt := time.Now()
	testutil.Eventually(t, 10*time.Second, func() error {
		good.mu.Lock()
		defer good.mu.Unlock()
		if len(good.got) == 0 {
			var list any
			_ = getJSON(n.URL("/api/v1/admin/webhooks"), &list)
			return fmt.Errorf("no delivery to the working receiver (%d tries); webhooks: %v", good.tries.Load(), list)
		}
		return nil
	})
	good.mu.Lock()
	p, at, bad := good.got[0], good.at[0], good.bad
	good.mu.Unlock()
	if lag := at.Sub(breakingAt); lag > 5*time.Second {
		t.Errorf("delivered %v after the story became breaking, want <= 5s", lag)
	}
	if p.Event != "story.breaking" || p.Story.ID != storyID || p.Hook != goodID || len(bad) > 0 {
		t.Errorf("payload %+v (story %s), problems %v", p, storyID, bad)
	}
	t.Logf("the story was listed breaking %s; the working receiver got it %v later", breakingAt.Format(time.StampMilli), at.Sub(breakingAt).Round(time.Millisecond))

	// The failing receiver: three tries, then a dead letter, in the admin
	// console's list.
	type hookJSON struct {
		ID     string         `json:"id"`
		Owner  string         `json:"owner"`
		Secret string         `json:"secret"`
		Status webhook.Status `json:"status"`
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		var list struct {
			Webhooks []hookJSON `json:"webhooks"`
		}
		if err := getJSON(n.URL("/api/v1/admin/webhooks"), &list); err != nil {
			return err
		}
		byID := map[string]hookJSON{}
		for _, h := range list.Webhooks {
			if h.Secret != "" {
				t.Fatalf("the admin list shows a secret: %+v", h)
			}
			byID[h.ID] = h
		}
		f, g := byID[failingID].Status, byID[goodID].Status
		if f.DeadLettered != 1 || f.Retried != 3 || f.LastStatus != 500 || !strings.Contains(f.LastError, "HTTP 500") || g.Delivered != 1 {
			return fmt.Errorf("statuses: failing %+v, good %+v", f, g)
		}
		return nil
	})
	if n := failing.tries.Load(); n != 3 {
		t.Errorf("the failing receiver was tried %d times, want 3", n)
	}
	if err := getJSON(n.URL("/health/ready"), &map[string]any{}); err != nil {
		t.Errorf("node not ready after the dead letter: %v", err)
	}
}

// makeBreaking posts seven outlets' reports of an eruption within
// minutes to n, a node with stories.breaking_rate 0.1, and returns the id
// of the story once the breaking list shows it.
func makeBreaking(t *testing.T, n *nodeProc) string {
	t.Helper()
	return makeBreakingAbout(t, n, "volcano", "Volcano erupts near Reykjavik, flights grounded across Iceland",
		"A volcano erupted near Reykjavik on Friday, grounding flights across Iceland.")
}

// makeBreakingAbout is makeBreaking for another event: it returns the id
// of the first breaking story that is none of known.
func makeBreakingAbout(t *testing.T, n *nodeProc, slug, title, summary string, known ...string) string {
	t.Helper()
	// Seven outlets report the event within minutes: a breaking story.
	now := time.Now().UTC()
	var lines []string
	for i, outlet := range []string{"wire", "daily", "post", "herald", "times", "globe", "courier"} {
		b, _ := json.Marshal(map[string]string{"url": fmt.Sprintf("https://%s.example/%s", outlet, slug), "source_id": outlet,
			"title": fmt.Sprintf("%s (%s)", title, outlet), "summary": summary,
			"published_at": now.Add(-time.Duration(7-i) * time.Minute).Format(time.RFC3339)})
		lines = append(lines, string(b))
	}
	resp, err := ingestPost(n.URL("/api/v1/articles?batch=1"), "application/x-ndjson", strings.NewReader(strings.Join(lines, "\n")))
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("articles: %v %v", err, resp)
	}
	resp.Body.Close()
	var storyID string
	testutil.EventuallyEvery(t, 30*time.Second, 20*time.Millisecond, func() error {
		var page struct {
			Stories []struct {
				ID string `json:"id"`
			} `json:"stories"`
		}
		if err := getJSON(n.URL("/api/v1/breaking"), &page); err != nil {
			return err
		}
		for _, st := range page.Stories {
			if !slices.Contains(known, st.ID) {
				storyID = st.ID
				return nil
			}
		}
		return fmt.Errorf("no new breaking story yet (%d known)", len(page.Stories))
	})
	return storyID
}
