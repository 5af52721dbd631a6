package query_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/operators/trending"
	"github.com/valyala/fasthttp"
)

// TestHealthDetailedTrendingMemory: /health/detailed shows the exact
// counters' memory per partition against the budget, and /metrics the
// gauges and the crossings; over the budget the answers stay exact.
func TestHealthDetailedTrendingMemory(t *testing.T) {
	const budget = 256 << 10
	n := newTestNode(t, withTrending(trending.OperatorOptions{ExactMaxBytes: budget}))
	type health struct {
		Status string
		Checks struct {
			Trending trending.ExactMemory `json:"trending"`
		}
	}
	get := func() health {
		t.Helper()
		r := n.get(t, "/health/detailed")
		h := decodeStrictPart[health](t, r.body)
		if r.status != fasthttp.StatusOK || h.Status != "ok" {
			t.Fatalf("health: %s", r)
		}
		return h
	}
	h := get().Checks.Trending
	if h.Mode != "exact" || h.BudgetBytes != budget || h.OverBudget || len(h.Partitions) != 4 || h.Action != "" {
		t.Fatalf("before shares: %+v", h)
	}
	// 8,000 distinct articles, one share each, and one article shared 500
	// times: several partitions go over 256 KiB.
	var lines []string
	for i := range 8000 {
		lines = append(lines, share(fmt.Sprintf("e%d", i), fmt.Sprintf("article-%05d", i), n.clock.ms(-time.Duration(i)*time.Second)))
	}
	for i := range 500 {
		lines = append(lines, share(fmt.Sprintf("hot%d", i), "hot", n.clock.ms(-time.Duration(i)*time.Second)))
	}
	n.postShareBatch(t, lines)
	n.waitCaughtUp(t)
	h = get().Checks.Trending
	over := 0
	for _, p := range h.Partitions {
		if p.Bytes <= 0 || p.OverBudget != (p.Bytes > budget) {
			t.Errorf("partition %+v", p)
		}
		if p.OverBudget {
			over++
		}
	}
	if over == 0 || !h.OverBudget || !strings.Contains(h.Action, "trending.counter: cms") {
		t.Fatalf("after 8,500 shares: %+v", h)
	}
	m := n.metrics(t)
	crossings := 0.0
	for p := range 4 {
		label := fmt.Sprintf(`{partition="%d"}`, p)
		if m["newsflow_trending_exact_budget_bytes"+label] != budget || m["newsflow_trending_exact_bytes"+label] <= 0 {
			t.Errorf("partition %d gauges: budget %v, bytes %v", p, m["newsflow_trending_exact_budget_bytes"+label], m["newsflow_trending_exact_bytes"+label])
		}
		crossings += m["newsflow_trending_exact_over_budget_total"+label]
	}
	if int(crossings) != over {
		t.Errorf("%v crossings counted, %d partitions over", crossings, over)
	}
	// Exact over budget.
	for id, want := range map[string][2]uint64{"hot": {500, 500}, "article-00007": {1, 1}, "article-07999": {0, 1}} {
		if got := n.shares(t, id).Counts; got["1h"] != want[0] || got["24h"] != want[1] {
			t.Errorf("%s: %v, want %d in 1h and %d in 24h", id, got, want[0], want[1])
		}
	}
}

// decodeStrictPart decodes the fields of T from body, ignoring others.
func decodeStrictPart[T any](t testing.TB, body []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("decode %T from %s: %v", v, body, err)
	}
	return v
}
