// Package stream serves GET /api/v1/stream: server-sent events, so that
// pages need not poll.
//
// Events (each with an id, data one line of JSON):
//
//	event: trending   the answer of /api/v1/trending?by=story&window=1h&k=10,
//	                  whenever it changed (as_of alone does not count)
//	event: breaking   {"stories":[...],"as_of":...}: the stories that became
//	                  breaking, as /api/v1/breaking lists them, each once per
//	                  breaking episode (it ends when the story leaves the list)
//	event: trending.entered
//	                  {"window","article_id","rank","count","entered_at"}
//	                  (and "error_bound" in cms mode): an article entered a
//	                  window's top K, one event per record of the
//	                  trending.changes topic (Follower), as soon as this
//	                  node appends or reads it
//	: ping            a comment every StreamHeartbeat, for proxies
//
// The stream starts with "retry:" (the reconnection delay) and the current
// state: the trending answer and the stories breaking now. An id is
// "<process>.<n>" and names the state up to event n of this server
// process: a client that reconnects to the same process with Last-Event-ID
// (the header EventSource sends, or ?last_event_id=) gets only what came
// after it; with an id of another process (a restart, another node) it gets
// the current state again. trending.entered events are announcements, not
// state: a new stream gets none from before it opened, a reconnection the
// last streamEnteredKeep of those after its id, and none that came while no
// stream was open (the trending.changes topic has every one).
//
// One hub per server computes the state every StreamInterval while at
// least one stream is open, once for all of them, and hands each stream the
// same prepared bytes. (After a time without any open stream a client
// gets the whole state again, whatever its Last-Event-ID.) In a cluster both answers come from the owner of the
// story partition (which names the stories): the server's Source asks it.
//
// Goroutines: the hub's loop (Run) is owned by the server's Run; each stream's writer
// runs in fasthttp's stream-writer goroutine for the connection and owns
// one goroutine that notices when the client closes the connection
// (watchPeer). A stream ends when the client goes away, when it reads too
// slowly (streamBuffer events queued: the client reconnects and gets the
// current state), and when the server shuts down (the hub closes every
// stream before the HTTP server drains).
package stream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/operators/trending"
	"github.com/newsflow/newsflow/query/httpkit"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
)

// Stream events and the trending query they carry.
const (
	eventTrending = "trending"
	eventBreaking = "breaking"
	eventEntered  = "trending.entered"
	// streamRetry is the reconnection delay a stream suggests.
	streamRetry = 5 * time.Second
	// streamBuffer is how many events may wait for a stream's client
	// before the stream is ended as too slow.
	streamBuffer = 16
	// streamEnteredKeep is how many trending.entered events the hub keeps
	// for streams that reconnect.
	streamEnteredKeep = 64
	// streamDrainGrace is how long a stream the hub ends may take to
	// write what it has: a client that does not read loses its connection
	// then.
	streamDrainGrace = time.Second
)

// Defaults of Options.
const (
	DefaultMax       = 1000
	DefaultInterval  = 2 * time.Second
	DefaultHeartbeat = 15 * time.Second
)

var (
	errStreamsFull   = errors.New("too many open streams")
	errStreamsClosed = errors.New("the server is shutting down")
)

var pingComment = []byte(": ping\n\n")

// Page is the answer of /api/v1/breaking with its stories as they are
// written, and the data of a breaking event.
type Page struct {
	Stories []json.RawMessage `json:"stories"`
	AsOf    int64             `json:"as_of,omitempty"`
}

// Source computes what streams carry: Trending the trending answer as it
// is written and its key (the answer without its as_of: what is compared
// to tell a change), Breaking the stories breaking now.
type Source struct {
	Trending func() (data, key []byte, err error)
	Breaking func() (Page, error)
}

// Options configure a Hub.
type Options struct {
	// Interval is how often the state is computed while streams are open,
	// Heartbeat how often a ping comment is written, WriteTimeout how long
	// one write may take; Max bounds the open streams.
	Interval, Heartbeat, WriteTimeout time.Duration
	Max                               int
}

