package query_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/query"
	"github.com/valyala/fasthttp"
)

const replayedHeader = "Idempotent-Replayed"

// wantReplay checks that r replays first: same status and body, marked
// replayed.
func wantReplay(t testing.TB, first, r response) {
	t.Helper()
	if r.status != first.status || string(r.body) != string(first.body) {
		t.Fatalf("replay: %s, want %s", r, first)
	}
	if r.header[replayedHeader] != "true" {
		t.Fatalf("replay lacks %s: true; headers %v", replayedHeader, r.header)
	}
	if ct := r.header["Content-Type"]; ct != "application/json" {
		t.Fatalf("replay Content-Type %q", ct)
	}
}

func wantFresh(t testing.TB, r response, status int) {
	t.Helper()
	if r.status != status {
		t.Fatalf("%s, want status %d", r, status)
	}
	if v, ok := r.header[replayedHeader]; ok {
		t.Fatalf("fresh response has %s: %q", replayedHeader, v)
	}
}

func TestIdempotencyReplay(t *testing.T) {
	n := newTestNode(t)
	ev := share("e1", "idem", n.clock.ms(0))
	first := n.post(t, pathShare, ev, query.HeaderIdempotencyKey, "key-1")
	wantFresh(t, first, fasthttp.StatusAccepted)
	if string(first.body) != `{"accepted":1}` {
		t.Fatalf("%s", first)
	}
	for range 3 {
		wantReplay(t, first, n.post(t, pathShare, ev, query.HeaderIdempotencyKey, "key-1"))
	}
	// A key names one request: another body with it is refused, and the
	// first is still replayed after.
	for _, body := range []string{share("e2", "idem", n.clock.ms(0)), "not even JSON", ev + " "} {
		wantError(t, n.post(t, pathShare, body, query.HeaderIdempotencyKey, "key-1"), fasthttp.StatusUnprocessableEntity, "different body")
	}
	wantReplay(t, first, n.post(t, pathShare, ev, query.HeaderIdempotencyKey, "key-1"))
	// The query is part of the request.
	wantError(t, n.post(t, pathShare+"?v=2", ev, query.HeaderIdempotencyKey, "key-1"), fasthttp.StatusUnprocessableEntity)
	if got := n.appended(t); got != 1 {
		t.Fatalf("appended %d after replays, want 1", got)
	}
	// Another key, or none, appends again.
	wantFresh(t, n.post(t, pathShare, ev, query.HeaderIdempotencyKey, "key-2"), fasthttp.StatusAccepted)
	wantFresh(t, n.post(t, pathShare, ev), fasthttp.StatusAccepted)
	if got := n.appended(t); got != 3 {
		t.Fatalf("appended %d, want 3", got)
	}
	// Three appends of one event_id: it counts once.
	n.waitShares(t, "idem", counts(1, 1, 1))
	m := n.metrics(t)
	if got := m[`newsflow_ingested_events_total{result="accepted",type="share"}`]; got != 3 {
		t.Fatalf("accepted events metric %v, want 3 (replays are not ingestion)", got)
	}
}

func TestIdempotencyBatch(t *testing.T) {
	n := newTestNode(t)
	now := n.clock.ms(0)
	mixed := share("b1", "idem-b", now) + "\nbad\n" + share("b2", "idem-b", now) + "\n"
	first := n.post(t, pathBatch, mixed, query.HeaderIdempotencyKey, "batch-1")
	wantFresh(t, first, fasthttp.StatusMultiStatus)
	if b := decodeBatch(t, first); *b.Accepted != 2 || *b.Rejected != 1 {
		t.Fatalf("%s", first)
	}
	// A partly rejected batch appended its valid lines: retrying it with the
	// key must not append them again.
	wantReplay(t, first, n.post(t, pathBatch, mixed, query.HeaderIdempotencyKey, "batch-1"))
	fixed := share("b1", "idem-b", now) + "\n" + share("b2", "idem-b", now) + "\n"
	wantError(t, n.post(t, pathBatch, fixed, query.HeaderIdempotencyKey, "batch-1"), fasthttp.StatusUnprocessableEntity, "different body")

	ok := n.post(t, pathBatch, fixed, query.HeaderIdempotencyKey, "batch-2")
	wantFresh(t, ok, fasthttp.StatusAccepted)
	wantReplay(t, ok, n.post(t, pathBatch, fixed, query.HeaderIdempotencyKey, "batch-2"))
	if got := n.appended(t); got != 4 {
		t.Fatalf("appended %d, want 4", got)
	}
	n.waitShares(t, "idem-b", counts(2, 2, 2)) // b1 and b2, appended twice

}

