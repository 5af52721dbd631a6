package query_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/query"
	"github.com/valyala/fasthttp"
)

// appendsLog records the size of every append of share events, and fails
// the append number failAt (1-based, 0: none).
type appendsLog struct {
	eventlog.Log
	mu     sync.Mutex
	sizes  []int
	failAt int
}

func (l *appendsLog) Append(ctx context.Context, recs []*eventlog.Record) error {
	l.mu.Lock()
	l.sizes = append(l.sizes, len(recs))
	fail := l.failAt != 0 && len(l.sizes) == l.failAt
	l.mu.Unlock()
	if fail {
		return errors.New("disk on fire")
	}
	return l.Log.Append(ctx, recs)
}

// take returns the sizes of the appends since the last call.
func (l *appendsLog) take() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.sizes
	l.sizes = nil
	return s
}

// TestBatchAppendedInChunks: a large batch is appended in chunks as it is
// decoded (so a request never holds a record for each of its lines), in
// order, all of it; with an Idempotency-Key it is appended whole with its
// key; a log failing in the middle answers 503 saying how much was
// appended, and resending the whole batch counts each event once.
func TestBatchAppendedInChunks(t *testing.T) {
	l := &appendsLog{}
	n := newTestNode(t, withLogWrapper(func(inner eventlog.Log) eventlog.Log { l.Log = inner; return l }))
	chunk := query.IngestChunkRecords
	lines := 2*chunk + 100
	batch := func(prefix, article string) string {
		var b strings.Builder
		for i := range lines {
			b.WriteString(share(fmt.Sprintf("%s-%d", prefix, i), article, n.clock.ms(0)))
			b.WriteByte('\n')
		}
		return b.String()
	}
	l.take()

	wantFresh(t, n.post(t, pathBatch, batch("a", "chunked")), fasthttp.StatusAccepted)
	if got, want := fmt.Sprint(l.take()), fmt.Sprint([]int{chunk, chunk, 100}); got != want {
		t.Fatalf("appends of the batch: %s records, want %s", got, want)
	}
	n.waitShares(t, "chunked", counts(uint64(lines), uint64(lines), uint64(lines)))

	wantFresh(t, n.post(t, pathBatch, batch("k", "keyed"), query.HeaderIdempotencyKey, "one"), fasthttp.StatusAccepted)
	if got, want := fmt.Sprint(l.take()), fmt.Sprint([]int{lines + 1}); got != want {
		t.Fatalf("appends of the keyed batch: %s records, want %s (the events and the key, atomically)", got, want)
	}
	n.waitShares(t, "keyed", counts(uint64(lines), uint64(lines), uint64(lines)))

	l.mu.Lock()
	l.failAt = 2
	l.mu.Unlock()
	body := batch("f", "failing")
	wantError(t, n.post(t, pathBatch, body), fasthttp.StatusServiceUnavailable,
		"log unavailable", fmt.Sprintf("first %d accepted shares", chunk), "disk on fire", "resending the whole batch is safe")
	if got, want := fmt.Sprint(l.take()), fmt.Sprint([]int{chunk, chunk}); got != want {
		t.Fatalf("appends before the failure: %s records, want %s (none after it)", got, want)
	}
	n.waitShares(t, "failing", counts(uint64(chunk), uint64(chunk), uint64(chunk)))
	l.mu.Lock()
	l.failAt = 0
	l.mu.Unlock()
	wantFresh(t, n.post(t, pathBatch, body), fasthttp.StatusAccepted)
	n.waitShares(t, "failing", counts(uint64(lines), uint64(lines), uint64(lines)))
}
