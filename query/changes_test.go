package query

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/engine/eventlog/embedded"
	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/internal/testutil"
	"github.com/newsflow/newsflow/operators/trending"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// fakeTrending is a trending source the test sets: per window the
// articles' counts (ranked by the source as the operator ranks them) and
// as_of, whether the answer is complete, and whether this node appends.
type fakeTrending struct {
	counts     map[string]map[string]uint64 // window → article → count
	asOf       int64
	incomplete bool
	follower   bool
	// The trending tasks' positions, and whether they are restoring.
	progress  []engine.Progress
	restoring bool
}

func (f *fakeTrending) source() changesSource {
	return changesSource{
		top: func(window string, k int) (trending.Result, error) {
			res := trending.Result{Window: window, AsOf: f.asOf, Items: []trending.Item{}}
			if f.incomplete {
				return res, fmt.Errorf("%w: partitions [2] missing", errIncomplete)
			}
			var items []trending.Item
			for a, n := range f.counts[window] {
				items = append(items, trending.Item{ArticleID: a, Count: n, Bound: n / 10})
			}
			res.Items = trending.MergeItems(k, items)
			return res, nil
		},
		emits:    func() bool { return !f.follower },
		progress: func() ([]engine.Progress, bool) { return f.progress, !f.restoring },
	}
}

// set gives every window the same counts.
func (f *fakeTrending) set(asOf int64, counts map[string]uint64) {
	f.asOf = asOf
	f.counts = map[string]map[string]uint64{"1m": counts, "1h": counts, "24h": counts}
}

// flakyLog fails appends while fail is set; with write also set, it
// writes the records before it fails (an append whose acknowledgement
// was lost).
type flakyLog struct {
	eventlog.Log
	fail, write atomic.Bool
}

func (l *flakyLog) Append(ctx context.Context, recs []*eventlog.Record) error {
	if !l.fail.Load() {
		return l.Log.Append(ctx, recs)
	}
	if l.write.Load() {
		if err := l.Log.Append(ctx, recs); err != nil {
			return err
		}
	}
	return errors.New("broker unreachable")
}

