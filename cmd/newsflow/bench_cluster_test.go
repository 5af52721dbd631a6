package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/newsflow/newsflow/cmd/newsflow/nodeproc"
	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/internal/testutil"
	"github.com/newsflow/newsflow/operators/trending"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The cluster benchmarks run real `newsflow run` processes (binPath, built
// by TestMain) as cluster members over a kfake broker hosted by the
// benchmark process. Every process, kfake and the benchmark's producer
// share this machine's cores: on a 2-core machine the figures measure what
// coordination costs, not how far the cluster scales out.

// Sizes of the cluster benchmarks; NEWSFLOW_BENCH_CLUSTER_EVENTS
// (throughput) and NEWSFLOW_BENCH_FAILOVER_KILLS override the defaults.
const (
	benchClusterEvents   = 1_000_000 // shares per BenchmarkClusterThroughput op
	benchClusterArticles = 5_000
	benchFailoverEvents  = 200_000 // shares in the log before the kills
	benchFailoverKills   = 10      // per BenchmarkClusterFailover op: 5 followers, 5 leaders
	// benchShareSpan is the event-time span of one generated stream.
	benchShareSpan = 2 * time.Minute
)

// BenchmarkClusterThroughput measures shares per second through a cluster
// of 1, 2 and 3 `newsflow run` processes (8 partitions, every stage; the
// nodes' default configuration), from the first share produced to every
// node caught up: every input of every task of every node committed up to
// the end of the log, which with round-robin production includes the
// repartition hop between nodes and, per commit, a Kafka transaction to
// each task's changelog.
//
// Before the timer starts, a cluster is formed (bootstrap, joins, every
// partition running) and 1,000,000 shares of 5,000 articles (Zipf 1.1,
// event times over the last 2 minutes) are generated. Timed: a franz-go
// producer in the benchmark process writes them to the shares topic with
// a round-robin partitioner (as Kafka clients that do not key by murmur2
// do, so the repartition stage forwards 7 in 8 shares, often to another
// node), while the benchmark polls every node's /api/v1/admin/progress
// every 25 ms until two polls in a row find all of them caught up (one is
// not enough: a node can be caught up just before another forwards it
// more). After the timer, the trending tasks' committed offsets must add
// up to the end offsets of the shares topic and of its repartition topic,
// and the counts of the 100 most shared articles, asked of the first node,
// must be exact.
//
// All the nodes, kfake and the producer share this machine's cores
// (host-cores): on 2 cores, adding nodes adds processes competing for the
// same CPU and more cross-node traffic, so the figure shows the overhead
// of coordination, not the gain of scaling out. events/s is shares per
// second; produce-s is how long producing them took.
func BenchmarkClusterThroughput(b *testing.B) {
	events := testutil.EnvInt(b, "NEWSFLOW_BENCH_CLUSTER_EVENTS", benchClusterEvents)
	for _, n := range []int{1, 2, 3} {
		b.Run("nodes="+strconv.Itoa(n), func(b *testing.B) {
			bc := startBenchCluster(b, n)
			cl := bc.producer()
			want := map[string]uint64{}
			var took, produceTook time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				stream := benchShares(events, benchClusterArticles, uint64(100*n+i))
				for id, c := range stream.counts {
					want[id] += c
				}
				recs := stream.records()
				b.StartTimer()
				start := time.Now()
				bc.produce(cl, recs)
				produceTook += time.Since(start)
				bc.WaitCaughtUp(5 * time.Minute)
				took += time.Since(start)
				b.StopTimer()
				bc.verifyCommitted()
			}
			bc.verifyTop(bc.nodes[0], want, 100)
			b.ReportMetric(float64(events)*float64(b.N)/took.Seconds(), "events/s")
			b.ReportMetric(produceTook.Seconds()/float64(b.N), "produce-s")
			b.ReportMetric(float64(runtime.NumCPU()), "host-cores")
			b.Logf("the %d node process(es), kfake and the producer share this machine's %d cores: events/s measures coordination overhead, not scale-out",
				n, runtime.NumCPU())
		})
	}
}

