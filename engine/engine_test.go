package engine_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/engine/eventlog/embedded"
	"github.com/newsflow/newsflow/internal/testutil"
	"github.com/newsflow/newsflow/state"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
)

// countOp counts records per key. Its state is one key per counted key; it
// fails at random to exercise restarts from committed state.
type countOp struct {
	name      string
	topic     string
	route     bool
	singleton bool
	failProb  float64
	panics    bool // inject failures in Process as panics
	// poison, if set, is a value whose Process always fails.
	poison   string
	seed     atomic.Uint64
	failures atomic.Int64
}

func (o *countOp) Spec() engine.Spec {
	in := engine.Input{Topic: o.topic, Key: "key"}
	if o.route {
		in.Route = func(r *eventlog.Record) ([]byte, bool) { return r.Key, len(r.Key) > 0 }
	}
	return engine.Spec{Name: o.name, Inputs: []engine.Input{in}, Singleton: o.singleton}
}

func (o *countOp) NewTask(tc engine.TaskContext) (engine.Task, error) {
	return &countTask{op: o, rng: rand.New(rand.NewPCG(o.seed.Add(1), uint64(tc.Partition))), counts: map[string]int64{}, dirty: map[string]bool{}}, nil
}

type countTask struct {
	op     *countOp
	rng    *rand.Rand
	counts map[string]int64
	dirty  map[string]bool
}

var errInjected = errors.New("injected failure")

func (t *countTask) Restore(r state.Reader) error {
	return r.Scan([]byte("c/"), []byte("c0"), func(k, v []byte) error {
		t.counts[string(k[2:])] = int64(binary.BigEndian.Uint64(v))
		return nil
	})
}

func (t *countTask) Process(_ *engine.ProcessContext, rec *eventlog.Record) error {
	if strings.HasPrefix(string(rec.Value), "bad") {
		return engine.Invalid("value %q is bad", rec.Value)
	}
	if len(rec.Key) == 0 {
		return engine.Invalid("no key")
	}
	if t.op.poison != "" && string(rec.Value) == t.op.poison {
		t.op.failures.Add(1)
		if t.op.panics {
			panic(fmt.Sprintf("cannot digest %q", rec.Value))
		}
		return fmt.Errorf("cannot digest %q", rec.Value)
	}
	if t.rng.Float64() < t.op.failProb {
		t.op.failures.Add(1)
		if t.op.panics {
			panic(errInjected)
		}
		return errInjected
	}
	t.counts[string(rec.Key)]++
	t.dirty[string(rec.Key)] = true
	return nil
}

func (t *countTask) Flush(w state.Writer) error {
	if t.rng.Float64() < t.op.failProb*100 {
		t.op.failures.Add(1)
		return errInjected
	}
	for k := range t.dirty {
		if err := w.Set([]byte("c/"+k), binary.BigEndian.AppendUint64(nil, uint64(t.counts[k]))); err != nil {
			return err
		}
	}
	clear(t.dirty)
	return nil
}

func (t *countTask) Committed(engine.CommitInfo) {}
func (t *countTask) Close() error                { return nil }

// flakyLog appends records to the repartition topics and then reports a
// failure now and then, as if the process had crashed after the append.
type flakyLog struct {
	eventlog.Log
	mu   sync.Mutex
	rng  *rand.Rand
	prob float64
	hits atomic.Int64
}

func (f *flakyLog) Append(ctx context.Context, recs []*eventlog.Record) error {
	if err := f.Log.Append(ctx, recs); err != nil {
		return err
	}
	if len(recs) > 0 && strings.HasSuffix(recs[0].Topic, "-repartition") {
		f.mu.Lock()
		fail := f.rng.Float64() < f.prob
		f.mu.Unlock()
		if fail {
			f.hits.Add(1)
			return errInjected
		}
	}
	return nil
}

