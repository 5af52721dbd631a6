package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/internal/testutil"
	"github.com/newsflow/newsflow/state"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// relayOp passes every record of its input on to its output; a record
// whose value is "own" gets an origin header of the operator's own.
type relayOp struct{ name, in, out string }

func (o *relayOp) Spec() engine.Spec {
	return engine.Spec{Name: o.name, Inputs: []engine.Input{{Topic: o.in}}, Outputs: []string{o.out}}
}

func (o *relayOp) NewTask(engine.TaskContext) (engine.Task, error) { return &relayTask{op: o}, nil }

type relayTask struct{ op *relayOp }

func (t *relayTask) Restore(state.Reader) error { return nil }
func (t *relayTask) Process(pc *engine.ProcessContext, rec *eventlog.Record) error {
	if string(rec.Value) == "bad" {
		return engine.Invalid("bad")
	}
	out := &eventlog.Record{Topic: t.op.out, Partition: rec.Partition, Key: rec.Key, Value: rec.Value, Timestamp: rec.Timestamp}
	if string(rec.Value) == "own" {
		out.Headers = []eventlog.Header{{Key: engine.HeaderOrigin, Value: []byte("7")}}
	}
	pc.Emit(out)
	return nil
}
func (t *relayTask) Flush(state.Writer) error    { return nil }
func (t *relayTask) Committed(engine.CommitInfo) {}
func (t *relayTask) Close() error                { return nil }

// recordingTracer records the spans the engine starts and ends.
type recordingTracer struct {
	mu     sync.Mutex
	starts []string // stage + " " + parent
	ended  map[string]error
}

func (rt *recordingTracer) Start(stage string, p int32, rec *eventlog.Record, parent []byte) ([]byte, func(error)) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	child := fmt.Sprintf("%s-span-%d", stage, len(rt.starts))
	rt.starts = append(rt.starts, stage+" "+string(parent))
	return []byte(child), func(err error) {
		rt.mu.Lock()
		defer rt.mu.Unlock()
		rt.ended[child] = err
	}
}

// histogram returns the cumulative bucket counts of a histogram series.
func histogram(t *testing.T, g prometheus.Gatherer, name string, labels map[string]string) (count uint64, le map[float64]uint64) {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if !hasLabels(m, labels) {
				continue
			}
			le = map[float64]uint64{}
			for _, b := range m.GetHistogram().GetBucket() {
				le[b.GetUpperBound()] = b.GetCumulativeCount()
			}
			return m.GetHistogram().GetSampleCount(), le
		}
	}
	t.Fatalf("no series %s%v", name, labels)
	return 0, nil
}

func gauge(t *testing.T, g prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum, found := 0.0, false
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if hasLabels(m, labels) {
				sum, found = sum+m.GetGauge().GetValue(), true
			}
		}
	}
	if !found {
		t.Fatalf("no series %s%v", name, labels)
	}
	return sum
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	n := 0
	for _, lp := range m.GetLabel() {
		if v, ok := want[lp.GetName()]; ok {
			if v != lp.GetValue() {
				return false
			}
			n++
		}
	}
	return n == len(want)
}

