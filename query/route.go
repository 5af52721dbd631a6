package query

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/newsflow/newsflow/cluster"
	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/operators/story"
	"github.com/newsflow/newsflow/operators/trending"
	"github.com/valyala/fasthttp"
)

// In a cluster any node answers any query. A query about one key (an
// article's shares, a user's interests) goes to the node that owns the
// key's partition; queries over the stories (the feed and history among
// them) are answered from the node's own copy of the story state (the
// writer's, or the standby copy every other node keeps: storiesHere), and
// at the story writer's node only while a node has no copy yet; the feed
// and history read the user's interest profile from its owner
// (userProfile);
// trending and search fan out to every node and merge, listing the
// partitions no node answered for and the nodes that failed. A request
// routed to an owner carries HeaderRouted and is not routed again; a
// fanned-out request carries HeaderForwarded and is answered from the
// receiver's own partitions only.

// Headers of requests between nodes. HeaderForwarded and HeaderRouted name
// the sender and count only with HeaderPeer, the cluster's peer token: a
// client cannot make a node skip routing, and requests from peers are not
// rate limited (a busy node's fan-outs would otherwise use up its address's
// budget on every peer).
const (
	HeaderForwarded = "X-Newsflow-Forwarded"
	HeaderRouted    = "X-Newsflow-Routed"
	HeaderPeer      = "X-Newsflow-Peer"
)

// fromPeer reports whether the request carries this cluster's peer token.
func (s *Server) fromPeer(ctx *fasthttp.RequestCtx) bool {
	if s.deps.Cluster == nil {
		return false
	}
	got := ctx.Request.Header.Peek(HeaderPeer)
	return len(got) > 0 && subtle.ConstantTimeCompare(got, []byte(s.deps.Cluster.PeerToken())) == 1
}

// storyPartition returns the partition whose owner runs the story
// operator's only task, as the engine's topology says.
func (s *Server) storyPartition() int32 {
	if s.deps.Engine != nil {
		if p, ok := s.deps.Engine.HomePartition(story.Name); ok {
			return p
		}
	}
	return engine.SingletonPartition
}

// fansOut reports whether the node answers for the whole cluster: it is in
// a cluster and the request is not another node's fan-out.
func (s *Server) fansOut(ctx *fasthttp.RequestCtx) bool {
	return s.deps.Cluster != nil && !(len(ctx.Request.Header.Peek(HeaderForwarded)) > 0 && s.fromPeer(ctx))
}

// routing reports whether a request must go to the owner of its data: the
// node is in a cluster and no other node sent it.
func (s *Server) routing(ctx *fasthttp.RequestCtx) bool {
	return s.fansOut(ctx) && !(len(ctx.Request.Header.Peek(HeaderRouted)) > 0 && s.fromPeer(ctx))
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
		_, err := s.atOwner(p, s.opts.FailoverTimeout,
			func() error {
				h(ctx)
				if ctx.Response.StatusCode() == fasthttp.StatusServiceUnavailable {
					// The partition restores here: try again.
					err := fmt.Errorf("%s", bytes.TrimSpace(ctx.Response.Body()))
					ctx.Response.ResetBody()
					ctx.Response.SetStatusCode(fasthttp.StatusOK)
					return err
				}
				return nil
			},
			func(m cluster.Member, _ time.Time) error { return s.forward(ctx, m) })
		if err != nil {
			writeJSON(ctx, fasthttp.StatusServiceUnavailable, map[string]any{"error": err.Error(), "partition": p})
		}
	}
}