func openChangesLog(t *testing.T) eventlog.Log {
	t.Helper()
	l, err := embedded.Open(embedded.Options{Dir: filepath.Join(t.TempDir(), "log"), Fsync: embedded.FsyncNever, RetentionAge: embedded.KeepForever})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// changesRig is a watcher over a log with its own metrics, and what it
// handed to the streams.
type changesRig struct {
	w         *changesWatcher
	reg       *prometheus.Registry
	announced []TrendingChange
}

func newChangesRig(t *testing.T, l eventlog.Log, src changesSource, topts trending.OperatorOptions, k int, hub *streamHub) *changesRig {
	t.Helper()
	r := &changesRig{reg: prometheus.NewRegistry()}
	announce := func(values [][]byte) {
		for _, v := range values {
			var c TrendingChange
			if err := json.Unmarshal(v, &c); err != nil {
				t.Errorf("announced %s: %v", v, err)
			}
			r.announced = append(r.announced, c)
		}
		if hub != nil {
			hub.entered(values)
		}
	}
	w, err := newChangesWatcher(l, topts, src, ChangesOptions{K: k}, time.Second, announce, slog.New(slog.DiscardHandler), r.reg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.close)
	r.w = w
	return r
}

func (r *changesRig) step(t *testing.T) {
	t.Helper()
	if err := r.w.step(context.Background()); err != nil {
		t.Fatalf("step: %v", err)
	}
}

func (r *changesRig) total(window string) float64 {
	var m dto.Metric
	if err := r.w.total.WithLabelValues(window).Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}

// readChanges returns every record of the topic, in offset order.
func readChanges(t *testing.T, l eventlog.Log) []*eventlog.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tp := eventlog.TopicPartition{Topic: schema.TopicTrendingChanges}
	o, err := l.Offsets(ctx, tp)
	if err != nil {
		t.Fatalf("offsets of %s: %v", tp, err)
	}
	r, err := l.NewReader(map[eventlog.TopicPartition]int64{tp: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []*eventlog.Record
	for int64(len(out)) < o.End {
		recs, err := r.Poll(ctx, 1000)
		if err != nil {
			t.Fatalf("read %s: %v", tp, err)
		}
		out = append(out, recs...)
	}
	return out
}

// changeNames returns "window/article@rank" for each record from offset
// from on, checking that each record is well formed.
func changeNames(t *testing.T, recs []*eventlog.Record, from int) []string {
	t.Helper()
	var out []string
	for _, rec := range recs[from:] {
		var c TrendingChange
		if err := json.Unmarshal(rec.Value, &c); err != nil {
			t.Fatalf("record %d: %v: %s", rec.Offset, err, rec.Value)
		}
		id, _ := rec.Header(HeaderChangeID)
		if string(rec.Key) != c.ArticleID || rec.Timestamp != c.EnteredAt || string(id) != c.ID() ||
			c.ID() != fmt.Sprintf("%s/%s/%d", c.Window, c.ArticleID, c.EnteredAt) {
			t.Fatalf("record %d: key %q, time %d, id %q, value %s", rec.Offset, rec.Key, rec.Timestamp, id, rec.Value)
		}
		out = append(out, fmt.Sprintf("%s/%s@%d", c.Window, c.ArticleID, c.Rank))
	}
	return out
}

func wantNames(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: %v, want %v", what, got, want)
	}
}

// TestChangesOncePerWindow: an article that enters a window's top K is
// appended to trending.changes once (key, value, time and id header as
// documented), not again while it stays remembered, again once the
// window's span has passed since it entered, and not again by a new
// watcher over the same log (a restart), which also announces what it
// should after that.
func TestChangesOncePerWindow(t *testing.T) {
	l := openChangesLog(t)
	src := &fakeTrending{}
	r := newChangesRig(t, l, src.source(), trending.OperatorOptions{}, 3, nil)
	t0 := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC).UnixMilli()

	// Nothing shared yet: nothing to announce, the topic exists.
	r.step(t)
	if recs := readChanges(t, l); len(recs) != 0 {
		t.Fatalf("%d records before any share", len(recs))
	}

	src.set(t0, map[string]uint64{"a": 10, "b": 8, "c": 5, "d": 1})
	r.step(t)
	recs := readChanges(t, l)
	wantNames(t, "first look", changeNames(t, recs, 0),
		"1m/a@1", "1m/b@2", "1m/c@3", "1h/a@1", "1h/b@2", "1h/c@3", "24h/a@1", "24h/b@2", "24h/c@3")
	var first TrendingChange
	if err := json.Unmarshal(recs[0].Value, &first); err != nil {
		t.Fatal(err)
	}
	if first != (TrendingChange{Window: "1m", ArticleID: "a", Rank: 1, Count: 10, EnteredAt: t0}) ||
		strings.Contains(string(recs[0].Value), "error_bound") {
		t.Fatalf("first record %s (exact mode: no error_bound)", recs[0].Value)
	}

	// The same answer, and reorderings among the same articles: nothing.
	r.step(t)
	src.set(t0+10_000, map[string]uint64{"a": 10, "b": 12, "c": 11, "d": 1})
	r.step(t)
	if n := len(readChanges(t, l)); n != 9 {
		t.Fatalf("%d records after looks without a new article, want 9", n)
	}

	// d enters every window 30s later, in c's place; only d is new.
	src.set(t0+30_000, map[string]uint64{"a": 10, "b": 12, "c": 2, "d": 11})
	r.step(t)
	recs = readChanges(t, l)
	wantNames(t, "d enters", changeNames(t, recs, 9), "1m/d@2", "1h/d@2", "24h/d@2")

	// 61s after t0 the 1m window has forgotten a and b (not d, which
	// entered at t0+30s): a and b are announced again in 1m only.
	src.set(t0+61_000, map[string]uint64{"a": 10, "b": 12, "c": 2, "d": 11})
	r.step(t)
	recs = readChanges(t, l)
	wantNames(t, "after the 1m span", changeNames(t, recs, 12), "1m/b@1", "1m/a@3")
	if r.total("1m") != 6 || r.total("1h") != 4 || r.total("24h") != 4 {
		t.Fatalf("newsflow_trending_changes_total: 1m %v, 1h %v, 24h %v; want 6, 4, 4", r.total("1m"), r.total("1h"), r.total("24h"))
	}
	if len(r.announced) != 14 {
		t.Fatalf("%d handed to the streams, want the 14 appended", len(r.announced))
	}

	// A restart: a new watcher over the same log remembers it all.
	r.w.close()
	r2 := newChangesRig(t, l, src.source(), trending.OperatorOptions{}, 3, nil)
	r2.step(t)
	r2.step(t)
	if n := len(readChanges(t, l)); n != 14 || len(r2.announced) != 0 {
		t.Fatalf("after a restart: %d records (want 14), %d announced", n, len(r2.announced))
	}
	// An hour and 20s after t0: the 1h window forgets a and b, not d
	// (entered at t0+30s); the 1m window forgets everything; 24h nothing.
	src.set(t0+time.Hour.Milliseconds()+20_000, map[string]uint64{"a": 10, "b": 12, "c": 2, "d": 11})
	r2.step(t)
	recs = readChanges(t, l)
	wantNames(t, "after the 1h span, restarted", changeNames(t, recs, 14), "1m/b@1", "1m/d@2", "1m/a@3", "1h/b@1", "1h/a@3")
	if r2.total("1m") != 3 || r2.total("1h") != 2 || r2.total("24h") != 0 {
		t.Fatalf("restarted totals: 1m %v, 1h %v, 24h %v", r2.total("1m"), r2.total("1h"), r2.total("24h"))
	}
}

