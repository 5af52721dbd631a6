package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/newsflow/newsflow/cmd/newsflow/nodeproc"
	"github.com/newsflow/newsflow/internal/testutil"
	"github.com/newsflow/newsflow/query"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// testCluster is three newsflow processes forming a cluster over one kfake
// broker that the test process hosts.
type testCluster struct {
	t       *testing.T
	kafka   *kfake.Cluster
	brokers []string
	nodes   map[string]*nodeProc // by node id: a, b, c
	ids     []string
}

const testClusterSecret = "cluster-test-secret"

func startTestCluster(t *testing.T, extraEnv ...string) *testCluster {
	t.Helper()
	k := newKfake(t)
	tc := &testCluster{t: t, kafka: k, brokers: k.ListenAddrs(), nodes: map[string]*nodeProc{}, ids: []string{"a", "b", "c"}}
	env := append([]string{"NEWSFLOW_CLUSTER_SECRET=" + testClusterSecret}, extraEnv...)
	var first string
	for _, id := range tc.ids {
		args := []string{"--brokers", tc.brokers[0], "--node-id", id, "--raft", nodeproc.FreeAddr(t, ""), "--log-level", "info"}
		if first == "" {
			args = append(args, "--bootstrap")
		} else {
			args = append(args, "--join", first)
		}
		n := startNodeEnv(t, t.TempDir(), env, args...)
		if first == "" {
			first = raftOf(n)
			n.WaitReady(60 * time.Second)
		}
		tc.nodes[id] = n
	}
	tc.waitFormed()
	return tc
}

// raftOf returns a node's Raft address (its --raft), where the other
// members reach it, and which --join takes.
func raftOf(n *nodeProc) string {
	i := slices.Index(n.Args, "--raft")
	if i < 0 || i+1 >= len(n.Args) {
		panic("node started without --raft")
	}
	return n.Args[i+1]
}

// waitFormed waits until all the nodes are members, up, each owning
// partitions, and every partition runs.
func (tc *testCluster) waitFormed() {
	tc.t.Helper()
	tc.waitView(60*time.Second, "formed: every member up, every partition running", func(v clusterView) bool {
		if len(v.Members) != len(tc.ids) {
			return false
		}
		for _, m := range v.Members {
			if !m.Up || m.Partitions == 0 {
				return false
			}
		}
		return v.allRunning()
	})
}

// clusterView is a node's answer to GET /api/v1/admin/cluster.
type clusterView struct{ query.ClusterView }

func (v clusterView) allRunning() bool {
	if len(v.Partitions) == 0 {
		return false
	}
	for _, p := range v.Partitions {
		if !p.Running {
			return false
		}
	}
	return true
}

// down reports whether the view lists member id as down.
func (v clusterView) down(id string) bool {
	return slices.ContainsFunc(v.Members, func(m query.ClusterMember) bool { return m.ID == id && !m.Up })
}

func (v clusterView) owns(id string) int {
	n := 0
	for _, p := range v.Partitions {
		if p.Owner == id {
			n++
		}
	}
	return n
}

// view asks node id for its view of the cluster.
func (tc *testCluster) view(id string) (clusterView, error) {
	var v clusterView
	err := getJSON(tc.nodes[id].URL("/api/v1/admin/cluster"), &v)
	return v, err
}

// waitView polls the running nodes' views until cond holds for one of them.
func (tc *testCluster) waitView(timeout time.Duration, what string, cond func(clusterView) bool) (clusterView, time.Duration) {
	tc.t.Helper()
	var last clusterView
	took := testutil.Eventually(tc.t, timeout, func() error {
		for _, id := range tc.ids {
			if !tc.nodes[id].Running() {
				continue
			}
			if v, err := tc.view(id); err == nil {
				last = v
				if cond(v) {
					return nil
				}
			}
		}
		return fmt.Errorf("cluster: not %s; last view %+v", what, last)
	})
	return last, took
}

