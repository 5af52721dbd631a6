package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/cluster"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/internal/testutil"
	"github.com/newsflow/newsflow/query"
)

// searchClusterPage is what the test reads of GET /api/v1/search.
type searchClusterPage struct {
	Hits []struct {
		ID    string  `json:"id"`
		Score float64 `json:"score"`
	} `json:"hits"`
	Total       int      `json:"total"`
	Next        string   `json:"next_cursor"`
	Partial     bool     `json:"partial"`
	Missing     []int32  `json:"missing_partitions"`
	FailedNodes []string `json:"failed_nodes"`
}

func (p searchClusterPage) ids() []string {
	var out []string
	for _, h := range p.Hits {
		out = append(out, fmt.Sprintf("%s/%v", h.ID, h.Score))
	}
	return out
}

// searchClusterGet sends GET path to node id with header pairs hdr and
// decodes a 200 answer into v.
func searchClusterGet(tc *testCluster, id, path string, v any, hdr ...string) error {
	return getJSONWith(tc.nodes[id].URL(path), v, hdr...)
}

func searchClusterPost(t *testing.T, tc *testCluster, id, path, contentType, body string) []byte {
	t.Helper()
	resp, err := ingestPost(tc.nodes[id].URL(path), contentType, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("POST %s through %s: %d %s", path, id, resp.StatusCode, b)
	}
	return b
}

