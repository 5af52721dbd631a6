package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/internal/testutil"
)

// TestClusterReaderStateSurvivesOwnerKill: a reader's marks, stars and
// folders (the readstate operator's state, in the partition of the
// reader's id) are written through one node, the node that owns that
// partition is SIGKILLed, and through every other node the reader then
// finds the same marks, stars and folders, once the partition runs
// elsewhere, and can go on changing them; after the killed node comes
// back, it answers the same.
func TestClusterReaderStateSurvivesOwnerKill(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test skipped in -short mode")
	}
	tc := startTestCluster(t)
	resp, err := ingestPost(tc.nodes["a"].URL("/api/v1/articles?batch=1"), "application/x-ndjson", strings.NewReader(threeStories(time.Now())))
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("articles: %v %v", err, resp)
	}
	resp.Body.Close()
	var arts []string
	testutil.Eventually(t, 30*time.Second, func() error {
		var page struct {
			Stories []struct {
				Representative string `json:"representative"`
			} `json:"stories"`
		}
		for _, id := range tc.ids {
			if err := getJSON(tc.nodes[id].URL("/api/v1/stories"), &page); err != nil || len(page.Stories) < 3 {
				return fmt.Errorf("stories through %s: %+v %v", id, page, err)
			}
		}
		arts = nil
		for _, s := range page.Stories {
			arts = append(arts, s.Representative)
		}
		return nil
	})

	req := func(node, method, path, session, body string) (int, string) {
		t.Helper()
		r, err := http.NewRequest(method, tc.nodes[node].URL(path), strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		r.Header.Set("Content-Type", "application/json")
		if session != "" {
			r.Header.Set("Authorization", "Bearer "+session)
		}
		return sendRequest(t, r)
	}
	code, body := req("a", http.MethodPost, "/api/v1/auth/register", "", `{"username":"rita","password":"correct horse battery staple"}`)
	if code != http.StatusCreated {
		t.Fatalf("register: %d %s", code, body)
	}
	var sess struct {
		Token string `json:"token"`
		User  struct {
			ID string `json:"id"`
		} `json:"user"`
	}
	if err := json.Unmarshal([]byte(body), &sess); err != nil || sess.Token == "" {
		t.Fatalf("register answer %s: %v", body, err)
	}

	// What the reader sees, through one node.
	seen := func(node string) (string, error) {
		var unread struct {
			Total struct {
				Articles int `json:"articles"`
			} `json:"total"`
		}
		if err := getJSONWith(tc.nodes[node].URL("/api/v1/me/unread"), &unread, "Authorization", "Bearer "+sess.Token); err != nil {
			return "", err
		}
		var starred struct {
			Articles []struct {
				ID string `json:"id"`
			} `json:"articles"`
		}
		if err := getJSONWith(tc.nodes[node].URL("/api/v1/me/starred"), &starred, "Authorization", "Bearer "+sess.Token); err != nil {
			return "", err
		}
		var stars []string
		for _, s := range starred.Articles {
			stars = append(stars, s.ID)
		}
		slices.Sort(stars)
		return fmt.Sprintf("unread %d, starred %v", unread.Total.Articles, stars), nil
	}

	// Written through a node other than the owner where it can be.
	p := eventlog.PartitionFor([]byte(sess.User.ID), engine.DefaultOptions().Partitions)
	v, _ := tc.waitView(10*time.Second, "with an owner for the reader's partition", func(v clusterView) bool { return v.allRunning() })
	owner := ""
	for _, cp := range v.Partitions {
		if cp.Partition == p {
			owner = cp.Owner
		}
	}
	writer := tc.ids[0]
	if writer == owner {
		writer = tc.ids[1]
	}
	if code, body := req(writer, http.MethodPost, "/api/v1/me/read", sess.Token, fmt.Sprintf(`{"articles":[%q,%q]}`, arts[0], arts[1])); code != http.StatusOK {
		t.Fatalf("mark read through %s: %d %s", writer, code, body)
	}
	if code, body := req(writer, http.MethodPut, "/api/v1/me/starred/"+arts[2], sess.Token, ""); code/100 != 2 {
		t.Fatalf("star through %s: %d %s", writer, code, body)
	}
	want := fmt.Sprintf("unread 1, starred [%s]", arts[2])
	for _, id := range tc.ids {
		if got, err := seen(id); err != nil || got != want {
			t.Fatalf("through %s right after the writes: %q %v, want %q", id, got, err, want)
		}
	}

	// The owner of the reader's partition dies.
	tc.nodes[owner].Kill()
	tc.waitView(30*time.Second, "with the reader's partition elsewhere", func(v clusterView) bool {
		return v.owns(owner) == 0 && v.allRunning()
	})
	for _, id := range tc.ids {
		if id == owner {
			continue
		}
		testutil.Eventually(t, 20*time.Second, func() error {
			got, err := seen(id)
			if err != nil || got != want {
				return fmt.Errorf("through %s after %s was killed: %q %v, want %q", id, owner, got, err, want)
			}
			return nil
		})
	}
	// And it goes on: unread one again, through the new owner's peer.
	other := ""
	for _, id := range tc.ids {
		if id != owner {
			other = id
		}
	}
	if code, body := req(other, http.MethodPost, "/api/v1/me/read", sess.Token, fmt.Sprintf(`{"articles":[%q],"read":false}`, arts[0])); code != http.StatusOK {
		t.Fatalf("mark unread through %s: %d %s", other, code, body)
	}
	want = fmt.Sprintf("unread 2, starred [%s]", arts[2])
	tc.nodes[owner].Start()
	tc.waitView(60*time.Second, "rejoined", func(v clusterView) bool { return v.owns(owner) > 0 && v.allRunning() })
	for _, id := range tc.ids {
		testutil.Eventually(t, 20*time.Second, func() error {
			got, err := seen(id)
			if err != nil || got != want {
				return fmt.Errorf("through %s after %s came back: %q %v, want %q", id, owner, got, err, want)
			}
			return nil
		})
	}
}