// TestIdempotencyNothingAppended: a request that appended nothing is not
// remembered, so the client can fix it and retry with the same key.
func TestIdempotencyNothingAppended(t *testing.T) {
	n := newTestNode(t)
	now := n.clock.ms(0)
	bad := n.post(t, pathShare, `{"event_id":"e1"}`, query.HeaderIdempotencyKey, "k")
	wantFresh(t, bad, fasthttp.StatusBadRequest)
	wantFresh(t, n.post(t, pathBatch, "nope\n", query.HeaderIdempotencyKey, "k"), fasthttp.StatusBadRequest)
	wantFresh(t, n.post(t, pathBatch, "", query.HeaderIdempotencyKey, "k"), fasthttp.StatusBadRequest)
	good := n.post(t, pathShare, share("e1", "retry", now), query.HeaderIdempotencyKey, "k")
	wantFresh(t, good, fasthttp.StatusAccepted)
	wantReplay(t, good, n.post(t, pathShare, share("e1", "retry", now), query.HeaderIdempotencyKey, "k"))
	n.waitShares(t, "retry", counts(1, 1, 1))
}

func TestIdempotencyKeyLength(t *testing.T) {
	n := newTestNode(t)
	ev := share("e1", "keylen", n.clock.ms(0))
	for _, path := range []string{pathShare, pathBatch} {
		r := n.post(t, path, ev, query.HeaderIdempotencyKey, strings.Repeat("k", 201))
		wantError(t, r, fasthttp.StatusBadRequest, query.HeaderIdempotencyKey, "200 bytes")
	}
	if got := n.appended(t); got != 0 {
		t.Fatalf("appended %d", got)
	}
	key := strings.Repeat("k", 200)
	first := n.post(t, pathShare, ev, query.HeaderIdempotencyKey, key)
	wantFresh(t, first, fasthttp.StatusAccepted)
	wantReplay(t, first, n.post(t, pathShare, ev, query.HeaderIdempotencyKey, key))
	if got := n.appended(t); got != 1 {
		t.Fatalf("appended %d, want 1", got)
	}
}

// TestIdempotencyRestart replays keys after the server, engine, log and
// state were closed and reopened on the same directories.
func TestIdempotencyRestart(t *testing.T) {
	dir, clock := t.TempDir(), newTestClock()
	n := newTestNode(t, withDir(dir), withClock(clock))
	now := clock.ms(0)
	single := share("r1", "restart", now)
	batch := share("r2", "restart", now) + "\n{}\n" + share("r3", "restart", now)
	first := n.post(t, pathShare, single, query.HeaderIdempotencyKey, "single")
	wantFresh(t, first, fasthttp.StatusAccepted)
	firstBatch := n.post(t, pathBatch, batch, query.HeaderIdempotencyKey, "batch")
	wantFresh(t, firstBatch, fasthttp.StatusMultiStatus)
	n.waitShares(t, "restart", counts(3, 3, 3))
	appended := n.appended(t)
	n.stop()

	clock.Advance(time.Hour)
	n = newTestNode(t, withDir(dir), withClock(clock))
	wantReplay(t, first, n.post(t, pathShare, single, query.HeaderIdempotencyKey, "single"))
	wantReplay(t, firstBatch, n.post(t, pathBatch, batch, query.HeaderIdempotencyKey, "batch"))
	if got := n.appended(t); got != appended {
		t.Fatalf("replays after restart appended %d records", got-appended)
	}
	n.waitShares(t, "restart", counts(3, 3, 3))

	// A second restart still knows the keys, and a new key appends.
	n.stop()
	n = newTestNode(t, withDir(dir), withClock(clock))
	wantReplay(t, first, n.post(t, pathShare, single, query.HeaderIdempotencyKey, "single"))
	wantFresh(t, n.post(t, pathShare, single, query.HeaderIdempotencyKey, "new"), fasthttp.StatusAccepted)
	wantFresh(t, n.post(t, pathShare, share("r4", "restart", now), query.HeaderIdempotencyKey, "newer"), fasthttp.StatusAccepted)
	// r1 again (a new key, the same event_id) counts nothing; r4 counts.
	n.waitShares(t, "restart", counts(4, 4, 4))
}

