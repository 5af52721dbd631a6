package query

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/query/auth"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fastjson"
)

// HeaderIdempotencyKey makes a POST safe to retry: a request repeating a key
// seen in the last IdempotencyTTL gets the first response again and appends
// nothing. On the embedded log the key is recorded in the same atomic append
// as the events, so a crash cannot separate them.
const HeaderIdempotencyKey = "Idempotency-Key"

// lineError reports one rejected line of a batch (1-based).
type lineError struct {
	Line  int    `json:"line"`
	Error string `json:"error"`
}

// batchResult is the response to a batch ingestion.
type batchResult struct {
	Accepted int `json:"accepted"`
	// Rejected counts every rejected line; Errors lists them in order.
	Rejected int         `json:"rejected"`
	Errors   []lineError `json:"errors,omitempty"`
	// Truncated: Errors lists only the first rejected lines (the first
	// maxLineErrors, or in a replayed response those that were stored).
	Truncated bool `json:"errors_truncated,omitempty"`
}

// maxLineErrors bounds the line errors a batch response lists (about
// 10 MB of errors at most); beyond it the response says errors_truncated
// and rejected still counts every line. A batch body of the default 32 MiB
// limit needs about 300 bytes a line to have fewer lines than this.
const maxLineErrors = 100_000

// handleShare ingests one share event (JSON object body).
func (s *Server) handleShare(ctx *fasthttp.RequestCtx) {
	s.ingest(ctx, "share", false, s.buildShares)
}

// handleShareBatch ingests NDJSON share events, one per line. Valid lines are
// appended even when others are rejected; the response counts both and
// lists every rejected line (up to maxLineErrors) with its reason. It is 202
// when every line was accepted, 207 when some were, 400 when none was (429
// when every line was over a limit).
func (s *Server) handleShareBatch(ctx *fasthttp.RequestCtx) {
	s.ingest(ctx, "share", true, s.buildShares)
}

// recordBuilder validates a request body and returns the response and
// the number of rejected events; it hands the records it makes to sink in
// order, a chunk at a time (ingestChunk), and stops at the first error
// sink returns, which it returns.
type recordBuilder func(ctx *fasthttp.RequestCtx, body *bodyLines, batch bool, sink recordSink) (status int, resp []byte, rejected int, err error)

// recordSink takes the next records a builder made of a body. It may keep
// the records but not the slice.
type recordSink func(recs []*eventlog.Record) error

// A batch is appended in chunks of at most ingestChunkRecords records and
// about ingestChunkBytes of values, as it is decoded, so that a request
// holds its body and one chunk, not a record for each of its lines (a
// 100,000-line batch would otherwise hold about three times its body
// until the end). A batch with an Idempotency-Key is appended whole, with
// its key, in one atomic append.
const (
	ingestChunkRecords = 4096
	ingestChunkBytes   = 1 << 20
)

// appendTimeout bounds one append of ingested records.
const appendTimeout = 30 * time.Second

// ingest appends the records build makes of the body, with idempotency.
func (s *Server) ingest(ctx *fasthttp.RequestCtx, kind string, batch bool, build recordBuilder) {
	span := s.opts.Tracing.Ingest(kind, ctx.Request.Header.Peek(engine.HeaderTraceParent))
	defer func() { span.EndHTTP(ctx.Response.StatusCode()) }()
	key := string(ctx.Request.Header.Peek(HeaderIdempotencyKey))
	if len(key) > 200 {
		writeError(ctx, fasthttp.StatusBadRequest, HeaderIdempotencyKey+" longer than 200 bytes")
		return
	}
	var sum []byte
	if key != "" {
		// A key is the caller's, for one endpoint, and names one request.
		key = idempotencyScope(ctx.Path(), s.caller(ctx), key)
		sum = idempotencyRequestSum(ctx.URI().RequestURI(), ctx.PostBody())
		prev, err := s.idem.begin(key)
		switch {
		case errors.Is(err, errNoKeys):
			writeError(ctx, fasthttp.StatusServiceUnavailable, err.Error())
			return
		case err != nil:
			writeError(ctx, fasthttp.StatusConflict, err.Error())
			return
		}
		defer s.idem.done(key)
		if prev != nil && !bytes.Equal(prev.Sum, sum) {
			writeError(ctx, fasthttp.StatusUnprocessableEntity, HeaderIdempotencyKey+
				" reused with another request: this key was sent before with a different body; use a new key for a new request")
			return
		}
		if prev != nil {
			ctx.Response.Header.Set("Idempotent-Replayed", "true")
			writeRaw(ctx, prev.Status, prev.Body)
			return
		}
	}
	var whole []*eventlog.Record // with a key: appended at the end, with it
	appended := 0
	sink := func(recs []*eventlog.Record) error {
		span.Stamp(recs...)
		if key != "" {
			whole = append(whole, recs...)
			return nil
		}
		if err := s.appendIngested(recs); err != nil {
			return err
		}
		appended += len(recs)
		return nil
	}
	status, body, rejected, err := build(ctx, linesOf(ctx), batch, sink)
	if err == nil && len(whole) > 0 {
		var marker *eventlog.Record
		if marker, err = s.idem.marker(key, sum, status, body); err == nil {
			if err = s.appendIngested(append(whole, marker)); err == nil {
				appended = len(whole)
			}
		}
	}
	if err != nil {
		s.m.ingested.WithLabelValues(kind, "accepted").Add(float64(appended))
		s.m.ingested.WithLabelValues(kind, "failed").Add(float64(max(len(whole)-appended, 0)))
		s.opts.Logger.Error("append "+kind+"s", "err", err, "appended", appended)
		status, msg := fasthttp.StatusServiceUnavailable, "log unavailable"
		if be := (*errBodyRead)(nil); errors.As(err, &be) {
			ctx.SetConnectionClose()
			status, msg = fasthttp.StatusBadRequest, "cannot read the request body"
			switch {
			case errors.Is(err, fasthttp.ErrBodyTooLarge):
				status, msg = fasthttp.StatusRequestEntityTooLarge, s.bodyTooLargeMessage()
			case isTimeout(err):
				status, msg = fasthttp.StatusRequestTimeout, "timed out reading the request body"
			}
		}
		if appended > 0 {
			msg = fmt.Sprintf("%s after the first %d accepted %ss of this batch were appended: %v; "+
				"resending the whole batch is safe (what was appended is deduplicated)", msg, appended, kind, err)
		} else {
			msg += ": " + err.Error()
		}
		writeError(ctx, status, msg)
		return
	}
	s.m.ingested.WithLabelValues(kind, "accepted").Add(float64(appended))
	s.m.ingested.WithLabelValues(kind, "rejected").Add(float64(rejected))
	writeRaw(ctx, status, body)
}

