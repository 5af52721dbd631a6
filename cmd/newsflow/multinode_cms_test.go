package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/internal/testutil"
)

// TestClusterCMSRestoreIdentical: three nodes count shares with the cms
// counter (a narrow sketch, so that estimates exceed the exact counts and
// only deterministic counting gives equal answers). After 30,000 shares,
// posted in one batch so that each partition holds them in one order, a
// follower is SIGKILLed: its partitions are restored on the other nodes
// from their changelogs, and every answer (the top 100 of 1m, 1h and 24h,
// globally and for two categories, and the shares of 79 articles, with
// their error bounds and as_of) is the same as before, through every
// node. More shares then arrive (among them repeats of earlier events);
// the answers stay the same when the killed node comes back and takes
// partitions back, and when another node leaves (`newsflow leave`) and
// hands its partitions over. A fresh single node fed the same batches
// answers the same after each: the restored partitions went on counting
// as partitions that never moved do.
func TestClusterCMSRestoreIdentical(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test skipped in -short mode")
	}
	start := time.Now()
	cms := []string{"NEWSFLOW_TRENDING_COUNTER=cms", "NEWSFLOW_TRENDING_CMS_WIDTH=256"}
	first, second := genRestoreShares(30_000, 10_000, 3000, 81)
	probes := restoreProbes(first, 40, 75)

	tc := startTestCluster(t, cms...)
	postRestoreShares(t, tc.nodes["a"], first)
	waitCaughtUpOn(t, tc, tc.ids, 2*time.Minute)
	before := settledAnswers(t, tc, tc.ids, probes)
	checkCMSAnswers(t, before, first.counts, probes)

	// A follower that owns partitions dies; the others restore them.
	v, err := tc.view("a")
	if err != nil {
		t.Fatal(err)
	}
	victim := ""
	for _, id := range tc.ids {
		if id != v.Leader && v.owns(id) > 0 {
			victim = id
			break
		}
	}
	if victim == "" {
		t.Fatalf("no follower owns a partition: %+v", v)
	}
	ownerBefore := partitionOwners(v)
	logFrom := logSizes(tc)
	tc.nodes[victim].Kill()
	rest := slices.DeleteFunc(slices.Clone(tc.ids), func(id string) bool { return id == victim })
	after, took := tc.waitView(30*time.Second, "running every partition without "+victim, func(v clusterView) bool {
		return v.owns(victim) == 0 && v.allRunning()
	})
	moved := movedPartitions(t, ownerBefore, partitionOwners(after))
	t.Logf("%s killed: its partitions run elsewhere after %s (partition → new owner: %v)", victim, took.Round(time.Millisecond), moved)
	waitCaughtUpOn(t, tc, rest, time.Minute)
	checkTrendingRestored(t, tc, moved, logFrom, int32(len(after.Partitions)), first)
	compareAnswers(t, "after "+victim+"'s partitions moved to "+strings.Join(rest, " and "), before, settledAnswers(t, tc, rest, probes))

	// The restored partitions go on counting (compared below with a node
	// that never restored).
	postRestoreShares(t, tc.nodes[rest[len(rest)-1]], second)
	waitCaughtUpOn(t, tc, rest, time.Minute)
	later := settledAnswers(t, tc, rest, probes)
	both := first.plus(second)
	checkCMSAnswers(t, later, both.counts, probes)
	if bytes.Equal(later["/api/v1/trending?window=1m&k=100"], before["/api/v1/trending?window=1m&k=100"]) {
		t.Fatal("the second batch did not change the 1m top")
	}

	// The killed node comes back and takes partitions back: restored from
	// its copy as of the kill and the changelog since, or from the
	// changelog alone for a partition it did not have.
	tc.nodes[victim].Start()
	v, _ = tc.waitView(60*time.Second, "running every partition with "+victim+" back", func(v clusterView) bool {
		return v.owns(victim) > 0 && v.allRunning()
	})
	t.Logf("%s came back and runs partitions %v (it had %v)", victim, ownedBy(partitionOwners(v), victim), ownedBy(ownerBefore, victim))
	waitCaughtUpOn(t, tc, tc.ids, time.Minute)
	compareAnswers(t, "after "+victim+" came back", later, settledAnswers(t, tc, tc.ids, probes))

	// A follower leaves (`newsflow leave`): its partitions are handed over
	// and restored on the two others.
	v, _ = tc.waitView(10*time.Second, "running every partition", clusterView.allRunning)
	leaver := ""
	for _, id := range tc.ids {
		if id != v.Leader && id != victim {
			leaver = id
		}
	}
	ownerBefore, logFrom = partitionOwners(v), logSizes(tc)
	if out, err := runCLI(t, "leave", "--addr", "http://"+tc.nodes[leaver].Addr, "--token", testAdminToken); err != nil || !strings.Contains(out, `"left":"`+leaver+`"`) {
		t.Fatalf("leave %s: %v\n%s", leaver, err, out)
	}
	switch err, exited := tc.nodes[leaver].WaitExit(30 * time.Second); {
	case !exited:
		t.Fatalf("%s still running 30s after it left", leaver)
	case err != nil:
		t.Fatalf("%s exited with %v after leaving", leaver, err)
	}
	after, _ = tc.waitView(30*time.Second, "running every partition on two members", func(v clusterView) bool {
		return len(v.Members) == 2 && v.owns(leaver) == 0 && v.allRunning()
	})
	moved = movedPartitions(t, ownerBefore, partitionOwners(after))
	t.Logf("%s left: partition → new owner: %v", leaver, moved)
	rest = slices.DeleteFunc(slices.Clone(tc.ids), func(id string) bool { return id == leaver })
	waitCaughtUpOn(t, tc, rest, time.Minute)
	checkTrendingRestored(t, tc, moved, logFrom, int32(len(after.Partitions)), both)
	compareAnswers(t, "after "+leaver+" left", later, settledAnswers(t, tc, rest, probes))

	// A replay on a fresh node: one process, the embedded log, the same
	// batches in the same order.
	n := runNode(t, t.TempDir(), cms)
	single := &testCluster{t: t, nodes: map[string]*nodeProc{"single": n}, ids: []string{"single"}}
	postRestoreShares(t, n, first)
	n.WaitCaughtUp(time.Minute)
	compareAnswers(t, "on a fresh single node fed the first batch", before, settledAnswers(t, single, single.ids, probes))
	postRestoreShares(t, n, second)
	n.WaitCaughtUp(time.Minute)
	compareAnswers(t, "on a fresh single node fed both batches", later, settledAnswers(t, single, single.ids, probes))
	t.Logf("answers identical after restores on other nodes (%s killed, back; %s left) and on a fresh node (%s)", victim, leaver, time.Since(start).Round(time.Millisecond))
}

