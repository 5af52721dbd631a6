package query

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/newsflow/newsflow/cluster"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/operators/trending"
	"github.com/valyala/fasthttp"
)

// In a cluster any node answers any query. A query about one key (an
// article's shares, a user's interests) goes to the node that owns the
// key's partition; queries over the stories go to the owner of the story
// operator's single partition; trending fans out to every node and merges.
// A request routed to an owner carries HeaderRouted and is not routed
// again; a fanned-out request carries HeaderForwarded and is answered from
// the receiver's own partitions only.

// Headers of requests between nodes; their value is the sender's id.
const (
	HeaderForwarded = "X-Newsflow-Forwarded"
	HeaderRouted    = "X-Newsflow-Routed"
)

// storyPartition is the partition of the story operator's only task.
const storyPartition = 0

// fansOut reports whether the node answers for the whole cluster: it is in
// a cluster and the request is not another node's fan-out.
func (s *Server) fansOut(ctx *fasthttp.RequestCtx) bool {
	return s.deps.Cluster != nil && len(ctx.Request.Header.Peek(HeaderForwarded)) == 0
}

// routing reports whether a request must go to the owner of its data: the
// node is in a cluster and no other node sent it.
func (s *Server) routing(ctx *fasthttp.RequestCtx) bool {
	return s.fansOut(ctx) && len(ctx.Request.Header.Peek(HeaderRouted)) == 0
}

// toOwner wraps h: the request is answered by the owner of the partition
// part returns (forwarded when that is another node).
func (s *Server) toOwner(part func(ctx *fasthttp.RequestCtx) (int32, bool), h fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		if !s.routing(ctx) {
			h(ctx)
			return
		}
		p, ok := part(ctx)
		if !ok {
			h(ctx) // the handler rejects the request
			return
		}
		// While the owner is unknown (a node that just started) or does
		// not answer (it died, and the leader has yet to move its
		// partitions), wait for the cluster state to change, up to the
		// peer timeout, then answer 503 naming the partition.
		deadline := time.Now().Add(s.opts.PeerTimeout)
		var lastErr error
		for {
			st, changed := s.deps.Cluster.State()
			m, ok := st.Owner(p)
			switch {
			case ok && m.ID == s.deps.Cluster.ID():
				h(ctx)
				return
			case ok:
				if lastErr = s.forward(ctx, m); lastErr == nil {
					return
				}
				lastErr = fmt.Errorf("node %s, owner of partition %d, did not answer: %w", m.ID, p, lastErr)
			default:
				lastErr = fmt.Errorf("partition %d has no owner yet", p)
			}
			wait := time.Until(deadline)
			if wait <= 0 {
				break
			}
			select {
			case <-changed:
			case <-time.After(min(wait, 250*time.Millisecond)):
			}
		}
		s.peerErrors.Inc()
		writeJSON(ctx, fasthttp.StatusServiceUnavailable, map[string]any{"error": lastErr.Error(), "partition": p})
	}
}

// keyPartition returns the partition of the path parameter name.
func (s *Server) keyPartition(name string) func(ctx *fasthttp.RequestCtx) (int32, bool) {
	return func(ctx *fasthttp.RequestCtx) (int32, bool) {
		raw, _ := ctx.UserValue(name).(string)
		key, err := url.PathUnescape(raw)
		if err != nil || key == "" {
			return 0, false
		}
		return eventlog.PartitionFor([]byte(key), s.enginePartitions()), true
	}
}

func storyOwner(*fasthttp.RequestCtx) (int32, bool) { return storyPartition, true }

// expandOwner routes trending queries that expand articles (from the story
// view) to the story owner, which then fans out.
func expandOwner(ctx *fasthttp.RequestCtx) (int32, bool) {
	return storyPartition, len(ctx.QueryArgs().Peek("expand")) > 0
}

func (s *Server) enginePartitions() int32 {
	if s.deps.Engine != nil {
		return s.deps.Engine.Partitions()
	}
	st, _ := s.deps.Cluster.State()
	return st.Partitions
}

