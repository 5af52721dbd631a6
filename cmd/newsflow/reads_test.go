package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/internal/testutil"
)

// TestKcatReadMovesInterestAndFeed: a read produced by kcat on the reads
// topic changes the reader's interest vector and feed within 2 seconds.
//
// It is one scenario checked step by step (cyclomatic 26): the steps
// depend on each other's state, so they stay in order in one function.
func TestKcatReadMovesInterestAndFeed(t *testing.T) {
	kcat, broker, n := kcatNode(t)

	// Two stories, one of sports and one of business, and a user.
	now := time.Now().UTC()
	var lines []string
	for i, a := range []struct{ url, title string }{
		{"https://sport.example/final", "United win the cup final after a penalty shootout"},
		{"https://sport2.example/final", "Cup final: United beat City on penalties"},
		{"https://biz.example/rates", "Central bank raises interest rates by a quarter point"},
		{"https://biz2.example/rates", "Interest rates rise again as the central bank fights inflation"},
	} {
		b, _ := json.Marshal(map[string]string{"url": a.url, "source_id": fmt.Sprint("src", i), "title": a.title,
			"published_at": now.Add(-time.Duration(10-i) * time.Minute).Format(time.RFC3339)})
		lines = append(lines, string(b))
	}
	resp, err := ingestPost(n.URL("/api/v1/articles?batch=1"), "application/x-ndjson", strings.NewReader(strings.Join(lines, "\n")))
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("articles: %v %v", err, resp)
	}
	resp.Body.Close()
	resp, err = http.Post(n.URL("/api/v1/auth/register"), "application/json", strings.NewReader(`{"username":"erin","password":"erin's long password"}`))
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("register: %v %v", err, resp)
	}
	var sess struct {
		Token string `json:"token"`
		User  struct {
			ID string `json:"id"`
		} `json:"user"`
	}
	json.NewDecoder(resp.Body).Decode(&sess)
	resp.Body.Close()

	type feedStory struct {
		ID             string `json:"id"`
		Representative string `json:"representative"`
		Topics         []struct{ Topic string }
	}
	feed := func() []feedStory {
		req, _ := http.NewRequest(http.MethodGet, n.URL("/api/v1/feed?limit=10"), nil)
		req.Header.Set("Authorization", "Bearer "+sess.Token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var page struct {
			Stories []feedStory `json:"stories"`
		}
		json.NewDecoder(resp.Body).Decode(&page)
		return page.Stories
	}
	var before []feedStory
	testutil.Eventually(t, 20*time.Second, func() error {
		if before = feed(); len(before) != 2 {
			return fmt.Errorf("feed before the read: %+v", before)
		}
		return nil
	})
	// Read the first story: a read story goes down the feed.
	target := before[0]
	var topic string
	if len(target.Topics) > 0 {
		topic = target.Topics[0].Topic
	}
	read := fmt.Sprintf(`{"event_id":"k1","user_id":%q,"article_id":%q,"session_id":"s1","timestamp":%d}`,
		sess.User.ID, target.Representative, now.UnixMilli())
	cmd := exec.Command(kcat, "-b", broker, "-q", "-P", "-t", "reads", "-K", "\t")
	cmd.Stdin = strings.NewReader(sess.User.ID + "\t" + read + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kcat: %v\n%s", err, out)
	}
	sent := time.Now()
	var interestAt, feedAt time.Duration
	testutil.Eventually(t, 10*time.Second, func() error {
		var p struct {
			Topics []struct{ Topic string } `json:"topics"`
			Reads  int                      `json:"reads"`
		}
		if interestAt == 0 && getJSON(n.URL("/api/v1/admin/users/"+sess.User.ID+"/interest"), &p) == nil && p.Reads == 1 &&
			(topic == "" || (len(p.Topics) > 0 && p.Topics[0].Topic == topic)) {
			interestAt = time.Since(sent)
		}
		if feedAt == 0 {
			if after := feed(); len(after) == 2 && after[0].ID != target.ID && after[1].ID == target.ID {
				feedAt = time.Since(sent)
			}
		}
		if interestAt == 0 || feedAt == 0 {
			return fmt.Errorf("after the kcat read: interest changed in %v, feed in %v (0: not yet)", interestAt, feedAt)
		}
		return nil
	})
	t.Logf("after the kcat read: interest changed in %v, feed in %v", interestAt, feedAt)
	if interestAt == 0 || interestAt > 2*time.Second {
		t.Errorf("interest changed after %v, want within 2s", interestAt)
	}
	if feedAt == 0 || feedAt > 2*time.Second {
		t.Errorf("feed changed after %v, want within 2s", feedAt)
	}
}
