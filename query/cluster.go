package query

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/valyala/fasthttp"
)

// handleInternal serves the nodes' internal cluster API; the cluster
// checks the shared secret.
func (s *Server) handleInternal(ctx *fasthttp.RequestCtx) {
	status, body := s.deps.Cluster.Handle(string(ctx.Path()), string(ctx.Request.Header.Peek("Authorization")), ctx.PostBody())
	writeRaw(ctx, status, body)
}

// handleCluster answers GET /api/v1/admin/cluster: this node, the leader,
// the members and every partition's owner and epoch.
func (s *Server) handleCluster(ctx *fasthttp.RequestCtx) {
	st, _ := s.deps.Cluster.State()
	type partition struct {
		localPartition
		Owner string `json:"owner"`
		Epoch uint64 `json:"epoch"`
	}
	// Lag and state size come from each partition's owner.
	reports := map[string]map[int32]localPartition{}
	add := func(node string, lps []localPartition) {
		reports[node] = map[int32]localPartition{}
		for _, lp := range lps {
			reports[node][lp.Partition] = lp
		}
	}
	add(s.deps.Cluster.ID(), s.localPartitions())
	var unreachable []string
	for _, a := range s.fanOut("/api/v1/admin/cluster/local", ctx) {
		var lr struct {
			Partitions []localPartition `json:"partitions"`
		}
		if a.err == nil && a.status == fasthttp.StatusOK && json.Unmarshal(a.body, &lr) == nil {
			add(a.node, lr.Partitions)
		} else {
			unreachable = append(unreachable, a.node)
		}
	}
	parts := make([]partition, len(st.Owners))
	owned := map[string]int{}
	for p, o := range st.Owners {
		lp := reports[o.Node][int32(p)] // zero (not running) if the owner did not report it
		lp.Partition = int32(p)
		parts[p] = partition{lp, o.Node, o.Epoch}
		owned[o.Node]++
	}
	type member struct {
		ID         string `json:"id"`
		RaftAddr   string `json:"raft_addr"`
		HTTPAddr   string `json:"http_addr"`
		Up         bool   `json:"up"`
		Leaving    bool   `json:"leaving,omitempty"`
		Leader     bool   `json:"leader"`
		Partitions int    `json:"partitions"`
	}
	leader := s.deps.Cluster.Leader()
	members := make([]member, 0, len(st.Members))
	for _, m := range st.Members {
		members = append(members, member{m.ID, m.RaftAddr, m.HTTPAddr, m.Up, m.Leaving, m.ID == leader, owned[m.ID]})
	}
	slices.SortFunc(members, func(a, b member) int { return cmp.Compare(a.ID, b.ID) })
	slices.Sort(unreachable)
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{
		"node": s.deps.Cluster.ID(), "leader": leader, "members": members, "partitions": parts, "unreachable": unreachable,
	})
}

// localPartition is what a node reports of a partition it runs.
type localPartition struct {
	Partition int32 `json:"partition"`
	// Running is true when the owner reported the partition as running
	// on it (false: the owner did not answer, or has not started it yet).
	Running    bool   `json:"running"`
	Lag        int64  `json:"lag"`
	StateBytes uint64 `json:"state_bytes"`
}

func (s *Server) localPartitions() []localPartition {
	n := s.deps.Engine.Partitions()
	lags := map[int32]int64{}
	for _, p := range s.deps.Engine.Progress() {
		lags[p.Partition%n] += p.Lag()
	}
	var out []localPartition
	for p := range s.deps.Engine.Assigned() {
		size, _ := s.deps.Engine.PartitionStateBytes(p)
		out = append(out, localPartition{Partition: p, Running: true, Lag: lags[p], StateBytes: size})
	}
	slices.SortFunc(out, func(a, b localPartition) int { return cmp.Compare(a.Partition, b.Partition) })
	return out
}

// handleClusterLocal answers GET /api/v1/admin/cluster/local: the
// partitions this node runs, with lag and state size.
func (s *Server) handleClusterLocal(ctx *fasthttp.RequestCtx) {
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{"node": s.deps.Cluster.ID(), "partitions": s.localPartitions()})
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