// An event's origin and trace context travel from an input record to the
// records emitted while it is processed, through every stage; each stage's
// commit observes the time since the origin, and its spans end when the
// batch commits.
func TestLineageAndVisibility(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	const parts = 2
	for _, topic := range []string{"in", "mid", "out"} {
		if _, err := eventlog.EnsureTopic(ctx, h.log, topic, parts); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	ms := func(d time.Duration) int64 { return now.Add(-d).UnixMilli() }
	recs := []*eventlog.Record{
		// Entered 45 s ago (a crawl's origin header), its log time recent.
		{Topic: "in", Partition: 0, Key: []byte("a"), Value: []byte("a"), Timestamp: ms(0),
			Headers: []eventlog.Header{engine.OriginHeader(now.Add(-45 * time.Second))}},
		// Traced, no origin header: its timestamp counts.
		{Topic: "in", Partition: 1, Key: []byte("b"), Value: []byte("b"), Timestamp: ms(2 * time.Second),
			Headers: []eventlog.Header{{Key: engine.HeaderTraceParent, Value: []byte("00-root")}}},
		{Topic: "in", Partition: 1, Key: []byte("c"), Value: []byte("c"), Timestamp: ms(1500 * time.Millisecond)},
		// A dead letter is not an event made visible.
		{Topic: "in", Partition: 0, Key: []byte("d"), Value: []byte("bad"), Timestamp: ms(0)},
	}
	if err := h.log.Append(ctx, recs); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	tracer := &recordingTracer{ended: map[string]error{}}
	h.runUntilCaughtUp(h.log, engine.Options{Partitions: parts, Registerer: reg, Tracer: tracer},
		&relayOp{name: "first", in: "in", out: "mid"}, &relayOp{name: "second", in: "mid", out: "out"})

	// The records of the last topic carry the first input's origin and
	// the trace context of the second stage's span.
	out := testutil.ReadTopic(t, h.log, "out")
	if len(out) != 3 {
		t.Fatalf("%d records on out, want 3", len(out))
	}
	for _, r := range out {
		origin, _ := r.Header(engine.HeaderOrigin)
		tp, traced := r.Header(engine.HeaderTraceParent)
		switch string(r.Key) {
		case "a":
			if want := strconv.FormatInt(ms(45*time.Second), 10); string(origin) != want || traced {
				t.Errorf("a: origin %s traced %v, want %s untraced", origin, traced, want)
			}
		case "b":
			if string(origin) != strconv.FormatInt(ms(2*time.Second), 10) {
				t.Errorf("b: origin %s, want its timestamp", origin)
			}
			if string(tp) != "second-span-1" {
				t.Errorf("b: traceparent %q, want the second stage's span", tp)
			}
		case "c":
			if traced {
				t.Errorf("c traced: %q", tp)
			}
		}
	}
	tracer.mu.Lock()
	if fmt.Sprint(tracer.starts) != "[first 00-root second first-span-0]" {
		t.Errorf("spans started %v, want the first stage's under the root and the second's under it", tracer.starts)
	}
	if len(tracer.ended) != 2 || tracer.ended["first-span-0"] != nil || tracer.ended["second-span-1"] != nil {
		t.Errorf("spans ended %v, want both ended by their commit", tracer.ended)
	}
	tracer.mu.Unlock()

	for _, st := range []struct{ stage, input string }{{"first", "in"}, {"second", "mid"}} {
		count, le := histogram(t, reg, "newsflow_event_visible_seconds", map[string]string{"stage": st.stage, "input": st.input})
		if count != 3 || le[30] != 2 || le[60] != 3 || le[1] != 0 {
			t.Errorf("%s: %d events visible, %d within 30 s, %d within 60 s, %d within 1 s; want 3, 2, 3, 0", st.stage, count, le[30], le[60], le[1])
		}
	}
}

// An operator's own origin header on an emitted record is kept.
func TestEmitKeepsOperatorHeaders(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	for _, topic := range []string{"in", "mid"} {
		if _, err := eventlog.EnsureTopic(ctx, h.log, topic, 1); err != nil {
			t.Fatal(err)
		}
	}
	err := h.log.Append(ctx, []*eventlog.Record{{Topic: "in", Key: []byte("k"), Value: []byte("own"), Timestamp: time.Now().UnixMilli(),
		Headers: []eventlog.Header{engine.OriginHeader(time.Now())}}})
	if err != nil {
		t.Fatal(err)
	}
	h.runUntilCaughtUp(h.log, engine.Options{Partitions: 1}, &relayOp{name: "first", in: "in", out: "mid"})
	out := testutil.ReadTopic(t, h.log, "mid")
	if len(out) != 1 {
		t.Fatalf("%d records, want 1", len(out))
	}
	var origins []string
	for _, hd := range out[0].Headers {
		if hd.Key == engine.HeaderOrigin {
			origins = append(origins, string(hd.Value))
		}
	}
	if fmt.Sprint(origins) != "[7]" {
		t.Errorf("origin headers %v, want only the operator's", origins)
	}
}

// A paused stage applies nothing more while its lag grows and shows; on
// resume it applies everything exactly once.
func TestPauseResume(t *testing.T) {
	h := newHarness(t)
	const parts = 2
	want := h.produce("events", parts, 500, func(key string, _ int) int32 { return eventlog.PartitionFor([]byte(key), parts) })
	reg := prometheus.NewRegistry()
	e, err := engine.New(h.log, h.db, engine.Options{Partitions: parts, Registerer: reg, LagInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Register(&countOp{name: "count", topic: "events"}); err != nil {
		t.Fatal(err)
	}
	if err := e.Pause("count"); err == nil {
		t.Error("Pause before Run: no error")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	caughtUp := func() error {
		ok, err := e.CaughtUp(context.Background())
		if err != nil || !ok {
			return fmt.Errorf("not caught up (%v): %+v", err, e.Progress())
		}
		return nil
	}
	testutil.Eventually(t, 30*time.Second, caughtUp)
	if err := e.Pause("nope"); err == nil {
		t.Error("pausing an unknown stage: no error")
	}
	if err := e.Pause("count"); err != nil {
		t.Fatal(err)
	}
	if gauge(t, reg, "newsflow_stage_paused", map[string]string{"stage": "count"}) != 1 {
		t.Fatal("stage not reported paused")
	}
	committed := func() (n int64) {
		for _, p := range e.Progress() {
			n += p.Committed
		}
		return n
	}
	before := committed()
	more := h.produce("events", parts, 300, func(key string, _ int) int32 { return eventlog.PartitionFor([]byte(key), parts) })
	testutil.Eventually(t, 10*time.Second, func() error {
		if lag := gauge(t, reg, "newsflow_lag_records", map[string]string{"stage": "count"}); lag != 300 {
			return fmt.Errorf("lag %v while paused, want 300", lag)
		}
		return nil
	})
	if got := committed(); got != before {
		t.Fatalf("a paused stage committed %d more records", got-before)
	}
	for _, s := range e.StageStates() {
		if s.Stage == "count" && (!s.Paused || s.Running != parts) {
			t.Errorf("stage state %+v, want paused with %d tasks running", s, parts)
		}
	}
	if err := e.Resume("count"); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, caughtUp)
	if gauge(t, reg, "newsflow_stage_paused", map[string]string{"stage": "count"}) != 0 {
		t.Error("stage still reported paused after resume")
	}
	for k, n := range more {
		want[k] += n
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	done <- nil
	got, _ := h.stateCounts("count", parts)
	equalCounts(t, got, want)
}

// Hold stops every stage's tasks committing, whatever their pause switch,
// and says why in StageStates; Release lets them go on; a stage an
// operator paused stays paused through a Hold and its Release.
func TestHoldRelease(t *testing.T) {
	h := newHarness(t)
	const parts = 2
	want := h.produce("events", parts, 200, func(key string, _ int) int32 { return eventlog.PartitionFor([]byte(key), parts) })
	e, err := engine.New(h.log, h.db, engine.Options{Partitions: parts, LagInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"count", "other"} {
		if err := e.Register(&countOp{name: name, topic: "events"}); err != nil {
			t.Fatal(err)
		}
	}
	e.Hold("disk", "disk nearly full")
	e.Hold("cluster", "out of contact")
	e.Release("cluster")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	testutil.Eventually(t, 10*time.Second, func() error {
		states := e.StageStates()
		if len(states) == 0 {
			return errors.New("no stages yet")
		}
		for _, s := range states {
			if s.Held != "disk nearly full" || s.Running != parts {
				return fmt.Errorf("stage state %+v, want held with %d tasks running", s, parts)
			}
		}
		return nil
	})
	for _, p := range e.Progress() {
		if p.Committed != 0 {
			t.Fatalf("a held task committed: %+v", p)
		}
	}
	if reason, ok := e.Held(); !ok || reason != "disk nearly full" {
		t.Errorf("Held() = %q, %v", reason, ok)
	}
	if err := e.Pause("other"); err != nil {
		t.Fatal(err)
	}
	e.Release("nobody") // not a holder: changes nothing
	if _, ok := e.Held(); !ok {
		t.Fatal("released by a non-holder")
	}
	e.Release("disk")
	testutil.Eventually(t, 30*time.Second, func() error {
		for _, p := range e.Progress() {
			if p.Stage == "count" && p.Committed != p.HighWatermark {
				return fmt.Errorf("not caught up after Release: %+v", p)
			}
		}
		return nil
	})
	for _, s := range e.StageStates() {
		if s.Held != "" || (s.Stage == "other") != s.Paused {
			t.Errorf("after Release: %+v", s)
		}
	}
	for _, p := range e.Progress() {
		if p.Stage == "other" && p.Committed != 0 {
			t.Errorf("the stage paused by hand committed after Release: %+v", p)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	done <- nil
	got, _ := h.stateCounts("count", parts)
	equalCounts(t, got, want)
}

// A task that keeps failing is not counted as running: between its
// attempts it is restoring again.
func TestFailingTaskIsNotRunning(t *testing.T) {
	h := newHarness(t)
	const parts = 2
	h.produce("events", parts, 100, func(key string, _ int) int32 { return eventlog.PartitionFor([]byte(key), parts) })
	reg := prometheus.NewRegistry()
	e, err := engine.New(h.log, h.db, engine.Options{Partitions: parts, Registerer: reg,
		RestartBackoff: 50 * time.Millisecond, MaxRestartBackoff: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Register(&countOp{name: "count", topic: "events", failProb: 1}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	testutil.Eventually(t, 10*time.Second, func() error {
		for _, s := range e.StageStates() {
			if s.Stage == "count" && s.Running == 0 && s.Restoring == parts {
				return nil
			}
		}
		return fmt.Errorf("stage states %+v, want the %d failing tasks restoring", e.StageStates(), parts)
	})
	if n := gauge(t, reg, "newsflow_tasks_running", map[string]string{"stage": "count"}); n == parts {
		t.Errorf("newsflow_tasks_running %v: the failing tasks count as running", n)
	}
}
