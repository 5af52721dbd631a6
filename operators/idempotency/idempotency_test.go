package idempotency_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/enginetest"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/internal/testutil"
	"github.com/newsflow/newsflow/operators/idempotency"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const parts = 3

// rig runs the operator on an engine over a log and a state store that
// outlive a run.
type rig struct {
	*enginetest.Rig
	t  *testing.T
	op *idempotency.Operator
}

func newRig(t *testing.T, ttl time.Duration) *rig {
	t.Helper()
	r := &rig{Rig: enginetest.New(t, map[string]int32{idempotency.Topic: parts}), t: t}
	var err error
	if r.op, err = idempotency.New(idempotency.Options{TTL: ttl}, parts, r.Log); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *rig) start() {
	r.Start(engine.Options{Partitions: parts, CommitInterval: 20 * time.Millisecond}, r.op)
}

func scope(name string) string { s := sha256.Sum256([]byte(name)); return string(s[:]) }

// mark appends the marker of key's response, as the HTTP layer does.
func (r *rig) mark(key string, at int64, body string) {
	r.t.Helper()
	sum := sha256.Sum256([]byte("request " + body))
	rec, err := r.op.Marker(key, idempotency.Response{Status: 202, Body: []byte(body), At: at, Sum: sum[:]})
	if err != nil {
		r.t.Fatal(err)
	}
	r.Append(rec)
}

func (r *rig) lookup(key string) *idempotency.Response {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := r.op.Lookup(ctx, key)
	if err != nil {
		r.t.Fatalf("lookup: %v", err)
	}
	return resp
}

// TestLookupSeesWhatWasAppended: a lookup right after a marker was
// appended finds it (it waits for the task to apply the topic as it was),
// on every partition; an unknown key is nil; and the keys survive a
// restart of the engine.
func TestLookupSeesWhatWasAppended(t *testing.T) {
	r := newRig(t, time.Hour)
	if _, err := r.op.Lookup(context.Background(), scope("k")); !errors.Is(err, idempotency.ErrUnavailable) {
		t.Fatalf("lookup before the task restored: %v, want ErrUnavailable", err)
	}
	r.start()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).UnixMilli()
	seen := map[int32]bool{}
	for i, name := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"} {
		key := scope(name)
		seen[eventlog.PartitionFor([]byte(key), parts)] = true
		r.mark(key, t0+int64(i), `{"accepted":"`+name+`"}`)
		got := r.lookup(key)
		if got == nil || string(got.Body) != `{"accepted":"`+name+`"}` || got.At != t0+int64(i) || got.Status != 202 {
			t.Fatalf("lookup of %s right after its marker: %+v", name, got)
		}
	}
	if len(seen) != parts {
		t.Fatalf("the keys fell in partitions %v; the test wants every one", seen)
	}
	if got := r.lookup(scope("unknown")); got != nil {
		t.Fatalf("unknown key: %+v", got)
	}
	r.Halt()
	if _, err := r.op.Lookup(context.Background(), scope("a")); !errors.Is(err, idempotency.ErrUnavailable) {
		t.Fatalf("lookup with the task stopped: %v, want ErrUnavailable", err)
	}
	r.start()
	if got := r.lookup(scope("l")); got == nil || string(got.Body) != `{"accepted":"l"}` {
		t.Fatalf("after a restart: %+v", got)
	}
}

// TestKeysExpire: a partition forgets a key a TTL of event time after it
// was answered, unless it was answered again since.
func TestKeysExpire(t *testing.T) {
	r := newRig(t, time.Minute)
	r.start()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).UnixMilli()
	// Three keys of one partition.
	var keys []string
	for i := 0; len(keys) < 3; i++ {
		k := scope(string(rune('a' + i)))
		if eventlog.PartitionFor([]byte(k), parts) == 0 {
			keys = append(keys, k)
		}
	}
	old, again, young := keys[0], keys[1], keys[2]
	r.mark(old, t0, `"old"`)
	r.mark(again, t0, `"again"`)
	r.mark(again, t0+50_000, `"again, later"`)
	r.mark(young, t0+100_000, `"young"`)
	r.lookup(young)                      // committed: the next batch's flush expires
	r.mark(young, t0+100_001, `"young"`) // one more batch
	testutil.Eventually(t, 10*time.Second, func() error {
		if got := r.lookup(old); got != nil {
			return errors.New("the old key is still kept")
		}
		return nil
	})
	if got := r.lookup(again); got == nil || string(got.Body) != `"again, later"` {
		t.Fatalf("a key answered again within the TTL: %+v", got)
	}
	if got := r.lookup(young); got == nil {
		t.Fatal("the young key was forgotten")
	}
}

// TestBadMarkers go to the dead-letter topic with the reason; the
// partition goes on.
func TestBadMarkers(t *testing.T) {
	r := newRig(t, time.Hour)
	r.start()
	key := scope("good")
	p := eventlog.PartitionFor([]byte(key), parts)
	bad := []*eventlog.Record{
		{Topic: idempotency.Topic, Partition: p, Key: []byte("short"), Value: []byte(`{}`)},
		{Topic: idempotency.Topic, Partition: (p + 1) % parts, Key: []byte(key), Value: []byte(`{"sum":"AAAA"}`)},
		{Topic: idempotency.Topic, Partition: p, Key: []byte(key), Value: []byte(`not json`)},
	}
	r.Append(bad...)
	r.mark(key, 1, `"good"`)
	if got := r.lookup(key); got == nil || string(got.Body) != `"good"` {
		t.Fatalf("after bad markers: %+v", got)
	}
	var reasons []string
	testutil.Eventually(t, 10*time.Second, func() error {
		reasons = reasons[:0]
		for _, rec := range testutil.ReadTopic(t, r.Log, engine.DefaultOptions().DeadLetterTopic) {
			reason, _ := rec.Header(engine.HeaderDLQReason)
			reasons = append(reasons, string(reason))
		}
		if len(reasons) != 3 {
			return errors.New("not every bad marker is dead-lettered yet")
		}
		return nil
	})
	for _, want := range []string{"key of 5 bytes", "in partition", "not a response"} {
		if !strings.Contains(strings.Join(reasons, "; "), want) {
			t.Fatalf("dead-letter reasons %q lack %q", reasons, want)
		}
	}
}
