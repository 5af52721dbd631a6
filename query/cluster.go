package query

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/valyala/fasthttp"
)

// ClusterView is the answer of GET /api/v1/admin/cluster: this node, the
// leader, the members and every partition's owner and epoch, with the lag
// and state size its owner reports.
type ClusterView struct {
	Node       string             `json:"node"`
	Leader     string             `json:"leader"`
	Members    []ClusterMember    `json:"members"`
	Partitions []ClusterPartition `json:"partitions"`
	// Unreachable lists the members that did not report their partitions.
	Unreachable []string `json:"unreachable"`
}

// ClusterMember is a member in a ClusterView.
type ClusterMember struct {
	ID         string `json:"id"`
	RaftAddr   string `json:"raft_addr"`
	HTTPAddr   string `json:"http_addr"`
	Up         bool   `json:"up"`
	Leaving    bool   `json:"leaving,omitempty"`
	Leader     bool   `json:"leader"`
	Partitions int    `json:"partitions"` // owned
}

// ClusterPartition is a partition in a ClusterView.
type ClusterPartition struct {
	LocalPartition
	Owner string `json:"owner"`
	Epoch uint64 `json:"epoch"`
}

// handleCluster answers GET /api/v1/admin/cluster with a ClusterView.
func (s *Server) handleCluster(ctx *fasthttp.RequestCtx) {
	st, _ := s.deps.Cluster.State()
	// Lag and state size come from each partition's owner.
	reports := map[string]map[int32]LocalPartition{}
	add := func(node string, lps []LocalPartition) {
		reports[node] = map[int32]LocalPartition{}
		for _, lp := range lps {
			reports[node][lp.Partition] = lp
		}
	}
	add(s.deps.Cluster.ID(), s.LocalPartitions())
	v := ClusterView{Node: s.deps.Cluster.ID(), Leader: s.deps.Cluster.Leader()}
	for _, a := range s.fanOut("/api/v1/admin/cluster/local", ctx) {
		var lr struct {
			Partitions []LocalPartition `json:"partitions"`
		}
		if a.err == nil && a.status == fasthttp.StatusOK && json.Unmarshal(a.body, &lr) == nil {
			add(a.node, lr.Partitions)
		} else {
			v.Unreachable = append(v.Unreachable, a.node)
		}
	}
	v.Partitions = make([]ClusterPartition, len(st.Owners))
	owned := map[string]int{}
	for p, o := range st.Owners {
		lp := reports[o.Node][int32(p)] // zero (not running) if the owner did not report it
		lp.Partition = int32(p)
		v.Partitions[p] = ClusterPartition{lp, o.Node, o.Epoch}
		owned[o.Node]++
	}
	v.Members = make([]ClusterMember, 0, len(st.Members))
	for _, m := range st.Members {
		v.Members = append(v.Members, ClusterMember{m.ID, m.RaftAddr, m.HTTPAddr, m.Up, m.Leaving, m.ID == v.Leader, owned[m.ID]})
	}
	slices.SortFunc(v.Members, func(a, b ClusterMember) int { return cmp.Compare(a.ID, b.ID) })
	slices.Sort(v.Unreachable)
	writeJSON(ctx, fasthttp.StatusOK, v)
}

// LocalPartition is what a node reports of a partition it runs.
type LocalPartition struct {
	Partition int32 `json:"partition"`
	// Running is true when the owner reported the partition as running
	// on it (false: the owner did not answer, or has not started it yet).
	Running    bool   `json:"running"`
	Lag        int64  `json:"lag"`
	StateBytes uint64 `json:"state_bytes"`
}

func (s *Server) LocalPartitions() []LocalPartition {
	n := s.deps.Engine.Partitions()
	lags := map[int32]int64{}
	for _, p := range s.deps.Engine.Progress() {
		lags[p.Partition%n] += p.Lag()
	}
	var out []LocalPartition
	for p := range s.deps.Engine.Assigned() {
		size, _ := s.deps.Engine.PartitionStateBytes(p)
		out = append(out, LocalPartition{Partition: p, Running: true, Lag: lags[p], StateBytes: size})
	}
	slices.SortFunc(out, func(a, b LocalPartition) int { return cmp.Compare(a.Partition, b.Partition) })
	return out
}

// handleClusterLocal answers GET /api/v1/admin/cluster/local: the
// partitions this node runs, with lag and state size.
func (s *Server) handleClusterLocal(ctx *fasthttp.RequestCtx) {
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{"node": s.deps.Cluster.ID(), "partitions": s.LocalPartitions()})
}

// handleLeave answers POST /api/v1/admin/cluster/leave: the node gives up
// its partitions (they move to the other members) and leaves the cluster,
// then stops.
func (s *Server) handleLeave(ctx *fasthttp.RequestCtx) {
	lctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.deps.Cluster.Leave(lctx); err != nil {
		writeError(ctx, fasthttp.StatusServiceUnavailable, "leave: "+err.Error())
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{"left": s.deps.Cluster.ID()})
	if s.opts.OnLeave != nil {
		go s.opts.OnLeave()
	}
}
