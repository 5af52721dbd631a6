package query

import (
	"encoding/json"
	"time"

	"github.com/newsflow/newsflow/cluster"
	"github.com/newsflow/newsflow/query/stream"
	"github.com/valyala/fasthttp"
)

// The live stream (GET /api/v1/stream) is query/stream; this is what it
// carries: the trending answer by story and the stories breaking now, in a
// cluster from the owner of the story partition (which names the
// stories), through the trending handler's own fan-out (trendingTop)
// there.

// The trending query a stream carries.
const (
	streamWindow      = "1h"
	streamK           = 10
	streamTrendingURI = "/api/v1/trending?by=story&window=1h&k=10"
	streamBreakingURI = "/api/v1/breaking"
)

// ChangesOptions configures the trending.entered stream events.
type ChangesOptions struct {
	// Disabled turns the follower off (the node runs no trending-changes
	// operator then).
	Disabled bool
}

// handleStream answers GET /api/v1/stream (query/stream).
func (s *Server) handleStream(ctx *fasthttp.RequestCtx) { s.stream.Handle(ctx) }

// streamSource is what the stream hub computes the streams' state from.
func (s *Server) streamSource() stream.Source {
	return stream.Source{
		Trending: func() ([]byte, []byte, error) {
			tr, err := s.streamTrending()
			if err != nil {
				return nil, nil, err
			}
			data, err := json.Marshal(tr)
			if err != nil {
				return nil, nil, err
			}
			tr.AsOf = 0
			key, err := json.Marshal(tr)
			return data, key, err
		},
		Breaking: s.streamBreaking,
	}
}

// streamTrending is the trending event's answer for the whole cluster.
func (s *Server) streamTrending() (storyTrending, error) {
	return fromStoryOwner(s, streamTrendingURI, func() (storyTrending, error) {
		res, failed, err := s.trendingTop(streamWindow, "", s.deps.Trending.Options().MaxK, s.deps.Cluster != nil)
		if err != nil {
			return storyTrending{}, err
		}
		return s.storyAnswer(res, failed, streamK), nil
	})
}

// streamBreaking lists the stories breaking now, as /api/v1/breaking does.
func (s *Server) streamBreaking() (stream.Page, error) {
	return fromStoryOwner(s, streamBreakingURI, func() (stream.Page, error) {
		res := s.deps.Stories.Breaking()
		page := stream.Page{Stories: make([]json.RawMessage, len(res.Stories)), AsOf: res.AsOf}
		for i, st := range res.Stories {
			raw, err := json.Marshal(st)
			if err != nil {
				return stream.Page{}, err
			}
			page.Stories[i] = raw
		}
		return page, nil
	})
}

// fromStoryOwner returns local's answer, computed here when this node has
// the story state (storiesHere), else the story writer's answer to GET
// uri (routed to it, so it answers for the cluster).
func fromStoryOwner[T any](s *Server, uri string, local func() (T, error)) (T, error) {
	if s.storiesHere() {
		return local()
	}
	var v T
	_, err := s.atOwner(s.storyPartition(), s.opts.PeerTimeout,
		func() error {
			var err error
			v, err = local()
			return err
		},
		func(m cluster.Member, deadline time.Time) error {
			a := s.peerGet(m, uri, HeaderRouted, nil, time.Until(deadline))
			if err := a.failure(); err != nil {
				return err
			}
			var zero T
			v = zero
			return json.Unmarshal(a.body, &v)
		})
	return v, err
}
