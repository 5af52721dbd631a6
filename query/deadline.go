package query

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/newsflow/newsflow/cluster"
	"github.com/newsflow/newsflow/operators/readstate"
	"github.com/valyala/fasthttp"
)

// Handlers call the metadata store (accounts, sessions, API keys,
// preferences, sources, webhooks, read marks and stars: the
// Raft-replicated store in a cluster) with a deadline of
// Options.MetaTimeout, never with none; a handler that makes several
// changes gives each its own. A metadata write goes through the leader and is retried while
// there is none (cluster.Node.Apply): without a deadline a request would
// wait for an election that may not come. Metadata reads come from the
// node's replica and do not wait for a leader.

// defaultMetaTimeout is Options.MetaTimeout's default.
const defaultMetaTimeout = 4 * time.Second

// metaRetryAfter is the Retry-After of a 503 for want of a leader: about
// an election.
const metaRetryAfter = 5 * time.Second

// metaCtx is the context of a handler's call to the metadata store,
// bounded by Options.MetaTimeout. It does not derive from the request:
// a change once sent is not abandoned halfway by a client that went away
// or a shutdown, and a fasthttp.RequestCtx is pooled, so a context derived
// from it would be watched past the handler's return (a data race on the
// reused request).
func (s *Server) metaCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), s.opts.MetaTimeout)
}

// metaUnavailable reports whether err says the metadata store could not
// take a write in time (the cluster has no leader, or it did not answer
// within Options.MetaTimeout) and if so answers 503 with Retry-After.
// Nothing was changed that the client must undo: the write may be sent
// again.
func metaUnavailable(ctx *fasthttp.RequestCtx, err error) bool {
	switch {
	case errors.Is(err, cluster.ErrNoLeader):
		setMetaRetryAfter(ctx)
		writeError(ctx, fasthttp.StatusServiceUnavailable, "the cluster has no leader right now, so it cannot take this change; try again")
		return true
	case errors.Is(err, readstate.ErrUnavailable):
		setMetaRetryAfter(ctx)
		writeError(ctx, fasthttp.StatusServiceUnavailable, "this reader's state is moving to this node; try again")
		return true
	case errors.Is(err, context.DeadlineExceeded):
		setMetaRetryAfter(ctx)
		writeError(ctx, fasthttp.StatusServiceUnavailable, "the metadata store did not answer in time; try again")
		return true
	}
	return false
}

// setMetaRetryAfter sets the Retry-After of a 503 for want of a leader.
func setMetaRetryAfter(ctx *fasthttp.RequestCtx) {
	ctx.Response.Header.Set("Retry-After", strconv.Itoa(int(metaRetryAfter.Seconds())))
}

// metaError answers an error of the metadata store that no handler
// branch took: 503 with Retry-After when the store is unavailable
// (metaUnavailable), else 500 with what failed.
func metaError(ctx *fasthttp.RequestCtx, what string, err error) {
	if !metaUnavailable(ctx, err) {
		writeError(ctx, fasthttp.StatusInternalServerError, what+": "+err.Error())
	}
}