// BaselineBinaryEnv names the binary of an older release that
// BenchmarkClusterFailover measures beside this checkout's, in the same
// run.
const baselineBinaryEnv = "NEWSFLOW_BENCH_BASELINE_BINARY"

// BenchmarkClusterFailover measures what clients see when a node of a
// three-node cluster (8 partitions) is SIGKILLed: the time until every
// survivor answers complete results again, and how many reads the
// survivors refused meanwhile.
//
// Setup: 200,000 shares of 5,000 articles produced and every node caught
// up. One op is a round of 10 kills (NEWSFLOW_BENCH_FAILOVER_KILLS) that
// alternate between a follower (the two followers in turn) and the Raft
// leader. For each kill:
//
//   - complete-s is the time from the SIGKILL until, in one round of
//     polls (every 5 ms), every survivor answers both a per-key query,
//     GET /api/v1/articles/{id}/shares for an article whose partition the
//     killed node owned, with its exact 1h and 24h counts, and a fan-out
//     read, GET /api/v1/trending, complete: 200, no missing_partitions, no
//     failed_nodes, no Warning: 199. It spans the failure detection
//     (cluster.down_after, 2 s, and an election when the node led), the
//     reassignment, the new owners' claims and restores, and the routing.
//   - failover-s is the time to the first exact per-key answer through
//     one survivor (the figure this benchmark reported before complete-s).
//   - refused counts the reads that clients asking every survivor every
//     50 ms (per-key queries of every article in turn and trending,
//     alternately) got refused from the kill until a second after
//     complete: a transport error, a status other than 2xx (failed, also
//     counted apart), or a partial answer (missing_partitions,
//     failed_nodes or Warning: 199). reads is how many they sent. rejoin-refused counts the same clients' refused
//     reads while the killed node starts again and gets its partitions
//     back.
//
// The figures are medians (complete-s, failover-s) and totals (refused,
// reads) over the kills of each kind, follower-* and leader-*.
//
// Before and after: with NEWSFLOW_BENCH_BASELINE_BINARY naming another
// release's binary, a second cluster runs it (on its own defaults, see
// nodeproc.Options.Binary), and each kill is made on both clusters in
// turn, the first of each pair alternating; its figures are reported as
// base-*, and base-*-x are baseline over current. Both clusters, kfake and
// the benchmark share this machine's cores (host-cores): the cluster not
// being killed idles, caught up.
func BenchmarkClusterFailover(b *testing.B) {
	kills := testutil.EnvInt(b, "NEWSFLOW_BENCH_FAILOVER_KILLS", benchFailoverKills)
	stream := benchShares(benchFailoverEvents, benchClusterArticles, 7)
	runs := []*failoverRun{{prefix: "", bc: startBenchClusterBin(b, 3, "current", "")}}
	if base := os.Getenv(baselineBinaryEnv); base != "" {
		runs = append(runs, &failoverRun{prefix: "base-", bc: startBenchClusterBin(b, 3, "baseline", base)})
	}
	for _, r := range runs {
		r.bc.produce(r.bc.producer(), stream.records())
		r.bc.WaitCaughtUp(5 * time.Minute)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := 0; k < kills; k++ {
			isLeader := k%2 == 1
			order := slices.Clone(runs)
			if (k/2)%2 == 1 {
				slices.Reverse(order)
			}
			for _, r := range order {
				r.results = append(r.results, r.bc.failover(isLeader, stream.counts, k))
			}
		}
	}
	b.StopTimer()
	for _, r := range runs {
		r.report(b)
	}
	if len(runs) == 2 {
		cur, base := runs[0], runs[1]
		for _, kind := range []string{"follower", "leader"} {
			c, bs := cur.summary(kind), base.summary(kind)
			if c.complete > 0 {
				b.ReportMetric(bs.complete.Seconds()/c.complete.Seconds(), "base-"+kind+"-complete-x")
			}
			if c.refused > 0 {
				b.ReportMetric(float64(bs.refused)/float64(c.refused), "base-"+kind+"-refused-x")
			}
			b.Logf("%s kills: complete after %s (baseline %s), refused %d of %d reads, %d of them failed (baseline %d of %d, %d failed)",
				kind, c.complete.Round(10*time.Millisecond), bs.complete.Round(10*time.Millisecond),
				c.refused, c.reads, c.failed, bs.refused, bs.reads, bs.failed)
		}
	}
	b.ReportMetric(float64(runtime.NumCPU()), "host-cores")
	b.Logf("the node processes and kfake share this machine's %d cores", runtime.NumCPU())
}

