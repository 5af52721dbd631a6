package engine_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/engine/eventlog/kafkalog"
	"github.com/newsflow/newsflow/internal/testutil"
	"github.com/newsflow/newsflow/state"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"
)

// clusterNode is one engine of a cluster test: its own Kafka client and
// state store.
type clusterNode struct {
	t      *testing.T
	log    *kafkalog.Log
	db     *state.DB
	e      *engine.Engine
	reg    *prometheus.Registry
	cancel context.CancelFunc
	done   chan error
}

// newClusterTest starts a kfake broker and returns it, its address, a data
// directory and a counting operator over the routed topic "in".
func newClusterTest(t *testing.T) (*kfake.Cluster, []string, string, *countOp) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, c.ListenAddrs(), t.TempDir(), &countOp{name: "count", topic: "in", route: true}
}

func startClusterNode(t *testing.T, brokers []string, dir string, op engine.Operator, parts int32) *clusterNode {
	t.Helper()
	l, err := kafkalog.Open(context.Background(), kafkalog.Options{Brokers: brokers})
	if err != nil {
		t.Fatal(err)
	}
	db, err := state.Open(dir, state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	e, err := engine.New(l, db, engine.Options{Partitions: parts, Cluster: true, RestartBackoff: 5 * time.Millisecond, MaxRestartBackoff: 50 * time.Millisecond,
		CommitInterval: 20 * time.Millisecond, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Register(op); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &clusterNode{t: t, log: l, db: db, e: e, reg: reg, cancel: cancel, done: make(chan error, 1)}
	go func() { n.done <- e.Run(ctx) }()
	return n
}

func (n *clusterNode) stop() {
	n.cancel()
	if err := <-n.done; err != nil {
		n.t.Errorf("engine: %v", err)
	}
	n.db.Close()
	n.log.Close()
}

// waitCaughtUp waits until the node's running tasks have committed all of
// their inputs.
func (n *clusterNode) waitCaughtUp() {
	n.t.Helper()
	testutil.Eventually(n.t, 30*time.Second, func() error {
		if ok, err := n.e.CaughtUp(context.Background()); err != nil || !ok {
			return fmt.Errorf("not caught up (%v): %+v", err, n.e.Progress())
		}
		return nil
	})
}

// counts reads the countOp keys of the given partitions from the node's
// local store.
func (n *clusterNode) counts(op string, parts ...int32) map[string]int64 {
	n.t.Helper()
	out := map[string]int64{}
	for _, p := range parts {
		ns := n.db.Namespace(fmt.Sprintf("task/%s/%d", op, p))
		if err := ns.Scan([]byte("c/"), []byte("c0"), func(k, v []byte) error {
			out[string(k[2:])] += int64(binary.BigEndian.Uint64(v))
			return nil
		}); err != nil {
			n.t.Fatal(err)
		}
	}
	return out
}

func produceKafka(t *testing.T, l eventlog.Log, topic string, from, n int, want map[string]int64) {
	t.Helper()
	var batch []*eventlog.Record
	for i := from; i < from+n; i++ {
		key := fmt.Sprintf("k%d", (i*7919)%211)
		want[key]++
		// Round robin, not murmur2: the repartition stage must co-locate.
		batch = append(batch, &eventlog.Record{Topic: topic, Partition: int32(i % 4), Key: []byte(key), Value: []byte("v"), Timestamp: int64(i)})
	}
	if err := l.Append(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
}

// truncate deletes every record of the input and repartition topics, so
// that only the changelogs can bring a partition's state to a new owner.
func truncate(t *testing.T, c *kfake.Cluster, l eventlog.Log) {
	t.Helper()
	for _, topic := range []string{"in", engine.RepartitionTopic("count", "in")} {
		for p := int32(0); p < 4; p++ {
			o, err := l.Offsets(context.Background(), eventlog.TopicPartition{Topic: topic, Partition: p})
			if err != nil {
				t.Fatal(err)
			}
			if err := c.DeleteRecords(topic, p, o.End); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func merge(ms ...map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for _, m := range ms {
		for k, v := range m {
			out[k] += v
		}
	}
	return out
}

// Partitions move between nodes and back; each node restores a partition's
// state from the changelog (in full, or from its stale local copy) and
// every record is counted exactly once.
func TestClusterPartitionsMoveWithTheirState(t *testing.T) {
	c, brokers, dir, op := newClusterTest(t)
	a := startClusterNode(t, brokers, dir+"/a", op, 4)
	want := map[string]int64{}
	if _, err := eventlog.EnsureTopic(context.Background(), a.log, "in", 4); err != nil {
		t.Fatal(err)
	}
	a.e.Assign(map[int32]uint64{0: 1, 1: 1, 2: 1, 3: 1})
	produceKafka(t, a.log, "in", 0, 3000, want)
	a.waitCaughtUp()
	equalCounts(t, a.counts("count", 0, 1, 2, 3), want)
	truncate(t, c, a.log)

	// Partitions 2 and 3 move to b, which has no local state: it restores
	// them from the changelog in full (the input is gone).
	b := startClusterNode(t, brokers, dir+"/b", op, 4)
	a.e.Assign(map[int32]uint64{0: 1, 1: 1})
	b.e.Assign(map[int32]uint64{2: 2, 3: 2})
	produceKafka(t, a.log, "in", 3000, 3000, want)
	a.waitCaughtUp()
	b.waitCaughtUp()
	equalCounts(t, merge(a.counts("count", 0, 1), b.counts("count", 2, 3)), want)
	truncate(t, c, a.log)

	// They move back: a brings its stale local copy up to date from the
	// changelog.
	b.e.Assign(nil)
	a.e.Assign(map[int32]uint64{0: 1, 1: 1, 2: 3, 3: 3})
	produceKafka(t, a.log, "in", 6000, 3000, want)
	a.waitCaughtUp()
	equalCounts(t, a.counts("count", 0, 1, 2, 3), want)
	b.stop()

	// A node that restarts brings its partitions back from its own store.
	a.stop()
	a = startClusterNode(t, brokers, dir+"/a", op, 4)
	defer a.stop()
	a.e.Assign(map[int32]uint64{0: 1, 1: 1, 2: 3, 3: 3})
	produceKafka(t, a.log, "in", 9000, 1000, want)
	a.waitCaughtUp()
	equalCounts(t, a.counts("count", 0, 1, 2, 3), want)
}

// A stale node that still believes it owns partitions runs them alongside
// their new owner: the two keep claiming the changelogs from each other,
// but every commit of a fenced claim fails, so after the stale node stops
// the owner's state counts every record exactly once.
func TestClusterStaleOwnerCannotDoubleCount(t *testing.T) {
	_, brokers, dir, op := newClusterTest(t)
	a := startClusterNode(t, brokers, dir+"/a", op, 4)
	defer a.stop()
	stale := startClusterNode(t, brokers, dir+"/stale", op, 4)
	if _, err := eventlog.EnsureTopic(context.Background(), a.log, "in", 4); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{}
	all := map[int32]uint64{0: 1, 1: 1, 2: 1, 3: 1}
	stale.e.Assign(all)
	produceKafka(t, a.log, "in", 0, 2000, want)
	stale.waitCaughtUp()
	a.e.Assign(map[int32]uint64{0: 2, 1: 2, 2: 2, 3: 2})
	for i := 0; i < 10; i++ {
		produceKafka(t, a.log, "in", 2000+i*500, 500, want)
		time.Sleep(30 * time.Millisecond)
	}
	stale.stop()
	a.waitCaughtUp()
	equalCounts(t, a.counts("count", 0, 1, 2, 3), want)
}

// Stopped says a revoked partition's tasks have returned: not while the
// partition is assigned, nor before the engine has stopped what ran of it;
// then its channel closes, the partition reads stopped, and the new owner
// claims its changelog without fencing a task that still runs (no task
// restarts on either node).
func TestClusterStoppedAfterRevoke(t *testing.T) {
	_, brokers, dir, op := newClusterTest(t)
	a := startClusterNode(t, brokers, dir+"/a", op, 4)
	defer a.stop()
	if _, err := eventlog.EnsureTopic(context.Background(), a.log, "in", 4); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{}
	a.e.Assign(map[int32]uint64{0: 1, 1: 1})
	produceKafka(t, a.log, "in", 0, 2000, want)
	a.waitCaughtUp()
	for _, p := range []int32{0, 1} {
		if stopped, _ := a.e.Stopped(p); stopped {
			t.Fatalf("partition %d assigned and running, yet stopped", p)
		}
	}
	if stopped, _ := a.e.Stopped(2); !stopped {
		t.Fatal("partition 2, never assigned, not stopped")
	}
	a.e.Assign(map[int32]uint64{1: 1})
	testutil.Eventually(t, 10*time.Second, func() error {
		stopped, changed := a.e.Stopped(0)
		if stopped {
			return nil
		}
		select {
		case <-changed:
		case <-time.After(time.Second):
		}
		return fmt.Errorf("partition 0 revoked but not stopped")
	})
	for _, in := range a.e.Progress() {
		if in.Partition%4 == 0 {
			t.Fatalf("partition 0 stopped, yet its task reports progress: %+v", in)
		}
	}
	if stopped, _ := a.e.Stopped(1); stopped {
		t.Fatal("partition 1, still assigned, stopped")
	}
	// The next owner claims it while producers go on: nothing is fenced.
	b := startClusterNode(t, brokers, dir+"/b", op, 4)
	defer b.stop()
	b.e.Assign(map[int32]uint64{0: 2})
	for i := range 5 {
		produceKafka(t, a.log, "in", 2000+i*400, 400, want)
		time.Sleep(20 * time.Millisecond)
	}
	a.waitCaughtUp()
	b.waitCaughtUp()
	for name, n := range map[string]*clusterNode{"a": a, "b": b} {
		if r := taskRestarts(t, n.reg); r != 0 {
			t.Errorf("node %s restarted %v tasks", name, r)
		}
	}
	// A partition given again is not stopped.
	a.e.Assign(map[int32]uint64{1: 1, 3: 4})
	if stopped, _ := a.e.Stopped(3); stopped {
		t.Fatal("partition 3 just assigned, stopped")
	}
}

// taskRestarts sums newsflow_task_restarts_total over the stages.
func taskRestarts(t *testing.T, g prometheus.Gatherer) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == "newsflow_task_restarts_total" {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}
