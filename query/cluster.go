package query

import (
	"cmp"
	"slices"

	"github.com/valyala/fasthttp"
)

// handleInternal serves the nodes' internal cluster API; the cluster
// checks the shared secret.
func (s *Server) handleInternal(ctx *fasthttp.RequestCtx) {
	status, body := s.deps.Cluster.Handle(string(ctx.Path()), string(ctx.Request.Header.Peek("Authorization")), ctx.PostBody())
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(body)
}

// handleCluster answers GET /api/v1/admin/cluster: this node, the leader,
// the members and every partition's owner and epoch.
func (s *Server) handleCluster(ctx *fasthttp.RequestCtx) {
	st, _ := s.deps.Cluster.State()
	type partition struct {
		Partition int32  `json:"partition"`
		Owner     string `json:"owner"`
		Epoch     uint64 `json:"epoch"`
	}
	parts := make([]partition, len(st.Owners))
	owned := map[string]int{}
	for p, o := range st.Owners {
		parts[p] = partition{int32(p), o.Node, o.Epoch}
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
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{
		"node": s.deps.Cluster.ID(), "leader": leader, "members": members, "partitions": parts,
	})
}