// Hub is the state every stream shares and the set of open streams. Its
// methods are safe for concurrent use.
type Hub struct {
	src          Source
	interval     time.Duration
	heartbeat    time.Duration
	writeTimeout time.Duration
	max          int
	boot         string // the process part of event ids
	open         prometheus.Gauge
	kick         chan struct{} // buffered 1: compute now, a new stream waits

	mu struct {
		sync.Mutex
		closed bool
		subs   map[*streamSub]struct{}
		seq    uint64 // of the last event
		// fresh is true when the state below was computed while streams
		// were open; the hub does not compute while none is.
		fresh     bool
		trendKey  []byte // the answer without as_of, to compare
		trendData []byte
		trendSeq  uint64
		breaking  []breakingEntry // breaking now, ranked
		asOf      int64           // of breaking
		// entered are the last trending.entered events, oldest first.
		entered []enteredEvent
	}
}

// enteredEvent is a trending.entered event as it is written.
type enteredEvent struct {
	seq uint64
	msg []byte
}

// breakingEntry is a story breaking now and the event that announced it.
type breakingEntry struct {
	id  string
	raw json.RawMessage
	seq uint64
}

// streamSub is one open stream.
type streamSub struct {
	ch   chan []byte // events to write; closed when the hub ends the stream
	conn net.Conn    // nil when the request has no connection (tests)
	last uint64      // Last-Event-ID within this process, or 0
	// since: the trending.entered events after this one are the stream's
	// (last, or the last event when it opened without one).
	since uint64
	// pending: the stream waits for the hub's first computation.
	pending bool
	ended   atomic.Bool
}

// NewHub returns a hub over src, counting its open streams in open.
func NewHub(src Source, opts Options, open prometheus.Gauge) *Hub {
	h := &Hub{src: src, interval: opts.Interval, heartbeat: opts.Heartbeat, writeTimeout: opts.WriteTimeout,
		max: opts.Max, boot: strconv.FormatInt(time.Now().UnixNano(), 36), open: open, kick: make(chan struct{}, 1)}
	h.mu.subs = map[*streamSub]struct{}{}
	return h
}

// Run computes and broadcasts the state every interval while streams are
// open, until ctx is done; then it ends every stream.
func (h *Hub) Run(ctx context.Context) {
	t := time.NewTicker(h.interval)
	defer t.Stop()
	defer h.Close()
	for {
		h.mu.Lock()
		listening := len(h.mu.subs) > 0
		if !listening {
			// Nobody listens, nothing is computed: forget the state, so
			// that the next stream gets it whole, even with an id from
			// before (stories may have stopped and started breaking
			// meanwhile).
			h.mu.fresh, h.mu.trendKey, h.mu.trendData, h.mu.breaking, h.mu.entered = false, nil, nil, nil, nil
		}
		h.mu.Unlock()
		if listening {
			h.refresh()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-h.kick:
		}
	}
}