// failoverRun is the kills made on one cluster and what each measured.
type failoverRun struct {
	prefix  string // of the metrics' names
	bc      *benchCluster
	results []failoverResult
}

// failoverResult is what one kill measured (see BenchmarkClusterFailover).
type failoverResult struct {
	node          string
	leader        bool
	correct       time.Duration // to the first exact per-key answer
	complete      time.Duration // to every survivor answering complete results
	reads         int
	refused       int // of reads
	failed        int // of refused: no answer or not 2xx (the rest were partial)
	wrong         int // per-key answers of 200 with other counts
	rejoinRefused int
}

// failoverSummary is the figures of one kind of kill.
type failoverSummary struct {
	correct, complete                     time.Duration // medians
	reads, refused, failed, wrong, rejoin int           // totals
}

func (r *failoverRun) summary(kind string) failoverSummary {
	var s failoverSummary
	var correct, complete []time.Duration
	for _, res := range r.results {
		if res.leader != (kind == "leader") {
			continue
		}
		correct = append(correct, res.correct)
		complete = append(complete, res.complete)
		s.reads += res.reads
		s.refused += res.refused
		s.failed += res.failed
		s.wrong += res.wrong
		s.rejoin += res.rejoinRefused
	}
	s.correct, s.complete = benchMedian(correct), benchMedian(complete)
	return s
}

func (r *failoverRun) report(b *testing.B) {
	var times []string
	for _, res := range r.results {
		t := fmt.Sprintf("%s%s complete %s (first correct %s), %d/%d refused (%d failed), %d wrong, %d refused on rejoin",
			res.node, map[bool]string{true: " (leader)"}[res.leader], res.complete.Round(10*time.Millisecond),
			res.correct.Round(10*time.Millisecond), res.refused, res.reads, res.failed, res.wrong, res.rejoinRefused)
		times = append(times, t)
	}
	bin := cmp.Or(r.bc.bin, "this checkout's")
	b.Logf("%s binary (%s), kill by kill: %s", r.bc.name, bin, strings.Join(times, "; "))
	for _, kind := range []string{"follower", "leader"} {
		s := r.summary(kind)
		b.ReportMetric(s.complete.Seconds(), r.prefix+kind+"-complete-s")
		b.ReportMetric(s.correct.Seconds(), r.prefix+kind+"-failover-s")
		b.ReportMetric(float64(s.refused), r.prefix+kind+"-refused")
		b.ReportMetric(float64(s.failed), r.prefix+kind+"-failed")
		b.ReportMetric(float64(s.reads), r.prefix+kind+"-reads")
		b.ReportMetric(float64(s.rejoin), r.prefix+kind+"-rejoin-refused")
		if s.wrong > 0 {
			b.ReportMetric(float64(s.wrong), r.prefix+kind+"-wrong")
		}
	}
}

