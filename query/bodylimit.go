package query

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/valyala/fasthttp"
)

// Request bodies are limited per route before they are read: once the
// headers are in, fasthttp asks bodyConfig for the request's limit
// (Server.HeaderReceived); a Content-Length over it is refused at once
// without reading the body, a chunked body is cut when it passes it, and
// the answer is 413 (handleTransportError) on a closed connection. The
// limits:
//
//   - login, register and setup (cookieRoutes) and the Google Reader
//     ClientLogin: MaxAuthBodyBytes (4 KiB);
//   - the batch routes (largeBodyRoutes: articles, share and read batches,
//     the OPML import) and the cluster's internal routes: MaxBodyBytes
//     (32 MiB);
//   - every other route: MaxSmallBodyBytes (1 MiB).
//
// So a client that has not logged in makes the node hold at most 4 KiB per
// login request, and 32 MiB only on the ingestion routes.

// Defaults of the body limits (Options).
const (
	defaultMaxAuthBody  = 4 << 10
	defaultMaxSmallBody = 1 << 20
)

// clientLogin is the Google Reader API's login (readerapi): a form, no
// cookie, but a login all the same.
const clientLogin = "/accounts/ClientLogin"

// largeBodyRoutes take bodies up to MaxBodyBytes.
var largeBodyRoutes = map[string]bool{
	"/api/v1/articles":             true,
	"/api/v1/events/share/batch":   true,
	"/api/v1/events/read/batch":    true,
	"/api/v1/admin/sources/import": true,
}

// bodyLimit returns the largest body a request on path may carry.
func (s *Server) bodyLimit(path []byte) int {
	switch {
	case cookieRoutes[string(path)], string(path) == clientLogin:
		return min(s.opts.MaxAuthBodyBytes, s.opts.MaxBodyBytes)
	case largeBodyRoutes[string(path)]:
		return s.opts.MaxBodyBytes
	default:
		return min(s.opts.MaxSmallBodyBytes, s.opts.MaxBodyBytes)
	}
}

// bodyConfig returns the body limit of a request whose headers have been
// read.
func (s *Server) bodyConfig(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	limit := s.bodyLimit(routePath(h))
	h.Del(headerBodyRefused)
	if h.ContentLength() > limit {
		// Refused on its length alone: none of it is read (readBody
		// answers 413 and closes the connection).
		h.Set(headerBodyRefused, "1")
		h.SetContentLength(0)
	}
	return fasthttp.RequestConfig{MaxRequestBodySize: limit}
}

// headerBodyRefused marks, from bodyConfig to readBody, a request whose
// Content-Length is over its route's limit. A client's own is dropped.
const headerBodyRefused = "X-Newsflow-Body-Refused"

// routePath returns a request's path as the router will see it
// (normalised: //, /./ and %-escapes), so that another spelling of a route
// has the route's limit.
func routePath(h *fasthttp.RequestHeader) []byte {
	path := h.RequestURI()
	if i := bytes.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	if bytes.Contains(path, []byte("//")) || bytes.Contains(path, []byte("/.")) || bytes.IndexByte(path, '%') >= 0 || !bytes.HasPrefix(path, []byte("/")) {
		u := fasthttp.AcquireURI()
		defer fasthttp.ReleaseURI(u)
		if err := u.Parse(nil, h.RequestURI()); err == nil {
			path = append([]byte(nil), u.Path()...)
		}
	}
	return path
}

// The server streams request bodies (fasthttp's StreamRequestBody: it
// reads at most 8 KiB before the handlers run), and readBody reads each
// body up to its route's limit before the handlers, as fasthttp would,
// with one exception: the share and read batches (streamRoutes) without
// an Idempotency-Key are decoded from the connection line by line as they
// arrive (ingest), so a request holds one buffered line and one chunk of
// records, not its body, however many clients post at once.

// streamRoutes decode their bodies from the connection.
var streamRoutes = map[string]bool{
	"/api/v1/events/share/batch": true,
	"/api/v1/events/read/batch":  true,
}

// readBody reads a streamed request body up to its route's limit (413
// beyond it, and for a Content-Length over it before reading anything),
// unless the route decodes the stream itself.
func (s *Server) readBody(next fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		if len(ctx.Request.Header.Peek(headerBodyRefused)) > 0 {
			s.bodyUnread(ctx, fasthttp.ErrBodyTooLarge)
			return
		}
		if !ctx.Request.IsBodyStream() {
			next(ctx)
			return
		}
		path := routePath(&ctx.Request.Header)
		limit := s.bodyLimit(path)
		if ctx.Request.Header.ContentLength() > limit {
			s.bodyUnread(ctx, fasthttp.ErrBodyTooLarge)
			return
		}
		if streamRoutes[string(path)] && len(ctx.Request.Header.Peek(HeaderIdempotencyKey)) == 0 {
			lines := &bodyLines{r: bufio.NewReaderSize(ctx.RequestBodyStream(), maxStreamLine), limit: limit}
			ctx.SetUserValue(bodyLinesKey{}, lines)
			next(ctx)
			if !lines.drain() {
				// Answered before the end of a body that could not be
				// read to its end within the limit: the rest is still
				// on the connection.
				ctx.SetConnectionClose()
			}
			return
		}
		body, err := readLimited(ctx.RequestBodyStream(), ctx.Request.Header.ContentLength(), limit)
		switch {
		case err != nil:
			s.bodyUnread(ctx, err)
			return
		case len(body) > limit:
			s.bodyUnread(ctx, fasthttp.ErrBodyTooLarge)
			return
		}
		ctx.Request.SetBodyRaw(body)
		next(ctx)
	}
}