// waitCaughtUp waits until every partition runs and every node has
// committed everything in the log.
func (tc *testCluster) WaitCaughtUp(timeout time.Duration) {
	tc.t.Helper()
	deadline := time.Now().Add(timeout)
	for _, id := range tc.ids {
		// Each node's own view: a restarted node replays the Raft log
		// before it knows the owners.
		testutil.Eventually(tc.t, time.Until(deadline), func() error {
			if v, err := tc.view(id); err != nil || len(v.Members) != 3 || !v.allRunning() {
				return fmt.Errorf("node %s: not every partition running: %+v %v", id, v, err)
			}
			return nil
		})
		tc.nodes[id].WaitCaughtUp(time.Until(deadline))
	}
}

// queryLoad sends trending and article-share queries round robin to the
// running nodes until stop is closed, counting answers that are errors
// (no answer or not 200) and answers that are partial.
type queryLoad struct {
	total, partial atomic.Int64
	failures
}

// failures counts failed queries by their status and the start of their
// error.
type failures struct {
	failed  atomic.Int64
	mu      sync.Mutex
	reasons map[string]int
}

func (f *failures) fail(reason string) {
	f.failed.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.reasons == nil {
		f.reasons = map[string]int{}
	}
	f.reasons[reason[:min(len(reason), 80)]]++
}

func (q *queryLoad) run(tc *testCluster, stop <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	client := &http.Client{Timeout: 5 * time.Second}
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		case <-time.After(20 * time.Millisecond):
		}
		n := tc.nodes[tc.ids[i%3]]
		if !n.Running() {
			continue
		}
		path := "/api/v1/trending?window=1h&k=10"
		if i%2 == 1 {
			path = "/api/v1/articles/art-" + fmt.Sprintf("%05d", i%500) + "/shares"
		}
		q.total.Add(1)
		resp, err := client.Get(n.URL(path))
		if err != nil {
			if n.Running() {
				q.fail(err.Error())
			} else {
				q.total.Add(-1) // killed under the request: the client picked a dead node
			}
			continue
		}
		var body [4096]byte
		k, _ := resp.Body.Read(body[:])
		resp.Body.Close()
		switch {
		case resp.StatusCode != 200:
			q.fail(strconv.Itoa(resp.StatusCode) + " " + string(body[:k]))
		case strings.Contains(string(body[:k]), `"missing_partitions":[`) || strings.Contains(string(body[:k]), `"failed_nodes":[`):
			q.partial.Add(1)
		}
	}
}

// produceShares writes lines to the shares topic in chunks with a pause
// after each, spread round robin over the partitions (not by key, so the
// repartition stage does real work); the channel gets the outcome.
func produceShares(t *testing.T, brokers []string, lines [][]byte, chunk int, pause time.Duration) <-chan error {
	t.Helper()
	recs := make([]*kgo.Record, len(lines))
	for i, l := range lines {
		recs[i] = &kgo.Record{Topic: "shares", Key: articleIDOf(l), Value: l}
	}
	return produceChunks(t, brokers, recs, chunk, pause)
}

// produceChunks writes recs round robin over their topic's partitions in
// chunks of chunk with a pause after each, in the background; the channel
// gets the outcome.
func produceChunks(t *testing.T, brokers []string, recs []*kgo.Record, chunk int, pause time.Duration) <-chan error {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(50_000))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		for i := 0; i < len(recs); i += chunk {
			if err := cl.ProduceSync(ctx, recs[i:min(i+chunk, len(recs))]...).FirstErr(); err != nil {
				done <- err
				return
			}
			time.Sleep(pause)
		}
		done <- nil
	}()
	return done
}

func clusterShares() int {
	if v, err := strconv.Atoi(os.Getenv("NEWSFLOW_CLUSTER_SHARES")); err == nil && v > 0 {
		return v
	}
	return 1_000_000
}

