package query_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/internal/testutil"
	"github.com/newsflow/newsflow/operators/trending"
	"github.com/valyala/fasthttp"
)

// TestArticleSharesCMS: with trending.counter: cms,
// /api/v1/articles/{id}/shares answers estimates with their error bound
// per window (the exact count within it), ?window= the one window's
// bound, /api/v1/trending items carry error_bound, and /health/detailed
// and /metrics show the sketches' memory.
//
// It is one scenario checked step by step (cyclomatic 38): the steps
// depend on each other's state, so they stay in order in one function.
func TestArticleSharesCMS(t *testing.T) {
	n := newTestNode(t, withTrending(trending.OperatorOptions{Counter: trending.CounterCMS}))
	long := strings.Repeat("L", 128) // the longest id an event may carry trends too
	args := []any{"hot", 40}
	exact := map[string]uint64{"hot": 40, long: 30}
	for i := range 300 {
		id := fmt.Sprintf("art-%03d", i)
		args = append(args, id, 1+i%7)
		exact[id] = uint64(1 + i%7)
	}
	postShares(t, n, "c", args...)
	var lines []string
	for i := range 30 {
		lines = append(lines, share(fmt.Sprint("long-", i), long, n.clock.ms(0)))
	}
	n.postShareBatch(t, lines)
	n.waitCaughtUp(t)

	type cmsShares struct {
		ArticleID string            `json:"article_id"`
		Counts    map[string]uint64 `json:"counts"`
		Bounds    map[string]uint64 `json:"bounds"`
		AsOf      int64             `json:"as_of"`
	}
	for id, want := range exact {
		r := n.get(t, "/api/v1/articles/"+id+"/shares")
		if r.status != fasthttp.StatusOK {
			t.Fatalf("shares of %s: %s", id, r)
		}
		sh := decodeStrict[cmsShares](t, r.body)
		if len(sh.Counts) != 3 || len(sh.Bounds) != 3 {
			t.Fatalf("%s: %s", id, r.body)
		}
		for w, c := range sh.Counts {
			if b := sh.Bounds[w]; c < want || c-want > b || b == 0 {
				t.Fatalf("%s window %s: %d ± %d, exact %d", id, w, c, b, want)
			}
		}
	}
	r := n.get(t, "/api/v1/articles/hot/shares?window=24h")
	one := decodeStrict[struct {
		ArticleID string `json:"article_id"`
		Window    string `json:"window"`
		Count     uint64 `json:"count"`
		Bound     uint64 `json:"error_bound"`
		AsOf      int64  `json:"as_of"`
	}](t, r.body)
	if r.status != fasthttp.StatusOK || one.Count < 40 || one.Count-40 > one.Bound || one.Bound == 0 {
		t.Fatalf("?window=24h: %s", r)
	}
	if r := n.get(t, "/api/v1/articles/never-shared/shares"); r.status != fasthttp.StatusOK ||
		!strings.Contains(string(r.body), `"counts":{"1h":0,"1m":0,"24h":0},"bounds":{"1h":0,"1m":0,"24h":0}`) {
		t.Fatalf("never shared: %s", r)
	}

	r = n.get(t, "/api/v1/trending?window=1h&k=3")
	top := decodeStrictPart[struct {
		Items []trending.Item `json:"items"`
	}](t, r.body)
	if r.status != fasthttp.StatusOK || len(top.Items) != 3 || top.Items[0].ArticleID != "hot" || top.Items[1].ArticleID != long ||
		!strings.Contains(string(r.body), `"error_bound":`) {
		t.Fatalf("trending: %s", r)
	}
	for _, it := range top.Items {
		if it.Count < exact[it.ArticleID] || it.Count-exact[it.ArticleID] > it.Bound || it.Bound == 0 {
			t.Fatalf("trending item %+v, exact %d", it, exact[it.ArticleID])
		}
	}

	h := decodeStrictPart[struct {
		Checks struct {
			Trending trending.ExactMemory `json:"trending"`
		}
	}](t, n.get(t, "/health/detailed").body).Checks.Trending
	if h.Mode != "cms" || h.BudgetBytes != 0 || h.MaxBytes < 60<<20 || h.MaxBytes > 80<<20 || h.OverBudget || len(h.Partitions) != 4 {
		t.Fatalf("health: %+v", h)
	}
	m := n.metrics(t)
	for _, p := range h.Partitions {
		label := fmt.Sprintf(`{partition="%d"}`, p.Partition)
		if p.Bytes <= 0 || p.Bytes > h.MaxBytes || p.OverBudget || m["newsflow_trending_cms_bytes"+label] != float64(p.Bytes) {
			t.Errorf("partition %+v, gauge %v", p, m["newsflow_trending_cms_bytes"+label])
		}
		if _, ok := m["newsflow_trending_exact_bytes"+label]; ok {
			t.Errorf("partition %d: exact gauge in cms mode", p.Partition)
		}
	}
}

// Trending by story in cms mode: a story's bound is the sum of its
// articles' bounds, so its true count is in [count-bound, count].
func TestTrendingByStoryCMS(t *testing.T) {
	n := newTestNode(t, withArticles(), withTrending(trending.OperatorOptions{Counter: trending.CounterCMS}))
	ingestFixture(t, n, articleFixture)
	idOf := articleIDsByURL(t, n)
	var args []any
	for i, f := range articleFixture[:4] { // the quake story's four articles
		args = append(args, idOf[f.url], 2+i)
	}
	postShares(t, n, "q", args...)
	var res struct {
		Items []struct {
			StoryID  string          `json:"story_id"`
			Count    uint64          `json:"count"`
			Bound    uint64          `json:"error_bound"`
			Articles []trending.Item `json:"articles"`
		} `json:"items"`
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		r := n.get(t, "/api/v1/trending?window=1h&by=story")
		if err := json.Unmarshal(r.body, &res); err != nil || len(res.Items) != 1 || res.Items[0].Count < 14 {
			return fmt.Errorf("by story: %s", r)
		}
		return nil
	})
	it := res.Items[0]
	var sum uint64
	for _, a := range it.Articles {
		sum += a.Bound
	}
	if len(it.Articles) != 4 || it.Bound != sum || it.Bound == 0 || it.Count-14 > it.Bound {
		t.Fatalf("story item %+v: bound %d, want the articles' %d, count within it of 14", it, it.Bound, sum)
	}
}