// TestIdempotencyTTL forgets keys older than IdempotencyTTL, in memory and
// across a restart.
func TestIdempotencyTTL(t *testing.T) {
	dir, clock := t.TempDir(), newTestClock()
	opts := withQuery(query.Options{IdempotencyTTL: time.Minute})
	n := newTestNode(t, withDir(dir), withClock(clock), opts)
	ev := share("t1", "ttl", clock.ms(0))
	first := n.post(t, pathShare, ev, query.HeaderIdempotencyKey, "a")
	wantFresh(t, first, fasthttp.StatusAccepted)
	wantFresh(t, n.post(t, pathShare, ev, query.HeaderIdempotencyKey, "b"), fasthttp.StatusAccepted)

	clock.Advance(59 * time.Second)
	wantReplay(t, first, n.post(t, pathShare, ev, query.HeaderIdempotencyKey, "a"))
	clock.Advance(2 * time.Second)
	wantFresh(t, n.post(t, pathShare, ev, query.HeaderIdempotencyKey, "a"), fasthttp.StatusAccepted)
	if got := n.appended(t); got != 3 {
		t.Fatalf("appended %d, want 3", got)
	}

	// "b" expired too; after a restart it is not loaded.
	n.stop()
	n = newTestNode(t, withDir(dir), withClock(clock), opts)
	wantFresh(t, n.post(t, pathShare, ev, query.HeaderIdempotencyKey, "b"), fasthttp.StatusAccepted)
	// "a" was used again 0s ago: still known.
	r := n.post(t, pathShare, ev, query.HeaderIdempotencyKey, "a")
	if r.header[replayedHeader] != "true" {
		t.Fatalf("key renewed before the restart was forgotten: %s", r)
	}
	if got := n.appended(t); got != 4 {
		t.Fatalf("appended %d, want 4", got)
	}
	n.waitShares(t, "ttl", counts(1, 1, 1)) // four appends of one event_id
}

// gateLog wraps the server's log: it can hold or fail the next Append of
// share records.
type gateLog struct {
	eventlog.Log
	mu struct {
		sync.Mutex
		hold    chan struct{} // when set, the next Append waits for it to close
		entered chan struct{} // closed when a held Append has started
		fail    error         // returned by the next Append
	}
}

func (g *gateLog) holdNext() (entered, release chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.mu.hold, g.mu.entered = make(chan struct{}), make(chan struct{})
	return g.mu.entered, g.mu.hold
}

func (g *gateLog) failNext(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.mu.fail = err
}