// TestClusterFailover: three nodes; shares are produced to Kafka while a
// follower and then the leader are SIGKILLed and restarted. A new leader is
// elected within 5 s, the dead nodes' partitions run elsewhere within 10 s,
// queries keep being answered, and the final counts, asked of any node,
// are exact.
func TestClusterFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test skipped in -short mode")
	}
	tc := startTestCluster(t)
	stream := genShares(clusterShares(), 5000, 47)

	var load queryLoad
	stopLoad := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go load.run(tc, stopLoad, &wg)
	produced := produceShares(t, tc.brokers, stream.lines, 10_000, 100*time.Millisecond)

	v, _ := tc.waitView(10*time.Second, "led", func(v clusterView) bool { return v.Leader != "" })
	leader := v.Leader
	var follower string
	for _, id := range tc.ids {
		if id != leader {
			follower = id
			break
		}
	}

	// A follower dies.
	time.Sleep(2 * time.Second)
	tc.nodes[follower].Kill()
	_, moved := tc.waitView(20*time.Second, "without partitions on the dead follower", func(v clusterView) bool {
		return v.owns(follower) == 0 && v.allRunning()
	})
	t.Logf("follower %s killed: its partitions run elsewhere after %s", follower, moved.Round(time.Millisecond))
	if moved > 10*time.Second {
		t.Errorf("partitions of the dead follower reassigned after %s, want <= 10s", moved)
	}
	tc.nodes[follower].Start()
	tc.waitView(30*time.Second, "rejoined by the follower", func(v clusterView) bool { return v.owns(follower) > 0 && v.allRunning() })

	// The leader dies.
	tc.nodes[leader].Kill()
	killed := time.Now()
	v, elected := tc.waitView(20*time.Second, "led by a new leader", func(v clusterView) bool { return v.Leader != "" && v.Leader != leader })
	t.Logf("leader %s killed: %s leads after %s", leader, v.Leader, elected.Round(time.Millisecond))
	if elected > 5*time.Second {
		t.Errorf("new leader after %s, want <= 5s", elected)
	}
	tc.waitView(20*time.Second, "without partitions on the dead leader", func(v clusterView) bool {
		return v.owns(leader) == 0 && v.allRunning()
	})
	moved = time.Since(killed)
	t.Logf("leader's partitions run elsewhere %s after the kill", moved.Round(time.Millisecond))
	if moved > 10*time.Second {
		t.Errorf("partitions of the dead leader reassigned after %s, want <= 10s", moved)
	}
	tc.nodes[leader].Start()

	if err := <-produced; err != nil {
		t.Fatalf("produce: %v", err)
	}
	tc.WaitCaughtUp(5 * time.Minute)
	close(stopLoad)
	wg.Wait()
	total, failed, partial := load.total.Load(), load.failed.Load(), load.partial.Load()
	t.Logf("queries during the test: %d, failed %d (%.2f%%), partial %d (%.2f%%)", total, failed,
		100*float64(failed)/float64(max(total, 1)), partial, 100*float64(partial)/float64(max(total, 1)))
	load.mu.Lock()
	t.Logf("failures by reason: %v", load.reasons)
	load.mu.Unlock()
	if total == 0 {
		t.Fatal("no queries were sent")
	}
	// Exact counts, through a node other than each article's owner for
	// most articles (requests are routed).
	for _, id := range tc.ids {
		verifyCounts(t, tc.nodes[id], stream.counts)
	}
}