// appendIngested appends ingested records to the log.
func (s *Server) appendIngested(recs []*eventlog.Record) error {
	actx, cancel := context.WithTimeout(context.Background(), appendTimeout)
	defer cancel()
	return s.deps.Log.Append(actx, recs)
}

// caller names who sends a request, for the scope of its Idempotency-Key:
// the admin or ingestion token (by its digest), the session's user, or for
// an anonymous request the client address (clientIP, per ClientKey).
func (s *Server) caller(ctx *fasthttp.RequestCtx) string {
	if t, ok := bearer(ctx); ok && (s.adminToken(ctx) || s.ingestToken(ctx)) {
		h := sha256.Sum256([]byte(t))
		return "token:" + hex.EncodeToString(h[:])
	}
	if u, ok := s.user(ctx); ok {
		return "user:" + u.ID
	}
	return "client:" + auth.ClientKey(clientIP(ctx))
}

// userEvent is what ingestion checks of a decoded event: whose it is,
// when it happened, and the key that routes it.
type userEvent struct {
	user string
	ts   int64
	key  string
}

// buildEvents validates the body's events of one kind (decode reads one)
// and returns the response, the records to append to topic and the number
// of rejected events; admit, if set, is asked last whether a valid event
// may be taken (a limit), and accepted, if set, hears of each accepted
// event.
func (s *Server) buildEvents(ctx *fasthttp.RequestCtx, body *bodyLines, batch bool, sink recordSink, topic, kind string,
	decode func(p *fastjson.Parser, line []byte) (userEvent, error), admit func() error, accepted func(userEvent)) (int, []byte, int, error) {
	parts, err := s.partitions(topic)
	if err != nil {
		b, _ := json.Marshal(errorBody{Error: kind + "s topic unavailable: " + err.Error()})
		return fasthttp.StatusServiceUnavailable, b, 0, nil
	}
	p := s.parsers.Get()
	defer s.parsers.Put(p)
	now := s.opts.Now().UnixMilli()
	// The request's arrival is the events' origin: the SLOs count from it.
	origin := engine.OriginHeader(time.Now())
	w := s.writer(ctx)
	record := func(line []byte) (*eventlog.Record, error) {
		ev, err := decode(p, line)
		if err != nil {
			return nil, err
		}
		if err := w.mayWrite(kind, ev.user); err != nil {
			return nil, err
		}
		if err := schema.CheckTime(ev.ts, now, s.opts.MaxPast, s.opts.MaxFuture); err != nil {
			return nil, err
		}
		if admit != nil {
			if err := admit(); err != nil {
				return nil, err
			}
		}
		if accepted != nil {
			accepted(ev)
		}
		k := []byte(ev.key)
		return &eventlog.Record{Topic: topic, Partition: eventlog.PartitionFor(k, parts),
			Key: k, Value: bytes.Clone(line), Timestamp: ev.ts, Headers: []eventlog.Header{origin}}, nil
	}
	return decodeLines(body, batch, kind+" event", record, sink)
}

