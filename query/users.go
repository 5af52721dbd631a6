package query

import (
	"errors"

	"github.com/newsflow/newsflow/query/auth"
	"github.com/valyala/fasthttp"
)

// Account administration (admins only, like every /api/v1/admin/ path):
//
//	GET    /api/v1/admin/users               every account, by username
//	DELETE /api/v1/admin/users/{id}          an account with its sessions,
//	                                         API keys, webhooks, preferences
//	                                         and read state
//	DELETE /api/v1/admin/users/{id}/sessions its sessions and API keys (log
//	                                         out everywhere)
//
// The last admin account cannot be deleted (409): the node would have no
// one to administer it but its admin token.

// usersPage is the answer of GET /api/v1/admin/users.
type usersPage struct {
	Users []auth.User `json:"users"`
}

func (s *Server) handleListUsers(ctx *fasthttp.RequestCtx) {
	mctx, cancel := s.metaCtx()
	defer cancel()
	users, err := s.deps.Auth.ListUsers(mctx)
	if err != nil {
		metaError(ctx, "list users", err)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, usersPage{Users: users})
}

// targetUser returns the account named by the path's id, or answers 404.
func (s *Server) targetUser(ctx *fasthttp.RequestCtx) (auth.User, bool) {
	id, _ := ctx.UserValue("id").(string)
	mctx, cancel := s.metaCtx()
	defer cancel()
	u, err := s.deps.Auth.GetUser(mctx, id)
	switch {
	case errors.Is(err, auth.ErrUserNotFound):
		writeError(ctx, fasthttp.StatusNotFound, "no user "+id)
	case err != nil:
		metaError(ctx, "read user", err)
	default:
		return u, true
	}
	return auth.User{}, false
}

func (s *Server) handleDeleteUser(ctx *fasthttp.RequestCtx) {
	u, ok := s.targetUser(ctx)
	if !ok {
		return
	}
	// Each step has a deadline of its own (metaCtx).
	if u.Role == auth.RoleAdmin {
		mctx, cancel := s.metaCtx()
		users, err := s.deps.Auth.ListUsers(mctx)
		cancel()
		if err != nil {
			metaError(ctx, "list users", err)
			return
		}
		admins := 0
		for _, o := range users {
			if o.Role == auth.RoleAdmin {
				admins++
			}
		}
		if admins <= 1 {
			writeError(ctx, fasthttp.StatusConflict, u.Username+" is the last admin: make another account an admin first")
			return
		}
	}
	// Dependents first, so that a failure leaves an account to delete
	// again: its webhooks (queued deliveries of them are dropped), then
	// the account with its sessions, API keys and preferences.
	if s.deps.Webhooks != nil {
		mctx, cancel := s.metaCtx()
		_, err := s.deps.Webhooks.DeleteOwner(mctx, u.ID)
		cancel()
		if err != nil {
			metaError(ctx, "delete the account's webhooks", err)
			return
		}
	}
	mctx, cancel := s.metaCtx()
	err := s.deps.Auth.DeleteUser(mctx, u.ID)
	cancel()
	if err != nil && !errors.Is(err, auth.ErrUserNotFound) {
		metaError(ctx, "delete user", err)
		return
	}
	if s.reads != nil {
		mctx, cancel := s.metaCtx()
		err := s.reads.DeleteUser(mctx, u.ID)
		cancel()
		if err != nil {
			writeError(ctx, fasthttp.StatusInternalServerError, "the account is deleted, its read state not: "+err.Error())
			return
		}
	}
	s.feeds.invalidate(u.ID)
	ctx.SetStatusCode(fasthttp.StatusNoContent)
}

func (s *Server) handleRevokeSessions(ctx *fasthttp.RequestCtx) {
	u, ok := s.targetUser(ctx)
	if !ok {
		return
	}
	mctx, cancel := s.metaCtx()
	defer cancel()
	if err := s.deps.Auth.RevokeAll(mctx, u.ID); err != nil {
		metaError(ctx, "revoke sessions", err)
		return
	}
	ctx.SetStatusCode(fasthttp.StatusNoContent)
}
