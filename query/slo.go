package query

import (
	"cmp"
	"slices"

	"github.com/newsflow/newsflow/node/slo"
	"github.com/valyala/fasthttp"
)

// sloAnswer is the answer of GET /api/v1/admin/slo: the report of the
// node, or in a cluster of every node that answered (their counts
// summed), with the nodes that did and did not and each one's own
// report.
type sloAnswer struct {
	slo.Report
	// Nodes answered (this one among them); FailedNodes did not: they
	// failed to, or are down and were not asked. Their counts are
	// missing.
	Nodes       []string     `json:"nodes,omitempty"`
	FailedNodes []string     `json:"failed_nodes,omitempty"`
	PerNode     []slo.Report `json:"per_node,omitempty"`
}

// handleSLO answers GET /api/v1/admin/slo. A node answers for itself;
// in a cluster the node asked asks every other member that is up (with
// the caller's credentials, as the cluster view does) and adds their
// counts to its own (slo.Combine): good and total events add up across
// nodes, so the cluster's value, budget and burn rates are derived from
// the sums.
func (s *Server) handleSLO(ctx *fasthttp.RequestCtx) {
	local := s.deps.SLO.Report()
	if s.deps.Cluster == nil {
		writeJSON(ctx, fasthttp.StatusOK, sloAnswer{Report: local})
		return
	}
	self := s.deps.Cluster.ID()
	local.Node = self
	if !s.fansOut(ctx) {
		writeJSON(ctx, fasthttp.StatusOK, sloAnswer{Report: local}) // another node's fan-out
		return
	}
	peers, failed := gather[sloAnswer](s, "/api/v1/admin/slo", ctx)
	reports := []slo.Report{local}
	for _, p := range peers {
		reports = append(reports, p.Report)
	}
	slices.SortFunc(reports, func(a, b slo.Report) int { return cmp.Compare(a.Node, b.Node) })
	ans := sloAnswer{Report: slo.Combine(reports...), FailedNodes: nodesOf(failed), PerNode: reports}
	ans.Node = self
	for _, r := range reports {
		ans.Nodes = append(ans.Nodes, r.Node)
	}
	st, _ := s.deps.Cluster.State()
	for _, m := range st.Members {
		if !m.Up && m.ID != self {
			ans.FailedNodes = append(ans.FailedNodes, m.ID)
		}
	}
	slices.Sort(ans.FailedNodes)
	warnPartial(ctx, nil, ans.FailedNodes)
	writeJSON(ctx, fasthttp.StatusOK, ans)
}
