package query

import (
	"errors"

	"github.com/newsflow/newsflow/query/auth"
	"github.com/valyala/fasthttp"
)

// The reader's API keys: the passwords reader apps use with the client
// APIs, created and revoked in the reader's settings with its session.

// handleAPIKeys lists the logged-in reader's API keys (never a secret).
func (s *Server) handleAPIKeys(ctx *fasthttp.RequestCtx, u auth.User) {
	mctx, cancel := s.metaCtx()
	defer cancel()
	keys, err := s.deps.Auth.APIKeys(mctx, u.ID)
	if err != nil {
		metaError(ctx, "list API keys", err)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{"api_keys": keys})
}

// newAPIKeyBody is the answer to creating a key: the only time its secret
// is shown.
type newAPIKeyBody struct {
	auth.APIKey
	Secret string `json:"secret"`
}

// handleNewAPIKey creates an API key named by {"name": ...}.
func (s *Server) handleNewAPIKey(ctx *fasthttp.RequestCtx, u auth.User) {
	var req struct {
		Name string `json:"name"`
	}
	if !decodeJSON(ctx, &req) {
		return
	}
	mctx, cancel := s.metaCtx()
	defer cancel()
	secret, k, err := s.deps.Auth.NewAPIKey(mctx, u.ID, req.Name)
	switch {
	case errors.Is(err, auth.ErrInvalidAPIKeyName):
		writeError(ctx, fasthttp.StatusBadRequest, err.Error())
	case errors.Is(err, auth.ErrTooManyAPIKeys):
		writeError(ctx, fasthttp.StatusConflict, err.Error())
	case err != nil:
		metaError(ctx, "create API key", err)
	default:
		ctx.Response.Header.Set("Cache-Control", "no-store")
		writeJSON(ctx, fasthttp.StatusCreated, newAPIKeyBody{k, secret})
	}
}

// handleRevokeAPIKey revokes one of the reader's API keys by its id.
func (s *Server) handleRevokeAPIKey(ctx *fasthttp.RequestCtx, u auth.User) {
	id, _ := ctx.UserValue("id").(string)
	mctx, cancel := s.metaCtx()
	defer cancel()
	err := s.deps.Auth.RevokeAPIKey(mctx, u.ID, id)
	switch {
	case errors.Is(err, auth.ErrNoAPIKey):
		writeError(ctx, fasthttp.StatusNotFound, "no API key "+id)
	case err != nil:
		metaError(ctx, "revoke API key", err)
	default:
		ctx.SetStatusCode(fasthttp.StatusNoContent)
	}
}
