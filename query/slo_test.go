package query_test

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/internal/testutil"
	"github.com/newsflow/newsflow/node/slo"
	"github.com/newsflow/newsflow/query"
	"github.com/valyala/fasthttp"
)

// sloBody is the body of GET /api/v1/admin/slo.
type sloBody struct {
	slo.Report
	Nodes       []string     `json:"nodes"`
	FailedNodes []string     `json:"failed_nodes"`
	PerNode     []slo.Report `json:"per_node"`
}

// slo returns the node's SLO answer (GET /api/v1/admin/slo with hdr) and
// its Warning header.
func (n *testNode) slo(t testing.TB, hdr ...string) (sloBody, string) {
	t.Helper()
	r := n.do(t, "GET", "/api/v1/admin/slo", nil, hdr...)
	if r.status != fasthttp.StatusOK {
		t.Fatalf("slo: %s", r)
	}
	if strings.Contains(string(r.body), "NaN") {
		t.Fatalf("slo: %s", r.body)
	}
	return decodeStrict[sloBody](t, r.body), r.header[query.HeaderWarning]
}

// objective returns an objective of a report (an availability group when
// group is set).
func objective(t testing.TB, rep slo.Report, id, group string) slo.Result {
	t.Helper()
	for _, r := range rep.Objectives {
		if r.ID != id {
			continue
		}
		if group == "" {
			return r
		}
		for _, g := range r.Groups {
			if g.Group == group {
				return g
			}
		}
	}
	t.Fatalf("no objective %s %s in %+v", id, group, rep.Objectives)
	return slo.Result{}
}

// counted returns an objective's good and total events over the SLO window.
func counted(t testing.TB, rep slo.Report, id, group string) (good, total float64) {
	t.Helper()
	w := objective(t, rep, id, group).Windows[rep.Window]
	return w.Good, w.Total
}

// The node's report counts what the node did: every article through each
// stage, the shares in trending, the searches, the cached feeds and the
// requests of each group.
// Admins only.
func TestSLOReport(t *testing.T) {
	n := newTestNode(t, withArticles())
	before, _ := n.slo(t)
	if before.Window != "30d" || !slices.Equal(before.Windows, []string{"5m", "1h", "30d"}) || before.Node != "" || before.Nodes != nil {
		t.Fatalf("report %+v", before)
	}
	var ids []string
	for _, r := range before.Objectives {
		ids = append(ids, r.ID)
		if !slices.Contains([]string{slo.StatusOK, slo.StatusBurning, slo.StatusBreached, slo.StatusNoData}, r.Status) {
			t.Errorf("%s: status %q", r.ID, r.Status)
		}
	}
	want := []string{"article_ingest", "article_searchable", "article_in_story", "trending_update", "crawl_coverage", "feed_latency", "search_latency", "availability"}
	if !slices.Equal(ids, want) {
		t.Fatalf("objectives %v, want %v", ids, want)
	}
	var groups []string
	for _, g := range objective(t, before.Report, slo.AvailabilityID, "").Groups {
		groups = append(groups, g.Group)
	}
	// Every group but the health probes (readiness answers 503 by design).
	if !slices.Equal(groups, []string{"account", "admin", "feed", "ingest", "other", "reader_api", "search", "stories", "trending", "ui"}) {
		t.Errorf("availability groups %v", groups)
	}
	if r := n.do(t, "GET", "/api/v1/admin/slo", nil, "X-Anonymous", "1"); r.status != fasthttp.StatusUnauthorized {
		t.Errorf("anonymous: %s", r)
	}

	ingestFixture(t, n, articleFixture) // searches until every article is found
	n.waitCaughtUp(t)
	mid, _ := n.slo(t)
	for _, q := range []string{"lisbon", "rates", "phone"} {
		if r := n.get(t, "/api/v1/search?q="+q); r.status != fasthttp.StatusOK {
			t.Fatalf("search: %s", r)
		}
	}
	for range 2 { // computed, then from the cache
		if r := n.get(t, "/api/v1/feed"); r.status != fasthttp.StatusOK {
			t.Fatalf("feed: %s", r)
		}
	}
	n.postShareBatch(t, []string{share("s1", "a1", n.clock.ms(0)), share("s2", "a1", n.clock.ms(0)), share("s3", "a2", n.clock.ms(0))})
	n.waitCaughtUp(t)
	delta := func(after, before sloBody, id, group string) (float64, float64) {
		g1, t1 := counted(t, after.Report, id, group)
		g0, t0 := counted(t, before.Report, id, group)
		return g1 - g0, t1 - t0
	}
	articles := float64(len(articleFixture))
	testutil.Eventually(t, 10*time.Second, func() error {
		after, _ := n.slo(t)
		for _, c := range []struct {
			id, group   string
			since       sloBody
			good, total float64
		}{
			{"article_ingest", "", before, articles, articles},
			{"article_searchable", "", before, articles, articles},
			{"article_in_story", "", before, articles, articles},
			{"search_latency", "", mid, 3, 3},
			{"feed_latency", "", mid, 1, 1},
			{"trending_update", "", mid, 3, 3}, // the shares, not the articles trending reads
			{slo.AvailabilityID, "search", mid, 3, 3},
			{slo.AvailabilityID, "feed", mid, 2, 2},
		} {
			if g, tot := delta(after, c.since, c.id, c.group); g != c.good || tot != c.total {
				return fmt.Errorf("%s %s: %v good of %v, want %v of %v", c.id, c.group, g, tot, c.good, c.total)
			}
		}
		r := objective(t, after.Report, "search_latency", "")
		if r.Status != slo.StatusOK || r.Value == nil || *r.Value != 1 || r.ErrorBudgetRemaining == nil || math.Abs(*r.ErrorBudgetRemaining-1) > 1e-9 {
			return fmt.Errorf("search_latency %+v", r)
		}
		if r := objective(t, after.Report, "crawl_coverage", ""); r.Status != slo.StatusNoData || r.Value != nil {
			return fmt.Errorf("crawl_coverage without a crawler: %+v", r)
		}
		return nil
	})
}