func (g *gateLog) Append(ctx context.Context, recs []*eventlog.Record) error {
	g.mu.Lock()
	hold, entered, fail := g.mu.hold, g.mu.entered, g.mu.fail
	g.mu.hold, g.mu.entered, g.mu.fail = nil, nil, nil
	g.mu.Unlock()
	if fail != nil {
		return fail
	}
	if hold != nil {
		close(entered)
		select {
		case <-hold:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return g.Log.Append(ctx, recs)
}

func withGate(g *gateLog) func(*nodeOptions) {
	return withLogWrapper(func(l eventlog.Log) eventlog.Log { g.Log = l; return g })
}

// TestIdempotencyInFlight: a retry while the first request is still
// appending gets 409 and appends nothing.
func TestIdempotencyInFlight(t *testing.T) {
	g := &gateLog{}
	n := newTestNode(t, withGate(g))
	ev := share("f1", "inflight", n.clock.ms(0))
	entered, release := g.holdNext()
	done := n.doAsync(fasthttp.MethodPost, pathShare, []byte(ev), query.HeaderIdempotencyKey, "slow")
	<-entered
	wantError(t, n.post(t, pathShare, ev, query.HeaderIdempotencyKey, "slow"), fasthttp.StatusConflict, "in progress")
	// Other keys are not held up by it.
	wantFresh(t, n.post(t, pathShare, ev, query.HeaderIdempotencyKey, "other"), fasthttp.StatusAccepted)
	close(release)
	res := <-done
	if res.err != nil {
		t.Fatal(res.err)
	}
	wantFresh(t, res.r, fasthttp.StatusAccepted)
	wantReplay(t, res.r, n.post(t, pathShare, ev, query.HeaderIdempotencyKey, "slow"))
	n.waitShares(t, "inflight", counts(1, 1, 1)) // two appends of one event_id
}

// TestIdempotencyConcurrent sends the same key from many clients at once:
// exactly one request appends.
func TestIdempotencyConcurrent(t *testing.T) {
	n := newTestNode(t)
	ev := share("c1", "concurrent", n.clock.ms(0))
	const clients = 16
	var wg sync.WaitGroup
	results := make([]response, clients)
	errs := make([]error, clients)
	for i := range clients {
		wg.Go(func() {
			results[i], errs[i] = n.tryDo(fasthttp.MethodPost, pathShare, []byte(ev), query.HeaderIdempotencyKey, "same")
		})
	}
	wg.Wait()
	fresh := 0
	for i, r := range results {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		switch {
		case r.status == fasthttp.StatusAccepted && r.header[replayedHeader] == "":
			fresh++
		case r.status == fasthttp.StatusAccepted && r.header[replayedHeader] == "true":
		case r.status == fasthttp.StatusConflict:
			errorMessage(t, r, fasthttp.StatusConflict)
		default:
			t.Fatalf("client %d: %s", i, r)
		}
	}
	if fresh != 1 {
		t.Fatalf("%d requests appended, want 1", fresh)
	}
	n.waitShares(t, "concurrent", counts(1, 1, 1))
}

// TestIngestAppendFailure: when the log refuses an append the client gets
// 503 JSON, and the key is released for a retry.
func TestIngestAppendFailure(t *testing.T) {
	g := &gateLog{}
	n := newTestNode(t, withGate(g))
	ev := share("x1", "fails", n.clock.ms(0))
	for _, path := range []string{pathShare, pathBatch} {
		g.failNext(errors.New("disk on fire"))
		wantError(t, n.post(t, path, ev, query.HeaderIdempotencyKey, "k-"+path), fasthttp.StatusServiceUnavailable, "log unavailable", "disk on fire")
		wantFresh(t, n.post(t, path, ev, query.HeaderIdempotencyKey, "k-"+path), fasthttp.StatusAccepted)
	}
	g.failNext(eventlog.ErrClosed)
	wantError(t, n.post(t, pathShare, ev), fasthttp.StatusServiceUnavailable, "log unavailable")
	if got := n.appended(t); got != 2 {
		t.Fatalf("appended %d, want 2", got)
	}
	n.waitShares(t, "fails", counts(1, 1, 1)) // two appends of one event_id
	m := n.metrics(t)
	if got := m[`newsflow_http_requests_total{code="503",route="ingest_share"}`]; got != 2 {
		t.Fatalf("503 metric %v, want 2", got)
	}
}

// TestIngestedMetricExcludesFailedAppends: events the client got a 503 for
// were not accepted.
func TestIngestedMetricExcludesFailedAppends(t *testing.T) {
	g := &gateLog{}
	n := newTestNode(t, withGate(g))
	g.failNext(errors.New("disk on fire"))
	r := n.post(t, pathBatch, share("x1", "fails", n.clock.ms(0))+"\n"+share("x2", "fails", n.clock.ms(0)))
	wantError(t, r, fasthttp.StatusServiceUnavailable)
	if got := n.metrics(t)[`newsflow_ingested_events_total{result="accepted",type="share"}`]; got != 0 {
		t.Fatalf("accepted events metric %v after a 503, want 0", got)
	}
}

// TestIngestUnknownTopic: without the shares topic the server answers 503
// and caches nothing, so it works once the topic exists.
func TestIngestUnknownTopic(t *testing.T) {
	g := &gateLog{}
	hidden := &hideTopicLog{gateLog: g, hide: true}
	n := newTestNode(t, withLogWrapper(func(l eventlog.Log) eventlog.Log { g.Log = l; return hidden }))
	ev := share("u1", "unknown-topic", n.clock.ms(0))
	wantError(t, n.post(t, pathShare, ev, query.HeaderIdempotencyKey, "k"), fasthttp.StatusServiceUnavailable, "shares topic unavailable")
	if got := n.appended(t); got != 0 {
		t.Fatalf("appended %d", got)
	}
	hidden.setHide(false)
	wantFresh(t, n.post(t, pathShare, ev, query.HeaderIdempotencyKey, "k"), fasthttp.StatusAccepted)
	n.waitShares(t, "unknown-topic", counts(1, 1, 1))
}

// hideTopicLog pretends the shares topic does not exist.
type hideTopicLog struct {
	*gateLog
	mu   sync.Mutex
	hide bool
}

func (h *hideTopicLog) setHide(v bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hide = v
}

func (h *hideTopicLog) Partitions(ctx context.Context, topic string) (int32, error) {
	h.mu.Lock()
	hide := h.hide
	h.mu.Unlock()
	if hide && topic == schema.TopicShares {
		return 0, fmt.Errorf("%w: %s", eventlog.ErrUnknownTopic, topic)
	}
	return h.gateLog.Partitions(ctx, topic)
}

// A key is its caller's: two callers that happen to pick one key both
// count, whoever they are (anonymous, a reader's session, the ingestion
// token), and a reader's read with a key cannot hide the ingestion
// service's read with the same key.
func TestIdempotencyScopedByCaller(t *testing.T) {
	n := newFixtureNode(t)
	ann := login(t, n, "/api/v1/auth/register", "ann", "correct horse battery")
	bob := login(t, n, "/api/v1/auth/register", "bob", "a long enough password")
	annID, bobID := userID(t, n, ann), userID(t, n, bob)
	key := []string{query.HeaderIdempotencyKey, "batch-42"}
	now := n.clock.ms(0)
	callers := []struct {
		name string
		hdr  []string
	}{
		{"anonymous", []string{"X-Anonymous", "1"}},
		{"ann", bearer(ann)},
		{"bob's cookie", []string{"Cookie", query.SessionCookie + "=" + bob}},
		{"ingestion token", bearer(testIngestToken)},
		{"admin token", bearer(testAdminToken)},
	}
	for i, c := range callers {
		var who []string
		switch c.name {
		case "ann":
			who = []string{"user_id", annID}
		case "bob's cookie":
			who = []string{"user_id", bobID}
		}
		body := share(fmt.Sprintf("shared-key-%d", i), "scoped", now, who...)
		r := n.post(t, pathShare, body, append(key, c.hdr...)...)
		wantFresh(t, r, fasthttp.StatusAccepted)
		wantReplay(t, r, n.post(t, pathShare, body, append(key, c.hdr...)...))
	}
	c := uint64(len(callers))
	n.waitShares(t, "scoped", counts(c, c, c))

	a1 := assignmentsByID(t, n)[0].id
	if r := n.post(t, "/api/v1/events/read", read("r-ann", annID, a1, "s", now), append(key, bearer(ann)...)...); r.status != fasthttp.StatusAccepted {
		t.Fatalf("ann's read: %s", r)
	}
	svc := n.post(t, "/api/v1/events/read", read("r-svc", bobID, a1, "s", now), append(key, bearer(testIngestToken)...)...)
	wantFresh(t, svc, fasthttp.StatusAccepted)
	if got := readsOnLog(t, n); !slices.Contains(got, annID) || !slices.Contains(got, bobID) {
		t.Fatalf("reads on the log: %v, want ann's and bob's", got)
	}
}
