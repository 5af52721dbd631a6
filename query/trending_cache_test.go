package query_test

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/internal/testutil"
	"github.com/newsflow/newsflow/operators/trending"
	"github.com/newsflow/newsflow/query"
	"github.com/valyala/fasthttp"
)

// refShares are shares with known answers: each is at one of three ages
// that fall in distinct sets of windows (the newest share, 10s old, sets
// the watermark): 10s in every window, 30m in 1h and 24h, 5h in 24h only.
type refShares struct {
	shares []refShare
	seq    int
}

type refShare struct {
	article, category string
	age               time.Duration
}

var refAges = []time.Duration{10 * time.Second, 30 * time.Minute, 5 * time.Hour}

// in reports whether a share of age counts in window.
func (s refShare) in(window string) bool {
	switch window {
	case "1m":
		return s.age < time.Minute
	case "1h":
		return s.age < time.Hour
	}
	return true
}

// add draws n random shares over articles (Zipf-popular, so that counts
// differ and some tie) and categories ("" for none), and returns them as
// NDJSON lines at the clock's now.
func (r *refShares) add(rng *rand.Rand, clock *testClock, n, articles int, cats []string) string {
	z := rand.NewZipf(rng, 1.2, 1, uint64(articles-1))
	var lines []string
	for range n {
		a := int(z.Uint64())
		s := refShare{article: fmt.Sprintf("art-%03d", a), category: cats[a%len(cats)], age: refAges[rng.IntN(len(refAges))]}
		if r.seq == 0 {
			s.age = refAges[0] // the watermark is known from the first share on
		}
		r.shares = append(r.shares, s)
		extra := []string{}
		if s.category != "" {
			extra = []string{"category", s.category}
		}
		lines = append(lines, share(fmt.Sprintf("ref-%d", r.seq), s.article, clock.ms(-s.age), extra...))
		r.seq++
	}
	return strings.Join(lines, "\n")
}

// top is the exact answer: the k articles with most shares in window and
// category (every category for ""), of the partitions keep accepts (all
// for nil), by count and then article id.
func (r *refShares) top(window, category string, k int, keep func(article string) bool) []trending.Item {
	counts := map[string]uint64{}
	for _, s := range r.shares {
		if s.in(window) && (category == "" || s.category == category) && (keep == nil || keep(s.article)) {
			counts[s.article]++
		}
	}
	items := make([]trending.Item, 0, len(counts))
	for a, c := range counts {
		items = append(items, trending.Item{ArticleID: a, Count: c})
	}
	slices.SortFunc(items, func(a, b trending.Item) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return cmp.Compare(a.ArticleID, b.ArticleID)
	})
	items = items[:min(k, len(items))]
	for i := range items {
		items[i].Rank = i + 1
	}
	return items
}

// rankingOf renders items as trendingResult.ranking does.
func rankingOf(items []trending.Item) string {
	var parts []string
	for _, it := range items {
		parts = append(parts, fmt.Sprintf("%s:%d", it.ArticleID, it.Count))
	}
	return strings.Join(parts, " ")
}

func trendingURI(window, category string, k int) string {
	q := url.Values{"window": {window}, "k": {fmt.Sprint(k)}}
	if category != "" {
		q.Set("category", category)
	}
	return "/api/v1/trending?" + q.Encode()
}