func benchMedian(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// benchNode is a `newsflow run` process of a benchmark cluster.
type benchNode struct {
	*nodeProc
	id string
}

// benchCluster is a cluster of benchNodes over a kfake broker that the
// benchmark process hosts.
type benchCluster struct {
	b       *testing.B
	name    string // in failures' messages
	bin     string // the nodes' binary; "" for this checkout's
	kafka   *kfake.Cluster
	brokers []string
	nodes   []*benchNode // ids a, b, c, ...

	adminClient *kgo.Client
}

// startBenchCluster starts n nodes (the first bootstraps the cluster, the
// others join it) and waits until every partition runs and every node is
// ready and caught up.
func startBenchCluster(b *testing.B, n int) *benchCluster {
	b.Helper()
	return startBenchClusterBin(b, n, "", "")
}

// startBenchClusterBin is startBenchCluster for nodes running binary bin
// (this checkout's if empty), named name in failures' messages.
func startBenchClusterBin(b *testing.B, n int, name, bin string) *benchCluster {
	b.Helper()
	k, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		b.Fatal(err)
	}
	bc := &benchCluster{b: b, name: name, bin: bin, kafka: k, brokers: k.ListenAddrs()}
	b.Cleanup(k.Close) // after the nodes' own cleanups kill them
	env := []string{"NEWSFLOW_CLUSTER_SECRET=" + testClusterSecret}
	for i := range n {
		id := string(rune('a' + i))
		args := []string{"--brokers", bc.brokers[0], "--node-id", id, "--raft", nodeproc.FreeAddr(b, "")}
		if i == 0 {
			args = append(args, "--bootstrap")
		} else {
			args = append(args, "--join", raftOf(bc.nodes[0].nodeProc))
		}
		bn := &benchNode{nodeProc: nodeproc.Start(b, nodeproc.Options{DataDir: b.TempDir(), Env: env, Args: args, Binary: bin}), id: id}
		bc.nodes = append(bc.nodes, bn)
		if i == 0 {
			bn.WaitReady(time.Minute)
		}
	}
	bc.waitFormed(2 * time.Minute)
	bc.WaitCaughtUp(2 * time.Minute)
	return bc
}

func (bc *benchCluster) fatalf(format string, args ...any) {
	bc.b.Helper()
	var sb strings.Builder
	if bc.name != "" {
		fmt.Fprintf(&sb, "\n(cluster %s)", bc.name)
	}
	for _, n := range bc.nodes {
		fmt.Fprintf(&sb, "\nnode %s log tail:\n%s", n.id, n.LogTail(3000))
	}
	bc.b.Fatalf("%s%s", fmt.Sprintf(format, args...), sb.String())
}

// tb is bc.b failing through bc.fatalf, with the nodes' log tails: for
// testutil.Eventually.
func (bc *benchCluster) tb() testing.TB { return benchClusterTB{bc.b, bc} }

type benchClusterTB struct {
	testing.TB
	bc *benchCluster
}

func (t benchClusterTB) Fatalf(format string, args ...any) {
	t.Helper()
	t.bc.fatalf(format, args...)
}

// waitFormed waits until every node's own view shows all the nodes up,
// each owning partitions, and every partition running.
func (bc *benchCluster) waitFormed(timeout time.Duration) {
	bc.b.Helper()
	deadline := time.Now().Add(timeout)
	for _, n := range bc.nodes {
		testutil.Eventually(bc.tb(), time.Until(deadline), func() error {
			var v clusterView
			if err := getJSON(n.URL("/api/v1/admin/cluster"), &v); err != nil || !bc.formed(v) {
				return fmt.Errorf("cluster not formed (node %s: %+v, %v)", n.id, v, err)
			}
			return nil
		})
	}
}

func (bc *benchCluster) formed(v clusterView) bool {
	if len(v.Members) != len(bc.nodes) || !v.allRunning() {
		return false
	}
	for _, m := range v.Members {
		if !m.Up || m.Partitions == 0 {
			return false
		}
	}
	return true
}

// caughtUp reports whether node n is ready and has committed everything
// in the log.
func (bc *benchCluster) caughtUp(client *http.Client, n *benchNode) bool {
	req, err := http.NewRequest(http.MethodGet, n.URL("/api/v1/admin/progress"), nil)
	if err != nil {
		return false
	}
	req.Header.Set("Authorization", "Bearer "+testAdminToken)
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var p struct {
		CaughtUp bool `json:"caught_up"`
	}
	return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&p) == nil && p.CaughtUp
}

