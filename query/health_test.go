package query_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/cluster"
	"github.com/newsflow/newsflow/internal/testutil"
	"github.com/valyala/fasthttp"
)

// healthBody is the body of /health/detailed.
type healthBody struct {
	Status       string   `json:"status"`
	Reasons      []string `json:"reasons"`
	UptimeS      int64    `json:"uptime_s"`
	Dependencies struct {
		Log struct {
			State              string `json:"state"`
			Reachable          bool   `json:"reachable"`
			EndOffsetsReadable bool   `json:"end_offsets_readable"`
			Error              string `json:"error"`
		} `json:"log"`
		State struct {
			State         string  `json:"state"`
			Open          *bool   `json:"open"`
			DiskFreeBytes *uint64 `json:"disk_free_bytes"`
			DiskSizeBytes *uint64 `json:"disk_size_bytes"`
			Error         string  `json:"error"`
		} `json:"state"`
		Cluster struct {
			State             string   `json:"state"`
			Single            bool     `json:"single"`
			MembersUp         int      `json:"members_up"`
			MembersDown       []string `json:"members_down"`
			Leader            string   `json:"leader"`
			LeaderKnown       bool     `json:"leader_known"`
			PartitionsUnowned []int32  `json:"partitions_unowned"`
		} `json:"cluster"`
		Crawler struct {
			State         string `json:"state"`
			SourcesActive *int64 `json:"sources_active"`
			SourcesOnTime *int64 `json:"sources_on_time"`
			OpenCircuits  *int64 `json:"open_circuits"`
		} `json:"crawler"`
	} `json:"dependencies"`
	Stages []healthStage              `json:"stages"`
	Checks map[string]json.RawMessage `json:"checks"`
}

type healthStage struct {
	Stage       string `json:"stage"`
	Kind        string `json:"kind"`
	State       string `json:"state"`
	Tasks       int    `json:"tasks"`
	Lag         int64  `json:"lag"`
	StalenessMS *int64 `json:"staleness_ms"`
}

// stage returns the named stage of the answer.
func (h healthBody) stage(t testing.TB, name string) healthStage {
	t.Helper()
	i := slices.IndexFunc(h.Stages, func(s healthStage) bool { return s.Stage == name })
	if i < 0 {
		t.Fatalf("no stage %s in %+v", name, h.Stages)
	}
	return h.Stages[i]
}

// detailed returns the node's /health/detailed, which must answer status.
func (n *testNode) detailed(t testing.TB, status int) healthBody {
	t.Helper()
	r := n.get(t, "/health/detailed")
	if r.status != status {
		t.Fatalf("/health/detailed: %s, want %d", r, status)
	}
	return decodeStrict[healthBody](t, r.body)
}

// A node that runs everything and has caught up: live, ready, and every
// dependency and stage in order.
func TestHealthTiers(t *testing.T) {
	n := newTestNode(t, withArticles())
	ingestFixture(t, n, articleFixture[:3])
	n.waitCaughtUp(t)
	if r := n.get(t, "/health/live"); r.status != 200 || string(r.body) != `{"status":"live"}` {
		t.Fatalf("live: %s", r)
	}
	if r := n.get(t, "/health/ready"); r.status != 200 || string(r.body) != `{"status":"ready"}` {
		t.Fatalf("ready: %s", r)
	}
	h := n.detailed(t, fasthttp.StatusOK)
	if h.Status != "ok" || len(h.Reasons) != 0 {
		t.Fatalf("status %s %q", h.Status, h.Reasons)
	}
	d := h.Dependencies
	if d.Log.State != "ok" || !d.Log.Reachable || !d.Log.EndOffsetsReadable {
		t.Errorf("log %+v", d.Log)
	}
	if d.State.State != "ok" || d.State.Open == nil || !*d.State.Open || d.State.DiskFreeBytes == nil || d.State.DiskSizeBytes == nil ||
		*d.State.DiskFreeBytes == 0 || *d.State.DiskFreeBytes > *d.State.DiskSizeBytes {
		t.Errorf("state %+v", d.State)
	}
	if c := d.Cluster; c.State != "ok" || !c.Single || c.MembersUp != 1 || len(c.MembersDown) != 0 || !c.LeaderKnown || len(c.PartitionsUnowned) != 0 {
		t.Errorf("cluster %+v", c)
	}
	if d.Crawler.State != "disabled" {
		t.Errorf("crawler %+v", d.Crawler)
	}
	var names []string
	for _, st := range n.eng.Topology() {
		names = append(names, st.Name)
		got := h.stage(t, st.Name)
		want := int(st.Tasks)
		if got.State != "running" || got.Tasks != want || got.Kind != st.Kind || got.Lag != 0 {
			t.Errorf("stage %+v, want running with %d tasks, kind %s, no lag", got, want, st.Kind)
		}
	}
	if len(h.Stages) != len(names) {
		t.Errorf("stages %+v, want %v", h.Stages, names)
	}
	if s := h.stage(t, "stories"); s.StalenessMS == nil || *s.StalenessMS != 0 {
		t.Errorf("stories: %+v", s)
	}
	for _, c := range []string{"engine", "trending", "stories", "search"} {
		if h.Checks[c] == nil {
			t.Errorf("no check %s: %v", c, h.Checks)
		}
	}
}