// The precomputed answer is byte for byte the computed one (the
// operator's Top encoded as before) and the exact one, for every window,
// category and k, after random shares and again after more.
func TestTrendingPrecomputedEqualsComputed(t *testing.T) {
	n := newTestNode(t)
	rng := rand.New(rand.NewPCG(7, 8))
	cats := []string{"tech", "sport", "world", "", "health"}
	var ref refShares
	asOf := n.clock.ms(-refAges[0])
	for round := range 2 {
		if r := n.post(t, pathBatch, ref.add(rng, n.clock, 3000, 300, cats)); r.status != fasthttp.StatusAccepted {
			t.Fatalf("post shares: %s", r)
		}
		// The last snapshots may predate the last shares: wait until they
		// are taken (nothing changes after that).
		n.waitTrending(t, "?window=24h&k=100", rankingOf(ref.top("24h", "", 100, nil)))
		checked := 0
		for _, window := range []string{"1m", "1h", "24h"} {
			for _, cat := range append(slices.Clone(cats), "unknown-category") {
				for k := 1; k <= 100; k++ {
					uri := trendingURI(window, cat, k)
					r := n.get(t, uri)
					if r.status != fasthttp.StatusOK {
						t.Fatalf("%s: %s", uri, r)
					}
					computed, err := n.op.Top(window, cat, k)
					if err != nil {
						t.Fatal(err)
					}
					want, err := json.Marshal(computed)
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(r.body, want) {
						t.Fatalf("round %d %s:\nprecomputed %s\n   computed %s", round, uri, r.body, want)
					}
					exact, err := json.Marshal(trending.Result{Window: window, Category: cat, Items: ref.top(window, cat, k, nil), AsOf: asOf})
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(r.body, exact) {
						t.Fatalf("round %d %s:\nprecomputed %s\n      exact %s", round, uri, r.body, exact)
					}
					checked++
				}
			}
		}
		t.Logf("round %d: %d answers checked", round, checked)
	}
	// The answers the cache leaves to the computed path are unchanged:
	// errors, and the default window and k.
	wantError(t, n.get(t, "/api/v1/trending?window=2h"), fasthttp.StatusBadRequest, "unknown window")
	wantError(t, n.get(t, "/api/v1/trending?k=101"), fasthttp.StatusBadRequest, "k must be")
	wantError(t, n.get(t, "/api/v1/trending?expand=x"), fasthttp.StatusBadRequest, "expand")
	def, err := n.op.Top("1h", "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := json.Marshal(def); !bytes.Equal(n.get(t, "/api/v1/trending").body, want) {
		t.Fatalf("default answer: %s, want %s", n.get(t, "/api/v1/trending").body, want)
	}
}

// A new share shows in the answer no later than the snapshot interval
// after it was applied, though the answer before it was served from the
// precomputed bytes.
func TestTrendingPrecomputedFreshness(t *testing.T) {
	const interval = 200 * time.Millisecond
	n := newTestNode(t, withTrending(trending.OperatorOptions{SnapshotInterval: interval}))
	postShares(t, n, "base", "base", 3)
	n.waitTrending(t, "?window=1h&k=5", "base:3")
	for i := range 5 {
		// Ask often before the share, so the answer is the cached one.
		for range 20 {
			n.get(t, "/api/v1/trending?window=1h&k=5")
		}
		id := fmt.Sprintf("fresh-%d", i)
		postShares(t, n, id, id, 10+i)
		n.waitCaughtUp(t) // applied: committed
		applied := time.Now()
		<-time.After(time.Until(applied.Add(interval)))
		r := n.get(t, "/api/v1/trending?window=1h&k=5")
		got := decodeStrict[trendingResult](t, r.body)
		if len(got.Items) == 0 || got.Items[0].ArticleID != id || got.Items[0].Count != uint64(10+i) {
			t.Fatalf("%s after %s: %s", id, time.Since(applied).Round(time.Millisecond), r.body)
		}
	}
}

// restoreHarness drives the trending tasks of a node whose engine does
// not run, as the engine would: records delivered one by one, commits,
// and restores from the committed state (a crash or a partition moving
// back).
type restoreHarness struct {
	t     *testing.T
	n     *testNode
	tasks []engine.Task
	seq   int
}

func (h *restoreHarness) start(p int32) {
	h.t.Helper()
	tk, err := h.n.op.NewTask(engine.TaskContext{Partition: p, Partitions: int32(len(h.tasks))})
	if err != nil {
		h.t.Fatal(err)
	}
	if err := tk.Restore(h.n.db.Namespace(fmt.Sprintf("restore-test-%d", p))); err != nil {
		h.t.Fatal(err)
	}
	h.tasks[p] = tk
}