// readLimited reads a body of length n (negative: unknown, chunked) from
// r, at most limit+1 bytes of it: a known length is read into a buffer of
// its size.
func readLimited(r io.Reader, n, limit int) ([]byte, error) {
	if n < 0 {
		return io.ReadAll(io.LimitReader(r, int64(limit)+1))
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, err
	}
	return body, nil
}

// bodyUnread answers a request whose body could not be read (or was too
// large) as a transport error, and closes the connection, which may still
// hold the rest of the body.
func (s *Server) bodyUnread(ctx *fasthttp.RequestCtx, err error) {
	s.handleTransportError(ctx, err)
	ctx.SetConnectionClose()
}

// maxStreamLine is the longest line a streamed batch may hold; a longer
// one is rejected (events are at most 8 KiB) and the batch goes on.
const maxStreamLine = 64 << 10

// errLineTooLong rejects a line of a streamed batch over maxStreamLine.
var errLineTooLong = fmt.Errorf("line longer than %d bytes", maxStreamLine)

// errBodyRead ends the decoding of a streamed batch: its body was over the
// limit, or reading it failed.
type errBodyRead struct{ err error }

func (e *errBodyRead) Error() string { return e.err.Error() }
func (e *errBodyRead) Unwrap() error { return e.err }

// bodyLines yields the lines of a request body, from memory or from the
// connection (a stream route's), at most limit bytes of it.
type bodyLines struct {
	rest   []byte        // a body in memory
	r      *bufio.Reader // or its stream
	read   int
	limit  int
	closed bool // the stream ended
}

// bodyLinesKey is the user value of a request whose body the handler
// decodes from the connection: its *bodyLines.
type bodyLinesKey struct{}

// linesOf returns the lines of ctx's body: from the connection on a
// stream route (readBody), else from memory.
func linesOf(ctx *fasthttp.RequestCtx) *bodyLines {
	if b, ok := ctx.UserValue(bodyLinesKey{}).(*bodyLines); ok {
		return b
	}
	return &bodyLines{rest: ctx.PostBody()}
}

// whole returns a body in memory.
func (b *bodyLines) whole() []byte { return b.rest }

// next returns the next line (nil at the end), errLineTooLong for a line
// over maxStreamLine (skipped), or an *errBodyRead.
func (b *bodyLines) next() ([]byte, error) {
	if b.r == nil {
		if len(b.rest) == 0 {
			return nil, nil
		}
		line := b.rest
		if i := bytes.IndexByte(b.rest, '\n'); i >= 0 {
			line, b.rest = b.rest[:i], b.rest[i+1:]
		} else {
			b.rest = nil
		}
		return line, nil
	}
	if b.closed {
		return nil, nil
	}
	line, err := b.r.ReadSlice('\n')
	tooLong := false
	for errors.Is(err, bufio.ErrBufferFull) {
		b.read += len(line)
		tooLong = true
		line, err = b.r.ReadSlice('\n')
	}
	b.read += len(line)
	switch {
	case b.read > b.limit:
		return nil, &errBodyRead{fasthttp.ErrBodyTooLarge}
	case errors.Is(err, io.EOF):
		b.closed = true
		if len(line) == 0 && !tooLong {
			return nil, nil
		}
	case err != nil:
		return nil, &errBodyRead{err}
	}
	if tooLong {
		return nil, errLineTooLong
	}
	if line = bytes.TrimSuffix(line, []byte("\n")); len(line) == 0 {
		line = []byte{} // a blank line, not the end
	}
	return line, nil
}

// drain reads and discards what is left of a streamed body the handler
// answered before its end (a 507 or 503 refuses it unread), up to the
// limit, so that the client, still sending it, reads the answer instead
// of a reset connection. It reports whether the body ended within the
// limit (the connection can serve the next request).
func (b *bodyLines) drain() bool {
	if b.r == nil || b.closed {
		return true
	}
	if b.read > b.limit {
		return false
	}
	n, err := io.Copy(io.Discard, io.LimitReader(b.r, int64(b.limit-b.read)+1))
	b.read += int(n)
	if err != nil || b.read > b.limit {
		return false
	}
	b.closed = true
	return true
}

// bodyTooLargeMessage is the 413 answer's error.
func (s *Server) bodyTooLargeMessage() string {
	return fmt.Sprintf("request body too large: login, register and setup take at most %d bytes, batches %d, other requests %d",
		s.bodyLimit([]byte("/api/v1/auth/login")), s.opts.MaxBodyBytes, s.bodyLimit(nil))
}