// TestClusterSharedAccounts: an account registered through node a logs in
// through node c, a session made on c is valid on b, and the same name
// cannot be registered twice through different nodes.
func TestClusterSharedAccounts(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test skipped in -short mode")
	}
	tc := startTestCluster(t)
	post := func(id, path, body, bearer string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, tc.nodes[id].URL(path), strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		return sendRequest(t, req)
	}
	const creds = `{"username":"dana","password":"correct horse battery staple"}`
	if code, body := post("a", "/api/v1/auth/register", creds, ""); code != http.StatusCreated {
		t.Fatalf("register through a: %d %s", code, body)
	}
	code, body := post("c", "/api/v1/auth/login", creds, "")
	if code != http.StatusOK {
		t.Fatalf("login through c: %d %s", code, body)
	}
	var login struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal([]byte(body), &login); err != nil || login.Token == "" {
		t.Fatalf("login answer %s: %v", body, err)
	}
	req, _ := http.NewRequest(http.MethodGet, tc.nodes["b"].URL("/api/v1/me"), nil)
	req.Header.Set("Authorization", "Bearer "+login.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	me, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(me), `"dana"`) {
		t.Fatalf("session from c used on b: %d %s", resp.StatusCode, me)
	}
	if code, body := post("b", "/api/v1/auth/register", `{"username":"dana","password":"another long passphrase"}`, ""); code != http.StatusConflict {
		t.Fatalf("second registration of the name through b: %d %s, want 409", code, body)
	}
}

// TestClusterRollingRestart: shares keep arriving while each of the three
// nodes in turn is stopped (SIGTERM) and started again, waiting for every
// partition to run before the next; no event is lost or counted twice.
// Then the same events arrive through two different nodes, and a retry
// with the same Idempotency-Key through a third: they count once.
func TestClusterRollingRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test skipped in -short mode")
	}
	tc := startTestCluster(t)
	stream := genShares(300_000, 3000, 53)
	produced := produceShares(t, tc.brokers, stream.lines, 3_000, 100*time.Millisecond)
	for _, id := range tc.ids {
		stopClean(t, tc.nodes[id])
		tc.nodes[id].Start()
		tc.waitView(60*time.Second, "running every partition with "+id+" back", func(v clusterView) bool {
			return v.owns(id) > 0 && v.allRunning()
		})
	}
	if err := <-produced; err != nil {
		t.Fatalf("produce: %v", err)
	}
	// The same events over HTTP through two different nodes (a client that
	// retried elsewhere), and a batch with an Idempotency-Key sent through
	// a and retried through c: each event counts once.
	twice := genMixedShares(2_000, 200, 10*time.Minute, 0, 54)
	body := bytes.Join(twice.lines, []byte("\n"))
	for _, id := range []string{"a", "b"} {
		postShares(t, tc.nodes[id], body)
	}
	keyed := genMixedShares(1_000, 100, 10*time.Minute, 0, 55)
	first := postShares(t, tc.nodes["a"], bytes.Join(keyed.lines, []byte("\n")), "Idempotency-Key", "rolling-1")
	time.Sleep(200 * time.Millisecond) // a client's retry comes later still
	if again := postShares(t, tc.nodes["c"], bytes.Join(keyed.lines, []byte("\n")), "Idempotency-Key", "rolling-1"); again != first+" (replayed)" {
		t.Fatalf("retry through c: %s, want the first response %s replayed", again, first)
	}
	want := maps.Clone(stream.counts)
	for _, s := range []*shareStream{twice, keyed} {
		for id, n := range s.counts {
			want[id] += n
		}
	}
	tc.WaitCaughtUp(5 * time.Minute)
	for _, id := range tc.ids {
		verifyCounts(t, tc.nodes[id], want)
	}
}

// postShares posts an NDJSON batch of shares to a node, expecting 202, and
// returns the response body, marked " (replayed)" when the node replayed a
// stored response.
func postShares(t *testing.T, n *nodeProc, body []byte, hdr ...string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, n.URL("/api/v1/events/share/batch"), bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("post shares to %s: %d %s", n.Addr, resp.StatusCode, b)
	}
	if resp.Header.Get("Idempotent-Replayed") == "true" {
		return string(b) + " (replayed)"
	}
	return string(b)
}

// runCLI runs a newsflow command against a node and returns its output.
func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, binPath, args...).CombinedOutput()
	return string(out), err
}