func (h *restoreHarness) deliver(article string, count int) int32 {
	h.t.Helper()
	p := eventlog.PartitionFor([]byte(article), int32(len(h.tasks)))
	for range count {
		h.seq++
		ts := h.n.clock.ms(0)
		rec := &eventlog.Record{Topic: schema.TopicShares, Partition: p, Key: []byte(article), Timestamp: ts,
			Value: []byte(share(fmt.Sprintf("h-%d", h.seq), article, ts, "category", "tech"))}
		var pc engine.ProcessContext
		if err := h.tasks[p].Process(&pc, rec); err != nil {
			h.t.Fatal(err)
		}
	}
	return p
}

func (h *restoreHarness) commit() {
	h.t.Helper()
	for p, tk := range h.tasks {
		b := h.n.db.Namespace(fmt.Sprintf("restore-test-%d", p)).NewBatch()
		if err := tk.Flush(b); err != nil {
			h.t.Fatal(err)
		}
		if err := b.Commit(); err != nil {
			h.t.Fatal(err)
		}
		tk.Committed(engine.CommitInfo{CaughtUp: true})
	}
}

// answer returns the ranking of the trending answer to uri, or an error
// when it is not the computed one (the operator's Top, asked right after).
func (h *restoreHarness) answer(uri, window, category string, k int) (string, []int32, error) {
	h.t.Helper()
	r := h.n.get(h.t, uri)
	computed, err := h.n.op.Top(window, category, k)
	if err != nil {
		h.t.Fatal(err)
	}
	if want, _ := json.Marshal(computed); r.status != fasthttp.StatusOK || !bytes.Equal(r.body, want) {
		return "", nil, fmt.Errorf("%s: %s, computed %s", uri, r, want)
	}
	res := decodeStrict[trendingResult](h.t, r.body)
	return res.ranking(h.t), res.Partial, nil
}

// answerNow is answer when nothing changes meanwhile: a difference fails.
func (h *restoreHarness) answerNow(uri, window, category string, k int) (string, []int32) {
	h.t.Helper()
	ranking, partial, err := h.answer(uri, window, category, k)
	if err != nil {
		h.t.Fatal(err)
	}
	return ranking, partial
}

// waitAnswer polls until the answer to uri ranks want.
func (h *restoreHarness) waitAnswer(uri, category, want string) {
	h.t.Helper()
	testutil.Eventually(h.t, 5*time.Second, func() error {
		got, _, err := h.answer(uri, "1h", category, 100)
		if err == nil && got != want {
			err = fmt.Errorf("%s: %s, want %s", uri, got, want)
		}
		return err
	})
}

// After a task is restored from its committed state, or stops, the next
// answer is the restored state's: the precomputed bytes of the state before
// are never served again.
func TestTrendingPrecomputedAfterRestore(t *testing.T) {
	n := newTestNode(t, withoutEngine())
	h := &restoreHarness{t: t, n: n, tasks: make([]engine.Task, n.eng.Partitions())}
	for p := range h.tasks {
		h.start(int32(p))
	}
	t.Cleanup(func() {
		for _, tk := range h.tasks {
			tk.Close()
		}
	})
	h.deliver("a", 5)
	h.deliver("b", 3)
	pc := h.deliver("c", 1)
	h.commit()
	for _, uri := range []string{"/api/v1/trending?window=1h&k=100", "/api/v1/trending?window=1h&k=100&category=tech"} {
		cat := ""
		if strings.Contains(uri, "category") {
			cat = "tech"
		}
		h.waitAnswer(uri, cat, "a:5 b:3 c:1")
		// Shares applied but not committed show ...
		h.deliver("c", 10)
		h.waitAnswer(uri, cat, "c:11 a:5 b:3")
		// ... until a crash loses them: the task is restored from its
		// committed state, and the very next answer is that state's.
		h.tasks[pc].Close()
		h.start(pc)
		if got, _ := h.answerNow(uri, "1h", cat, 100); got != "a:5 b:3 c:1" {
			t.Fatalf("%s right after the restore: %s, want a:5 b:3 c:1", uri, got)
		}
	}
	// A partition that stops (moved to another node) is missing at once.
	const top = "/api/v1/trending?window=1h&k=100"
	h.tasks[pc].Close()
	if got, partial := h.answerNow(top, "1h", "", 100); strings.Contains(got, "c:") || !slices.Equal(partial, []int32{pc}) {
		t.Fatalf("with partition %d stopped: %s, missing %v", pc, got, partial)
	}
	h.start(pc)
	if got, partial := h.answerNow(top, "1h", "", 100); got != "a:5 b:3 c:1" || partial != nil {
		t.Fatalf("partition %d back: %s, missing %v", pc, got, partial)
	}
}