type harness struct {
	t   *testing.T
	dir string
	log eventlog.Log
	db  *state.DB
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{t: t, dir: t.TempDir()}
	l, err := embedded.Open(embedded.Options{Dir: h.dir + "/log", Fsync: embedded.FsyncNever})
	if err != nil {
		t.Fatal(err)
	}
	db, err := state.Open(h.dir+"/state", state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h.log, h.db = l, db
	t.Cleanup(func() {
		db.Close()
		l.Close()
	})
	return h
}

// runUntilCaughtUp runs an engine with ops until it has committed all of
// the log, then stops it.
func (h *harness) runUntilCaughtUp(l eventlog.Log, opts engine.Options, ops ...engine.Operator) *engine.Engine {
	h.t.Helper()
	opts.RestartBackoff = time.Millisecond
	opts.MaxRestartBackoff = 5 * time.Millisecond
	e, err := engine.New(l, h.db, opts)
	if err != nil {
		h.t.Fatal(err)
	}
	for _, op := range ops {
		if err := e.Register(op); err != nil {
			h.t.Fatal(err)
		}
	}
	h.runUntilCaughtUpWith(e)
	return e
}

// stateCounts reads every countOp key of every partition from the state DB.
func (h *harness) stateCounts(op string, parts int32) (map[string]int64, map[string]int32) {
	counts, owner := map[string]int64{}, map[string]int32{}
	for p := int32(0); p < parts; p++ {
		ns := h.db.Namespace(fmt.Sprintf("task/%s/%d", op, p))
		err := ns.Scan([]byte("c/"), []byte("c0"), func(k, v []byte) error {
			key := string(k[2:])
			if prev, ok := owner[key]; ok && prev != p {
				h.t.Fatalf("key %s counted in partitions %d and %d", key, prev, p)
			}
			owner[key] = p
			counts[key] += int64(binary.BigEndian.Uint64(v))
			return nil
		})
		if err != nil {
			h.t.Fatal(err)
		}
	}
	return counts, owner
}

func (h *harness) produce(topic string, parts int32, n int, partitionOf func(key string, i int) int32) map[string]int64 {
	h.t.Helper()
	ctx := context.Background()
	if _, err := eventlog.EnsureTopic(ctx, h.log, topic, parts); err != nil {
		h.t.Fatal(err)
	}
	want := map[string]int64{}
	var batch []*eventlog.Record
	for i := 0; i < n; i++ {
		key := fmt.Sprintf("k%d", (i*7919)%211)
		want[key]++
		batch = append(batch, &eventlog.Record{Topic: topic, Partition: partitionOf(key, i), Key: []byte(key), Value: []byte("v"), Timestamp: int64(i)})
		if len(batch) == 1000 {
			if err := h.log.Append(ctx, batch); err != nil {
				h.t.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if err := h.log.Append(ctx, batch); err != nil {
		h.t.Fatal(err)
	}
	return want
}

func equalCounts(t *testing.T, got, want map[string]int64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("counted %d keys, want %d", len(got), len(want))
	}
	for k, w := range want {
		if got[k] != w {
			t.Fatalf("key %s counted %d times, want %d", k, got[k], w)
		}
	}
}

// Every record changes state exactly once although tasks fail at random
// between applying records and committing them.
func TestExactlyOnceAcrossTaskFailures(t *testing.T) {
	h := newHarness(t)
	const parts = 4
	want := h.produce("in", parts, 20000, func(k string, _ int) int32 { return eventlog.PartitionFor([]byte(k), parts) })
	op := &countOp{name: "count", topic: "in", failProb: 0.0005}
	h.runUntilCaughtUp(h.log, engine.Options{Partitions: parts, MaxBatch: 97}, op)
	if op.failures.Load() == 0 {
		t.Fatal("no failure was injected; the test proves nothing")
	}
	got, _ := h.stateCounts("count", parts)
	equalCounts(t, got, want)
	t.Logf("%d injected failures", op.failures.Load())
}

// A panic in an operator restarts its task from the committed state, like
// an error, and leaves the rest of the engine running.
func TestExactlyOnceAcrossPanics(t *testing.T) {
	h := newHarness(t)
	const parts = 4
	want := h.produce("in", parts, 20000, func(k string, _ int) int32 { return eventlog.PartitionFor([]byte(k), parts) })
	op := &countOp{name: "count", topic: "in", failProb: 0.0005, panics: true}
	h.runUntilCaughtUp(h.log, engine.Options{Partitions: parts, MaxBatch: 97}, op)
	if op.failures.Load() == 0 {
		t.Fatal("no panic was injected; the test proves nothing")
	}
	got, _ := h.stateCounts("count", parts)
	equalCounts(t, got, want)
}

// Records a producer put in arbitrary partitions are co-located by key
// through the repartition topic, and forwarded records that are appended
// again after a failure are applied once.
func TestRepartitionCoLocatesAndDeduplicates(t *testing.T) {
	h := newHarness(t)
	const parts = 4
	rng := rand.New(rand.NewPCG(1, 2))
	want := h.produce("in", parts, 20000, func(string, int) int32 { return rng.Int32N(parts) })
	fl := &flakyLog{Log: h.log, rng: rand.New(rand.NewPCG(3, 4)), prob: 0.2}
	op := &countOp{name: "count", topic: "in", route: true, failProb: 0.0002}
	e := h.runUntilCaughtUp(fl, engine.Options{Partitions: parts, MaxBatch: 113}, op)
	if fl.hits.Load() == 0 {
		t.Fatal("no repartition append failed; the test proves nothing")
	}
	got, owner := h.stateCounts("count", parts)
	equalCounts(t, got, want)
	for k, p := range owner {
		if want := eventlog.PartitionFor([]byte(k), parts); p != want {
			t.Fatalf("key %s counted by partition %d, murmur2 says %d", k, p, want)
		}
	}
	var forwarded int64
	for _, p := range e.Progress() {
		if strings.HasSuffix(p.Topic, "-repartition") {
			forwarded += p.Committed
		}
	}
	if forwarded <= 0 {
		t.Fatal("nothing went through the repartition topic")
	}
	t.Logf("%d failed repartition appends; %d forwarded records read", fl.hits.Load(), forwarded)
}

// A singleton operator runs one task, on partition 0, reading partition 0
// of its input, exactly once across failures; the partition that hosts it
// weighs more in a cluster's assignment.
func TestSingleton(t *testing.T) {
	h := newHarness(t)
	const parts = 4
	want := h.produce("in", parts, 20000, func(string, int) int32 { return engine.SingletonPartition })
	op := &countOp{name: "count", topic: "in", singleton: true, failProb: 0.0005}
	reg := prometheus.NewRegistry()
	start := time.Now()
	e := h.runUntilCaughtUp(h.log, engine.Options{Partitions: parts, MaxBatch: 97, Registerer: reg}, op)
	// The one task's busy time: some, and at most the run's.
	if busy := testutil.Counter(t, reg, "newsflow_task_busy_seconds_total", "stage", "count"); busy <= 0 || busy > time.Since(start).Seconds() {
		t.Fatalf("busy %.3fs in a run of %v", busy, time.Since(start))
	}
	if op.failures.Load() == 0 {
		t.Fatal("no failure was injected; the test proves nothing")
	}
	got, owner := h.stateCounts("count", parts)
	equalCounts(t, got, want)
	for k, p := range owner {
		if p != engine.SingletonPartition {
			t.Fatalf("key %s counted by partition %d", k, p)
		}
	}
	var tasks []engine.Progress
	for _, p := range e.Progress() {
		if p.Stage == "count" {
			tasks = append(tasks, p)
		}
	}
	if len(tasks) != 1 || tasks[0].Partition != engine.SingletonPartition || tasks[0].Committed != 20000 {
		t.Fatalf("singleton progress: %+v", tasks)
	}
	if st := e.Topology(); len(st) != 1 || st[0].Tasks != 1 || !st[0].Singleton {
		t.Fatalf("topology: %+v", st)
	}
	if p, ok := e.HomePartition("count"); !ok || p != engine.SingletonPartition {
		t.Fatalf("HomePartition = %d, %v", p, ok)
	}
	if _, ok := e.HomePartition("other"); ok {
		t.Fatal("HomePartition of an unknown operator")
	}
	if w := e.PartitionWeights(); fmt.Sprint(w) != "[2 1 1 1]" {
		t.Fatalf("weights %v", w)
	}

	// A singleton cannot repartition its input.
	e2, err := engine.New(h.log, h.db, engine.Options{Partitions: parts})
	if err != nil {
		t.Fatal(err)
	}
	if err := e2.Register(&countOp{name: "routed", topic: "in", singleton: true, route: true}); err != nil {
		t.Fatal(err)
	}
	if err := e2.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "singleton") {
		t.Fatalf("Run with a routed singleton: %v", err)
	}
}

// A source topic with more partitions than the engine: the extra partitions
// are read only by the repartition stage.
func TestRepartitionFromWiderTopic(t *testing.T) {
	h := newHarness(t)
	const parts, wide = 3, 7
	want := h.produce("in", wide, 5000, func(_ string, i int) int32 { return int32(i % wide) })
	op := &countOp{name: "count", topic: "in", route: true}
	h.runUntilCaughtUp(h.log, engine.Options{Partitions: parts}, op)
	got, _ := h.stateCounts("count", parts)
	equalCounts(t, got, want)
}

// Invalid records go to the dead-letter topic with the reason and source
// position, and processing carries on.
func TestDeadLetters(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	if _, err := eventlog.EnsureTopic(ctx, h.log, "in", 2); err != nil {
		t.Fatal(err)
	}
	recs := []*eventlog.Record{
		{Topic: "in", Partition: 0, Key: []byte("a"), Value: []byte("ok")},
		{Topic: "in", Partition: 0, Key: []byte("a"), Value: []byte("bad one")},
		{Topic: "in", Partition: 1, Value: []byte("no key here")},
		{Topic: "in", Partition: 0, Key: []byte("a"), Value: []byte("ok")},
	}
	if err := h.log.Append(ctx, recs); err != nil {
		t.Fatal(err)
	}
	op := &countOp{name: "count", topic: "in"}
	h.runUntilCaughtUp(h.log, engine.Options{Partitions: 2}, op)
	got, _ := h.stateCounts("count", 2)
	equalCounts(t, got, map[string]int64{"a": 2})

	var dead []*eventlog.Record
	for p := int32(0); p < 2; p++ {
		o, err := h.log.Offsets(ctx, eventlog.TopicPartition{Topic: "newsflow-deadletter", Partition: p})
		if err != nil {
			t.Fatal(err)
		}
		if o.End == 0 {
			continue
		}
		r, _ := h.log.NewReader(map[eventlog.TopicPartition]int64{{Topic: "newsflow-deadletter", Partition: p}: 0})
		got, err := r.Poll(ctx, 10)
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		dead = append(dead, got...)
	}
	if len(dead) != 2 {
		t.Fatalf("%d dead letters, want 2", len(dead))
	}
	reasons := map[string]string{}
	for _, d := range dead {
		reason, _ := d.Header(engine.HeaderDLQReason)
		off, _ := d.Header(engine.HeaderDLQOffset)
		part, _ := d.Header(engine.HeaderDLQPartition)
		reasons[string(d.Value)] = string(reason) + "@" + string(part) + "/" + string(off)
	}
	if reasons["bad one"] != `value "bad one" is bad@0/1` || reasons["no key here"] != "no key@1/0" {
		t.Fatalf("dead letters = %v", reasons)
	}
}

// A poison pill, a record whose apply always panics or fails, is tried
// engine.max_record_failures times (the task restarting from its committed
// state each time), then dead-lettered with the panic or error, and the
// partition's later records are applied; the metric counts it.
func TestPoisonPill(t *testing.T) {
	for _, panics := range []bool{true, false} {
		t.Run(fmt.Sprint("panics=", panics), func(t *testing.T) {
			h := newHarness(t)
			ctx := context.Background()
			if _, err := eventlog.EnsureTopic(ctx, h.log, "in", 1); err != nil {
				t.Fatal(err)
			}
			var recs []*eventlog.Record
			for i, v := range []string{"ok", "ok", "poison", "ok", "ok", "ok"} {
				recs = append(recs, &eventlog.Record{Topic: "in", Key: []byte(fmt.Sprint("k", i%2)), Value: []byte(v)})
			}
			if err := h.log.Append(ctx, recs); err != nil {
				t.Fatal(err)
			}
			op := &countOp{name: "count", topic: "in", poison: "poison", panics: panics}
			reg := prometheus.NewRegistry()
			h.runUntilCaughtUp(h.log, engine.Options{Partitions: 1, MaxBatch: 2, Registerer: reg}, op)
			got, _ := h.stateCounts("count", 1)
			equalCounts(t, got, map[string]int64{"k0": 2, "k1": 3})
			if n := op.failures.Load(); n != 3 {
				t.Errorf("the poison record was applied %d times, want 3", n)
			}
			dead := readDeadLetters(t, h.log, 1)
			if len(dead) != 1 || string(dead[0].Value) != "poison" {
				t.Fatalf("dead letters %v, want the poison record", dead)
			}
			reason, _ := dead[0].Header(engine.HeaderDLQReason)
			off, _ := dead[0].Header(engine.HeaderDLQOffset)
			want := `applying it failed 3 times in a row: cannot digest "poison"`
			if panics {
				want = `applying it failed 3 times in a row: panic: cannot digest "poison"`
			}
			if string(reason) != want || string(off) != "2" {
				t.Errorf("reason %q at offset %s, want %q at 2", reason, off, want)
			}
			if v := counterValue(t, reg, "newsflow_poison_records_total"); v != 1 {
				t.Errorf("newsflow_poison_records_total = %v, want 1", v)
			}
		})
	}
}

// readDeadLetters reads every record of the dead-letter topic.
func readDeadLetters(t *testing.T, l eventlog.Log, parts int32) []*eventlog.Record {
	t.Helper()
	ctx := context.Background()
	var dead []*eventlog.Record
	for p := range parts {
		tp := eventlog.TopicPartition{Topic: "newsflow-deadletter", Partition: p}
		o, err := l.Offsets(ctx, tp)
		if err != nil {
			t.Fatal(err)
		}
		if o.End == 0 {
			continue
		}
		r, err := l.NewReader(map[eventlog.TopicPartition]int64{tp: 0})
		if err != nil {
			t.Fatal(err)
		}
		got, err := r.Poll(ctx, int(o.End))
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		dead = append(dead, got...)
	}
	return dead
}

// counterValue sums a counter's series in reg.
func counterValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var v float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				v += m.GetCounter().GetValue()
			}
		}
	}
	return v
}