// refresh computes the state and sends what changed to every stream, and
// the whole state to the streams that wait for it.
func (h *Hub) refresh() {
	data, key, trErr := h.src.Trending()
	br, brErr := h.src.Breaking()
	var ids []string
	if brErr == nil {
		ids, brErr = storyIDs(br.Stories)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.mu.closed {
		return
	}
	var out [][]byte
	if trErr == nil {
		if !bytes.Equal(key, h.mu.trendKey) {
			h.mu.seq++
			h.mu.trendKey, h.mu.trendData, h.mu.trendSeq = key, data, h.mu.seq
			out = append(out, h.event(h.mu.seq, eventTrending, data))
		}
	}
	if brErr == nil {
		was := make(map[string]uint64, len(h.mu.breaking))
		for _, b := range h.mu.breaking {
			was[b.id] = b.seq
		}
		seq := h.mu.seq + 1
		now := make([]breakingEntry, len(ids))
		var news []json.RawMessage
		for i, id := range ids {
			at, ok := was[id]
			if !ok {
				at = seq
				news = append(news, br.Stories[i])
			}
			now[i] = breakingEntry{id, br.Stories[i], at}
		}
		if len(news) > 0 {
			h.mu.seq = seq
			out = append(out, h.breakingEvent(seq, news, br.AsOf))
		}
		h.mu.breaking, h.mu.asOf = now, br.AsOf
	}
	if trErr == nil && brErr == nil {
		h.mu.fresh = true
	}
	for sub := range h.mu.subs {
		msgs := out
		if sub.pending {
			if !h.mu.fresh {
				continue
			}
			msgs, sub.pending = h.catchUpLocked(sub), false
		}
		h.sendLocked(sub, msgs)
	}
}

// storyIDs returns the id of each story.
func storyIDs(stories []json.RawMessage) ([]string, error) {
	ids := make([]string, len(stories))
	for i, raw := range stories {
		var st struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(raw, &st); err != nil || st.ID == "" {
			return nil, fmt.Errorf("breaking story without an id: %.80s", raw)
		}
		ids[i] = st.ID
	}
	return ids, nil
}

// stateLocked returns the events that bring a client that has the state
// up to event last (0: nothing) up to date.
func (h *Hub) stateLocked(last uint64) [][]byte {
	var out [][]byte
	if h.mu.trendData != nil && h.mu.trendSeq > last {
		out = append(out, h.event(h.mu.seq, eventTrending, h.mu.trendData))
	}
	var news []json.RawMessage
	for _, b := range h.mu.breaking {
		if b.seq > last {
			news = append(news, b.raw)
		}
	}
	if len(news) > 0 {
		out = append(out, h.breakingEvent(h.mu.seq, news, h.mu.asOf))
	}
	return out
}

// catchUpLocked returns the events sub is owed when it starts: the
// trending.entered events after sub.since (in one message), then the state
// after sub.last.
func (h *Hub) catchUpLocked(sub *streamSub) [][]byte {
	var entered []byte
	for _, e := range h.mu.entered {
		if e.seq > sub.since {
			entered = append(entered, e.msg...)
		}
	}
	state := h.stateLocked(sub.last)
	if entered == nil {
		return state
	}
	return append([][]byte{entered}, state...)
}

// Entered sends a trending.entered event with each of values (records of
// trending.changes) to every open stream, as one message (a client is not
// too slow for a burst of them), and keeps the last streamEnteredKeep for
// streams that reconnect. With no stream open it does nothing.
func (h *Hub) Entered(values [][]byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.mu.closed || len(h.mu.subs) == 0 || len(values) == 0 {
		return
	}
	var msg []byte
	for _, v := range values {
		h.mu.seq++
		ev := h.event(h.mu.seq, eventEntered, v)
		h.mu.entered = append(h.mu.entered, enteredEvent{h.mu.seq, ev})
		msg = append(msg, ev...)
	}
	if n := len(h.mu.entered) - streamEnteredKeep; n > 0 {
		h.mu.entered = append(h.mu.entered[:0:0], h.mu.entered[n:]...)
	}
	for sub := range h.mu.subs {
		if !sub.pending { // a pending stream gets them with the state
			h.sendLocked(sub, [][]byte{msg})
		}
	}
}

// sendLocked queues msgs for sub, or ends the stream if its client is too
// slow to take them.
func (h *Hub) sendLocked(sub *streamSub, msgs [][]byte) {
	for _, m := range msgs {
		select {
		case sub.ch <- m:
		default:
			h.endLocked(sub, true)
			return
		}
	}
}

func (h *Hub) event(seq uint64, name string, data []byte) []byte {
	b := make([]byte, 0, len(data)+64)
	b = fmt.Appendf(b, "id: %s.%d\nevent: %s\ndata: ", h.boot, seq, name)
	b = append(b, data...)
	return append(b, "\n\n"...)
}

func (h *Hub) breakingEvent(seq uint64, stories []json.RawMessage, asOf int64) []byte {
	data, _ := json.Marshal(Page{Stories: stories, AsOf: asOf})
	return h.event(seq, eventBreaking, data)
}

// lastSeq reads a Last-Event-ID: the event number if the id is of this
// process and not beyond its last event, else 0 (send the whole state).
func (h *Hub) lastSeqLocked(id string) uint64 {
	boot, n, ok := strings.Cut(id, ".")
	if !ok || boot != h.boot {
		return 0
	}
	seq, err := strconv.ParseUint(n, 10, 64)
	if err != nil || seq > h.mu.seq {
		return 0
	}
	return seq
}

// subscribe opens a stream for a client that has the state up to
// Last-Event-ID lastID ("" for none); its first events are queued.
func (h *Hub) subscribe(conn net.Conn, lastID string) (*streamSub, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.mu.closed:
		return nil, errStreamsClosed
	case len(h.mu.subs) >= h.max:
		return nil, errStreamsFull
	}
	sub := &streamSub{ch: make(chan []byte, streamBuffer), conn: conn, last: h.lastSeqLocked(lastID)}
	sub.since = sub.last
	if sub.since == 0 {
		sub.since = h.mu.seq
	}
	h.mu.subs[sub] = struct{}{}
	h.open.Inc()
	if h.mu.fresh {
		h.sendLocked(sub, h.catchUpLocked(sub))
		return sub, nil
	}
	sub.pending = true
	select {
	case h.kick <- struct{}{}:
	default:
	}
	return sub, nil
}