// atOwner runs local when this node owns partition p, or remote with the
// owner when another node does, until one of them succeeds. While the
// owner is unknown (a node that just started) or fails (it died, and the
// leader has yet to move its partitions; or the partition is restoring on
// it), it waits for the cluster state to change and tries again, up to
// wait: the failover timeout for a query of one key, which a client would
// rather wait for than see fail, the peer timeout for a part of a larger
// answer that can do without it (remote gets the deadline; a forward is
// bounded by the peer timeout). It then returns the last error and the
// node that failed ("" when the partition had no owner, or the local
// attempt failed).
func (s *Server) atOwner(p int32, wait time.Duration, local func() error, remote func(m cluster.Member, deadline time.Time) error) (failed string, err error) {
	deadline := time.Now().Add(max(wait, s.opts.PeerTimeout))
	for {
		st, changed := s.deps.Cluster.State()
		m, ok := st.Owner(p)
		failed = ""
		switch {
		case ok && m.ID == s.deps.Cluster.ID():
			if err = local(); err == nil {
				return "", nil
			}
		case ok:
			if err = remote(m, deadline); err == nil {
				return "", nil
			}
			failed, err = m.ID, fmt.Errorf("node %s, owner of partition %d, did not answer: %w", m.ID, p, err)
		default:
			err = fmt.Errorf("partition %d has no owner yet", p)
		}
		left := time.Until(deadline)
		if left <= 0 {
			s.peerErrors.Inc()
			return failed, err
		}
		select {
		case <-changed:
		case <-time.After(min(left, 250*time.Millisecond)):
		}
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

// userPartition returns the partition of the logged-in user's key (none
// without a session: the handler answers 401).
func (s *Server) userPartition(ctx *fasthttp.RequestCtx) (int32, bool) {
	u, ok := s.user(ctx)
	if !ok {
		return 0, false
	}
	return eventlog.PartitionFor([]byte(u.ID), s.enginePartitions()), true
}

func (s *Server) storyOwner(*fasthttp.RequestCtx) (int32, bool) { return s.storyPartition(), true }

// storiesHere reports whether this node reads the story state itself: on a
// single node always; in a cluster when it runs the story task or keeps a
// standby copy that has caught up (engine.Freshness).
func (s *Server) storiesHere() bool {
	if s.deps.Cluster == nil {
		return true
	}
	if s.deps.Engine == nil {
		return false
	}
	_, ok := s.deps.Engine.Freshness(story.Name, s.storyPartition())
	return ok
}

// storyStaleness is how stale the story state this node answers from is,
// in ms: 0 when it reflects every article the log holds (as last checked),
// otherwise the age of the writer's commit it reflects, which grows while
// the writer fails over.
func (s *Server) storyStaleness() int64 {
	if s.deps.Engine == nil {
		return 0
	}
	f, ok := s.deps.Engine.Freshness(story.Name, s.storyPartition())
	if !ok {
		return 0
	}
	return f.Staleness.Milliseconds()
}

// atStories answers a story query here when storiesHere, otherwise at the
// story writer's node.
func (s *Server) atStories(h fasthttp.RequestHandler) fasthttp.RequestHandler {
	routed := s.toOwner(s.storyOwner, h)
	return func(ctx *fasthttp.RequestCtx) {
		if s.storiesHere() {
			h(ctx)
			return
		}
		routed(ctx)
	}
}

// expandOwner routes trending queries that read the story view (expand=
// and by=story) to the story owner, which then fans out, unless this node
// has its own copy of the story state.
func (s *Server) expandOwner(ctx *fasthttp.RequestCtx) (int32, bool) {
	args := ctx.QueryArgs()
	return s.storyPartition(), !s.storiesHere() && (len(args.Peek("expand")) > 0 || string(args.Peek("by")) == "story")
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
	// A client's own copies of the nodes' headers do not travel.
	for _, h := range []string{HeaderForwarded, HeaderRouted, HeaderPeer} {
		req.Header.Del(h)
	}
	req.SetHost(m.HTTPAddr)
	req.URI().SetScheme("http")
	req.Header.Set(HeaderRouted, s.deps.Cluster.ID())
	req.Header.Set(HeaderPeer, s.deps.Cluster.PeerToken())
	if err := s.peers.DoTimeout(req, resp, s.opts.PeerTimeout); err != nil {
		return err
	}
	if resp.StatusCode() == fasthttp.StatusServiceUnavailable {
		// The partition is not ready there yet (restoring after a move):
		// the caller tries again until its deadline.
		return fmt.Errorf("status 503: %s", bytes.TrimSpace(resp.Body()))
	}
	resp.CopyTo(&ctx.Response)
	ctx.Response.Header.Set("X-Newsflow-Node", m.ID)
	return nil
}

// peerAnswer is one node's answer to a request from this node.
type peerAnswer struct {
	node   string
	status int
	body   []byte
	err    error
}

// failure returns the answer's error, or an error naming its status when
// that is not 200.
func (a peerAnswer) failure() error {
	switch {
	case a.err != nil:
		return a.err
	case a.status != fasthttp.StatusOK:
		return fmt.Errorf("status %d: %s", a.status, bytes.TrimSpace(a.body))
	}
	return nil
}

// peerCredentials are a request's Authorization and Cookie headers, copied:
// a fasthttp request must not be read from several goroutines (Peek
// writes a buffer of the header).
type peerCredentials [][2]string

func credentialsOf(ctx *fasthttp.RequestCtx) peerCredentials {
	if ctx == nil {
		return nil
	}
	var c peerCredentials
	for _, h := range []string{"Authorization", "Cookie"} {
		if v := ctx.Request.Header.Peek(h); len(v) > 0 {
			c = append(c, [2]string{h, string(v)})
		}
	}
	return c
}

// peerGet sends GET uri (path and query) to member m with header hdr
// (HeaderForwarded or HeaderRouted) naming this node, and creds.
func (s *Server) peerGet(m cluster.Member, uri, hdr string, creds peerCredentials, timeout time.Duration) peerAnswer {
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI("http://" + m.HTTPAddr + uri)
	req.Header.Set(hdr, s.deps.Cluster.ID())
	req.Header.Set(HeaderPeer, s.deps.Cluster.PeerToken())
	for _, h := range creds {
		req.Header.Set(h[0], h[1])
	}
	a := peerAnswer{node: m.ID}
	if a.err = s.peers.DoTimeout(req, resp, timeout); a.err == nil {
		a.status, a.body = resp.StatusCode(), slices.Clone(resp.Body())
	}
	return a
}

// fanOut sends GET uri (path and query) to every other member that is up,
// concurrently, and returns their answers. The credentials of from, if
// set, go along (for admin queries).
func (s *Server) fanOut(uri string, from *fasthttp.RequestCtx) []peerAnswer {
	return s.fanOutWith(uri, credentialsOf(from))
}

// fanOutWith is fanOut with the headers given (credentials, a trace
// context).
func (s *Server) fanOutWith(uri string, hdrs peerCredentials) []peerAnswer {
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
			out[i] = s.peerGet(m, uri, HeaderForwarded, hdrs, s.opts.PeerTimeout)
			if out[i].err != nil {
				s.peerErrors.Inc()
			}
		})
	}
	wg.Wait()
	return out
}

