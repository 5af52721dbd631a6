package query

import (
	"errors"
	"time"

	"github.com/newsflow/newsflow/operators/interest"
	"github.com/valyala/fasthttp"
)

// profileBody is a user's interest profile as the API shows it.
type profileBody struct {
	UserID  string                  `json:"user_id"`
	Topics  []interest.Weight       `json:"topics"`
	Updated *time.Time              `json:"updated_at,omitempty"`
	Reads   int                     `json:"reads"`
	History []interest.HistoryEntry `json:"history"`
}

// handleUserInterest answers a user's interest vector (decayed to now) and
// reading history.
func (s *Server) handleUserInterest(ctx *fasthttp.RequestCtx) {
	id, _ := ctx.UserValue("id").(string)
	if id == "" || len(id) > 128 {
		writeError(ctx, fasthttp.StatusBadRequest, "user id must be 1 to 128 bytes")
		return
	}
	p, found, err := s.deps.Interest.Profile(id)
	switch {
	case errors.Is(err, interest.ErrUnavailable):
		writeError(ctx, fasthttp.StatusServiceUnavailable, err.Error())
		return
	case err != nil:
		writeError(ctx, fasthttp.StatusInternalServerError, err.Error())
		return
	}
	body := profileBody{UserID: id, Topics: []interest.Weight{}, History: []interest.HistoryEntry{}}
	if found {
		now := s.opts.Now().UnixMilli()
		body.Topics = p.DecayedTopics(s.deps.Interest.Options().DailyDecay, max(now, p.Updated))
		t := time.UnixMilli(p.Updated).UTC()
		body.Updated, body.Reads, body.History = &t, p.Reads, p.History
	}
	writeJSON(ctx, fasthttp.StatusOK, body)
}