// TestChangesBadCases: an incomplete answer announces nothing; an append
// that fails is retried at the next look, and one that wrote before it
// failed is not repeated; cms answers carry error_bound, 0 included.
func TestChangesBadCases(t *testing.T) {
	l := &flakyLog{Log: openChangesLog(t)}
	src := &fakeTrending{}
	r := newChangesRig(t, l, src.source(), trending.OperatorOptions{Counter: trending.CounterCMS}, 2, nil)
	t0 := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC).UnixMilli()

	src.set(t0, map[string]uint64{"a": 10, "b": 8, "c": 5})
	src.incomplete = true
	r.step(t)
	if n := len(readChanges(t, l)); n != 0 {
		t.Fatalf("%d records from an incomplete answer", n)
	}
	src.incomplete = false

	l.fail.Store(true)
	if err := r.w.step(context.Background()); err == nil || !strings.Contains(err.Error(), "broker unreachable") {
		t.Fatalf("step with a failing log: %v", err)
	}
	if n := len(readChanges(t, l)); n != 0 || r.total("1h") != 0 || len(r.announced) != 0 {
		t.Fatalf("a failed append left %d records, counted %v, announced %d", n, r.total("1h"), len(r.announced))
	}
	l.fail.Store(false)
	r.step(t)
	recs := readChanges(t, l)
	wantNames(t, "retried", changeNames(t, recs, 0), "1m/a@1", "1m/b@2", "1h/a@1", "1h/b@2", "24h/a@1", "24h/b@2")
	var c TrendingChange
	if err := json.Unmarshal(recs[0].Value, &c); err != nil || c.Bound == nil || *c.Bound != 1 {
		t.Fatalf("cms record %s: want error_bound 1", recs[0].Value)
	}

	// c enters with a bound of 0, and the append's acknowledgement is
	// lost after it was written: the next look reads it back.
	src.set(t0+1000, map[string]uint64{"a": 10, "b": 8, "c": 9})
	l.fail.Store(true)
	l.write.Store(true)
	if err := r.w.step(context.Background()); err == nil {
		t.Fatal("step: no error from the failing append")
	}
	l.fail.Store(false)
	r.step(t)
	r.step(t)
	recs = readChanges(t, l)
	wantNames(t, "after a lost acknowledgement", changeNames(t, recs, 6), "1m/c@2", "1h/c@2", "24h/c@2")
	if !strings.Contains(string(recs[6].Value), `"error_bound":0`) {
		t.Fatalf("cms record %s: want error_bound 0", recs[6].Value)
	}
	// Read back from the topic, they count as other nodes' appends would:
	// handed to the streams, not counted by this node's metric.
	if r.total("1m") != 2 || len(r.announced) != 9 {
		t.Fatalf("1m total %v, %d announced; want 2, 9", r.total("1m"), len(r.announced))
	}
}

// TestChangesFailover: of two watchers over one log (two nodes), the one
// that owns partition 0 appends and the other hands the records to its
// streams; when ownership moves, the new owner reads the topic first and
// does not repeat what was announced, and the old one stops appending.
func TestChangesFailover(t *testing.T) {
	l := openChangesLog(t)
	srcA, srcB := &fakeTrending{}, &fakeTrending{follower: true}
	a := newChangesRig(t, l, srcA.source(), trending.OperatorOptions{}, 2, nil)
	b := newChangesRig(t, l, srcB.source(), trending.OperatorOptions{}, 2, nil)
	t0 := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC).UnixMilli()
	counts := map[string]uint64{"x": 5, "y": 4, "z": 1}
	srcA.set(t0, counts)
	srcB.set(t0, counts)

	b.step(t) // B starts following at the end
	a.step(t)
	b.step(t)
	if n := len(readChanges(t, l)); n != 6 || len(a.announced) != 6 || len(b.announced) != 6 {
		t.Fatalf("%d records, A announced %d, B %d; want 6 each", n, len(a.announced), len(b.announced))
	}
	if fmt.Sprint(a.announced) != fmt.Sprint(b.announced) {
		t.Fatalf("A announced %v, B %v", a.announced, b.announced)
	}

	// Partition 0 moves to B; z enters.
	srcA.follower, srcB.follower = true, false
	counts = map[string]uint64{"x": 5, "y": 4, "z": 6}
	srcA.set(t0+5000, counts)
	srcB.set(t0+5000, counts)
	b.step(t)
	a.step(t)
	recs := readChanges(t, l)
	wantNames(t, "after the move", changeNames(t, recs, 6), "1m/z@1", "1h/z@1", "24h/z@1")
	if b.total("1m") != 1 || a.total("1m") != 2 || len(a.announced) != 9 {
		t.Fatalf("B appended %v, A %v in 1m; A announced %d", b.total("1m"), a.total("1m"), len(a.announced))
	}

	// And back to A, which did not append z itself: nothing again.
	srcA.follower, srcB.follower = false, true
	a.step(t)
	b.step(t)
	if n := len(readChanges(t, l)); n != 9 || a.total("1m") != 2 || len(b.announced) != 9 {
		t.Fatalf("back on A: %d records, A appended %v in 1m, B announced %d", n, a.total("1m"), len(b.announced))
	}
}