// gather fans uri out (fanOut) and decodes every answer with status 200
// into a T. The other answers (no answer, another status, a body that does
// not decode) are returned as failed.
func gather[T any](s *Server, uri string, from *fasthttp.RequestCtx) (answers []T, failed []peerAnswer) {
	return gatherWith[T](s, uri, credentialsOf(from))
}

// gatherWith is gather with the headers given (fanOutWith).
func gatherWith[T any](s *Server, uri string, hdrs peerCredentials) (answers []T, failed []peerAnswer) {
	for _, a := range s.fanOutWith(uri, hdrs) {
		var v T
		if a.err = a.failure(); a.err == nil {
			a.err = json.Unmarshal(a.body, &v)
		}
		if a.err != nil {
			failed = append(failed, a)
			continue
		}
		answers = append(answers, v)
	}
	return answers, failed
}

// nodesOf returns the nodes of answers, sorted.
func nodesOf(answers []peerAnswer) []string {
	var out []string
	for _, a := range answers {
		out = append(out, a.node)
	}
	slices.Sort(out)
	return out
}

// unanswered returns, sorted, the partitions that are in every one of
// lists: each node that answered a fanned-out query lists the partitions
// it could not answer for, so these are the partitions no node answered
// for. Without lists it returns nil.
func unanswered(lists ...[]int32) []int32 {
	if len(lists) == 0 {
		return nil
	}
	var out []int32
	for _, p := range lists[0] {
		every := true
		for _, l := range lists[1:] {
			every = every && slices.Contains(l, p)
		}
		if every && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// A query over every partition (search, trending) that misses some asks
// again, up to the peer timeout, while those partitions are moving: one
// the balance hands from one node to another (Owner.Next) answers again a
// moment later on its new owner, and a reader would rather wait that long
// than see a partial answer. A partition missed at the same owner's epoch
// for longer than settleWindow (a task that fails over and over, an owner
// that is down for good) is not waited for again until its owner changes:
// the answer says it is partial at once.
const settleWindow = 10 * time.Second

// settling remembers, per partition, the owner's epoch at which queries
// first missed it, and when.
type settling struct {
	mu   sync.Mutex
	seen map[int32]settleMark
}

type settleMark struct {
	epoch uint64
	at    time.Time
}

// inMotion reports whether a query that missed partitions should ask
// again: one of them is being handed off, or was first missed at its
// owner's current epoch less than settleWindow ago.
func (s *Server) inMotion(missing []int32) bool {
	st, _ := s.deps.Cluster.State()
	now := time.Now()
	s.settle.mu.Lock()
	defer s.settle.mu.Unlock()
	if s.settle.seen == nil {
		s.settle.seen = map[int32]settleMark{}
	}
	moving := false
	for _, p := range missing {
		if p < 0 || int(p) >= len(st.Owners) {
			continue
		}
		o := st.Owners[p]
		m, ok := s.settle.seen[p]
		if !ok || m.epoch != o.Epoch {
			m = settleMark{epoch: o.Epoch, at: now}
			s.settle.seen[p] = m
		}
		moving = moving || o.Next != "" || now.Sub(m.at) < settleWindow
	}
	return moving
}

// untilComplete runs answer, a query over every partition of the cluster
// that returns the partitions it missed, and runs it again while they are
// in motion (inMotion), on each change of the cluster state or every
// 100ms, until the peer timeout has passed since the first run.
func (s *Server) untilComplete(answer func() (missing []int32)) {
	deadline := time.Now().Add(s.opts.PeerTimeout)
	for {
		_, changed := s.deps.Cluster.State()
		missing := answer()
		left := time.Until(deadline)
		if len(missing) == 0 || left <= 0 || !s.inMotion(missing) {
			return
		}
		select {
		case <-changed:
		case <-time.After(min(left, 100*time.Millisecond)):
		}
	}
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
	answers, failed := gather[trending.Result](s, "/api/v1/trending?"+q.Encode(), nil)
	lists := [][]trending.Item{local.Items}
	partial := [][]int32{local.Partial}
	res := local
	for _, r := range answers {
		lists = append(lists, r.Items)
		partial = append(partial, r.Partial)
		res.AsOf = max(res.AsOf, r.AsOf)
	}
	res.Items = trending.MergeItems(k, lists...)
	res.Partial = unanswered(partial...)
	return res, nodesOf(failed)
}

// peerTimeoutDefault bounds a request to another node.
const peerTimeoutDefault = 2 * time.Second

// HeaderWarning marks an answer that lacks part of what was asked: some
// partitions or nodes did not contribute to it (the body says which, in
// missing_partitions and failed_nodes). Its value is one warning of code
// 199 (RFC 7234 §5.5), so that clients and proxies that do not read the
// body see it too.
const HeaderWarning = "Warning"

// warnPartial sets HeaderWarning on an answer that misses partitions or
// nodes, and does nothing when it misses none.
func warnPartial(ctx *fasthttp.RequestCtx, missing []int32, failed []string) {
	if len(missing) == 0 && len(failed) == 0 {
		return
	}
	var parts []string
	if len(missing) > 0 {
		ps := make([]string, len(missing))
		for i, p := range missing {
			ps[i] = strconv.Itoa(int(p))
		}
		parts = append(parts, "partitions "+strings.Join(ps, ", ")+" missing")
	}
	if len(failed) > 0 {
		parts = append(parts, "nodes "+strings.Join(failed, ", ")+" did not answer")
	}
	ctx.Response.Header.Set(HeaderWarning, "199 newsflow "+strconv.Quote("partial answer: "+strings.Join(parts, "; ")))
}
