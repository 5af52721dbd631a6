package query

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/newsflow/newsflow/cluster"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/operators/interest"
	"github.com/newsflow/newsflow/query/auth"
	"github.com/valyala/fasthttp"
)

// profileBody is a user's interest profile as the API shows it.
type profileBody struct {
	UserID string `json:"user_id"`
	// Topics is the interest vector decayed to the event time the request
	// asked for (or to the latest read, if that is later).
	Topics []interest.Weight `json:"topics"`
	// Updated is the event time of the latest read in ms since the epoch;
	// absent for a user without reads.
	Updated int64                   `json:"updated_at,omitempty"`
	Reads   int                     `json:"reads"`
	History []interest.HistoryEntry `json:"history"`
}

// handleUserInterest answers GET /api/v1/admin/users/{id}/interest: a
// user's interest vector (decayed to ?at=, default now) and reading
// history.
func (s *Server) handleUserInterest(ctx *fasthttp.RequestCtx) {
	raw, _ := ctx.UserValue("id").(string)
	id, err := url.PathUnescape(raw)
	if err != nil || id == "" || len(id) > 128 {
		writeError(ctx, fasthttp.StatusBadRequest, "user id must be 1 to 128 bytes of valid percent-encoding")
		return
	}
	s.writeProfile(ctx, id)
}

// handleMyInterest answers GET /api/v1/me/interest: the logged-in user's
// interest vector (decayed to ?at=, default now) and reading history. In
// a cluster it is routed to the owner of the user's partition; the feed
// reads the profile through it.
func (s *Server) handleMyInterest(ctx *fasthttp.RequestCtx, u auth.User) {
	s.writeProfile(ctx, u.ID)
}

// writeProfile answers user's profile from this node's state, decayed to
// the event time ?at= (RFC 3339 or ms; default now).
func (s *Server) writeProfile(ctx *fasthttp.RequestCtx, user string) {
	at := s.opts.Now().UnixMilli()
	if v := ctx.QueryArgs().Peek("at"); len(v) > 0 {
		var err error
		if at, err = parseTimeArg(string(v)); err != nil {
			writeError(ctx, fasthttp.StatusBadRequest, "at: "+err.Error())
			return
		}
	}
	body, err := s.localProfile(user, at)
	switch {
	case errors.Is(err, interest.ErrUnavailable):
		writeError(ctx, fasthttp.StatusServiceUnavailable, err.Error())
	case err != nil:
		writeError(ctx, fasthttp.StatusInternalServerError, err.Error())
	default:
		writeJSON(ctx, fasthttp.StatusOK, body)
	}
}

// localProfile reads user's profile from this node's interest state, its
// vector decayed to event time at (ms) or to the latest read if that is
// later. In a cluster the user's partition must run here: the state of a
// partition that moved away is stale.
func (s *Server) localProfile(user string, at int64) (profileBody, error) {
	if s.deps.Cluster != nil {
		p := eventlog.PartitionFor([]byte(user), s.deps.Engine.Partitions())
		if _, ok := s.deps.Engine.Assigned()[p]; !ok {
			return profileBody{}, fmt.Errorf("partition %d does not run on node %s: %w", p, s.deps.Cluster.ID(), interest.ErrUnavailable)
		}
	}
	p, found, err := s.deps.Interest.Profile(user)
	if err != nil {
		return profileBody{}, err
	}
	body := profileBody{UserID: user, Topics: []interest.Weight{}, History: []interest.HistoryEntry{}}
	if found {
		body.Topics = p.DecayedTopics(s.deps.Interest.Options().DailyDecay, max(at, p.Updated))
		body.Updated, body.Reads, body.History = p.Updated, p.Reads, p.History
	}
	return body, nil
}

// interestGap says why a reader's interest profile could not be read, in
// the terms of the cluster's other partial answers.
type interestGap struct {
	Error string `json:"interest_error"`
	// Missing is the user's partition.
	Missing []int32 `json:"missing_partitions"`
	// FailedNodes is the partition's owner, when it did not answer.
	FailedNodes []string `json:"failed_nodes,omitempty"`
}

// userProfile reads the profile of the request's user u (its vector
// decayed to event time at) from the owner of the user's partition: this
// node, or in a cluster the owner, asked at GET /api/v1/me/interest with
// the request's own credentials (sessions are replicated to every node).
// While the owner is unknown, restoring or silent it waits, up to the peer
// timeout (atOwner); then it returns why the profile is unavailable.
func (s *Server) userProfile(ctx *fasthttp.RequestCtx, u auth.User, at int64) (profileBody, *interestGap) {
	p := eventlog.PartitionFor([]byte(u.ID), s.enginePartitions())
	var body profileBody
	var err error
	failed := ""
	if s.deps.Cluster == nil {
		body, err = s.localProfile(u.ID, at)
	} else {
		uri := "/api/v1/me/interest?at=" + strconv.FormatInt(at, 10)
		failed, err = s.atOwner(p, s.opts.PeerTimeout,
			func() error {
				var err error
				body, err = s.localProfile(u.ID, at)
				return err
			},
			func(m cluster.Member, deadline time.Time) error {
				a := s.peerGet(m, uri, HeaderRouted, credentialsOf(ctx), time.Until(deadline))
				if err := a.failure(); err != nil {
					return err
				}
				body = profileBody{}
				if err := json.Unmarshal(a.body, &body); err != nil {
					return err
				}
				if body.UserID != u.ID {
					return fmt.Errorf("answered the profile of %q", body.UserID)
				}
				return nil
			})
	}
	if err != nil {
		gap := &interestGap{Error: "interest profile unavailable: " + err.Error(), Missing: []int32{p}}
		if failed != "" {
			gap.FailedNodes = []string{failed}
		}
		return profileBody{}, gap
	}
	return body, nil
}

// errorBody is the gap as an error response.
func (g *interestGap) errorBody() map[string]any {
	return map[string]any{"error": g.Error, "missing_partitions": g.Missing, "failed_nodes": g.FailedNodes}
}
