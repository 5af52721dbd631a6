package query_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/cluster"
	"github.com/newsflow/newsflow/query"
	"github.com/valyala/fasthttp"
)

// fakeCluster is a fixed cluster view that records what it is asked.
type fakeCluster struct {
	state cluster.State
	calls []string
}

func (f *fakeCluster) ID() string     { return "b" }
func (f *fakeCluster) Leader() string { return "a" }
func (f *fakeCluster) State() (cluster.State, <-chan struct{}) {
	return f.state, make(chan struct{})
}
func (f *fakeCluster) Leave(context.Context) error { f.calls = append(f.calls, "leave"); return nil }
func (f *fakeCluster) PeerToken() string           { return "peer-token" }

func testCluster() *fakeCluster {
	return &fakeCluster{state: cluster.State{
		Partitions: 4,
		Members: map[string]cluster.Member{
			"a": {ID: "a", RaftAddr: "10.0.0.1:7000", HTTPAddr: "10.0.0.1:8080", Up: true},
			"b": {ID: "b", RaftAddr: "10.0.0.2:7000", HTTPAddr: "10.0.0.2:8080", Up: true},
			"c": {ID: "c", RaftAddr: "10.0.0.3:7000", HTTPAddr: "10.0.0.3:8080", Up: false},
		},
		Owners: []cluster.Owner{{Node: "a", Epoch: 1}, {Node: "b", Epoch: 5}, {Node: "a", Epoch: 6}, {Node: "b", Epoch: 4}},
	}}
}

func TestClusterAdminAndInternalRoutes(t *testing.T) {
	fc := testCluster()
	n := newTestNode(t, withCluster(fc))
	r := n.get(t, "/api/v1/admin/cluster")
	var res query.ClusterView
	if err := json.Unmarshal(r.body, &res); err != nil || r.status != fasthttp.StatusOK {
		t.Fatalf("cluster: %s", r)
	}
	// Member a is up but its address answers nothing: the view says so.
	if res.Node != "b" || res.Leader != "a" || len(res.Members) != 3 || len(res.Partitions) != 4 || len(res.Unreachable) != 1 || res.Unreachable[0] != "a" {
		t.Fatalf("cluster view %+v", res)
	}
	if m := res.Members[0]; m.ID != "a" || !m.Leader || !m.Up || m.Partitions != 2 {
		t.Errorf("member a: %+v", m)
	}
	if m := res.Members[2]; m.ID != "c" || m.Up || m.Partitions != 0 {
		t.Errorf("member c: %+v", m)
	}
	if p := res.Partitions[1]; p.Owner != "b" || p.Epoch != 5 {
		t.Errorf("partition 1: %+v", p)
	}
	if r := n.do(t, "GET", "/api/v1/admin/cluster", nil, "X-Anonymous", "1"); r.status != fasthttp.StatusUnauthorized {
		t.Errorf("anonymous: %s", r)
	}
	// The cluster's internal API is on the Raft port: the public one does
	// not serve it, whatever the request carries.
	for _, p := range []string{cluster.PathJoin, cluster.PathApply, cluster.PathIndex} {
		if r := n.do(t, "POST", p, []byte(`{"op":"x"}`), "Authorization", "Bearer s3cret"); r.status != fasthttp.StatusNotFound {
			t.Errorf("%s on the public port: %s", p, r)
		}
	}
	if len(fc.calls) != 0 {
		t.Errorf("calls %q", fc.calls)
	}
}

// Requests between members carry the cluster's peer token: with it a node
// answers a fanned-out request from its own partitions and does not rate
// limit it; a client's copy of the headers without the token is ignored
// (the node fans out itself) and counts against the client's address.
func TestPeerHeadersNeedTheToken(t *testing.T) {
	n := newTestNode(t, withCluster(testCluster()), withQuery(query.Options{PeerTimeout: 200 * time.Millisecond,
		RateLimits: query.RateLimits{PerIP: 0.001, BurstIP: 3}}))
	for i := range 10 {
		r := n.do(t, "GET", "/api/v1/trending?window=1h", nil,
			query.HeaderForwarded, "a", query.HeaderPeer, "peer-token", "X-Anonymous", "1")
		if r.status != fasthttp.StatusOK || strings.Contains(string(r.body), `"failed_nodes"`) {
			t.Fatalf("peer request %d: want a local answer, not limited: %s", i, r)
		}
	}
	r := n.do(t, "GET", "/api/v1/trending?window=1h", nil,
		query.HeaderForwarded, "a", query.HeaderPeer, "a guess", "X-Anonymous", "1")
	if r.status != fasthttp.StatusOK || !strings.Contains(string(r.body), `"failed_nodes":["a"]`) {
		t.Fatalf("client request with the peer headers but not the token: want a fan-out that finds a silent: %s", r)
	}
	limited := false
	for range 5 {
		r := n.do(t, "GET", "/api/v1/trending?window=1h", nil, query.HeaderForwarded, "a", "X-Anonymous", "1")
		limited = limited || r.status == fasthttp.StatusTooManyRequests
	}
	if !limited {
		t.Fatal("client requests with a forged peer header were not rate limited")
	}
}

// A client's copy of the fan-out header does not travel with a request a
// node forwards to an owner: the owner, which believes the forwarding
// node, still asks every node.
func TestForwardDropsClientPeerHeaders(t *testing.T) {
	c := newClusterNet(t, map[string][]int32{"a": {0, 2}, "b": {1, 3}}, withQuery(query.Options{PeerTimeout: time.Second}))
	b := c.node("b")
	r := b.do(t, "GET", "/api/v1/trending?window=1h&expand=articles", nil, query.HeaderForwarded, "x", "X-Anonymous", "1")
	if r.status != fasthttp.StatusOK || strings.Contains(string(r.body), `"missing_partitions":[`) {
		t.Fatalf("expanded trending through b (routed to a) with a client's fan-out header: %s", r)
	}
}
