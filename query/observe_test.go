package query_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/newsflow/newsflow/internal/testutil"
	"github.com/valyala/fasthttp"
)

// On a node under a little of everything, the objectives' metrics count
// what happened: each stage's visibility of the events it applied, feed
// answers by cache state, searches, requests by endpoint group and status
// class, and the node's own state.
func TestObjectiveMetrics(t *testing.T) {
	n := newFixtureNode(t)
	waitArticles(t, n, len(articleFixture))
	now := n.clock.ms(0)
	n.post(t, pathShare, share("o1", "obs", now))
	n.post(t, pathBatch, share("o2", "obs", now)+"\n"+share("o3", "obs", now))
	n.post(t, pathShare, `{}`) // 400
	n.waitShares(t, "obs", counts(3, 3, 3))
	searches := n.metrics(t)[`newsflow_query_seconds_count{cache="miss",query="search"}`] // waitArticles searched
	for _, uri := range []string{"/api/v1/feed", "/api/v1/feed", "/api/v1/search?q=the", "/settings"} {
		if r := n.get(t, uri); r.status != fasthttp.StatusOK {
			t.Fatalf("GET %s: %s", uri, r)
		}
	}
	m := n.metrics(t)
	exact := map[string]float64{
		`newsflow_query_seconds_count{cache="miss",query="feed"}`:               1,
		`newsflow_query_seconds_count{cache="hit",query="feed"}`:                1,
		`newsflow_query_seconds_count{cache="miss",query="search"}`:             searches + 1,
		`newsflow_http_group_requests_total{class="2xx",group="ui"}`:            1,
		`newsflow_http_group_requests_total{class="4xx",group="ingest"}`:        1,
		`newsflow_http_group_requests_total{class="5xx",group="feed"}`:          0,
		`newsflow_event_visible_seconds_count{input="shares",stage="trending"}`: 3,
		`newsflow_stage_paused{stage="stories"}`:                                0,
		`newsflow_tasks_running{stage="trending"}`:                              4,
		`newsflow_tasks_running{stage="stories"}`:                               1,
		`newsflow_state_staleness_seconds{stage="stories"}`:                     0,
		`newsflow_cluster_members{state="up"}`:                                  1,
		`newsflow_cluster_members{state="down"}`:                                0,
		`newsflow_partitions_unowned`:                                           0,
		`newsflow_partitions_owned`:                                             4,
	}
	for k, v := range exact {
		if got, ok := m[k]; !ok || got != v {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, v)
		}
	}
	if got := m[`newsflow_http_group_requests_total{class="2xx",group="feed"}`]; got != 2 {
		t.Errorf("feed group: %v answers in 2xx, want 2", got)
	}
	// Every article reached each stage within the objectives' thresholds:
	// the fixture went in through HTTP a moment ago.
	for _, st := range []struct{ stage, input, le string }{
		{"articles", "articles.raw", "30"}, {"stories", "articles", "60"}, {"search", "articles.indexed", "60"}, {"trending", "shares", "30"},
	} {
		count := m[fmt.Sprintf(`newsflow_event_visible_seconds_count{input=%q,stage=%q}`, st.input, st.stage)]
		within := m[fmt.Sprintf(`newsflow_event_visible_seconds_bucket{input=%q,stage=%q,le=%q}`, st.input, st.stage, st.le)]
		if count == 0 || within != count {
			t.Errorf("%s: %v events visible, %v within %s s", st.stage, count, within, st.le)
		}
	}
	if m[`newsflow_disk_free_bytes{dir="data"}`] <= 0 || m[`newsflow_disk_size_bytes{dir="data"}`] < m[`newsflow_disk_free_bytes{dir="data"}`] {
		t.Errorf("disk: %v free of %v", m[`newsflow_disk_free_bytes{dir="data"}`], m[`newsflow_disk_size_bytes{dir="data"}`])
	}
}

// An admin pauses a stage on a node: shares are accepted but not counted,
// the stage lists as paused with its lag; resumed, it counts them once.
func TestStagePauseResume(t *testing.T) {
	n := newTestNode(t)
	if r := n.post(t, "/api/v1/admin/stages/nope/pause", ""); r.status != fasthttp.StatusNotFound {
		t.Fatalf("pausing an unknown stage: %s", r)
	}
	if r := n.post(t, "/api/v1/admin/stages/trending/pause", "", "X-Anonymous", "1"); r.status != fasthttp.StatusUnauthorized {
		t.Fatalf("pausing without credentials: %s", r)
	}
	if r := n.post(t, "/api/v1/admin/stages/trending/pause", ""); r.status != fasthttp.StatusOK {
		t.Fatalf("pause: %s", r)
	}
	now := n.clock.ms(0)
	n.post(t, pathBatch, share("p1", "paused", now)+"\n"+share("p2", "paused", now))
	type stageView struct {
		Stage   string `json:"stage"`
		Running int    `json:"running"`
		Paused  bool   `json:"paused"`
		Lag     int64  `json:"lag"`
	}
	stage := func(name string) stageView {
		r := n.get(t, "/api/v1/admin/stages")
		var out struct {
			Stages []stageView `json:"stages"`
		}
		if err := json.Unmarshal(r.body, &out); err != nil {
			t.Fatalf("stages: %v (%s)", err, r)
		}
		for _, s := range out.Stages {
			if s.Stage == name {
				return s
			}
		}
		t.Fatalf("no stage %s in %s", name, r)
		return stageView{}
	}
	testutil.Eventually(t, 15*time.Second, func() error {
		if s := stage("trending"); !s.Paused || s.Lag < 1 || s.Running != 4 {
			return fmt.Errorf("trending %+v, want paused, 4 tasks and a lag", s)
		}
		return nil
	})
	if got := n.shares(t, "paused"); got.Counts["1h"] != 0 {
		t.Fatalf("a paused stage counted %d shares", got.Counts["1h"])
	}
	if m := n.metrics(t); m[`newsflow_stage_paused{stage="trending"}`] != 1 {
		t.Error("newsflow_stage_paused not 1 while paused")
	}
	if r := n.post(t, "/api/v1/admin/stages/trending/resume", ""); r.status != fasthttp.StatusOK {
		t.Fatalf("resume: %s", r)
	}
	n.waitShares(t, "paused", counts(2, 2, 2))
	if s := stage("trending"); s.Paused {
		t.Errorf("still paused after resume: %+v", s)
	}
}