// waitCaughtUp polls every node until two rounds in a row find all of
// them caught up. One round is not enough: node x may be caught up when
// polled, then receive records node y forwards before y is polled and
// found caught up. In the second round every node is polled after every
// other node had committed all of its inputs, forwarding included.
func (bc *benchCluster) WaitCaughtUp(timeout time.Duration) {
	bc.b.Helper()
	client := &http.Client{Timeout: 10 * time.Second}
	// Each poll makes the node ask the broker for the end offset of every
	// input: polling without pause would take CPU from the nodes being
	// measured.
	testutil.EventuallyEvery(bc.tb(), timeout, 25*time.Millisecond, func() error {
		for round := range 2 {
			for _, n := range bc.nodes {
				if !bc.caughtUp(client, n) {
					return fmt.Errorf("cluster not caught up: node %s is not (round %d)", n.id, round+1)
				}
			}
		}
		return nil
	})
}

// verifyCommitted checks that the trending tasks, across the nodes, have
// committed every record of the shares topic and of its repartition
// topic: waitCaughtUp did not return early.
func (bc *benchCluster) verifyCommitted() {
	bc.b.Helper()
	repartition := engine.RepartitionTopic(trending.Name, "shares")
	committed := map[string]int64{}
	for _, n := range bc.nodes {
		var p struct {
			Inputs []struct {
				Stage     string `json:"stage"`
				Topic     string `json:"topic"`
				Committed int64  `json:"committed"`
			} `json:"inputs"`
		}
		if err := getJSON(n.URL("/api/v1/admin/progress"), &p); err != nil {
			bc.fatalf("progress of node %s: %v", n.id, err)
		}
		for _, in := range p.Inputs {
			if in.Stage == trending.Name {
				committed[in.Topic] += in.Committed
			}
		}
	}
	adm := kadm.NewClient(bc.admin())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, "shares", repartition)
	if err != nil {
		bc.b.Fatal(err)
	}
	for _, topic := range []string{"shares", repartition} {
		var end int64
		ends.Each(func(o kadm.ListedOffset) {
			if o.Topic == topic {
				end += o.Offset
			}
		})
		if committed[topic] != end {
			bc.fatalf("trending committed %d records of %s, the topic holds %d", committed[topic], topic, end)
		}
	}
}

// admin returns a plain client of the cluster's broker.
func (bc *benchCluster) admin() *kgo.Client {
	bc.b.Helper()
	if bc.adminClient == nil {
		cl, err := kgo.NewClient(kgo.SeedBrokers(bc.brokers...))
		if err != nil {
			bc.b.Fatal(err)
		}
		bc.b.Cleanup(cl.Close)
		bc.adminClient = cl
	}
	return bc.adminClient
}

// producer returns a client that writes to the shares topic with a
// round-robin partitioner, as TestClusterFailover's does.
func (bc *benchCluster) producer() *kgo.Client {
	bc.b.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bc.brokers...), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(50_000))
	if err != nil {
		bc.b.Fatal(err)
	}
	bc.b.Cleanup(cl.Close)
	// Load the metadata before any timing.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.Ping(ctx); err != nil {
		bc.b.Fatal(err)
	}
	return cl
}

// produce writes recs as fast as the client can and returns once all are
// acknowledged.
func (bc *benchCluster) produce(cl *kgo.Client, recs []*kgo.Record) {
	bc.b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var mu sync.Mutex
	var first error
	for _, r := range recs {
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		bc.b.Fatal(err)
	}
	if first != nil {
		bc.b.Fatalf("produce: %v", first)
	}
}

// benchArticleShares asks node n for an article's counts per window.
func benchArticleShares(client *http.Client, n *benchNode, id string) (map[string]uint64, int, error) {
	var sh struct {
		Counts map[string]uint64 `json:"counts"`
	}
	resp, err := client.Get(n.URL("/api/v1/articles/" + id + "/shares"))
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return nil, resp.StatusCode, err
	}
	if err := json.Unmarshal(body, &sh); err != nil {
		return nil, resp.StatusCode, err
	}
	return sh.Counts, resp.StatusCode, nil
}

// verifyTop checks the 1h and 24h counts of the top articles of want
// through node n.
func (bc *benchCluster) verifyTop(n *benchNode, want map[string]uint64, top int) {
	bc.b.Helper()
	ids := make([]string, 0, len(want))
	for id := range want {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(x, y string) int {
		if want[x] != want[y] {
			return int(want[y]) - int(want[x])
		}
		return strings.Compare(x, y)
	})
	client := &http.Client{Timeout: 10 * time.Second}
	for _, id := range ids[:min(top, len(ids))] {
		got, code, err := benchArticleShares(client, n, id)
		if err != nil || code != http.StatusOK || got["1h"] != want[id] || got["24h"] != want[id] {
			bc.fatalf("article %s through node %s: %v (status %d, %v), want %d in 1h and 24h", id, n.id, got, code, err, want[id])
		}
	}
}

