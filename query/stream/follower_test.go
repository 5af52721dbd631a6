package stream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/engine/eventlog/embedded"
	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/internal/testutil"
	"github.com/newsflow/newsflow/operators/trending"
	"github.com/prometheus/client_golang/prometheus"
)

func openChangesLog(t *testing.T) eventlog.Log {
	t.Helper()
	l, err := embedded.Open(embedded.Options{Dir: filepath.Join(t.TempDir(), "log"), Fsync: embedded.FsyncNever, RetentionAge: embedded.KeepForever})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// appendChanges appends records as the trending-changes operator writes
// them and returns their values.
func appendChanges(t *testing.T, l eventlog.Log, changes ...trending.Change) [][]byte {
	t.Helper()
	var recs []*eventlog.Record
	var values [][]byte
	for _, c := range changes {
		v, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		values = append(values, v)
		recs = append(recs, &eventlog.Record{Topic: schema.TopicTrendingChanges, Key: []byte(c.ArticleID), Value: v, Timestamp: c.EnteredAt,
			Headers: []eventlog.Header{{Key: trending.HeaderChangeID, Value: []byte(c.ID())}}})
	}
	if err := l.Append(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	return values
}

// pollFailLog fails its readers' polls while fail is set.
type pollFailLog struct {
	eventlog.Log
	fail atomic.Bool
}

func (l *pollFailLog) NewReader(pos map[eventlog.TopicPartition]int64) (eventlog.Reader, error) {
	r, err := l.Log.NewReader(pos)
	return &pollFailReader{Reader: r, l: l}, err
}

type pollFailReader struct {
	eventlog.Reader
	l *pollFailLog
}

// Poll loses what it read while fail is set, as a connection that breaks
// mid-fetch.
func (r *pollFailReader) Poll(ctx context.Context, n int) ([]*eventlog.Record, error) {
	recs, err := r.Reader.Poll(ctx, n)
	if err == nil && r.l.fail.Load() {
		return nil, errors.New("broker unreachable")
	}
	return recs, err
}

// TestChangesFollower: the follower starts at the topic's end (what was
// there before is not announced), hands every record appended since to
// the streams in order, skips a value that is not a change, and after a
// failed read resumes where it stopped, neither skipping nor repeating.
func TestChangesFollower(t *testing.T) {
	l := &pollFailLog{Log: openChangesLog(t)}
	if _, err := eventlog.EnsureTopic(context.Background(), l, schema.TopicTrendingChanges, 1); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC).UnixMilli()
	appendChanges(t, l, trending.Change{Window: "1h", ArticleID: "old", Rank: 1, Count: 3, EnteredAt: t0})
	var mu sync.Mutex
	var got []string
	f := NewFollower(l, func(values [][]byte) {
		mu.Lock()
		defer mu.Unlock()
		for _, v := range values {
			got = append(got, string(v))
		}
	}, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	testutil.Eventually(t, 5*time.Second, func() error {
		if f.started.Load() {
			return nil
		}
		return errors.New("the follower has not started")
	})
	want := appendChanges(t, l, trending.Change{Window: "1h", ArticleID: "a", Rank: 1, Count: 5, EnteredAt: t0 + 1},
		trending.Change{Window: "1m", ArticleID: "b", Rank: 2, Count: 4, EnteredAt: t0 + 2})
	if err := l.Append(ctx, []*eventlog.Record{{Topic: schema.TopicTrendingChanges, Value: []byte("not a change")}}); err != nil {
		t.Fatal(err)
	}
	wait := func(n int) []string {
		t.Helper()
		var out []string
		testutil.Eventually(t, 10*time.Second, func() error {
			mu.Lock()
			defer mu.Unlock()
			if out = append([]string(nil), got...); len(out) < n {
				return fmt.Errorf("%d of %d announced", len(out), n)
			}
			return nil
		})
		return out
	}
	if out := wait(2); len(out) != 2 || strings.Contains(out[0], `"old"`) || out[0] != string(want[0]) || out[1] != string(want[1]) {
		t.Fatalf("announced %q, want %q", out, want)
	}
	l.fail.Store(true)
	lost := appendChanges(t, l, trending.Change{Window: "24h", ArticleID: "c", Rank: 1, Count: 9, EnteredAt: t0 + 3})
	time.Sleep(200 * time.Millisecond)
	l.fail.Store(false)
	if out := wait(3); len(out) != 3 || out[2] != string(lost[0]) {
		t.Fatalf("after a failed read: %q", out)
	}
	time.Sleep(changesRetry + 500*time.Millisecond)
	if out := wait(3); len(out) != 3 {
		t.Fatalf("after a failed read, repeated: %q", out)
	}
}

// TestChangesStream: the stream hub sends each appended record as a
// trending.entered event, the record's value as its data, to every open
// stream; a stream that reconnects with an earlier id gets those after it,
// a new one none from before it opened.
func TestChangesStream(t *testing.T) {
	l := openChangesLog(t)
	trend := []byte(`{"window":"1h","items":[]}`)
	hub := NewHub(Source{
		Trending: func() ([]byte, []byte, error) { return trend, trend, nil },
		Breaking: func() (Page, error) { return Page{Stories: []json.RawMessage{}}, nil },
	}, Options{Interval: DefaultInterval, Heartbeat: DefaultHeartbeat, WriteTimeout: 10 * time.Second, Max: DefaultMax}, prometheus.NewGauge(prometheus.GaugeOpts{Name: "streams"}))
	t.Cleanup(hub.Close)
	f := NewFollower(l, hub.Entered, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	t0 := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC).UnixMilli()

	sub, err := hub.subscribe(nil, "")
	if err != nil {
		t.Fatal(err)
	}
	hub.refresh()
	state := readSSE(t, sub)
	if len(state) != 1 || state[0].name != eventTrending {
		t.Fatalf("first events %+v, want the trending state", state)
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		if f.started.Load() {
			return nil
		}
		return errors.New("the follower has not started")
	})

	var values [][]byte
	for i, a := range []string{"p", "q"} {
		for _, w := range []string{"1m", "1h", "24h"} {
			values = append(values, appendChanges(t, l, trending.Change{Window: w, ArticleID: a, Rank: i + 1, Count: uint64(3 - i), EnteredAt: t0})...)
		}
	}
	var got []sseBlock
	testutil.Eventually(t, 10*time.Second, func() error {
		got = append(got, readSSE(t, sub)...)
		if len(got) < len(values) {
			return fmt.Errorf("%d of %d events", len(got), len(values))
		}
		return nil
	})
	if len(got) != 6 {
		t.Fatalf("%d events for 6 records", len(got))
	}
	for i, ev := range got {
		if ev.name != eventEntered || ev.data != string(values[i]) {
			t.Fatalf("event %d: %s %s, want %s %s", i, ev.name, ev.data, eventEntered, values[i])
		}
	}

	// A reconnection after the third event gets the three after it; a
	// new stream, none.
	again, err := hub.subscribe(nil, got[2].id)
	if err != nil {
		t.Fatal(err)
	}
	re := readSSE(t, again)
	if len(re) != 3 || re[0].id != got[3].id || re[2].data != got[5].data {
		t.Fatalf("after Last-Event-ID %s: %+v", got[2].id, re)
	}
	fresh, err := hub.subscribe(nil, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range readSSE(t, fresh) {
		if ev.name == eventEntered {
			t.Fatalf("a new stream got %+v from before it opened", ev)
		}
	}

	// r enters: every open stream gets it.
	appendChanges(t, l, trending.Change{Window: "1m", ArticleID: "r", Rank: 1, Count: 5, EnteredAt: t0 + 1000})
	for _, s := range []*streamSub{sub, again, fresh} {
		var evs []sseBlock
		testutil.Eventually(t, 10*time.Second, func() error {
			if evs = append(evs, readSSE(t, s)...); len(evs) == 0 {
				return errors.New("no event")
			}
			return nil
		})
		if len(evs) != 1 || evs[0].name != eventEntered || !strings.Contains(evs[0].data, `"article_id":"r"`) {
			t.Fatalf("r entering: %+v", evs)
		}
	}
}

// sseBlock is one event of a stream as sent.
type sseBlock struct{ id, name, data string }

// readSSE parses the messages queued for sub.
func readSSE(t *testing.T, sub *streamSub) []sseBlock {
	t.Helper()
	var out []sseBlock
	for {
		select {
		case m, ok := <-sub.ch:
			if !ok {
				t.Fatal("the stream ended")
			}
			for _, block := range strings.Split(strings.TrimSuffix(string(m), "\n\n"), "\n\n") {
				var b sseBlock
				for _, line := range strings.Split(block, "\n") {
					k, v, _ := strings.Cut(line, ": ")
					switch k {
					case "id":
						b.id = v
					case "event":
						b.name = v
					case "data":
						b.data = v
					}
				}
				out = append(out, b)
			}
		default:
			return out
		}
	}
}