// Replaying from offset 0 into cleared state rebuilds the same state, and
// replaying from a later offset counts only what follows it.
func TestReplay(t *testing.T) {
	h := newHarness(t)
	const parts = 2
	rng := rand.New(rand.NewPCG(5, 6))
	want := h.produce("in", parts, 4000, func(string, int) int32 { return rng.Int32N(parts) })
	op := &countOp{name: "count", topic: "in", route: true}
	h.runUntilCaughtUp(h.log, engine.Options{Partitions: parts}, op)
	got, _ := h.stateCounts("count", parts)
	equalCounts(t, got, want)

	replay := func(from int64) {
		e, err := engine.New(h.log, h.db, engine.Options{Partitions: parts})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Register(op); err != nil {
			t.Fatal(err)
		}
		if err := e.Replay(context.Background(), "count", func(eventlog.TopicPartition) (int64, error) { return from, nil }); err != nil {
			t.Fatal(err)
		}
		h.runUntilCaughtUpWith(e)
	}
	replay(0)
	got, _ = h.stateCounts("count", parts)
	equalCounts(t, got, want)

	// From offset 1000 of each source partition: only records at or after it.
	replay(1000)
	wantLater := map[string]int64{}
	for p := int32(0); p < parts; p++ {
		r, _ := h.log.NewReader(map[eventlog.TopicPartition]int64{{Topic: "in", Partition: p}: 1000})
		o, _ := h.log.Offsets(context.Background(), eventlog.TopicPartition{Topic: "in", Partition: p})
		for n := int64(1000); n < o.End; {
			recs, err := r.Poll(context.Background(), 10000)
			if err != nil {
				t.Fatal(err)
			}
			for _, rec := range recs {
				wantLater[string(rec.Key)]++
				n = rec.Offset + 1
			}
		}
		r.Close()
	}
	got, _ = h.stateCounts("count", parts)
	equalCounts(t, got, wantLater)
}

