package query_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/newsflow/newsflow/cluster"
	"github.com/newsflow/newsflow/internal/testutil"
	"github.com/newsflow/newsflow/operators/trending"
	"github.com/newsflow/newsflow/query"
	"github.com/valyala/fasthttp"
)

// setOwner changes the owner of partition p in the cluster's state, as an
// applied Raft command would, and tells every node.
func (c *clusterNet) setOwner(p int32, o cluster.Owner) {
	c.mu.Lock()
	defer c.mu.Unlock()
	owners := slices.Clone(c.state.Owners)
	owners[p] = o
	c.state.Owners = owners
	close(c.changed)
	c.changed = make(chan struct{})
}

// without returns parts less partition p.
func without(parts map[int32]uint64, p int32) map[int32]uint64 {
	out := maps.Clone(parts)
	delete(out, p)
	return out
}

// waitStopped waits until no task of partition p runs on n.
func waitStopped(t *testing.T, n *testNode, p int32) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, func() error {
		if stopped, _ := n.eng.Stopped(p); !stopped {
			return fmt.Errorf("partition %d still runs", p)
		}
		return nil
	})
}

// trendingOf asks n for the cluster's trending top.
func trendingOf(t *testing.T, n *testNode) (items []trending.Item, missing []int32, took time.Duration) {
	t.Helper()
	start := time.Now()
	r := n.get(t, trendingURI("24h", "", 100))
	took = time.Since(start)
	if r.status != fasthttp.StatusOK {
		t.Fatalf("trending: %s", r)
	}
	var got struct {
		Items   []trending.Item `json:"items"`
		Missing []int32         `json:"missing_partitions"`
	}
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatal(err)
	}
	return got.Items, got.Missing, took
}

// TestClusterQueriesWaitForMovingPartitions: while the balance hands a
// partition from one node to another (its old owner has stopped it, the
// new one has not started it), trending and search through any node wait
// for it and answer complete, as after the move; a partition that no node
// runs and whose owner does not change is waited for within the peer
// timeout only, and then answered as partial.
func TestClusterQueriesWaitForMovingPartitions(t *testing.T) {
	const peerTimeout = 1500 * time.Millisecond
	c := newClusterNet(t, map[string][]int32{"a": {0, 1}, "b": {2, 3}}, withQuery(query.Options{PeerTimeout: peerTimeout}))
	a, b := c.node("a"), c.node("b")
	var ref refShares
	if r := a.post(t, pathBatch, ref.add(rand.New(rand.NewPCG(5, 6)), c.clock, 400, 40, []string{""})); r.status != fasthttp.StatusAccepted {
		t.Fatalf("post shares: %s", r)
	}
	want := ref.top("24h", "", 100, nil)
	ingestFixture(t, a, articleFixture)
	hits := func() int { return len(searchPageOf(t, a, "limit=100").Hits) }
	testutil.Eventually(t, 10*time.Second, func() error {
		if got, missing, _ := trendingOf(t, a); !slices.Equal(got, want) || len(missing) > 0 {
			return fmt.Errorf("trending %v missing %v, want %v", got, missing, want)
		}
		return nil
	})
	allHits := hits()
	if allHits != len(articleFixture) {
		t.Fatalf("%d of %d articles found", allHits, len(articleFixture))
	}

	// Partition 2 is handed from b to a: b stops it; a takes it 600ms
	// later.
	const moved = 2
	c.setOwner(moved, cluster.Owner{Node: "b", Epoch: 1, Next: "a"})
	b.eng.Assign(without(b.eng.Assigned(), moved))
	waitStopped(t, b, moved)
	go func() {
		time.Sleep(600 * time.Millisecond)
		c.setOwner(moved, cluster.Owner{Node: "a", Epoch: 2})
		parts := a.eng.Assigned()
		parts[moved] = 2
		a.eng.Assign(parts)
	}()
	got, missing, took := trendingOf(t, b)
	if !slices.Equal(got, want) || len(missing) > 0 {
		t.Fatalf("trending while partition %d moves (%s): missing %v, %d items, want %d", moved, took, missing, len(got), len(want))
	}
	if p := searchPageOf(t, a, "limit=100"); p.Partial {
		t.Fatalf("search after the move: partial, missing %v, %d of %d hits", p.Missing, len(p.Hits), allHits)
	}
	// The new owner rebuilds the moved partition's index from the log
	// (search keeps local state): its hits come back as it catches up.
	testutil.Eventually(t, 10*time.Second, func() error {
		if p := searchPageOf(t, a, "limit=100"); p.Partial || len(p.Hits) != allHits {
			return fmt.Errorf("search after the move: partial %v, missing %v, %d of %d hits", p.Partial, p.Missing, len(p.Hits), allHits)
		}
		return nil
	})
	t.Logf("trending through b during the handoff: complete after %s", took.Round(time.Millisecond))

	// Partition 3 stops on b and its owner stays b: the answer waits the
	// peer timeout at most, and says it is partial.
	const stopped = 3
	b.eng.Assign(without(b.eng.Assigned(), stopped))
	waitStopped(t, b, stopped)
	_, missing, took = trendingOf(t, a)
	if !slices.Equal(missing, []int32{stopped}) {
		t.Fatalf("trending without partition %d: missing %v", stopped, missing)
	}
	if took > peerTimeout+time.Second {
		t.Fatalf("trending without partition %d took %s, more than the peer timeout %s and a second", stopped, took, peerTimeout)
	}
	if p := searchPageOf(t, a, "limit=100"); !p.Partial || !slices.Equal(p.Missing, []int32{stopped}) {
		t.Fatalf("search without partition %d: partial %v, missing %v", stopped, p.Partial, p.Missing)
	}
}