// endLocked removes a stream and closes its queue, once. kick, for an end
// the client did not cause, bounds how long the writer may still take
// (streamDrainGrace).
func (h *Hub) endLocked(sub *streamSub, kick bool) {
	if _, ok := h.mu.subs[sub]; !ok {
		return
	}
	delete(h.mu.subs, sub)
	h.open.Dec()
	sub.ended.Store(true)
	close(sub.ch)
	if kick && sub.conn != nil {
		_ = sub.conn.SetWriteDeadline(time.Now().Add(streamDrainGrace))
	}
}

func (h *Hub) end(sub *streamSub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.endLocked(sub, false)
}

// Close ends every stream and refuses new ones. It is idempotent and
// nil-safe.
func (h *Hub) Close() {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.mu.closed = true
	for sub := range h.mu.subs {
		h.endLocked(sub, true)
	}
}

// serve writes a stream until its client goes away or the hub ends it. It
// runs in fasthttp's stream-writer goroutine.
func (h *Hub) serve(w *bufio.Writer, sub *streamSub) {
	defer h.end(sub)
	gone, stop := watchPeer(sub.conn)
	defer stop()
	write := func(b []byte) bool {
		if sub.conn != nil {
			// fasthttp set a write deadline for the whole response.
			_ = sub.conn.SetWriteDeadline(time.Now().Add(h.writeTimeout))
			if sub.ended.Load() { // the hub may have shortened it meanwhile
				_ = sub.conn.SetWriteDeadline(time.Now().Add(streamDrainGrace))
			}
		}
		if _, err := w.Write(b); err != nil {
			return false
		}
		return w.Flush() == nil
	}
	if !write(fmt.Appendf(nil, "retry: %d\n\n", streamRetry.Milliseconds())) {
		return
	}
	hb := time.NewTicker(h.heartbeat)
	defer hb.Stop()
	for {
		select {
		case m, ok := <-sub.ch:
			if !ok || !write(m) {
				return
			}
		case <-hb.C:
			if !write(pingComment) {
				return
			}
		case <-gone:
			return
		}
	}
}

// watchPeer returns a channel closed when the client closes conn (or sends
// anything: a stream's client has nothing more to say), and stop, which
// ends the watch and waits for its goroutine. Without it a stream would
// notice a client gone only when a write fails, a heartbeat or two later.
// The connection carries nothing else: the response closes it.
func watchPeer(conn net.Conn) (gone <-chan struct{}, stop func()) {
	if conn == nil {
		return nil, func() {}
	}
	done := make(chan struct{})
	_ = conn.SetReadDeadline(time.Time{}) // fasthttp's, for reading the request
	go func() {
		defer close(done)
		var b [1]byte
		_, _ = conn.Read(b[:])
	}()
	return done, func() {
		_ = conn.SetReadDeadline(time.Unix(1, 0))
		<-done
	}
}

// Handle answers GET /api/v1/stream with server-sent events, or 503 when
// Max streams are open or the server is shutting down.
func (h *Hub) Handle(ctx *fasthttp.RequestCtx) {
	last := string(ctx.Request.Header.Peek("Last-Event-ID"))
	if last == "" {
		last = string(ctx.QueryArgs().Peek("last_event_id"))
	}
	sub, err := h.subscribe(ctx.Conn(), last)
	if err != nil {
		ctx.Response.Header.Set("Retry-After", strconv.Itoa(int(streamRetry.Seconds())))
		msg := err.Error()
		if errors.Is(err, errStreamsFull) {
			msg = fmt.Sprintf("%s (at most %d); retry later", msg, h.max)
		}
		httpkit.WriteError(ctx, fasthttp.StatusServiceUnavailable, msg)
		return
	}
	ctx.SetContentType("text/event-stream; charset=utf-8") // Cache-Control: no-store, as all of /api/
	ctx.Response.Header.Set("X-Accel-Buffering", "no")     // proxies: pass events on at once
	ctx.Response.ImmediateHeaderFlush = true
	// The stream owns the connection until it ends (watchPeer reads it).
	ctx.SetConnectionClose()
	ctx.SetBodyStreamWriter(func(w *bufio.Writer) { h.serve(w, sub) })
}

