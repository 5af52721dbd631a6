package query

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/newsflow/newsflow/cluster"
	"github.com/valyala/fasthttp"
)

// Handlers call the metadata store (accounts, sessions, API keys,
// preferences, sources, webhooks: the Raft-replicated store in a cluster)
// and the reader state (appends to the log, reads from the owner of the
// reader's partition) with a deadline of Options.MetaTimeout, never with
// none. A metadata write goes through the leader and is retried while
// there is none (cluster.Node.Apply): without a deadline a request would
// wait for an election that may not come. Metadata reads come from the
// node's replica and do not wait for a leader.

// defaultMetaTimeout is Options.MetaTimeout's default.
const defaultMetaTimeout = 4 * time.Second

// metaRetryAfter is the Retry-After of a 503 for want of a leader: about
// an election.
const metaRetryAfter = 5 * time.Second

// readCtx is the context of a handler's reads of the metadata store: the
// request's (it ends when the server shuts down) with the deadline of
// Options.MetaTimeout.
func (s *Server) readCtx(ctx *fasthttp.RequestCtx) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.opts.MetaTimeout)
}

// writeCtx is the context of a handler's writes to the metadata store
// (and of the reads that decide them): bounded by Options.MetaTimeout but
// not by the request, so a write once sent is not abandoned halfway by a
// shutdown or a client that went away.
func (s *Server) writeCtx() (context.Context, context.CancelFunc) {
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
		ctx.Response.Header.Set("Retry-After", strconv.Itoa(int(metaRetryAfter.Seconds())))
		writeError(ctx, fasthttp.StatusServiceUnavailable, "the cluster has no leader right now, so it cannot take this change; try again")
		return true
	case errors.Is(err, context.DeadlineExceeded):
		ctx.Response.Header.Set("Retry-After", strconv.Itoa(int(metaRetryAfter.Seconds())))
		writeError(ctx, fasthttp.StatusServiceUnavailable, "the metadata store did not answer in time; try again")
		return true
	}
	return false
}

// metaError answers an error of the metadata store that no handler
// branch took: 503 with Retry-After when the store is unavailable
// (metaUnavailable), else 500 with what failed.
func metaError(ctx *fasthttp.RequestCtx, what string, err error) {
	if !metaUnavailable(ctx, err) {
		writeError(ctx, fasthttp.StatusInternalServerError, what+": "+err.Error())
	}
}