// failover kills a node, the Raft leader if leader is set and otherwise
// one of the followers (the k/2-th, in turn), and measures what the
// survivors answer (see BenchmarkClusterFailover) about an article (the
// k-th in a fixed order) whose partition the killed node owned, the
// fan-out reads and the reads of clients asking every survivor every
// 50 ms. It then starts the node again and waits for the cluster to be
// whole and caught up.
func (bc *benchCluster) failover(leader bool, want map[string]uint64, k int) failoverResult {
	bc.b.Helper()
	var v clusterView
	if err := getJSON(bc.nodes[0].URL("/api/v1/admin/cluster"), &v); err != nil || !bc.formed(v) || v.Leader == "" {
		bc.fatalf("cluster not whole before a kill: %+v, %v", v, err)
	}
	var target *benchNode
	var followers, survivors []*benchNode
	for _, n := range bc.nodes {
		if n.id == v.Leader {
			if leader {
				target = n
			}
		} else {
			followers = append(followers, n)
		}
	}
	if !leader {
		target = followers[(k/2)%len(followers)]
	}
	for _, n := range bc.nodes {
		if n != target {
			survivors = append(survivors, n)
		}
	}
	owner := map[int32]string{}
	for _, p := range v.Partitions {
		owner[p.Partition] = p.Owner
	}
	parts := int32(len(v.Partitions))
	var candidates, all []string
	for id := range want {
		all = append(all, id)
		if owner[eventlog.PartitionFor([]byte(id), parts)] == target.id {
			candidates = append(candidates, id)
		}
	}
	if len(candidates) == 0 {
		bc.fatalf("node %s owns no article's partition: %+v", target.id, v)
	}
	slices.Sort(candidates)
	slices.Sort(all)
	id := candidates[(k*7919)%len(candidates)]
	client := &http.Client{Timeout: 30 * time.Second}
	correct := func(n *benchNode) bool {
		got, code, err := benchArticleShares(client, n, id)
		return err == nil && code == http.StatusOK && got["1h"] == want[id] && got["24h"] == want[id]
	}
	complete := func(n *benchNode) bool {
		return !benchRead(client, n, benchTrendingPath, 0).refused()
	}
	for _, n := range survivors {
		if !correct(n) || !complete(n) {
			bc.fatalf("article %s: node %s answers wrong counts or a partial trending before the kill", id, n.id)
		}
	}

	readers := startFailoverReaders(survivors, all, want)
	start := time.Now()
	target.Kill()
	res := failoverResult{node: target.id, leader: leader}
	// Polled every 5ms: the times are measured to that.
	testutil.EventuallyEvery(bc.tb(), 2*time.Minute, 5*time.Millisecond, func() error {
		whole := true
		for i, n := range survivors {
			ok := correct(n)
			if ok && i == 0 && res.correct == 0 {
				res.correct = time.Since(start)
			}
			if !ok || !complete(n) {
				whole = false
			}
		}
		if !whole {
			return fmt.Errorf("article %s and trending: no complete answers from every survivor since killing node %s", id, target.id)
		}
		return nil
	})
	res.complete = time.Since(start)
	time.Sleep(time.Second) // answers just after complete count too
	restart := time.Now()
	target.Start()
	target.WaitReady(2 * time.Minute)
	bc.waitFormed(2 * time.Minute)
	bc.WaitCaughtUp(2 * time.Minute)
	for _, a := range readers.stop() {
		switch {
		case a.at.Before(start):
		case a.at.Before(restart):
			res.reads++
			if a.refused() {
				res.refused++
				if a.failed() {
					res.failed++
				}
			} else if a.wrong {
				res.wrong++
			}
		case a.refused():
			res.rejoinRefused++
		}
	}
	return res
}