// TestClusterStatusAndLeave: `newsflow status` shows every member and
// partition; `newsflow leave` makes node c hand its partitions to a and b
// and stop, losing no event; started again as it was, c refuses to come
// back as a member nobody has, and with --join it joins again and takes
// partitions.
//
// It is one scenario checked step by step (cyclomatic 27): the steps
// depend on each other's state, so they stay in order in one function.
func TestClusterStatusAndLeave(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test skipped in -short mode")
	}
	tc := startTestCluster(t)
	stream := genShares(100_000, 2000, 61)
	half := len(stream.lines) / 2
	produced := produceShares(t, tc.brokers, stream.lines[:half], 5_000, 50*time.Millisecond)
	admin := func(id string) []string {
		return []string{"--addr", "http://" + tc.nodes[id].Addr, "--token", testAdminToken}
	}

	out, err := runCLI(t, append([]string{"status"}, admin("b")...)...)
	if err != nil {
		t.Fatalf("status: %v\n%s", err, out)
	}
	owned := regexp.MustCompile(`(?m)^(\d+)\s+([abc])\s+\d+\s+true\s`).FindAllStringSubmatch(out, -1)
	if len(owned) != 8 || !regexp.MustCompile(`(?m)^node b, leader [abc]$`).MatchString(out) ||
		len(regexp.MustCompile(`(?m)^[abc]\s+\S+\s+up`).FindAllString(out, -1)) != 3 {
		t.Fatalf("status through b: want node b, a leader, three members up and 8 running partitions:\n%s", out)
	}
	out, err = runCLI(t, append([]string{"status", "--json"}, admin("a")...)...)
	var v clusterView
	if err != nil || json.Unmarshal([]byte(out), &v) != nil || len(v.Members) != 3 || len(v.Partitions) != 8 {
		t.Fatalf("status --json: %v %+v\n%s", err, v, out)
	}

	out, err = runCLI(t, append([]string{"leave"}, admin("c")...)...)
	if err != nil || !strings.Contains(out, `"left":"c"`) {
		t.Fatalf("leave: %v\n%s", err, out)
	}
	c := tc.nodes["c"]
	switch err, exited := c.WaitExit(30 * time.Second); {
	case !exited:
		t.Fatal("c still running 30s after it left")
	case err != nil:
		t.Fatalf("c exited with %v after leaving", err)
	}
	_, moved := tc.waitView(20*time.Second, "with two members running every partition", func(v clusterView) bool {
		return len(v.Members) == 2 && v.owns("c") == 0 && v.allRunning()
	})
	t.Logf("c left; a and b run every partition %s after it stopped", moved.Round(time.Millisecond))
	out, err = runCLI(t, append([]string{"status"}, admin("a")...)...)
	if err != nil || regexp.MustCompile(`(?m)^c\s`).MatchString(out) {
		t.Fatalf("status after c left: %v\n%s", err, out)
	}

	// Started again as before but without --join, c refuses.
	joinArgs := c.Args
	i := slices.Index(c.Args, "--join")
	c.Args = slices.Delete(slices.Clone(c.Args), i, i+2)
	c.Start()
	err, exited := c.WaitExit(30 * time.Second)
	if !exited {
		t.Fatal("c started without --join after leaving and kept running")
	}
	if b, _ := os.ReadFile(c.LogPath); err == nil || !strings.Contains(string(b), "left its cluster") || !strings.Contains(string(b), "--join") {
		t.Fatalf("c started without --join after leaving: %v\n%s", err, b)
	}
	c.Args = joinArgs
	c.Start()
	_, back := tc.waitView(60*time.Second, "with c back, running partitions", func(v clusterView) bool {
		return len(v.Members) == 3 && v.owns("c") > 0 && v.allRunning()
	})
	t.Logf("c joined again and runs partitions %s after its start", back.Round(time.Millisecond))

	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	if err := <-produceShares(t, tc.brokers, stream.lines[half:], 5_000, 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	tc.WaitCaughtUp(3 * time.Minute)
	for _, id := range tc.ids {
		verifyCounts(t, tc.nodes[id], stream.counts)
	}
}