// In a cluster the node asked sums every node's counts, says which nodes
// answered, lists each one's report, and warns when one did not.
func TestSLOCluster(t *testing.T) {
	c := newClusterNet(t, map[string][]int32{"a": {0, 2}, "b": {1, 3}}, withQuery(query.Options{PeerTimeout: time.Second}))
	a, b := c.node("a"), c.node("b")
	for range 2 {
		if r := a.get(t, "/api/v1/search?q=lisbon"); r.status != fasthttp.StatusOK { // b answers a's fan-outs
			t.Fatalf("search: %s", r)
		}
	}
	got, warning := a.slo(t)
	if got.Node != "a" || !slices.Equal(got.Nodes, []string{"a", "b"}) || got.FailedNodes != nil || warning != "" || len(got.PerNode) != 2 ||
		got.PerNode[0].Node != "a" || got.PerNode[1].Node != "b" {
		t.Fatalf("nodes %v, failed %v, per node %d, warning %q", got.Nodes, got.FailedNodes, len(got.PerNode), warning)
	}
	// The cluster's counts are the sums of the nodes'.
	for _, r := range got.Objectives {
		check := func(r slo.Result) {
			for name, w := range r.Windows {
				var good, total float64
				for _, p := range got.PerNode {
					g, tot := counted(t, slo.Report{Window: name, Objectives: p.Objectives}, r.ID, r.Group)
					good, total = good+g, total+tot
				}
				if w.Good != good || w.Total != total {
					t.Errorf("%s %s %s: %v of %v, the nodes' sum is %v of %v", r.ID, r.Group, name, w.Good, w.Total, good, total)
				}
			}
		}
		check(r)
		for _, g := range r.Groups {
			check(g)
		}
	}
	// A search counts once, at the node the user asked: b answered a's
	// fan-outs without counting them.
	if g, tot := counted(t, got.PerNode[0], "search_latency", ""); g != 2 || tot != 2 {
		t.Errorf("a's searches: %v of %v", g, tot)
	}
	if g, tot := counted(t, got.PerNode[1], "search_latency", ""); g != 0 || tot != 0 {
		t.Errorf("b's searches: %v of %v, want none (they were a's fan-outs)", g, tot)
	}
	// Asked by another node (with the peer token), a node answers for itself.
	own, _ := b.slo(t, query.HeaderForwarded, "a", query.HeaderPeer, "peer-token")
	if own.Node != "b" || own.Nodes != nil || own.PerNode != nil {
		t.Fatalf("b for itself: %+v", own)
	}
	// b's health: the story stage is a standby copy there.
	if st := b.detailed(t, fasthttp.StatusOK).stage(t, "stories"); st.State != "standby" || st.Tasks != 0 || st.StalenessMS == nil {
		t.Errorf("stories on b: %+v", st)
	}

	b.stop()
	got, warning = a.slo(t)
	if !slices.Equal(got.Nodes, []string{"a"}) || !slices.Equal(got.FailedNodes, []string{"b"}) || len(got.PerNode) != 1 ||
		warning != `199 newsflow "partial answer: nodes b did not answer"` {
		t.Fatalf("without b: nodes %v, failed %v, warning %q", got.Nodes, got.FailedNodes, warning)
	}
	if g, tot := counted(t, got.Report, "search_latency", ""); g != 2 || tot != 2 {
		t.Errorf("a's searches without b: %v of %v", g, tot)
	}
}

// A member that is down is not asked: it is among the nodes that did not
// answer, with those that did not in time.
func TestSLOMemberDown(t *testing.T) {
	n := newTestNode(t, withCluster(testCluster()), withQuery(query.Options{PeerTimeout: 200 * time.Millisecond}))
	got, warning := n.slo(t)
	if got.Node != "b" || !slices.Equal(got.Nodes, []string{"b"}) || !slices.Equal(got.FailedNodes, []string{"a", "c"}) ||
		warning != `199 newsflow "partial answer: nodes a, c did not answer"` {
		t.Fatalf("nodes %v, failed %v, warning %q", got.Nodes, got.FailedNodes, warning)
	}
}
