package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/internal/testutil"
)

// TestReadsOnlyByTheReader, through the binary: an anonymous read for a
// user, and one by another user's session, are refused and never reach
// that user's history; the user's own read (their session, as the web UI
// sends it) does, and the same event sent again counts once.
func TestReadsOnlyByTheReader(t *testing.T) {
	n := runNode(t, t.TempDir(), nil)
	now := time.Now()
	resp, err := ingestPost(n.URL("/api/v1/articles?batch=1"), "application/x-ndjson", strings.NewReader(threeStories(now)))
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("articles: %v %v", err, resp)
	}
	resp.Body.Close()
	var stories struct {
		Stories []struct {
			Representative string `json:"representative"`
		} `json:"stories"`
	}
	testutil.Eventually(t, 20*time.Second, func() error {
		if err := getJSON(n.URL("/api/v1/stories"), &stories); err != nil || len(stories.Stories) < 3 {
			return fmt.Errorf("stories: %+v %v", stories, err)
		}
		return nil
	})
	arts := []string{stories.Stories[0].Representative, stories.Stories[1].Representative, stories.Stories[2].Representative}

	type session struct {
		Token string `json:"token"`
		User  struct {
			ID string `json:"id"`
		} `json:"user"`
	}
	register := func(name string) session {
		resp, err := http.Post(n.URL("/api/v1/auth/register"), "application/json",
			strings.NewReader(fmt.Sprintf(`{"username":%q,"password":"a long passphrase"}`, name)))
		if err != nil || resp.StatusCode != http.StatusCreated {
			t.Fatalf("register %s: %v %v", name, err, resp)
		}
		defer resp.Body.Close()
		var s session
		json.NewDecoder(resp.Body).Decode(&s)
		return s
	}
	ann, bob := register("ann"), register("bob")
	post := func(cookie, body string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, n.URL("/api/v1/events/read"), strings.NewReader(body))
		if cookie != "" {
			req.Header.Set("Cookie", "nf_session="+cookie)
			req.Header.Set("Origin", "http://"+n.Addr) // the web UI's own page
		}
		return sendRequest(t, req)
	}
	read := func(id, article string) string {
		return fmt.Sprintf(`{"event_id":%q,"user_id":%q,"article_id":%q,"session_id":"s1","timestamp":%d}`, id, ann.User.ID, article, now.UnixMilli())
	}
	if code, body := post("", read("anon", arts[0])); code != http.StatusUnauthorized || !strings.Contains(body, `"error"`) {
		t.Fatalf("anonymous read for ann: %d %s, want 401 with a reason", code, body)
	}
	if code, body := post(bob.Token, read("by-bob", arts[1])); code != http.StatusForbidden || !strings.Contains(body, "not the logged-in user") {
		t.Fatalf("bob's read for ann: %d %s, want 403 with a reason", code, body)
	}
	for range 2 { // the same event twice
		if code, body := post(ann.Token, read("own", arts[2])); code != http.StatusAccepted {
			t.Fatalf("ann's own read: %d %s", code, body)
		}
	}
	history := func() []string {
		req, _ := http.NewRequest(http.MethodGet, n.URL("/api/v1/history"), nil)
		req.Header.Set("Authorization", "Bearer "+ann.Token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var h struct {
			History []struct {
				ArticleID string `json:"article_id"`
			} `json:"history"`
		}
		json.NewDecoder(resp.Body).Decode(&h)
		var ids []string
		for _, e := range h.History {
			ids = append(ids, e.ArticleID)
		}
		return ids
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if len(history()) == 0 {
			return errors.New("ann's own read never reached her history")
		}
		return nil
	})
	n.WaitCaughtUp(time.Minute)
	if h := history(); len(h) != 1 || h[0] != arts[2] {
		t.Fatalf("ann's history %v, want only her own read of %s", h, arts[2])
	}
}

// sendRequest sends req with the default client and returns the
// answer's status and body.
func sendRequest(t *testing.T, req *http.Request) (int, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// threeStories is an NDJSON batch of three articles on unrelated events,
// from three sources, published a minute apart up to now.
func threeStories(now time.Time) string {
	var lines []string
	for i, title := range []string{"Volcano erupts near Reykjavik", "Central bank raises interest rates", "Cup final goes to penalties"} {
		b, _ := json.Marshal(map[string]string{"url": fmt.Sprintf("https://ex%d.example/a", i), "source_id": fmt.Sprint("src", i),
			"title": title, "published_at": now.Add(-time.Duration(i) * time.Minute).Format(time.RFC3339)})
		lines = append(lines, string(b))
	}
	return strings.Join(lines, "\n")
}