// forward sends the request to member m and copies its answer back.
func (s *Server) forward(ctx *fasthttp.RequestCtx, m cluster.Member) error {
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseResponse(resp)
	ctx.Request.CopyTo(req)
	req.SetHost(m.HTTPAddr)
	req.URI().SetScheme("http")
	req.Header.Set(HeaderRouted, s.deps.Cluster.ID())
	if err := s.peers.DoTimeout(req, resp, s.opts.PeerTimeout); err != nil {
		return err
	}
	resp.CopyTo(&ctx.Response)
	ctx.Response.Header.Set("X-Newsflow-Node", m.ID)
	return nil
}

// peerAnswer is one node's answer to a fanned-out query.
type peerAnswer struct {
	node   string
	status int
	body   []byte
	err    error
}

// fanOut sends GET uri (path and query) to every other member that is up,
// concurrently, and returns their answers. The credentials of from, if
// set, go along (for admin queries).
func (s *Server) fanOut(uri string, from *fasthttp.RequestCtx) []peerAnswer {
	st, _ := s.deps.Cluster.State()
	self := s.deps.Cluster.ID()
	var members []cluster.Member
	for _, m := range st.Members {
		if m.ID != self && m.Up {
			members = append(members, m)
		}
	}
	out := make([]peerAnswer, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		wg.Go(func() {
			req := fasthttp.AcquireRequest()
			defer fasthttp.ReleaseRequest(req)
			resp := fasthttp.AcquireResponse()
			defer fasthttp.ReleaseResponse(resp)
			req.SetRequestURI("http://" + m.HTTPAddr + uri)
			req.Header.Set(HeaderForwarded, self)
			if from != nil {
				for _, h := range []string{"Authorization", "Cookie"} {
					if v := from.Request.Header.Peek(h); len(v) > 0 {
						req.Header.SetBytesV(h, v)
					}
				}
			}
			a := peerAnswer{node: m.ID}
			if a.err = s.peers.DoTimeout(req, resp, s.opts.PeerTimeout); a.err == nil {
				a.status, a.body = resp.StatusCode(), slices.Clone(resp.Body())
			} else {
				s.peerErrors.Inc()
			}
			out[i] = a
		})
	}
	wg.Wait()
	return out
}

// clusterTop merges this node's trending answer with every other node's.
// Partitions hold disjoint articles, so the top k of the union of the
// nodes' top ks is exact (trending.MergeItems). A partition no node answered for is listed as
// missing, and a node that did not answer as failed.
func (s *Server) clusterTop(local trending.Result, window, category string, k int) (trending.Result, []string) {
	q := url.Values{"window": {window}, "k": {fmt.Sprint(k)}}
	if category != "" {
		q.Set("category", category)
	}
	missing := map[int32]bool{}
	for _, p := range local.Partial {
		missing[p] = true
	}
	lists := [][]trending.Item{local.Items}
	res := local
	var failed []string
	for _, a := range s.fanOut("/api/v1/trending?"+q.Encode(), nil) {
		var r trending.Result
		if a.err == nil && a.status == fasthttp.StatusOK {
			a.err = json.Unmarshal(a.body, &r)
		} else if a.err == nil {
			a.err = fmt.Errorf("status %d", a.status)
		}
		if a.err != nil {
			failed = append(failed, a.node)
			continue
		}
		// Missing: a partition no node answered for.
		for p := range missing {
			if !slices.Contains(r.Partial, p) {
				delete(missing, p)
			}
		}
		lists = append(lists, r.Items)
		res.AsOf = max(res.AsOf, r.AsOf)
	}
	res.Items = trending.MergeItems(k, lists...)
	res.Partial = nil
	for p := range missing {
		res.Partial = append(res.Partial, p)
	}
	slices.Sort(res.Partial)
	slices.Sort(failed)
	return res, failed
}

// peerTimeoutDefault bounds a request to another node.
const peerTimeoutDefault = 2 * time.Second
