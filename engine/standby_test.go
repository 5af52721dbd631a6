package engine_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/internal/testutil"
	"github.com/newsflow/newsflow/state"
)

// standbyOp is the counting operator with standby copies; as a Follower
// it keeps, per partition, the counts its copy holds, the way a query
// view would.
type standbyOp struct {
	countOp
	mu     sync.Mutex
	seen   map[int32]map[string]int64
	loads  int // Follow calls without changes
	follow int // Follow calls with changes
}

func (o *standbyOp) Spec() engine.Spec {
	s := o.countOp.Spec()
	s.Standby = true
	return s
}

func (o *standbyOp) Follow(p int32, r state.Reader, changes []eventlog.Change) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.seen == nil {
		o.seen = map[int32]map[string]int64{}
	}
	if changes == nil {
		o.loads++
		m := map[string]int64{}
		err := r.Scan([]byte("c/"), []byte("c0"), func(k, v []byte) error {
			m[string(k[2:])] = int64(binary.BigEndian.Uint64(v))
			return nil
		})
		o.seen[p] = m
		return err
	}
	o.follow++
	for _, ch := range changes {
		if len(ch.Key) > 2 && string(ch.Key[:2]) == "c/" && !ch.Delete {
			o.seen[p][string(ch.Key[2:])] = int64(binary.BigEndian.Uint64(ch.Value))
		}
	}
	return nil
}

func (o *standbyOp) counts(parts ...int32) map[string]int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := map[string]int64{}
	for _, p := range parts {
		for k, v := range o.seen[p] {
			out[k] += v
		}
	}
	return out
}

// TestStandbyCopies: a node that runs no partition of a Standby stage
// keeps a copy of every partition's state, current within a commit, which
// its Follower reads; when partitions move to it, its restore reads only
// the changelog's tail (no change at all when its copy was current), while
// a node without a copy reads the whole state; and every record still
// counts exactly once.
func TestStandbyCopies(t *testing.T) {
	_, brokers, dir, _ := newClusterTest(t)
	opA := &standbyOp{countOp: countOp{name: "count", topic: "in", route: true}}
	opB := &standbyOp{countOp: countOp{name: "count", topic: "in", route: true}}
	a := startClusterNode(t, brokers, dir+"/a", opA, 4)
	defer a.stop()
	b := startClusterNode(t, brokers, dir+"/b", opB, 4)
	defer b.stop()
	if _, err := eventlog.EnsureTopic(context.Background(), a.log, "in", 4); err != nil {
		t.Fatal(err)
	}
	all := []int32{0, 1, 2, 3}
	want := map[string]int64{}
	a.e.Assign(map[int32]uint64{0: 1, 1: 1, 2: 1, 3: 1})
	b.e.Assign(nil)
	for i := range 5 {
		produceKafka(t, a.log, "in", i*1000, 1000, want)
		time.Sleep(20 * time.Millisecond)
	}
	a.waitCaughtUp()
	equalCounts(t, a.counts("count", all...), want)

	// b's copies and its Follower reach a's state; b says how current.
	testutil.Eventually(t, 20*time.Second, func() error {
		if got := opB.counts(all...); !maps.Equal(got, want) {
			return fmt.Errorf("b's follower has %d keys, %d counted; want %d, %d", len(got), sum(got), len(want), sum(want))
		}
		for _, p := range all {
			f, ok := b.e.Freshness("count", p)
			if !ok || f.Source != "standby" || f.Staleness != 0 {
				return fmt.Errorf("b's freshness of partition %d: %+v %v, want a current standby copy", p, f, ok)
			}
		}
		return nil
	})
	equalCounts(t, b.counts("count", all...), want)
	if f, ok := a.e.Freshness("count", 0); !ok || f.Source != "task" || f.Staleness != 0 {
		t.Errorf("a's freshness of partition 0: %+v %v, want its current task", f, ok)
	}
	if !b.e.Ready() {
		t.Error("b not ready with caught-up copies")
	}

	// a's tasks stop; input arrives meanwhile: b's copies say they are
	// behind, and by how much.
	a.e.Assign(nil)
	stopped := time.Now()
	produceKafka(t, a.log, "in", 5000, 1000, want)
	testutil.Eventually(t, 10*time.Second, func() error {
		f, ok := b.e.Freshness("count", 2)
		if !ok || f.Staleness == 0 {
			return fmt.Errorf("b's freshness of partition 2 while no node runs it: %+v %v, want stale", f, ok)
		}
		if f.Staleness < time.Since(stopped)-time.Second {
			return fmt.Errorf("staleness %v, but the last commit was over %v ago", f.Staleness, time.Since(stopped))
		}
		return nil
	})

	// Partitions 2 and 3 move to b: a claim and the tail (nothing: its
	// copies were current). They move with their state: counts are exact.
	before := testutil.Counter(t, b.reg, "newsflow_changelog_restore_changes_total", "stage", "count")
	b.e.Assign(map[int32]uint64{2: 2, 3: 2})
	a.e.Assign(map[int32]uint64{0: 2, 1: 2})
	a.waitCaughtUp()
	b.waitCaughtUp()
	if got := testutil.Counter(t, b.reg, "newsflow_changelog_restore_changes_total", "stage", "count") - before; got != 0 {
		t.Errorf("b read %v changes claiming partitions it kept current copies of, want 0", got)
	}
	equalCounts(t, merge(a.counts("count", 0, 1), b.counts("count", 2, 3)), want)
	// a now keeps copies of 2 and 3 and b of 0 and 1.
	testutil.Eventually(t, 20*time.Second, func() error {
		if got := merge(opA.counts(2, 3), opA.counts(0, 1)); !maps.Equal(opB.counts(0, 1), a.counts("count", 0, 1)) || !maps.Equal(opA.counts(2, 3), b.counts("count", 2, 3)) {
			return fmt.Errorf("copies behind the owners (a follows %d keys)", len(got))
		}
		return nil
	})

	// A node without copies restores everything.
	c := startClusterNode(t, brokers, dir+"/c", &countOp{name: "count", topic: "in", route: true}, 4)
	defer c.stop()
	b.e.Assign(map[int32]uint64{2: 2})
	c.e.Assign(map[int32]uint64{3: 3})
	c.waitCaughtUp()
	if got := testutil.Counter(t, c.reg, "newsflow_changelog_restore_changes_total", "stage", "count"); got < float64(len(b.counts("count", 3))) {
		t.Errorf("c restored %v changes without a copy, want at least the %d keys of the partition", got, len(b.counts("count", 3)))
	}
	produceKafka(t, a.log, "in", 6000, 1000, want)
	a.waitCaughtUp()
	b.waitCaughtUp()
	c.waitCaughtUp()
	equalCounts(t, merge(a.counts("count", 0, 1), b.counts("count", 2), c.counts("count", 3)), want)
}

func sum(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}