// buildShares validates share events, keyed by article_id.
func (s *Server) buildShares(ctx *fasthttp.RequestCtx, body *bodyLines, batch bool, sink recordSink) (int, []byte, int, error) {
	return s.buildEvents(ctx, body, batch, sink, schema.TopicShares, "share", func(p *fastjson.Parser, line []byte) (userEvent, error) {
		sh, err := schema.DecodeShare(p, line)
		return userEvent{user: sh.UserID, ts: sh.Timestamp, key: sh.ArticleID}, err
	}, s.shareLimit(ctx), nil)
}

// decodeLines applies decode to a single-event body or to each line of an
// NDJSON batch, hands the records to sink in chunks (ingestChunkRecords,
// ingestChunkBytes), and builds the response. An error of sink ends it and
// is returned.
func decodeLines(body *bodyLines, batch bool, what string, decode func(line []byte) (*eventlog.Record, error), sink recordSink) (int, []byte, int, error) {
	if !batch {
		rec, err := decode(bytes.TrimSpace(body.whole()))
		if err != nil {
			status := fasthttp.StatusBadRequest
			if fe := (*errForbidden)(nil); errors.As(err, &fe) {
				status = fasthttp.StatusForbidden
			}
			if le := (*errShareLimit)(nil); errors.As(err, &le) {
				status = fasthttp.StatusTooManyRequests
			}
			b, _ := json.Marshal(errorBody{Error: err.Error()})
			return status, b, 1, nil
		}
		if err := sink([]*eventlog.Record{rec}); err != nil {
			return 0, nil, 0, err
		}
		return fasthttp.StatusAccepted, []byte(`{"accepted":1}`), 0, nil
	}
	var res batchResult
	var chunk []*eventlog.Record
	chunkBytes := 0
	limited := 0 // lines rejected by a limit
	for n := 1; ; n++ {
		line, err := body.next()
		if be := (*errBodyRead)(nil); errors.As(err, &be) {
			return 0, nil, 0, err
		}
		if line == nil && err == nil {
			break
		}
		var rec *eventlog.Record
		if err == nil {
			if line = bytes.TrimSpace(line); len(line) == 0 {
				continue
			}
			rec, err = decode(line)
		}
		if err != nil {
			if le := (*errShareLimit)(nil); errors.As(err, &le) {
				limited++
			}
			res.Rejected++
			if len(res.Errors) < maxLineErrors {
				res.Errors = append(res.Errors, lineError{Line: n, Error: err.Error()})
			} else {
				res.Truncated = true
			}
			continue
		}
		res.Accepted++
		chunk = append(chunk, rec)
		if chunkBytes += len(rec.Key) + len(rec.Value); len(chunk) >= ingestChunkRecords || chunkBytes >= ingestChunkBytes {
			if err := sink(chunk); err != nil {
				return 0, nil, 0, err
			}
			clear(chunk)
			chunk, chunkBytes = chunk[:0], 0
		}
	}
	if len(chunk) > 0 {
		if err := sink(chunk); err != nil {
			return 0, nil, 0, err
		}
	}
	status := fasthttp.StatusAccepted
	switch {
	case res.Accepted+res.Rejected == 0:
		b, _ := json.Marshal(errorBody{Error: "empty batch: send one JSON " + what + " per line"})
		return fasthttp.StatusBadRequest, b, 0, nil
	case res.Accepted == 0 && limited == res.Rejected:
		status = fasthttp.StatusTooManyRequests // every line over a limit: retry later
	case res.Accepted == 0:
		status = fasthttp.StatusBadRequest
	case res.Rejected > 0:
		status = fasthttp.StatusMultiStatus // the accepted lines are taken: resend only the rejected
	}
	b, _ := json.Marshal(res)
	return status, b, res.Rejected, nil
}

// handleRead ingests one read event; handleReadBatch NDJSON read schema.
// A read is keyed by user_id.
func (s *Server) handleRead(ctx *fasthttp.RequestCtx) { s.ingest(ctx, "read", false, s.buildReads) }

func (s *Server) handleReadBatch(ctx *fasthttp.RequestCtx) { s.ingest(ctx, "read", true, s.buildReads) }

func (s *Server) buildReads(ctx *fasthttp.RequestCtx, body *bodyLines, batch bool, sink recordSink) (int, []byte, int, error) {
	return s.buildEvents(ctx, body, batch, sink, schema.TopicReads, "read", func(p *fastjson.Parser, line []byte) (userEvent, error) {
		r, err := schema.DecodeRead(p, line)
		return userEvent{user: r.UserID, ts: r.Timestamp, key: r.UserID}, err
	}, nil, func(ev userEvent) {
		// The reader's feed pushes read stories down: compute it anew.
		s.feeds.invalidate(ev.user)
	})
}

// errInFlight is returned for a retry that arrives while the first request
// with the same key is still being processed.
var errInFlight = errors.New("a request with this " + HeaderIdempotencyKey + " is in progress; retry later")
