package query

import "github.com/valyala/fasthttp"

// Disk is the node's free-space guard. Allow returns an error, whose text
// says why, unless a write of about n bytes of request may go ahead; the
// server answers 507 with it. Safe for concurrent use.
type Disk interface {
	Allow(n int) error
}

// requireDisk answers 507 Insufficient Storage, with the reason and a
// Retry-After, to an ingestion request the node cannot take for want of
// disk space, before its body is appended to the log. Nothing of it is
// kept: the client sends it again later.
func (s *Server) requireDisk(h fasthttp.RequestHandler) fasthttp.RequestHandler {
	if s.deps.Disk == nil {
		return h
	}
	return func(ctx *fasthttp.RequestCtx) {
		n := ctx.Request.Header.ContentLength()
		if !ctx.Request.IsBodyStream() {
			n = max(n, len(ctx.Request.Body()))
		}
		if err := s.deps.Disk.Allow(max(n, 0)); err != nil {
			ctx.Response.Header.Set("Retry-After", "30")
			writeError(ctx, fasthttp.StatusInsufficientStorage, err.Error()+"; nothing of this request was kept: send it again later")
			return
		}
		h(ctx)
	}
}
