package query

import (
	"context"
	"errors"

	"github.com/newsflow/newsflow/internal/auth"
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
	users, err := s.deps.Auth.ListUsers(context.Background())
	if err != nil {
		writeError(ctx, fasthttp.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, usersPage{Users: users})
}

// targetUser returns the account named by the path's id, or answers 404.
func (s *Server) targetUser(ctx *fasthttp.RequestCtx) (auth.User, bool) {
	id, _ := ctx.UserValue("id").(string)
	u, err := s.deps.Auth.GetUser(context.Background(), id)
	switch {
	case errors.Is(err, auth.ErrUserNotFound):
		writeError(ctx, fasthttp.StatusNotFound, "no user "+id)
	case err != nil:
		writeError(ctx, fasthttp.StatusInternalServerError, err.Error())
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
	bg := context.Background()
	if u.Role == auth.RoleAdmin {
		users, err := s.deps.Auth.ListUsers(bg)
		if err != nil {
			writeError(ctx, fasthttp.StatusInternalServerError, err.Error())
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
		if _, err := s.deps.Webhooks.DeleteOwner(bg, u.ID); err != nil {
			writeError(ctx, fasthttp.StatusInternalServerError, "delete the account's webhooks: "+err.Error())
			return
		}
	}
	if err := s.deps.Auth.DeleteUser(bg, u.ID); err != nil && !errors.Is(err, auth.ErrUserNotFound) {
		writeError(ctx, fasthttp.StatusInternalServerError, err.Error())
		return
	}
	if s.reads != nil {
		if err := s.reads.DeleteUser(bg, u.ID); err != nil {
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
	if err := s.deps.Auth.RevokeAll(context.Background(), u.ID); err != nil {
		writeError(ctx, fasthttp.StatusInternalServerError, err.Error())
		return
	}
	ctx.SetStatusCode(fasthttp.StatusNoContent)
}