// TestChangesWaitsForReplay: a watcher that starts appending waits until
// this node's trending tasks have restored and applied what their inputs
// held when it began to wait (a restarted node replays the log into state
// older than it), and a snapshot interval more, so that it does not take
// the tops of the replay for articles entering.
func TestChangesWaitsForReplay(t *testing.T) {
	l := openChangesLog(t)
	ctx := context.Background()
	if err := l.CreateTopic(ctx, schema.TopicShares, 1); err != nil {
		t.Fatal(err)
	}
	share := func(n int) {
		for range n {
			if err := l.Append(ctx, []*eventlog.Record{{Topic: schema.TopicShares, Key: []byte("k"), Value: []byte("{}")}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	share(5)
	src := &fakeTrending{restoring: true,
		progress: []engine.Progress{{Stage: trending.Name, Topic: schema.TopicShares, Partition: 0, Committed: 2}}}
	r := newChangesRig(t, l, src.source(), trending.OperatorOptions{SnapshotInterval: 50 * time.Millisecond}, 2, nil)
	src.set(time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC).UnixMilli(), map[string]uint64{"a": 3, "b": 2})

	r.step(t) // restoring
	src.restoring = false
	r.step(t) // the target is 5; 2 applied
	share(3)  // shares keep coming: the target stays
	src.progress[0].Committed = 4
	r.step(t)
	if n := len(readChanges(t, l)); n != 0 {
		t.Fatalf("%d records while the tasks replay", n)
	}
	src.progress[0].Committed = 5
	r.step(t) // caught up: answers may still be a snapshot interval old
	if n := len(readChanges(t, l)); n != 0 {
		t.Fatalf("%d records at once when the tasks caught up", n)
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		r.step(t)
		if len(readChanges(t, l)) == 0 {
			return errors.New("nothing appended a snapshot interval after the tasks caught up")
		}
		return nil
	})
	wantNames(t, "caught up", changeNames(t, readChanges(t, l), 0), "1m/a@1", "1m/b@2", "1h/a@1", "1h/b@2", "24h/a@1", "24h/b@2")
}

// TestChangesStream: the stream hub sends each appended record as a
// trending.entered event, the record's value as its data, to every open
// stream; a stream that reconnects with an earlier id gets those after it,
// a new one none from before it opened.
func TestChangesStream(t *testing.T) {
	l := openChangesLog(t)
	hub := newStreamHub(streamSource{
		trending: func() (storyTrending, error) { return storyTrending{Window: "1h", Items: []storyItem{}}, nil },
		breaking: func() (breakingPage, error) { return breakingPage{Stories: []json.RawMessage{}}, nil },
	}, Options{}.withDefaults(), prometheus.NewGauge(prometheus.GaugeOpts{Name: "streams"}))
	t.Cleanup(hub.close)
	src := &fakeTrending{}
	r := newChangesRig(t, l, src.source(), trending.OperatorOptions{}, 2, hub)
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

	src.set(t0, map[string]uint64{"p": 3, "q": 2, "r": 1})
	r.step(t)
	recs := readChanges(t, l)
	got := readSSE(t, sub)
	if len(got) != len(recs) || len(recs) != 6 {
		t.Fatalf("%d events for %d records, want 6", len(got), len(recs))
	}
	for i, ev := range got {
		if ev.name != eventEntered || ev.data != string(recs[i].Value) {
			t.Fatalf("event %d: %s %s, want %s %s", i, ev.name, ev.data, eventEntered, recs[i].Value)
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
	src.set(t0+1000, map[string]uint64{"p": 3, "q": 2, "r": 5})
	r.step(t)
	for _, s := range []*streamSub{sub, again, fresh} {
		evs := readSSE(t, s)
		if len(evs) != 3 || evs[0].name != eventEntered || !strings.Contains(evs[0].data, `"article_id":"r"`) {
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