// The trending.changes topic is written by the trending-changes operator
// (operators/trending/changes.go): one record each time an article enters
// a window's global top K. Every node follows the topic and hands each
// new record to its open streams as a trending.entered event (Hub.Entered),
// so streams on any node of a cluster get them.
//
// Goroutine: Follower.Run, owned by the server's Run; the follower's
// fields are its own.

// Defaults of the follower.
const (
	// changesRetry spaces the attempts of a follower whose read failed.
	changesRetry = 2 * time.Second
	// changesLogEvery spaces the warnings of a follower that keeps failing.
	changesLogEvery = time.Minute
)

// Follower reads trending.changes from its end and hands what is
// appended to the open streams (Hub.Entered).
type Follower struct {
	log      eventlog.Log
	announce func(values [][]byte)
	logger   *slog.Logger
	// next is the next offset to read per partition, once known: a read
	// that failed resumes there, so no record is skipped.
	next     map[eventlog.TopicPartition]int64
	failing  bool
	loggedAt time.Time
	// started is set once the follower has a position (for tests).
	started atomic.Bool
}

// NewFollower returns a follower of l's trending.changes handing records
// to announce.
func NewFollower(l eventlog.Log, announce func([][]byte), logger *slog.Logger) *Follower {
	return &Follower{log: l, announce: announce, logger: logger}
}

// Run follows the topic until ctx is done, trying again every
// changesRetry after a failure.
func (f *Follower) Run(ctx context.Context) {
	for {
		err := f.follow(ctx)
		if ctx.Err() != nil {
			return
		}
		if !f.failing || time.Since(f.loggedAt) >= changesLogEvery {
			f.failing, f.loggedAt = true, time.Now()
			f.logger.Warn("trending.changes: cannot follow the topic; streams get no trending.entered events until it can", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(changesRetry):
		}
	}
}

// follow reads the topic from where it stopped (the first time: its end)
// and hands each batch of records to the streams, until ctx is done or a
// read fails.
func (f *Follower) follow(ctx context.Context) error {
	parts, err := eventlog.EnsureTopic(ctx, f.log, schema.TopicTrendingChanges, 1)
	if err != nil {
		return err
	}
	first := f.next == nil
	if first {
		f.next = map[eventlog.TopicPartition]int64{}
	}
	pos := make(map[eventlog.TopicPartition]int64, parts)
	for p := range parts {
		tp := eventlog.TopicPartition{Topic: schema.TopicTrendingChanges, Partition: p}
		o, err := f.log.Offsets(ctx, tp)
		if err != nil {
			return fmt.Errorf("read %s: %w", tp, err)
		}
		next, ok := f.next[tp]
		if !ok {
			next = o.End // a partition met now starts at its end
			if !first {
				next = o.Start
			}
		}
		pos[tp] = max(next, o.Start) // retention may have passed it
		f.next[tp] = pos[tp]
	}
	r, err := f.log.NewReader(pos)
	if err != nil {
		return fmt.Errorf("read %s: %w", schema.TopicTrendingChanges, err)
	}
	defer r.Close()
	f.started.Store(true)
	if f.failing {
		f.failing = false
		f.logger.Info("trending.changes: following again")
	}
	for {
		recs, err := r.Poll(ctx, 1000)
		if err != nil {
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return err
			}
			return fmt.Errorf("read %s: %w", schema.TopicTrendingChanges, err)
		}
		values := make([][]byte, 0, len(recs))
		for _, rec := range recs {
			f.next[eventlog.TopicPartition{Topic: rec.Topic, Partition: rec.Partition}] = rec.Offset + 1
			var c trending.Change
			if json.Unmarshal(rec.Value, &c) != nil || c.Window == "" || c.ArticleID == "" {
				continue // not ours to read
			}
			values = append(values, rec.Value)
		}
		if len(values) > 0 {
			f.announce(values)
		}
	}
}