// benchTrendingPath is the fan-out read of the failover benchmark.
const benchTrendingPath = "/api/v1/trending?window=1h&k=10"

// benchAnswer is what a read of a benchmark node answered.
type benchAnswer struct {
	at      time.Time // when it was sent
	err     error
	code    int
	warning string // the Warning header
	partial bool   // missing_partitions, failed_nodes or partial in the body
	wrong   bool   // a per-key answer with other counts than produced
}

// refused reports whether a client would count the answer as a refused
// read: failed, or partial.
func (a benchAnswer) refused() bool {
	return a.failed() || strings.HasPrefix(a.warning, "199") || a.partial
}

// failed reports whether the read got no answer, or not a 2xx.
func (a benchAnswer) failed() bool { return a.err != nil || a.code < 200 || a.code > 299 }

// benchRead GETs path of node n and classifies the answer; want, if the
// path is an article's shares, holds the counts its answer must have.
func benchRead(client *http.Client, n *benchNode, path string, want uint64) benchAnswer {
	a := benchAnswer{at: time.Now()}
	resp, err := client.Get(n.URL(path))
	if err != nil {
		a.err = err
		return a
	}
	defer resp.Body.Close()
	a.code, a.warning = resp.StatusCode, resp.Header.Get("Warning")
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		a.err = err
		return a
	}
	var ans struct {
		Missing []int32           `json:"missing_partitions"`
		Failed  []string          `json:"failed_nodes"`
		Partial bool              `json:"partial"`
		Counts  map[string]uint64 `json:"counts"`
	}
	if err := json.Unmarshal(body, &ans); err != nil {
		a.err = fmt.Errorf("%d %.100s: %w", a.code, body, err)
		return a
	}
	a.partial = len(ans.Missing) > 0 || len(ans.Failed) > 0 || ans.Partial
	if strings.HasSuffix(path, "/shares") && a.code == http.StatusOK {
		a.wrong = ans.Counts["1h"] != want || ans.Counts["24h"] != want
	}
	return a
}

// failoverReaders are clients that read every survivor every 50 ms.
type failoverReaders struct {
	stopc chan struct{}
	wg    sync.WaitGroup
	mu    sync.Mutex
	got   []benchAnswer
}

// startFailoverReaders starts one client per node of nodes that asks it,
// every 50 ms, for the counts of the articles ids in turn (with want's
// counts) and for trending, alternately.
func startFailoverReaders(nodes []*benchNode, ids []string, want map[string]uint64) *failoverReaders {
	r := &failoverReaders{stopc: make(chan struct{})}
	for w, n := range nodes {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			// Longer than cluster.failover_timeout, which a per-key
			// query may wait for its partition's owner.
			client := &http.Client{Timeout: 30 * time.Second}
			for i := w; ; i++ {
				select {
				case <-r.stopc:
					return
				case <-time.After(50 * time.Millisecond):
				}
				path, id := benchTrendingPath, ""
				if i%2 == 1 {
					id = ids[(i*31)%len(ids)]
					path = "/api/v1/articles/" + id + "/shares"
				}
				a := benchRead(client, n, path, want[id])
				r.mu.Lock()
				r.got = append(r.got, a)
				r.mu.Unlock()
			}
		}()
	}
	return r
}

// stop stops the clients and returns their answers.
func (r *failoverReaders) stop() []benchAnswer {
	close(r.stopc)
	r.wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.got
}

// benchShares makes n share events over `articles` articles (Zipf 1.1),
// with event times rising over the benchShareSpan before now plus up to 5 s
// of jitter, and event ids unique to seed.
func benchShares(n, articles int, seed uint64) *shareStream {
	const jitter = 5 * time.Second
	return sharesOver(n, articles, seed, time.Now().Add(-benchShareSpan-jitter), benchShareSpan, jitter)
}

func (s *shareStream) records() []*kgo.Record {
	recs := make([]*kgo.Record, len(s.lines))
	for i, l := range s.lines {
		recs[i] = &kgo.Record{Topic: "shares", Key: s.keys[i], Value: l}
	}
	return recs
}
