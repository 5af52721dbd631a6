package embedded

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/engine/eventlog/logtest"
	"github.com/newsflow/newsflow/internal/testutil"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// newTestLog opens a log in a fresh directory and closes it when the test
// ends. mutate, if not nil, adjusts the options.
func newTestLog(t testing.TB, mutate func(*Options)) *Log {
	t.Helper()
	opts := Options{Dir: t.TempDir()}
	if mutate != nil {
		mutate(&opts)
	}
	return openTestLog(t, opts)
}

func openTestLog(t testing.TB, opts Options) *Log {
	t.Helper()
	l, err := Open(opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return l
}

// reopen closes l and opens its directory again with the same options.
func reopen(t testing.TB, l *Log) *Log {
	t.Helper()
	if err := l.Close(); err != nil {
		t.Fatalf("close before reopen: %v", err)
	}
	return openTestLog(t, l.opts)
}

func TestConformance(t *testing.T) {
	for _, policy := range []FsyncPolicy{FsyncAlways, FsyncInterval, FsyncNever} {
		t.Run(string(policy), func(t *testing.T) {
			open := func(t *testing.T) eventlog.Log {
				return newTestLog(t, func(o *Options) { o.Fsync = policy })
			}
			logtest.Run(t, open, logtest.Options{
				Reopen: func(t *testing.T, l eventlog.Log) eventlog.Log { return reopen(t, l.(*Log)) },
			})
		})
	}
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustCreate(t testing.TB, l eventlog.Log, topic string, parts int32) {
	t.Helper()
	if err := l.CreateTopic(ctxT(t), topic, parts); err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

func mustAppend(t testing.TB, l eventlog.Log, recs ...*eventlog.Record) {
	t.Helper()
	if err := l.Append(ctxT(t), recs); err != nil {
		t.Fatalf("append: %v", err)
	}
}

func tpOf(topic string, p int32) eventlog.TopicPartition {
	return eventlog.TopicPartition{Topic: topic, Partition: p}
}

func mustOffsets(t testing.TB, l eventlog.Log, tp eventlog.TopicPartition) eventlog.Offsets {
	t.Helper()
	o, err := l.Offsets(ctxT(t), tp)
	if err != nil {
		t.Fatalf("offsets %s: %v", tp, err)
	}
	return o
}

// checkOffsets fails the test unless tp's offsets are {start end}; what
// names the moment in the message.
func checkOffsets(t testing.TB, l eventlog.Log, tp eventlog.TopicPartition, start, end int64, what string) {
	t.Helper()
	if o := mustOffsets(t, l, tp); o.Start != start || o.End != end {
		t.Fatalf("%s %+v, want {%d %d}", what, o, start, end)
	}
}

// readRange reads every record of tp from offset from (or the partition's
// start, if later) up to the partition's current end.
func readRange(t testing.TB, l eventlog.Log, tp eventlog.TopicPartition, from int64) []*eventlog.Record {
	t.Helper()
	o := mustOffsets(t, l, tp)
	from = max(from, o.Start)
	if from >= o.End {
		return nil
	}
	r, err := l.NewReader(map[eventlog.TopicPartition]int64{tp: from})
	if err != nil {
		t.Fatalf("new reader: %v", err)
	}
	defer r.Close()
	return logtest.ReadN(t, r, int(o.End-from), 500)
}

func value(i int) []byte { return fmt.Appendf(nil, "value-%06d", i) }

func TestRestartKeepsOffsetsDense(t *testing.T) {
	l := newTestLog(t, func(o *Options) { o.IndexIntervalRecords = 7 })
	mustCreate(t, l, "a", 3)
	mustCreate(t, l, "b", 1)
	next := map[int32]int{}
	write := func(n int) {
		var batch []*eventlog.Record
		for i := 0; i < n; i++ {
			p := int32(i % 3)
			batch = append(batch, &eventlog.Record{Topic: "a", Partition: p,
				Key: []byte("k"), Value: value(next[p]), Timestamp: int64(next[p])})
			next[p]++
		}
		mustAppend(t, l, batch...)
	}
	write(100)
	write(31)
	l = reopen(t, l)
	if n, err := l.Partitions(ctxT(t), "b"); err != nil || n != 1 {
		t.Fatalf("Partitions(b) after reopen = %d, %v", n, err)
	}
	write(50)
	l = reopen(t, l)
	write(20)
	// A topic created after a reopen gets a fresh id.
	mustCreate(t, l, "c", 1)
	mustAppend(t, l, &eventlog.Record{Topic: "c", Value: []byte("c0")})
	for p := int32(0); p < 3; p++ {
		tp := tpOf("a", p)
		checkOffsets(t, l, tp, 0, int64(next[p]), tp.String()+" offsets")
		got := readRange(t, l, tp, 0)
		if len(got) != next[p] {
			t.Fatalf("%s: read %d records, want %d", tp, len(got), next[p])
		}
		for i, r := range got {
			if r.Offset != int64(i) || !bytes.Equal(r.Value, value(i)) || r.Timestamp != int64(i) || string(r.Key) != "k" {
				t.Fatalf("%s position %d: offset %d value %q ts %d", tp, i, r.Offset, r.Value, r.Timestamp)
			}
		}
	}
	if got := readRange(t, l, tpOf("c", 0), 0); len(got) != 1 || string(got[0].Value) != "c0" {
		t.Fatalf("topic c holds %v", got)
	}
	if o := mustOffsets(t, l, tpOf("b", 0)); o != (eventlog.Offsets{}) {
		t.Fatalf("empty topic b offsets %+v", o)
	}
}

func TestConcurrentAppendsDense(t *testing.T) {
	l := newTestLog(t, func(o *Options) { o.MaxBatchRecords = 64; o.IndexIntervalRecords = 16 })
	const parts, writers, appends = 3, 16, 60
	mustCreate(t, l, "c", parts)
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	var mu sync.Mutex
	acked := map[string]int64{} // value -> offset reported by Append
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for i := range appends {
				p := int32(rng.IntN(parts))
				batch := make([]*eventlog.Record, 1+rng.IntN(5))
				for j := range batch {
					batch[j] = &eventlog.Record{Topic: "c", Partition: p,
						Value: fmt.Appendf(nil, "%d-%d-%d", w, i, j), Timestamp: int64(i)}
				}
				if err := l.Append(context.Background(), batch); err != nil {
					errs <- err
					return
				}
				for j, r := range batch {
					// One Append's records of a partition are consecutive.
					if r.Offset != batch[0].Offset+int64(j) {
						errs <- fmt.Errorf("append %d-%d: offsets %d then %d", w, i, batch[0].Offset, r.Offset)
						return
					}
				}
				mu.Lock()
				for _, r := range batch {
					acked[string(r.Value)] = r.Offset
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for p := int32(0); p < parts; p++ {
		for i, r := range readRange(t, l, tpOf("c", p), 0) {
			if r.Offset != int64(i) {
				t.Fatalf("partition %d position %d has offset %d", p, i, r.Offset)
			}
			v := string(r.Value)
			if seen[v] {
				t.Fatalf("record %q read twice", v)
			}
			seen[v] = true
			if off, ok := acked[v]; !ok || off != r.Offset {
				t.Fatalf("record %q at offset %d, Append reported %d (%v)", v, r.Offset, off, ok)
			}
		}
	}
	if len(seen) != len(acked) {
		t.Fatalf("read %d distinct records, appended %d", len(seen), len(acked))
	}
}

// clock is an injectable clock for retention tests.
type clock struct{ ms atomic.Int64 }

func (c *clock) now() time.Time          { return time.UnixMilli(c.ms.Load()) }
func (c *clock) set(t time.Time)         { c.ms.Store(t.UnixMilli()) }
func (c *clock) advance(d time.Duration) { c.ms.Add(d.Milliseconds()) }

func mustRetain(t testing.TB, l *Log) {
	t.Helper()
	if err := l.runRetention(ctxT(t)); err != nil {
		t.Fatalf("retention: %v", err)
	}
}

// TestRetentionByAge is one scenario checked step by step (cyclomatic 27): the steps
// depend on each other's state, so they stay in order in one function.
func TestRetentionByAge(t *testing.T) {
	var clk clock
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	clk.set(base)
	l := newTestLog(t, func(o *Options) {
		o.IndexIntervalRecords = 10
		o.RetentionAge = time.Hour
		o.RetentionCheckInterval = time.Hour // passes run only when the test asks
		o.Now = clk.now
	})
	mustCreate(t, l, "r", 2)
	tp := tpOf("r", 0)
	// 95 records one minute apart: intervals [0,10) ... [80,90), open [90,95).
	var batch []*eventlog.Record
	for i := range 95 {
		batch = append(batch, &eventlog.Record{Topic: "r", Value: value(i),
			Timestamp: base.Add(time.Duration(i) * time.Minute).UnixMilli()})
	}
	// Partition 1 gets one old record, only in its open interval.
	batch = append(batch, &eventlog.Record{Topic: "r", Partition: 1, Value: []byte("old"), Timestamp: base.UnixMilli()})
	mustAppend(t, l, batch...)

	// Nothing has expired yet.
	clk.set(base.Add(time.Hour))
	mustRetain(t, l)
	checkOffsets(t, l, tp, 0, 95, "offsets before expiry")

	// Cutoff at minute 35: intervals whose newest record is older (up to
	// [20,30), newest 29) go; [30,40) holds minute 35 and later, so stays.
	clk.set(base.Add(95 * time.Minute))
	mustRetain(t, l)
	checkOffsets(t, l, tp, 30, 95, "offsets after expiry")
	checkReadFrom := func(l *Log, from int64, wantFirst, wantEnd int) {
		t.Helper()
		got := readRange(t, l, tp, from)
		if len(got) != wantEnd-wantFirst {
			t.Fatalf("read %d records from %d, want %d", len(got), from, wantEnd-wantFirst)
		}
		for i, r := range got {
			if want := int64(wantFirst + i); r.Offset != want || !bytes.Equal(r.Value, value(wantFirst+i)) {
				t.Fatalf("record %d: offset %d value %q, want offset %d", i, r.Offset, r.Value, want)
			}
		}
	}
	checkReadFrom(l, 0, 30, 95)
	checkReadFrom(l, 42, 42, 95)
	// The idle partition 1 was emptied but keeps its end offset.
	checkOffsets(t, l, tpOf("r", 1), 1, 1, "emptied partition offsets")
	if got, err := l.OffsetForTime(ctxT(t), tp, 0); err != nil || got != 30 {
		t.Fatalf("OffsetForTime(0) after retention = %d, %v; want 30", got, err)
	}

	l = reopen(t, l)
	checkOffsets(t, l, tp, 30, 95, "offsets after reopen")
	checkOffsets(t, l, tpOf("r", 1), 1, 1, "emptied partition offsets after reopen")
	more := []*eventlog.Record{
		{Topic: "r", Value: value(95), Timestamp: base.Add(95 * time.Minute).UnixMilli()},
		{Topic: "r", Partition: 1, Value: []byte("new"), Timestamp: base.Add(95 * time.Minute).UnixMilli()},
	}
	mustAppend(t, l, more...)
	if more[0].Offset != 95 || more[1].Offset != 1 {
		t.Fatalf("offsets after reopen %d, %d; want 95, 1", more[0].Offset, more[1].Offset)
	}
	checkReadFrom(l, 0, 30, 96)
	if got := readRange(t, l, tpOf("r", 1), 0); len(got) != 1 || got[0].Offset != 1 || string(got[0].Value) != "new" {
		t.Fatalf("partition 1 after reopen: %v", got)
	}

	// Everything expires: the open interval of partition 0 holds minute 95.
	clk.advance(24 * time.Hour)
	mustRetain(t, l)
	checkOffsets(t, l, tp, 96, 96, "offsets after full expiry")
	l = reopen(t, l)
	checkOffsets(t, l, tp, 96, 96, "offsets after full expiry and reopen")
}

func TestRetentionBySize(t *testing.T) {
	l := newTestLog(t, func(o *Options) {
		o.IndexIntervalRecords = 10
		o.RetentionAge = KeepForever
		o.RetentionCheckInterval = time.Hour
	})
	mustCreate(t, l, "s", 1)
	tp := tpOf("s", 0)
	rec := func(i int) *eventlog.Record {
		return &eventlog.Record{Topic: "s", Value: value(i), Timestamp: 1e12}
	}
	recSize := int64(partKeyLen + encodedLen(rec(0))) // all records have the same size
	// Room for 35 records: keep intervals so that at most 35 are retained.
	l.opts.RetentionBytes = 35 * recSize

	var batch []*eventlog.Record
	for i := range 95 {
		batch = append(batch, rec(i))
	}
	mustAppend(t, l, batch...)
	mustRetain(t, l)
	// 95 records: drop [0,10) ... until at most 35 remain. [60,95) = 35.
	checkOffsets(t, l, tp, 60, 95, "offsets")
	got := readRange(t, l, tp, 0)
	if len(got) != 35 || got[0].Offset != 60 || !bytes.Equal(got[0].Value, value(60)) {
		t.Fatalf("read %d records starting at %d", len(got), got[0].Offset)
	}
	// The open interval is never deleted for size.
	l.opts.RetentionBytes = 1
	mustRetain(t, l)
	checkOffsets(t, l, tp, 90, 95, "offsets with tiny limit")
	l = reopen(t, l)
	checkOffsets(t, l, tp, 90, 95, "offsets after reopen")
	mustAppend(t, l, rec(95))
	got = readRange(t, l, tp, 0)
	if len(got) != 6 || got[0].Offset != 90 || got[5].Offset != 95 || !bytes.Equal(got[5].Value, value(95)) {
		t.Fatalf("after reopen read %d records", len(got))
	}
}

// bruteOffsetForTime is OffsetForTime by a full scan.
func bruteOffsetForTime(recs []*eventlog.Record, end, ts int64) int64 {
	for _, r := range recs {
		if r.Timestamp >= ts {
			return r.Offset
		}
	}
	return end
}

func TestOffsetForTimeMatchesScan(t *testing.T) {
	var clk clock
	clk.set(time.UnixMilli(100_000))
	l := newTestLog(t, func(o *Options) {
		o.IndexIntervalRecords = 7
		o.RetentionAge = 50 * time.Second
		o.RetentionCheckInterval = time.Hour
		o.Now = clk.now
	})
	mustCreate(t, l, "t", 1)
	tp := tpOf("t", 0)
	rng := rand.New(rand.NewPCG(7, 7))
	var batch []*eventlog.Record
	for i := range 500 {
		// Mostly increasing with late and early outliers.
		ts := int64(i*200) + rng.Int64N(5000) - 2500
		if rng.IntN(20) == 0 {
			ts -= 20_000
		}
		batch = append(batch, &eventlog.Record{Topic: "t", Value: value(i), Timestamp: ts})
	}
	for len(batch) > 0 {
		n := min(len(batch), 1+rng.IntN(40))
		mustAppend(t, l, batch[:n]...)
		batch = batch[n:]
	}
	check := func(l *Log, stage string) {
		t.Helper()
		o := mustOffsets(t, l, tp)
		recs := readRange(t, l, tp, 0)
		queries := []int64{-1 << 62, 1 << 62}
		for _, r := range recs {
			queries = append(queries, r.Timestamp-1, r.Timestamp, r.Timestamp+1)
		}
		for range 200 {
			queries = append(queries, rng.Int64N(110_000)-5_000)
		}
		for _, ts := range queries {
			want := bruteOffsetForTime(recs, o.End, ts)
			got, err := l.OffsetForTime(ctxT(t), tp, ts)
			if err != nil || got != want {
				t.Fatalf("%s: OffsetForTime(%d) = %d, %v; scan says %d", stage, ts, got, err, want)
			}
		}
	}
	check(l, "fresh")
	l = reopen(t, l)
	check(l, "reopened")
	mustRetain(t, l) // cutoff 50s: drops a prefix of intervals
	if o := mustOffsets(t, l, tp); o.Start == 0 || o.Start%7 != 0 {
		t.Fatalf("retention left start %d, want a positive multiple of 7", o.Start)
	}
	check(l, "after retention")
}

func TestCloseUnblocksPoll(t *testing.T) {
	l := newTestLog(t, nil)
	mustCreate(t, l, "p", 1)
	r, err := l.NewReader(map[eventlog.TopicPartition]int64{tpOf("p", 0): 0})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	pollErr := make(chan error, 1)
	go func() {
		_, err := r.Poll(context.Background(), 10)
		pollErr <- err
	}()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-pollErr:
		if !errors.Is(err, eventlog.ErrClosed) {
			t.Fatalf("blocked Poll returned %v, want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Poll still blocked 10s after Close")
	}
	if err := l.Append(ctxT(t), []*eventlog.Record{{Topic: "p", Value: []byte("x")}}); !errors.Is(err, eventlog.ErrClosed) {
		t.Fatalf("Append after Close = %v, want ErrClosed", err)
	}
	if _, err := l.Offsets(ctxT(t), tpOf("p", 0)); !errors.Is(err, eventlog.ErrClosed) {
		t.Fatalf("Offsets after Close = %v, want ErrClosed", err)
	}
	if err := l.CreateTopic(ctxT(t), "q", 1); !errors.Is(err, eventlog.ErrClosed) {
		t.Fatalf("CreateTopic after Close = %v, want ErrClosed", err)
	}
	if _, err := l.NewReader(nil); !errors.Is(err, eventlog.ErrClosed) {
		t.Fatalf("NewReader after Close = %v, want ErrClosed", err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
}

// Appends racing with Close either succeed, and are then readable after a
// reopen, or fail with ErrClosed.
func TestCloseDrainsAppends(t *testing.T) {
	l := newTestLog(t, func(o *Options) { o.Fsync = FsyncNever })
	mustCreate(t, l, "d", 1)
	const writers = 8
	var wg sync.WaitGroup
	var acked atomic.Int64
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				err := l.Append(context.Background(), []*eventlog.Record{{Topic: "d", Value: fmt.Appendf(nil, "%d-%d", w, i)}})
				if errors.Is(err, eventlog.ErrClosed) {
					return
				}
				if err != nil {
					errs <- err
					return
				}
				acked.Add(1)
			}
		}()
	}
	// Close once appends are under way, or at once if a writer has failed
	// (its error is reported below).
	testutil.Eventually(t, 10*time.Second, func() error {
		if n := acked.Load(); n < 200 && len(errs) == 0 {
			return fmt.Errorf("%d appends acknowledged", n)
		}
		return nil
	})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	l = openTestLog(t, l.opts)
	if o := mustOffsets(t, l, tpOf("d", 0)); o.End < acked.Load() {
		t.Fatalf("end %d after reopen, but %d appends were acknowledged", o.End, acked.Load())
	}
}

func TestRecordsDoNotAlias(t *testing.T) {
	l := newTestLog(t, nil)
	mustCreate(t, l, "n", 1)
	in := &eventlog.Record{Topic: "n", Key: []byte("key"), Value: []byte("value"), Headers: []eventlog.Header{{Key: "h", Value: []byte("hv")}}}
	mustAppend(t, l, in)
	in.Value[0] = 'X' // the log must have copied on append
	a := readRange(t, l, tpOf("n", 0), 0)[0]
	a.Key = append(a.Key, "-more"...)
	a.Value[0] = 'Y'
	a.Headers[0].Value[0] = 'Z'
	b := readRange(t, l, tpOf("n", 0), 0)[0]
	if string(b.Key) != "key" || string(b.Value) != "value" || string(b.Headers[0].Value) != "hv" {
		t.Fatalf("second read = %q %q %q", b.Key, b.Value, b.Headers[0].Value)
	}
	if string(a.Value) != "Yalue" {
		t.Fatalf("appending to the key changed the value: %q", a.Value)
	}
}

func TestNilAndEmptyRoundTrip(t *testing.T) {
	l := newTestLog(t, nil)
	mustCreate(t, l, "e", 1)
	in := []*eventlog.Record{
		{Topic: "e"},
		{Topic: "e", Key: []byte{}, Value: []byte{}, Headers: []eventlog.Header{{Key: "nil"}, {Key: "", Value: []byte{}}}},
	}
	mustAppend(t, l, in...)
	out := readRange(t, l, tpOf("e", 0), 0)
	if out[0].Key != nil || out[0].Value != nil || out[0].Headers != nil {
		t.Fatalf("nil fields came back as %#v", out[0])
	}
	o := out[1]
	if o.Key == nil || o.Value == nil || len(o.Headers) != 2 || o.Headers[0].Value != nil || o.Headers[1].Value == nil {
		t.Fatalf("empty fields came back as %#v", o)
	}
}

func TestPollFairAcrossPartitions(t *testing.T) {
	l := newTestLog(t, nil)
	mustCreate(t, l, "f", 3)
	var batch []*eventlog.Record
	for p := int32(0); p < 3; p++ {
		for i := range 100 {
			batch = append(batch, &eventlog.Record{Topic: "f", Partition: p, Value: value(i)})
		}
	}
	mustAppend(t, l, batch...)
	pos := map[eventlog.TopicPartition]int64{tpOf("f", 0): 0, tpOf("f", 1): 0, tpOf("f", 2): 0}
	r, err := l.NewReader(pos)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	recs, err := r.Poll(ctxT(t), 30)
	if err != nil {
		t.Fatal(err)
	}
	count := map[int32]int{}
	for _, rc := range recs {
		count[rc.Partition]++
	}
	if len(recs) != 30 || count[0] != 10 || count[1] != 10 || count[2] != 10 {
		t.Fatalf("Poll(30) over 3 busy partitions took %v", count)
	}
	hw := r.HighWatermarks()
	for tp := range pos {
		if hw[tp] != 100 {
			t.Fatalf("high watermarks %v", hw)
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	if err := (Options{Dir: "x"}).Validate(); err != nil {
		t.Fatalf("zero options with dir: %v", err)
	}
	d := DefaultOptions()
	d.Dir = "x"
	if err := d.Validate(); err != nil {
		t.Fatalf("default options: %v", err)
	}
	for _, o := range []Options{
		{},
		{Dir: "x", Fsync: "sometimes"},
		{Dir: "x", RetentionBytes: -1},
		{Dir: "x", SyncInterval: -time.Second},
		{Dir: "x", MaxBatchRecords: -1},
	} {
		if err := o.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil, want an error", o)
		}
		if _, err := Open(o); err == nil {
			t.Errorf("Open(%+v) succeeded", o)
		}
	}
	if got := (Options{Dir: "x", RetentionAge: KeepForever}).withDefaults(); got.retentionEnabled() {
		t.Fatal("KeepForever left retention enabled")
	}
}

func TestCreateTopicValidation(t *testing.T) {
	l := newTestLog(t, nil)
	for _, c := range []struct {
		name  string
		parts int32
	}{{"", 1}, {"x", 0}, {"x", -3}, {"x", maxPartitions + 1}} {
		if err := l.CreateTopic(ctxT(t), c.name, c.parts); err == nil {
			t.Errorf("CreateTopic(%q, %d) succeeded", c.name, c.parts)
		}
	}
	if _, err := l.NewReader(map[eventlog.TopicPartition]int64{tpOf("nope", 0): 0}); !errors.Is(err, eventlog.ErrUnknownTopic) {
		t.Fatalf("NewReader(unknown) = %v", err)
	}
	mustCreate(t, l, "x", 2)
	if _, err := l.NewReader(map[eventlog.TopicPartition]int64{tpOf("x", 2): 0}); !errors.Is(err, eventlog.ErrInvalidPartition) {
		t.Fatalf("NewReader(bad partition) = %v", err)
	}
	if _, err := l.OffsetForTime(ctxT(t), tpOf("x", 5), 0); !errors.Is(err, eventlog.ErrInvalidPartition) {
		t.Fatalf("OffsetForTime(bad partition) = %v", err)
	}
}

func TestFsyncIntervalSyncs(t *testing.T) {
	l := newTestLog(t, func(o *Options) { o.Fsync = FsyncInterval; o.SyncInterval = time.Millisecond })
	mustCreate(t, l, "i", 1)
	mustAppend(t, l, &eventlog.Record{Topic: "i", Value: []byte("x")})
	testutil.Eventually(t, 10*time.Second, func() error {
		if n := l.unsynced.Load(); n != 0 {
			return fmt.Errorf("syncer has not synced: %d appends unsynced", n)
		}
		return nil
	})
}