func (h *harness) runUntilCaughtUpWith(e *engine.Engine) {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	defer cancel()
	go func() { done <- e.Run(ctx) }()
	testutil.Eventually(h.t, 60*time.Second, func() error {
		ok, err := e.CaughtUp(context.Background())
		if err != nil {
			h.t.Fatal(err)
		}
		if !ok {
			return fmt.Errorf("engine did not catch up: %+v", e.Progress())
		}
		return nil
	})
	cancel()
	if err := <-done; err != nil {
		h.t.Fatal(err)
	}
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// blindLog hands out readers that never know the high watermarks, as a
// Kafka reader before its first fetch response: tasks never see themselves
// caught up and must commit on the commit interval alone.
type blindLog struct{ eventlog.Log }

func (b blindLog) NewReader(pos map[eventlog.TopicPartition]int64) (eventlog.Reader, error) {
	r, err := b.Log.NewReader(pos)
	return blindReader{r}, err
}

type blindReader struct{ eventlog.Reader }

func (blindReader) HighWatermarks() map[eventlog.TopicPartition]int64 { return nil }

func TestCommitIntervalWithoutCatchUpSignal(t *testing.T) {
	h := newHarness(t)
	const parts = 2
	want := h.produce("in", parts, 3000, func(k string, _ int) int32 { return eventlog.PartitionFor([]byte(k), parts) })
	op := &countOp{name: "count", topic: "in"}
	h.runUntilCaughtUp(blindLog{h.log}, engine.Options{Partitions: parts, CommitInterval: 20 * time.Millisecond, MaxBatch: 1 << 20}, op)
	got, _ := h.stateCounts("count", parts)
	equalCounts(t, got, want)
}
