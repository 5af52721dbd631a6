package query_test

import (
	"context"
	"errors"
	"maps"
	"net"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/newsflow/newsflow/cluster"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/query"
	"github.com/newsflow/newsflow/state"
	"github.com/twmb/franz-go/pkg/kfake"
)

// clusterNet is a cluster in one process: whole nodes (newTestNode with
// the article pipeline) whose logs are one kfake broker and whose engines
// run in cluster mode; their servers listen on loopback ports and call
// each other. The Raft control plane is faked: every node reads one fixed
// cluster.State (a dead node is still up and owns its partitions in it:
// the leader has not noticed yet), and one metadata store stands in for
// the replicated metadata, so accounts and sessions are valid on every
// node.
type clusterNet struct {
	t     *testing.T
	clock *testClock
	meta  *state.DB
	nodes map[string]*testNode

	mu      sync.Mutex
	state   cluster.State
	changed chan struct{}
}

// clusterPartitions is the partition count of a clusterNet.
const clusterPartitions = 4

// newClusterNet starts one node per entry of owners, which lists the
// partitions each node owns (every partition must have one owner), and
// waits until every node is ready. Nodes are stopped in t.Cleanup.
func newClusterNet(t *testing.T, owners map[string][]int32, opts ...func(*nodeOptions)) *clusterNet {
	t.Helper()
	k, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	c := &clusterNet{t: t, clock: newTestClock(), nodes: map[string]*testNode{}, changed: make(chan struct{})}
	if c.meta, err = state.Open(filepath.Join(t.TempDir(), "meta"), state.Options{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.meta.Close() })
	c.state = cluster.State{Partitions: clusterPartitions, Members: map[string]cluster.Member{}, Owners: make([]cluster.Owner, clusterPartitions)}
	listeners := map[string]net.Listener{}
	for _, id := range slices.Sorted(maps.Keys(owners)) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		listeners[id] = ln
		c.state.Members[id] = cluster.Member{ID: id, HTTPAddr: ln.Addr().String(), Up: true}
		for _, p := range owners[id] {
			c.state.Owners[p] = cluster.Owner{Node: id, Epoch: 1}
		}
	}
	for p, o := range c.state.Owners {
		if o.Node == "" {
			t.Fatalf("partition %d has no owner", p)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(owners)) {
		no := append([]func(*nodeOptions){withArticles(), withClock(c.clock), func(o *nodeOptions) {
			o.partitions, o.brokers, o.assign, o.meta, o.listener = clusterPartitions, k.ListenAddrs(), c.state.OwnedBy(id), c.meta, listeners[id]
			o.cluster = member{c, id}
		}}, opts...)
		c.nodes[id] = newTestNode(t, no...)
	}
	return c
}

// node returns a node by id.
func (c *clusterNet) node(id string) *testNode {
	n, ok := c.nodes[id]
	if !ok {
		c.t.Fatalf("no node %q", id)
	}
	return n
}

// ownerOf returns the id of the node that owns key's partition.
func (c *clusterNet) ownerOf(key string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state.Owners[eventlog.PartitionFor([]byte(key), clusterPartitions)].Node
}

// member is one node's view of a clusterNet.
type member struct {
	c  *clusterNet
	id string
}

func (m member) ID() string     { return m.id }
func (m member) Leader() string { return "a" }
func (m member) State() (cluster.State, <-chan struct{}) {
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	return m.c.state, m.c.changed
}
func (m member) Leave(context.Context) error { return errors.New("not in this test") }
func (m member) PeerToken() string           { return "peer-token" }

var _ query.Cluster = member{}
