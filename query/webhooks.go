package query

import (
	"context"
	"errors"
	"fmt"

	"github.com/newsflow/newsflow/internal/fetch"
	"github.com/newsflow/newsflow/internal/redact"
	"github.com/newsflow/newsflow/operators/webhook"
	"github.com/newsflow/newsflow/query/auth"
	"github.com/valyala/fasthttp"
)

// Breaking-news webhooks: a reader registers URLs with a filter; admins
// see every hook with its delivery status.

// hookView is a hook with its delivery status; the secret, and the
// credentials its URL may carry, only for its owner.
type hookView struct {
	webhook.Hook
	Status webhook.Status `json:"status"`
}

func (s *Server) hookViews(ctx context.Context, owner string, withSecret bool) ([]hookView, error) {
	hooks, err := s.deps.Webhooks.List(ctx, owner)
	if err != nil {
		return nil, err
	}
	out := make([]hookView, len(hooks))
	for i, h := range hooks {
		if !withSecret {
			// Admins see whose hooks go where, not the owner's
			// credentials.
			h.Secret, h.URL = "", redact.URL(h.URL)
		}
		out[i].Hook = h
		if out[i].Status, err = s.deps.Webhooks.Status(ctx, h.ID); err != nil {
			return nil, err
		}
		// Without the node's own addresses, also in a status stored by
		// versions that kept them.
		out[i].Status.LastError = redact.InternalAddrs(out[i].Status.LastError)
		if !withSecret {
			out[i].Status.LastError = redact.Text(out[i].Status.LastError)
		}
	}
	return out, nil
}

func (s *Server) handleMyWebhooks(ctx *fasthttp.RequestCtx, u auth.User) {
	mctx, cancel := s.metaCtx()
	defer cancel()
	hooks, err := s.hookViews(mctx, u.ID, true)
	if err != nil {
		metaError(ctx, "list webhooks", err)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{"webhooks": hooks})
}

// handleAddWebhook registers {"url", "topics", "sources"} for the reader;
// a URL on an address the SSRF guard refuses is refused (400 with
// reason blocked_address).
func (s *Server) handleAddWebhook(ctx *fasthttp.RequestCtx, u auth.User) {
	var req struct {
		URL     string   `json:"url"`
		Topics  []string `json:"topics"`
		Sources []string `json:"sources"`
	}
	if !decodeJSON(ctx, &req) {
		return
	}
	// Deliveries dial through the crawler's SSRF guard: a URL it refuses
	// is refused now, not at every delivery.
	var be *fetch.BlockedError
	gctx, cancel := s.metaCtx()
	err := s.urlGuard().CheckURL(gctx, req.URL)
	cancel()
	if errors.As(err, &be) {
		writeJSON(ctx, fasthttp.StatusBadRequest, refusal{Reason: "blocked_address",
			Error: fmt.Sprintf("the webhook URL cannot be delivered to: %s, which the SSRF guard refuses "+
				"(a node may deliver to such addresses when its configuration allows them: crawl.allow_cidrs or crawl.allow_private)", be.Reason())})
		return
	}
	mctx, cancel := s.metaCtx()
	defer cancel()
	h, err := s.deps.Webhooks.Add(mctx, u.ID, req.URL, req.Topics, req.Sources)
	switch {
	case errors.Is(err, webhook.ErrInvalid):
		writeError(ctx, fasthttp.StatusBadRequest, err.Error())
	case errors.Is(err, webhook.ErrTooMany):
		writeError(ctx, fasthttp.StatusConflict, err.Error())
	case err != nil:
		metaError(ctx, "add webhook", err)
	default:
		ctx.Response.Header.Set("Cache-Control", "no-store")
		writeJSON(ctx, fasthttp.StatusCreated, h)
	}
}

func (s *Server) handleDeleteMyWebhook(ctx *fasthttp.RequestCtx, u auth.User) {
	s.deleteWebhook(ctx, u.ID)
}

func (s *Server) handleAdminWebhooks(ctx *fasthttp.RequestCtx) {
	mctx, cancel := s.metaCtx()
	defer cancel()
	hooks, err := s.hookViews(mctx, "", false)
	if err != nil {
		metaError(ctx, "list webhooks", err)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{"webhooks": hooks})
}

func (s *Server) handleAdminDeleteWebhook(ctx *fasthttp.RequestCtx) { s.deleteWebhook(ctx, "") }

// deleteWebhook deletes the {id} hook of owner ("": any).
func (s *Server) deleteWebhook(ctx *fasthttp.RequestCtx, owner string) {
	id, _ := ctx.UserValue("id").(string)
	mctx, cancel := s.metaCtx()
	defer cancel()
	err := s.deps.Webhooks.Delete(mctx, owner, id)
	switch {
	case errors.Is(err, webhook.ErrNotFound):
		writeError(ctx, fasthttp.StatusNotFound, "no webhook "+id)
	case err != nil:
		metaError(ctx, "delete webhook", err)
	default:
		ctx.SetStatusCode(fasthttp.StatusNoContent)
	}
}