// genRestoreShares makes two batches of share events over `articles`
// articles (Zipf), ascending in event time with up to 30 s of jitter:
// the first (n1 events) spread over the last 6 h to 3 m ago, denser with
// time (40% in the hours before the last one, half in the last hour, a
// tenth in its last minutes), the second (n2, and a twentieth of the first
// again: repeats that must not count) over the last 3 m. Every 20th event
// has no category (it counts globally, and waits for its article's topics
// in vain).
func genRestoreShares(n1, n2, articles int, seed uint64) (first, second *shareStream) {
	rng := rand.New(rand.NewPCG(seed, seed^0xc35))
	z := rand.NewZipf(rng, 1.1, 1, uint64(articles-1))
	cats := []string{"world", "business", "tech", "science", "sports"}
	now := time.Now().UnixMilli()
	ago := func(d time.Duration) int64 { return now - d.Milliseconds() }
	// Each segment spreads its share of a batch evenly from one time to
	// another.
	type segment struct {
		frac     float64
		from, to int64
	}
	gen := func(n int, segs []segment, seq int) *shareStream {
		s := &shareStream{counts: map[string]uint64{}}
		for _, sg := range segs {
			m := int(sg.frac * float64(n))
			for i := range m {
				a := z.Uint64()
				id := fmt.Sprintf("cms-%05d", a)
				ts := min(now, sg.from+int64(i)*(sg.to-sg.from)/int64(m)+rng.Int64N(60_000)-30_000)
				cat := `,"category":"` + cats[a%uint64(len(cats))] + `"`
				if seq%20 == 0 {
					cat = ""
				}
				s.counts[id]++
				s.lines = append(s.lines, fmt.Appendf(nil,
					`{"event_id":"cms-%d-%d","article_id":"%s","user_id":"u%d-%d","share_type":"link"%s,"timestamp":%d}`,
					seed, seq, id, rng.IntN(50000), seq, cat, ts))
				seq++
			}
		}
		return s
	}
	first = gen(n1, []segment{
		{0.4, ago(6 * time.Hour), ago(time.Hour)},
		{0.5, ago(time.Hour), ago(5 * time.Minute)},
		{0.1, ago(5 * time.Minute), ago(3 * time.Minute)},
	}, 0)
	second = gen(n2, []segment{{1, ago(3 * time.Minute), now}}, len(first.lines))
	for range len(first.lines) / 20 {
		at := rng.IntN(len(second.lines) + 1)
		second.lines = slices.Insert(second.lines, at, first.lines[rng.IntN(len(first.lines))])
	}
	return first, second
}

