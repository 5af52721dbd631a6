package query_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/internal/testutil"
	"github.com/valyala/fasthttp"
)

// The web UI shows titles, not ids: trending with expand=articles and the
// reading history carry each article's title, source and story.
//
// It is one scenario checked step by step (cyclomatic 26): the steps
// depend on each other's state, so they stay in order in one function.
func TestTrendingAndHistoryShowArticles(t *testing.T) {
	n := newFixtureNode(t)
	idOf := articleIDsByURL(t, n)
	quake, final := idOf["https://wire.example/quake-lisbon"], idOf["https://sport.example/cup-final"]
	quakeStory, _ := n.stories.StoryOfArticle(quake)
	var topics struct {
		Labels []string `json:"labels"`
	}
	if err := json.Unmarshal(n.get(t, "/api/v1/topics").body, &topics); err != nil ||
		len(topics.Labels) < 8 || !slices.IsSorted(topics.Labels) || !slices.Contains(topics.Labels, "sports") {
		t.Errorf("topic labels (every topic the classifier knows): %v (%v)", topics.Labels, err)
	}
	ts := n.clock.ms(0)
	lines := []string{share("s1", quake, ts), share("s2", quake, ts), share("s3", final, ts)}
	n.postShareBatch(t, lines)
	n.waitShares(t, quake, map[string]uint64{"1m": 2, "1h": 2, "24h": 2})
	n.waitShares(t, final, map[string]uint64{"1m": 1, "1h": 1, "24h": 1})

	var res struct {
		Items []struct {
			ArticleID string `json:"article_id"`
			Count     uint64 `json:"count"`
			Title     string `json:"title"`
			Source    string `json:"source"`
			StoryID   string `json:"story_id"`
			URL       string `json:"url"`
		} `json:"items"`
	}
	r := n.get(t, "/api/v1/trending?window=1h&expand=articles")
	if err := json.Unmarshal(r.body, &res); err != nil || r.status != fasthttp.StatusOK || len(res.Items) != 2 {
		t.Fatalf("trending: %s", r)
	}
	top := res.Items[0]
	if top.ArticleID != quake || top.Count != 2 || top.Title != articleFixture[0].title || top.Source != "wire" ||
		top.StoryID != quakeStory || top.URL != "https://wire.example/quake-lisbon" {
		t.Errorf("top item %+v, want the Lisbon article of story %s", top, quakeStory)
	}
	// Without expand the answer is as before: ids and counts only.
	if r := n.get(t, "/api/v1/trending?window=1h"); strings.Contains(string(r.body), `"title"`) {
		t.Errorf("trending without expand: %s", r)
	}
	if r := n.get(t, "/api/v1/trending?expand=everything"); r.status != fasthttp.StatusBadRequest || !strings.Contains(string(r.body), "expand") {
		t.Errorf("bad expand: %s", r)
	}

	// History: a logged-in reader's reads, newest first, with titles.
	tok := login(t, n, "/api/v1/auth/register", "reader", "a long enough password")
	var me struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(n.do(t, "GET", "/api/v1/me", nil, bearer(tok)...).body, &me); err != nil {
		t.Fatal(err)
	}
	if r := n.post(t, "/api/v1/events/read/batch", read("r1", me.ID, final, "s", ts)+"\n"+read("r2", me.ID, quake, "s", ts+1000)); r.status != fasthttp.StatusAccepted {
		t.Fatalf("reads: %s", r)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		var h struct {
			History []struct {
				ArticleID string `json:"article_id"`
				Title     string `json:"title"`
				StoryID   string `json:"story_id"`
			} `json:"history"`
		}
		r := n.do(t, "GET", "/api/v1/history", nil, bearer(tok)...)
		if err := json.Unmarshal(r.body, &h); err != nil || len(h.History) != 2 {
			return fmt.Errorf("history: %s", r)
		}
		if h.History[0].ArticleID != quake || h.History[0].Title != articleFixture[0].title || h.History[0].StoryID != quakeStory ||
			h.History[1].Title != articleFixture[10].title {
			return fmt.Errorf("history %+v", h.History)
		}
		return nil
	})
}

// Readers choosing preferred sources see every source's name, never its
// crawl state.
func TestPublicSources(t *testing.T) {
	n := newTestNode(t)
	if r := n.post(t, "/api/v1/admin/sources?discover=false", `{"feed_url":"https://feeds.example/world.xml","name":"Example World"}`); r.status != fasthttp.StatusCreated {
		t.Fatalf("add: %s", r)
	}
	r := n.do(t, "GET", "/api/v1/sources", nil, "X-Anonymous", "1")
	var res struct {
		Sources []map[string]any `json:"sources"`
	}
	if err := json.Unmarshal(r.body, &res); err != nil || r.status != fasthttp.StatusOK || len(res.Sources) != 1 {
		t.Fatalf("sources: %s", r)
	}
	s := res.Sources[0]
	if s["name"] != "Example World" || s["id"] == "" {
		t.Errorf("source %v", s)
	}
	for _, private := range []string{"crawl", "feed_url", "status"} {
		if _, ok := s[private]; ok {
			t.Errorf("public source shows %q: %v", private, s)
		}
	}
}

// The admin console's system panel: records per second and lag per stage,
// dead letters, bytes on disk per store.
func TestAdminStats(t *testing.T) {
	n := newTestNode(t)
	type stats struct {
		Stages []struct {
			Stage        string  `json:"stage"`
			Committed    int64   `json:"committed"`
			Lag          int64   `json:"lag"`
			EventsPerSec float64 `json:"events_per_s"`
		} `json:"stages"`
		DeadLetters int64            `json:"dead_letters"`
		Stores      map[string]int64 `json:"stores"`
	}
	get := func() stats {
		t.Helper()
		var st stats
		r := n.get(t, "/api/v1/admin/stats")
		if err := json.Unmarshal(r.body, &st); err != nil || r.status != fasthttp.StatusOK {
			t.Fatalf("stats: %s", r)
		}
		return st
	}
	if r := n.do(t, "GET", "/api/v1/admin/stats", nil, "X-Anonymous", "1"); r.status != fasthttp.StatusUnauthorized {
		t.Errorf("anonymous stats: %s", r)
	}
	before := get()
	if before.DeadLetters != 0 || before.Stores["log"] <= 0 || before.Stores["state"] <= 0 {
		t.Errorf("fresh node: %+v", before)
	}
	var lines []string
	for i := range 50 {
		lines = append(lines, share(fmt.Sprintf("e%d", i), "a1", n.clock.ms(0)))
	}
	n.postShareBatch(t, lines)
	// One record that bypassed HTTP validation is dead-lettered.
	bad := &eventlog.Record{Topic: schema.TopicShares, Partition: 0, Value: []byte("not json"), Timestamp: n.clock.ms(0)}
	if err := n.log.Append(context.Background(), []*eventlog.Record{bad}); err != nil {
		t.Fatal(err)
	}
	n.waitCaughtUp(t)
	n.clock.Advance(10 * time.Second)
	testutil.Eventually(t, 10*time.Second, func() error {
		st := get()
		var committed int64
		var rate float64
		for _, s := range st.Stages {
			if s.Stage == "trending" {
				committed, rate = s.Committed, s.EventsPerSec
			}
		}
		// 51 records in 10 s of the node's clock since the first call.
		if committed != 51 || rate < 5 || rate > 5.2 || st.DeadLetters != 1 {
			return fmt.Errorf("after 50 shares and a bad record: %+v", st)
		}
		return nil
	})
}
