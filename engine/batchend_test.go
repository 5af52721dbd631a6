package engine_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/state"
)

// endOp counts the records of each partition and, at the end of each
// batch, emits the partition's running count to topic "ends". Its
// EndBatch fails or panics at random.
type endOp struct {
	failProb float64
	seed     atomic.Uint64
	failures atomic.Int64
	// empty counts EndBatch calls for batches that applied nothing.
	empty atomic.Int64
}

func (o *endOp) Spec() engine.Spec {
	return engine.Spec{Name: "ender", Inputs: []engine.Input{{Topic: "in", Key: "key"}}, Outputs: []string{"ends"}}
}

func (o *endOp) NewTask(tc engine.TaskContext) (engine.Task, error) {
	return &endTask{op: o, p: tc.Partition, rng: rand.New(rand.NewPCG(o.seed.Add(1), uint64(tc.Partition)))}, nil
}

type endTask struct {
	op       *endOp
	p        int32
	rng      *rand.Rand
	n, batch int64
}

func (t *endTask) Restore(r state.Reader) error {
	v, ok, err := r.Get([]byte("n"))
	if ok && len(v) == 8 {
		t.n = int64(binary.BigEndian.Uint64(v))
	}
	return err
}

func (t *endTask) Process(*engine.ProcessContext, *eventlog.Record) error {
	t.n++
	t.batch++
	return nil
}

func (t *endTask) EndBatch(pc *engine.ProcessContext) error {
	if t.batch == 0 {
		t.op.empty.Add(1)
	}
	t.batch = 0
	switch x := t.rng.Float64(); {
	case x < t.op.failProb:
		t.op.failures.Add(1)
		return errInjected
	case x < 2*t.op.failProb:
		t.op.failures.Add(1)
		panic("injected panic at the end of a batch")
	}
	if pos := pc.Position(); pos != t.n {
		return fmt.Errorf("position %d after %d records", pos, t.n)
	}
	pc.Emit(&eventlog.Record{Topic: "ends", Partition: t.p, Key: []byte("p" + strconv.Itoa(int(t.p))), Value: []byte(strconv.FormatInt(t.n, 10))})
	return nil
}

func (t *endTask) Flush(w state.Writer) error {
	return w.Set([]byte("n"), binary.BigEndian.AppendUint64(nil, uint64(t.n)))
}

func (t *endTask) Committed(engine.CommitInfo) {}
func (t *endTask) Close() error                { return nil }

// TestBatchEnder: a task's EndBatch runs once per batch that applied
// records, after its last Process, and what it emits commits with the
// batch: although EndBatch fails and panics at random (restarting the
// task), each partition's last output is its exact record count, every
// output is a count the task reached, and batches that applied nothing
// never call it. The task's position is its count: one input partition,
// read from offset 0.
func TestBatchEnder(t *testing.T) {
	h := newHarness(t)
	const parts = 3
	want := map[int32]int64{}
	h.produce("in", parts, 5000, func(_ string, i int) int32 {
		p := int32(i % parts)
		want[p]++
		return p
	})
	op := &endOp{failProb: 0.02}
	h.runUntilCaughtUp(h.log, engine.Options{Partitions: parts, MaxBatch: 50}, op)
	if op.failures.Load() == 0 {
		t.Fatal("no failure was injected; the test proves nothing")
	}
	if n := op.empty.Load(); n != 0 {
		t.Fatalf("EndBatch called %d times for batches that applied nothing", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for p := int32(0); p < parts; p++ {
		tp := eventlog.TopicPartition{Topic: "ends", Partition: p}
		o, err := h.log.Offsets(ctx, tp)
		if err != nil {
			t.Fatal(err)
		}
		if o.End < want[p]/50 {
			t.Fatalf("partition %d: %d outputs for %d records in batches of at most 50", p, o.End, want[p])
		}
		r, err := h.log.NewReader(map[eventlog.TopicPartition]int64{tp: 0})
		if err != nil {
			t.Fatal(err)
		}
		var last int64
		for read := int64(0); read < o.End; {
			recs, err := r.Poll(ctx, 1000)
			if err != nil {
				t.Fatal(err)
			}
			for _, rec := range recs {
				read++
				n, err := strconv.ParseInt(string(rec.Value), 10, 64)
				if err != nil || n <= 0 || n > want[p] || string(rec.Key) != fmt.Sprintf("p%d", p) {
					t.Fatalf("partition %d: output %q %q", p, rec.Key, rec.Value)
				}
				last = n
			}
		}
		r.Close()
		if last != want[p] {
			t.Fatalf("partition %d: last output %d, want its %d records", p, last, want[p])
		}
	}
}