// plus is the stream of s's events then o's, with the counts of both
// (o's repeats of s's events aside: they are not in o's counts).
func (s *shareStream) plus(o *shareStream) *shareStream {
	out := &shareStream{lines: slices.Concat(s.lines, o.lines), counts: maps.Clone(s.counts)}
	for id, n := range o.counts {
		out.counts[id] += n
	}
	return out
}

// restoreProbes returns the articles whose shares the test reads: the top
// most shared of s (ties by id), then every step-th article id not among
// them, up to cms-02999 (some never shared: their estimates are sketch
// noise only).
func restoreProbes(s *shareStream, top, step int) []string {
	ids := slices.SortedFunc(maps.Keys(s.counts), func(a, b string) int {
		if s.counts[a] != s.counts[b] {
			if s.counts[a] > s.counts[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	out := slices.Clone(ids[:top])
	for i := 0; i < 3000; i += step {
		if id := fmt.Sprintf("cms-%05d", i); !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// postRestoreShares posts s as one NDJSON batch through n and checks that
// every line was accepted.
func postRestoreShares(t *testing.T, n *nodeProc, s *shareStream) {
	t.Helper()
	body := postShares(t, n, bytes.Join(s.lines, []byte("\n")))
	if want := fmt.Sprintf(`"accepted":%d,"rejected":0`, len(s.lines)); !strings.Contains(body, want) {
		t.Fatalf("post %d shares through %s: %s", len(s.lines), n.Addr, body)
	}
}

// waitCaughtUpOn waits until nodes ids each see every partition running
// and have committed everything in the log.
func waitCaughtUpOn(t *testing.T, tc *testCluster, ids []string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for _, id := range ids {
		testutil.Eventually(t, time.Until(deadline), func() error {
			if v, err := tc.view(id); err != nil || !v.allRunning() {
				return fmt.Errorf("node %s: not every partition running: %+v %v", id, v, err)
			}
			return nil
		})
		tc.nodes[id].WaitCaughtUp(time.Until(deadline))
	}
}

// partitionOwners maps each partition of a view to its owner.
func partitionOwners(v clusterView) map[int32]string {
	out := map[int32]string{}
	for _, p := range v.Partitions {
		out[p.Partition] = p.Owner
	}
	return out
}

// logSizes returns the length of each node's log so far.
func logSizes(tc *testCluster) map[string]int {
	out := map[string]int{}
	for _, id := range tc.ids {
		out[id] = len(tc.nodes[id].LogTail(1 << 30))
	}
	return out
}

// movedPartitions returns the partitions whose owner differs between two
// maps of owners, with their new owner; none is a failure: the test would
// prove nothing.
func movedPartitions(t *testing.T, before, after map[int32]string) map[int32]string {
	t.Helper()
	moved := map[int32]string{}
	for p, owner := range after {
		if before[p] != owner {
			moved[p] = owner
		}
	}
	if len(moved) == 0 {
		t.Fatalf("no partition changed owner: before %v, after %v", before, after)
	}
	return moved
}

// ownedBy returns, sorted, the partitions owners gives to id.
func ownedBy(owners map[int32]string, id string) []int32 {
	var out []int32
	for p, o := range owners {
		if o == id {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// checkTrendingRestored checks that the trending task of each moved
// partition runs on its new owner, which restored it from the changelog
// (its log says so after the offset logFrom[owner]), and has committed
// every share of s in that partition.
func checkTrendingRestored(t *testing.T, tc *testCluster, moved map[int32]string, logFrom map[string]int, partitions int32, s *shareStream) {
	t.Helper()
	for p, owner := range moved {
		log := tc.nodes[owner].LogTail(1 << 30)[logFrom[owner]:]
		re := regexp.MustCompile(fmt.Sprintf(`msg="restored from changelog" stage=trending partition=%d from=\d+ changes=[1-9]`, p))
		if !re.MatchString(log) {
			t.Fatalf("trending partition %d: %s's log does not say it restored it from the changelog:\n%s", p, owner, log[max(0, len(log)-3000):])
		}
	}
	perPartition := map[int32]int64{}
	for _, l := range s.lines {
		perPartition[eventlog.PartitionFor(articleIDOf(l), partitions)]++
	}
	for p, owner := range moved {
		var prog struct {
			Inputs []struct {
				Stage     string `json:"stage"`
				Topic     string `json:"topic"`
				Partition int32  `json:"partition"`
				Committed int64  `json:"committed"`
			} `json:"inputs"`
		}
		if err := getJSON(tc.nodes[owner].URL("/api/v1/admin/progress"), &prog); err != nil {
			t.Fatal(err)
		}
		found := false
		for _, in := range prog.Inputs {
			if in.Stage == "trending" && in.Topic == "shares" && in.Partition == p {
				found = true
				if in.Committed != perPartition[p] {
					t.Fatalf("trending partition %d on %s: committed %d, want the %d shares of the partition", p, owner, in.Committed, perPartition[p])
				}
			}
		}
		if !found {
			t.Fatalf("trending partition %d does not run on its new owner %s: %+v", p, owner, prog.Inputs)
		}
	}
}

// restoreWindows and restoreCategories are the trending answers the test
// reads, with k=100.
var (
	restoreWindows    = []string{"1m", "1h", "24h"}
	restoreCategories = []string{"", "tech", "sports"}
)

// restorePaths returns the paths of the answers the test compares.
func restorePaths(probes []string) []string {
	var out []string
	for _, w := range restoreWindows {
		for _, c := range restoreCategories {
			p := "/api/v1/trending?window=" + w + "&k=100"
			if c != "" {
				p += "&category=" + c
			}
			out = append(out, p)
		}
	}
	for _, id := range probes {
		out = append(out, "/api/v1/articles/"+id+"/shares")
	}
	return out
}

// settledAnswers reads every answer through each of the nodes ids until
// each is complete (no missing partition, no failed node), every node
// gives the same, and a second round a snapshot interval later gives the
// same again (a top-K may be up to 200 ms stale). It returns the answers
// by path, each decoded and encoded again (keys sorted, numbers as
// written), as_of included: it is the newest event time counted, which a
// restore keeps.
func settledAnswers(t *testing.T, tc *testCluster, ids, probes []string) map[string][]byte {
	t.Helper()
	paths := restorePaths(probes)
	read := func() (map[string][]byte, error) {
		out := map[string][]byte{}
		for _, id := range ids {
			for _, p := range paths {
				var v map[string]any
				if err := getJSONNumbers(tc.nodes[id].URL(p), &v); err != nil {
					return nil, fmt.Errorf("through %s: %w", id, err)
				}
				for _, k := range []string{"missing_partitions", "failed_nodes"} {
					if l, ok := v[k].([]any); ok && len(l) > 0 {
						return nil, fmt.Errorf("%s through %s: %s %v", p, id, k, l)
					}
				}
				b, err := json.Marshal(v)
				if err != nil {
					return nil, err
				}
				if prev, ok := out[p]; ok && !bytes.Equal(prev, b) {
					return nil, fmt.Errorf("%s: %s and %s answer differently:\n%s", p, ids[0], id, firstDifference(prev, b))
				}
				out[p] = b
			}
		}
		return out, nil
	}
	var prev, cur map[string][]byte
	testutil.EventuallyEvery(t, 30*time.Second, 250*time.Millisecond, func() error {
		var err error
		prev = cur
		if cur, err = read(); err != nil {
			return fmt.Errorf("answers not settled: %w", err)
		}
		if prev == nil || !maps.EqualFunc(prev, cur, bytes.Equal) {
			return errors.New("answers not settled: two rounds differ")
		}
		return nil
	})
	return cur
}

// getJSONNumbers is getJSON keeping numbers as written.
func getJSONNumbers(url string, v any) error {
	var raw json.RawMessage
	if err := getJSON(url, &raw); err != nil {
		return err
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	return d.Decode(v)
}

// compareAnswers fails unless got holds exactly the answers of want.
func compareAnswers(t *testing.T, what string, want, got map[string][]byte) {
	t.Helper()
	var diffs []string
	for _, p := range slices.Sorted(maps.Keys(want)) {
		if !bytes.Equal(want[p], got[p]) {
			diffs = append(diffs, p+":\n"+firstDifference(want[p], got[p]))
		}
	}
	if len(diffs) > 0 {
		t.Fatalf("%s: %d of %d answers differ; first ones (want, then got):\n%s", what, len(diffs), len(want),
			strings.Join(diffs[:min(3, len(diffs))], "\n"))
	}
	t.Logf("%s: %d answers identical", what, len(want))
}

// firstDifference shows a and b around the first byte where they differ.
func firstDifference(a, b []byte) string {
	i := 0
	for i < min(len(a), len(b)) && a[i] == b[i] {
		i++
	}
	from := max(0, i-150)
	return fmt.Sprintf("  …%s\n  …%s", a[from:min(len(a), i+150)], b[from:min(len(b), i+150)])
}

// cmsItem is an item of a cms node's trending answer: an estimate and
// its error bound.
type cmsItem struct {
	ArticleID string  `json:"article_id"`
	Count     uint64  `json:"count"`
	Bound     *uint64 `json:"error_bound"`
}

// checkCMSAnswers checks that the answers are cms answers worth comparing:
// every window's top holds articles, the global tops of 1h and 24h hold
// 100, every count carries its error bound and is at least the exact
// count (24h: every share in the stream counts) and within the bound of
// it, and some estimates exceed the exact counts.
func checkCMSAnswers(t *testing.T, answers map[string][]byte, exact map[string]uint64, probes []string) {
	t.Helper()
	over := 0
	check := func(what, id string, count uint64, bound *uint64) {
		t.Helper()
		want := exact[id]
		if bound == nil || count < want || count-want > *bound {
			t.Fatalf("%s %s: count %d, bound %v, exact %d", what, id, count, bound, want)
		}
		if count > want {
			over++
		}
	}
	for _, w := range restoreWindows {
		for _, c := range restoreCategories {
			p := "/api/v1/trending?window=" + w + "&k=100"
			if c != "" {
				p += "&category=" + c
			}
			var res struct {
				Items []cmsItem `json:"items"`
			}
			if err := json.Unmarshal(answers[p], &res); err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			if len(res.Items) == 0 || (c == "" && w != "1m" && len(res.Items) != 100) {
				t.Fatalf("%s: %d items", p, len(res.Items))
			}
			for _, it := range res.Items {
				if it.Bound == nil || (w == "24h" && c == "") {
					check(p, it.ArticleID, it.Count, it.Bound)
				}
			}
		}
	}
	for _, id := range probes {
		var sh struct {
			Counts map[string]uint64 `json:"counts"`
			Bounds map[string]uint64 `json:"bounds"`
		}
		if err := json.Unmarshal(answers["/api/v1/articles/"+id+"/shares"], &sh); err != nil {
			t.Fatal(err)
		}
		b, ok := sh.Bounds["24h"]
		if !ok {
			t.Fatalf("%s: no 24h bound in %v", id, sh)
		}
		check("shares 24h", id, sh.Counts["24h"], &b)
	}
	if over == 0 {
		t.Fatal("no estimate exceeds its exact count: the sketch counted exactly, and equal answers would not show deterministic estimates")
	}
	t.Logf("%d answers: every 24h count within its bound of the exact count; %d estimates above it", len(answers), over)
}
