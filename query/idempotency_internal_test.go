package query

import (
	"context"
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
	old := newIdempotency(l, time.Hour, func() time.Time { return now.Add(-2 * time.Hour) })
	rec, _ := old.marker("/p old", 202, []byte(`{}`))
	if err := l.Append(ctx, []*eventlog.Record{rec}); err != nil {
		t.Fatal(err)
	}

	i := newIdempotency(l, time.Hour, clock)
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
	if i.known("/p old") {
		t.Error("a key older than the TTL is known")
	}

	other := newIdempotency(l, time.Hour, clock)
	rec, _ = other.marker("/p k1", 202, []byte(`{"accepted":1}`))
	if err := l.Append(ctx, []*eventlog.Record{rec}); err != nil {
		t.Fatal(err)
	}
	qctx, cancel = context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := i.catchUp(qctx); err != nil {
		t.Fatal(err)
	}
	if !i.known("/p k1") {
		t.Fatal("catchUp returned before the other node's key was remembered")
	}
	if sr, err := i.begin("/p k1"); err != nil || sr == nil || string(sr.Body) != `{"accepted":1}` {
		t.Errorf("begin after catchUp: %+v %v", sr, err)
	}
}