// In a cluster a node answering a fan-out serves its own partitions'
// answer (precomputed) with the others missing; a node answering for the
// cluster merges every node's, and reports a node that does not answer.
func TestTrendingPrecomputedCluster(t *testing.T) {
	c := newClusterNet(t, map[string][]int32{"a": {0, 2}, "b": {1, 3}})
	a, b := c.node("a"), c.node("b")
	rng := rand.New(rand.NewPCG(3, 4))
	cats := []string{"tech", ""}
	var ref refShares
	onA := func(article string) bool { p := partitionOf(article); return p == 0 || p == 2 }
	onB := func(article string) bool { return !onA(article) }
	forwarded := []string{query.HeaderForwarded, "test", query.HeaderPeer, "peer-token"}
	check := func(n *testNode, window, cat string, k int, keep func(string) bool, missing []int32, failed []string, hdr ...string) error {
		r := n.do(t, "GET", trendingURI(window, cat, k), nil, hdr...)
		if r.status != fasthttp.StatusOK {
			return fmt.Errorf("%s: %s", trendingURI(window, cat, k), r)
		}
		var got struct {
			Items       []trending.Item `json:"items"`
			PartialFlag bool            `json:"partial"`
			Partial     []int32         `json:"missing_partitions"`
			FailedNodes []string        `json:"failed_nodes"`
		}
		if err := json.Unmarshal(r.body, &got); err != nil {
			return err
		}
		// The cluster's answer (not another node's fan-out) says when it
		// misses partitions or nodes: partial, and a Warning header.
		fanned := len(hdr) == 0
		if warned := r.header[query.HeaderWarning] != ""; warned != (fanned && (len(missing) > 0 || len(failed) > 0)) || got.PartialFlag != (fanned && len(missing) > 0) {
			return fmt.Errorf("%s%v: partial %v, warning %q; missing %v, failed %v", trendingURI(window, cat, k), hdr, got.PartialFlag, r.header[query.HeaderWarning], missing, failed)
		}
		if want := ref.top(window, cat, k, keep); !slices.Equal(got.Items, want) || !slices.Equal(got.Partial, missing) || !slices.Equal(got.FailedNodes, failed) {
			return fmt.Errorf("%s%v:\n got %s\nwant items %v, missing %v, failed %v", trendingURI(window, cat, k), hdr, r.body, want, missing, failed)
		}
		return nil
	}
	for round := range 2 {
		if r := a.post(t, pathBatch, ref.add(rng, c.clock, 500, 60, cats)); r.status != fasthttp.StatusAccepted {
			t.Fatalf("post shares: %s", r)
		}
		for _, window := range []string{"1m", "1h", "24h"} {
			for _, cat := range cats {
				for _, k := range []int{1, 7, 100} {
					testutil.Eventually(t, 10*time.Second, func() error {
						return cmp.Or(
							check(a, window, cat, k, nil, nil, nil),
							check(b, window, cat, k, nil, nil, nil),
							check(a, window, cat, k, onA, []int32{1, 3}, nil, forwarded...),
							check(b, window, cat, k, onB, []int32{0, 2}, nil, forwarded...))
					})
				}
			}
		}
		t.Logf("round %d: every answer exact", round)
	}
	b.stop()
	if err := check(a, "1h", "", 100, onA, []int32{1, 3}, []string{"b"}); err != nil {
		t.Fatalf("without b: %v", err)
	}
}