// A paused stage keeps the node ready but degrades its health, with the
// reason, until it is resumed; the shares it did not read meanwhile are
// its lag, then counted.
func TestHealthDegradedWhilePaused(t *testing.T) {
	n := newTestNode(t)
	if r := n.post(t, "/api/v1/admin/stages/trending/pause", ""); r.status != fasthttp.StatusOK {
		t.Fatalf("pause: %s", r)
	}
	n.postShareBatch(t, []string{share("p1", "a1", n.clock.ms(-5*time.Minute)), share("p2", "a1", n.clock.ms(-5*time.Minute))})
	testutil.Eventually(t, 15*time.Second, func() error {
		h := n.detailed(t, fasthttp.StatusOK)
		st := h.stage(t, "trending")
		if h.Status != "degraded" || !slices.Contains(h.Reasons, "stage trending is paused") || st.State != "paused" || st.Tasks != 4 || st.Lag != 2 {
			return fmt.Errorf("status %s %q, trending %+v", h.Status, h.Reasons, st)
		}
		return nil
	})
	if r := n.get(t, "/health/ready"); r.status != fasthttp.StatusOK {
		t.Fatalf("ready while paused: %s", r)
	}
	if r := n.post(t, "/api/v1/admin/stages/trending/resume", ""); r.status != fasthttp.StatusOK {
		t.Fatalf("resume: %s", r)
	}
	n.waitShares(t, "a1", counts(2, 2, 2))
	testutil.Eventually(t, 15*time.Second, func() error {
		if h := n.detailed(t, fasthttp.StatusOK); h.Status != "ok" || h.stage(t, "trending").State != "running" {
			return fmt.Errorf("after resume: %s %q %+v", h.Status, h.Reasons, h.stage(t, "trending"))
		}
		return nil
	})
}

// A cluster member down, and a partition whose owner is down, degrade the
// health of every node that sees them.
func TestHealthDegradedClusterMemberDown(t *testing.T) {
	fc := testCluster() // c is down and owns nothing
	n := newTestNode(t, withCluster(fc))
	h := n.detailed(t, fasthttp.StatusOK)
	c := h.Dependencies.Cluster
	if h.Status != "degraded" || !slices.Equal(h.Reasons, []string{"cluster member c is down"}) ||
		c.State != "degraded" || c.Single || c.MembersUp != 2 || !slices.Equal(c.MembersDown, []string{"c"}) || c.Leader != "a" || !c.LeaderKnown ||
		len(c.PartitionsUnowned) != 0 {
		t.Fatalf("c down: %s %q %+v", h.Status, h.Reasons, c)
	}
	onC := testCluster()
	onC.state.Owners[3] = cluster.Owner{Node: "c", Epoch: 7}
	h = newTestNode(t, withCluster(onC)).detailed(t, fasthttp.StatusOK)
	if !slices.Equal(h.Dependencies.Cluster.PartitionsUnowned, []int32{3}) ||
		!slices.Contains(h.Reasons, "partitions 3 have no owner that is up") {
		t.Fatalf("partition 3 on c: %q %+v", h.Reasons, h.Dependencies.Cluster)
	}
}

// Not ready, with the reason: while the tasks have not restored, and
// while the server stops; live all along.
func TestReadyReasons(t *testing.T) {
	n := newTestNode(t, withoutEngine())
	r := n.get(t, "/health/ready")
	got := decodeStrict[map[string]string](t, r.body)
	if r.status != fasthttp.StatusServiceUnavailable || got["reason"] != "restoring" || got["error"] != "tasks are restoring state" {
		t.Fatalf("engine not running: %s", r)
	}
	h := n.detailed(t, fasthttp.StatusServiceUnavailable)
	if h.Status != "restoring" || !slices.Contains(h.Reasons, "tasks are restoring state") || len(h.Stages) != 0 {
		t.Fatalf("detailed: %s %q %+v", h.Status, h.Reasons, h.Stages)
	}

	m := newTestNode(t)
	handler := m.srv.Handler()
	m.stop()
	call := func(path string) (int, string) {
		var ctx fasthttp.RequestCtx
		ctx.Request.SetRequestURI(path)
		ctx.Request.Header.Set("Host", "newsflow")
		handler(&ctx)
		return ctx.Response.StatusCode(), string(ctx.Response.Body())
	}
	if code, body := call("/health/ready"); code != fasthttp.StatusServiceUnavailable || !strings.Contains(body, `"reason":"stopping"`) {
		t.Fatalf("ready while stopping: %d %s", code, body)
	}
	if code, _ := call("/health/live"); code != fasthttp.StatusOK {
		t.Fatalf("live while stopping: %d", code)
	}
	if code, body := call("/health/detailed"); code != fasthttp.StatusServiceUnavailable || !strings.Contains(body, `"status":"stopping"`) {
		t.Fatalf("detailed while stopping: %d %.300s", code, body)
	}
}
