package query

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/newsflow/newsflow/engine/eventlog"
)

// catchUp returns once the keys appended before it (here by "another
// node", straight to the log) are remembered, and at once when the topic
// holds only keys older than the TTL.
func TestIdempotencyCatchUp(t *testing.T) {
	l := openChangesLog(t)
	ctx := t.Context()
	now := time.UnixMilli(1_800_000_000_000)
	clock := func() time.Time { return now }
	if _, err := eventlog.EnsureTopic(ctx, l, IdempotencyTopic, 1); err != nil {
		t.Fatal(err)
	}
	old := newIdempotency(l, time.Hour, 0, func() time.Time { return now.Add(-2 * time.Hour) })
	keyOld, keyNew := idempotencyScope([]byte("/p"), "client:192.0.2.1", "old"), idempotencyScope([]byte("/p"), "client:192.0.2.1", "k1")
	sum := idempotencyRequestSum([]byte("/p"), []byte("body"))
	rec, _ := old.marker(keyOld, sum, 202, []byte(`{}`))
	if err := l.Append(ctx, []*eventlog.Record{rec}); err != nil {
		t.Fatal(err)
	}

	i := newIdempotency(l, time.Hour, 0, clock)
	r, err := i.load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- i.follow(fctx, r) }()
	t.Cleanup(func() { stop(); <-done })

	qctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	if err := i.catchUp(qctx); err != nil {
		t.Errorf("catchUp over keys older than the TTL: %v", err)
	}
	cancel()
	if i.known(keyOld) {
		t.Error("a key older than the TTL is known")
	}

	other := newIdempotency(l, time.Hour, 0, clock)
	rec, _ = other.marker(keyNew, sum, 202, []byte(`{"accepted":1}`))
	if err := l.Append(ctx, []*eventlog.Record{rec}); err != nil {
		t.Fatal(err)
	}
	qctx, cancel = context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := i.catchUp(qctx); err != nil {
		t.Fatal(err)
	}
	if !i.known(keyNew) {
		t.Fatal("catchUp returned before the other node's key was remembered")
	}
	if sr, err := i.begin(keyNew); err != nil || sr == nil || string(sr.Body) != `{"accepted":1}` {
		t.Errorf("begin after catchUp: %+v %v", sr, err)
	}
}

// The keys remembered are bounded: beyond maxKeys the oldest go first, and
// a long stored response is cut to maxStoredResponse.
func TestIdempotencyBounded(t *testing.T) {
	l := openChangesLog(t)
	now := time.UnixMilli(1_800_000_000_000)
	i := newIdempotency(l, time.Hour, 3, func() time.Time { return now })
	sum := idempotencyRequestSum([]byte("/p"), nil)
	key := func(n int) string { return idempotencyScope([]byte("/p"), "client:a", strconv.Itoa(n)) }
	for n := range 10 {
		now = now.Add(time.Millisecond)
		if sr, err := i.begin(key(n)); sr != nil || err != nil {
			t.Fatalf("begin %d: %v %v", n, sr, err)
		}
		_, sr := i.marker(key(n), sum, 202, []byte(`{"accepted":1}`))
		i.finish(key(n), sr)
		if got := i.len(); got > 3 {
			t.Fatalf("%d keys remembered, bound 3", got)
		}
	}
	for n := range 10 {
		if want := n >= 7; i.known(key(n)) != want {
			t.Errorf("key %d known %v, want %v (the newest 3 kept)", n, !want, want)
		}
	}
	if len(i.mu.order) > 3 {
		t.Errorf("expiry list holds %d entries for 3 keys", len(i.mu.order))
	}

	res := batchResult{Accepted: 1, Rejected: 500}
	for n := range 500 {
		res.Errors = append(res.Errors, lineError{Line: n + 2, Error: "share event: missing article_id"})
	}
	long, _ := json.Marshal(res)
	_, sr := i.marker(key(99), sum, 400, long)
	var got batchResult
	if err := json.Unmarshal(sr.Body, &got); err != nil {
		t.Fatal(err)
	}
	if len(sr.Body) > maxStoredResponse || !got.Truncated || got.Accepted != 1 || got.Rejected != 500 || len(got.Errors) == 0 || got.Errors[0].Line != 2 {
		t.Errorf("stored %d bytes: %+v", len(sr.Body), got)
	}
}

// A scope is a digest that tells the path, the caller and the key apart,
// whatever bytes they hold.
func TestIdempotencyScope(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range [][3]string{{"/a", "u", "k"}, {"/a", "uk", ""}, {"/a", "", "uk"}, {"/au", "", "k"}, {"/a", "u", "K"}} {
		s := idempotencyScope([]byte(c[0]), c[1], c[2])
		if len(s) != 32 || seen[s] {
			t.Fatalf("scope of %q: %x", c, s)
		}
		seen[s] = true
	}
	if bytes.Equal(idempotencyRequestSum([]byte("/a"), []byte("b")), idempotencyRequestSum([]byte("/ab"), nil)) {
		t.Fatal("request digest does not separate path and body")
	}
}