// TestClusterSearchAndFeedThroughAnyNode: three processes; articles
// ingested through one node are indexed on the owners of their
// partitions. A search through any node answers every article, complete,
// with the same hits in the same order, and pages continue from node to
// node; each node asked alone answers only its own partitions. A reader
// whose interest profile lives on another node than the story owner gets
// the same personal feed through every node.
//
// It is one scenario checked step by step (cyclomatic 50): the steps
// depend on each other's state, so they stay in order in one function.
func TestClusterSearchAndFeedThroughAnyNode(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test skipped in -short mode")
	}
	tc := startTestCluster(t)
	const perTopic = 20
	now := time.Now().UTC()
	var lines []string
	for i := range 2 * perTopic {
		title := fmt.Sprintf("Glacier melting faster, climate scientists warn in study %d", i)
		if i >= perTopic {
			title = fmt.Sprintf("Striker scores twice as league leaders win football match %d", i)
		}
		b, _ := json.Marshal(map[string]string{
			"url": fmt.Sprintf("https://outlet%d.example/news/%d", i%5, i), "source_id": fmt.Sprintf("outlet%d", i%5),
			"title": title, "summary": title + ".", "published_at": now.Add(-time.Duration(i) * time.Minute).Format(time.RFC3339),
		})
		lines = append(lines, string(b))
	}
	searchClusterPost(t, tc, "a", "/api/v1/articles?batch=1", "application/x-ndjson", strings.Join(lines, "\n"))
	tc.WaitCaughtUp(90 * time.Second)

	// Every article is found through every node, the same way.
	var all searchClusterPage
	testutil.Eventually(t, 30*time.Second, func() error {
		all = searchClusterPage{}
		if err := searchClusterGet(tc, "a", "/api/v1/search?limit=100", &all); err != nil || all.Total != 2*perTopic || len(all.Hits) != all.Total || all.Partial {
			return fmt.Errorf("search through a: %+v %v", all, err)
		}
		return nil
	})
	for _, q := range []string{"q=glacier+climate", "q=striker", ""} {
		var want searchClusterPage
		for _, id := range tc.ids {
			var p searchClusterPage
			if err := searchClusterGet(tc, id, "/api/v1/search?limit=100&"+q, &p); err != nil {
				t.Fatal(err)
			}
			if p.Partial || p.Missing != nil || p.FailedNodes != nil || p.Total != len(p.Hits) || p.Total < perTopic {
				t.Errorf("search %q through %s: total %d, %d hits, partial %v, missing %v, failed %v", q, id, p.Total, len(p.Hits), p.Partial, p.Missing, p.FailedNodes)
			}
			if id == "a" {
				want = p
			} else if !slices.Equal(p.ids(), want.ids()) {
				t.Errorf("search %q through %s:\n%v\nthrough a:\n%v", q, id, p.ids(), want.ids())
			}
		}
		// Pages of 7, each through the next node, continue one another.
		var paged []string
		cursor := ""
		for i := 0; ; i++ {
			var p searchClusterPage
			if err := searchClusterGet(tc, tc.ids[i%3], "/api/v1/search?limit=7&"+q+"&cursor="+url.QueryEscape(cursor), &p); err != nil {
				t.Fatal(err)
			}
			paged = append(paged, p.ids()...)
			if p.Next == "" || i > 20 {
				break
			}
			cursor = p.Next
		}
		if !slices.Equal(paged, want.ids()) {
			t.Errorf("search %q in pages of 7 across the nodes:\n%v\nwant\n%v", q, paged, want.ids())
		}
	}
	// Each node asked alone: its own partitions, which are the others'
	// missing ones.
	view, err := tc.view("a")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, id := range tc.ids {
		var p searchClusterPage
		if err := searchClusterGet(tc, id, "/api/v1/search?limit=100", &p, query.HeaderForwarded, "test", query.HeaderPeer, cluster.PeerToken(testClusterSecret)); err != nil {
			t.Fatal(err)
		}
		var notOwned []int32
		for _, part := range view.Partitions {
			if part.Owner != id {
				notOwned = append(notOwned, part.Partition)
			}
		}
		if !slices.Equal(p.Missing, notOwned) {
			t.Errorf("%s alone: missing %v, want %v", id, p.Missing, notOwned)
		}
		for _, h := range p.Hits {
			if other, ok := seen[h.ID]; ok {
				t.Errorf("%s answered by %s and %s", h.ID, other, id)
			}
			seen[h.ID] = id
		}
	}
	if len(seen) != 2*perTopic {
		t.Errorf("the nodes alone answered %d articles, want %d", len(seen), 2*perTopic)
	}

	// A reader whose partition is not the story partition's owner's.
	owner := func(key string) string {
		return view.Partitions[eventlog.PartitionFor([]byte(key), int32(len(view.Partitions)))].Owner
	}
	storyOwner := view.Partitions[0].Owner
	var token, userID string
	for i := 0; userID == ""; i++ {
		if i == 9 {
			t.Fatal("every reader registered lives on the story owner")
		}
		var s struct {
			Token string `json:"token"`
			User  struct {
				ID string `json:"id"`
			} `json:"user"`
		}
		body := searchClusterPost(t, tc, tc.ids[i%3], "/api/v1/auth/register", "application/json",
			fmt.Sprintf(`{"username":"reader%d","password":"correct horse battery staple"}`, i))
		if err := json.Unmarshal(body, &s); err != nil {
			t.Fatal(err)
		}
		if owner(s.User.ID) != storyOwner {
			token, userID = s.Token, s.User.ID
		}
	}
	var reads []string
	for i, h := range all.Hits {
		if i >= perTopic && len(reads) < 3 { // newest first: the football articles are the older half
			reads = append(reads, fmt.Sprintf(`{"event_id":"r%d","user_id":%q,"article_id":%q,"session_id":"s","timestamp":%d}`, i, userID, h.ID, now.UnixMilli()))
		}
	}
	searchClusterPost(t, tc, "c", "/api/v1/events/read/batch", "application/x-ndjson", strings.Join(reads, "\n"))
	auth := []string{"Authorization", "Bearer " + token}
	testutil.Eventually(t, 30*time.Second, func() error {
		var p struct {
			Reads int `json:"reads"`
		}
		if err := searchClusterGet(tc, storyOwner, "/api/v1/me/interest", &p, auth...); err != nil || p.Reads != 3 {
			return fmt.Errorf("profile of %s (partition owner %s): %+v %v", userID, owner(userID), p, err)
		}
		return nil
	})
	type feed struct {
		Stories []struct {
			ID    string  `json:"id"`
			Score float64 `json:"score"`
		} `json:"stories"`
		Partial  bool   `json:"partial"`
		Interest string `json:"interest"`
	}
	var anonymous feed
	if err := searchClusterGet(tc, "a", "/api/v1/feed?limit=100", &anonymous); err != nil {
		t.Fatal(err)
	}
	var first feed
	for i, id := range tc.ids {
		var f feed
		if err := searchClusterGet(tc, id, "/api/v1/feed?limit=100", &f, auth...); err != nil {
			t.Fatal(err)
		}
		if f.Interest != "applied" || f.Partial || len(f.Stories) == 0 {
			t.Errorf("feed through %s: interest %q, partial %v, %d stories", id, f.Interest, f.Partial, len(f.Stories))
		}
		if i == 0 {
			first = f
			if fmt.Sprint(f.Stories) == fmt.Sprint(anonymous.Stories) {
				t.Errorf("the reader's feed is the anonymous one: %v", f.Stories)
			}
		} else if fmt.Sprint(f.Stories) != fmt.Sprint(first.Stories) {
			t.Errorf("feed through %s: %v, through a: %v", id, f.Stories, first.Stories)
		}
	}
}
