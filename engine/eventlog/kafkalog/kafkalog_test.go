package kafkalog_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/engine/eventlog/kafkalog"
	"github.com/newsflow/newsflow/engine/eventlog/logtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testTimeout bounds every blocking call a test makes.
const testTimeout = 30 * time.Second

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// newCluster starts a one-broker kfake cluster, closed when t ends.
func newCluster(t *testing.T) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatalf("start kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// openLog opens a log on c, closed when t ends (before c, since cleanups
// run last in, first out).
func openLog(t *testing.T, c *kfake.Cluster) *kafkalog.Log {
	t.Helper()
	l, err := kafkalog.Open(testCtx(t), kafkalog.Options{Brokers: c.ListenAddrs()})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("close log: %v", err)
		}
	})
	return l
}

// newTestLog starts a cluster and opens a log on it.
func newTestLog(t *testing.T) (*kafkalog.Log, *kfake.Cluster) {
	t.Helper()
	c := newCluster(t)
	return openLog(t, c), c
}

func createTopic(t *testing.T, l eventlog.Log, topic string, partitions int32) {
	t.Helper()
	if err := l.CreateTopic(testCtx(t), topic, partitions); err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

func newReader(t *testing.T, l eventlog.Log, positions map[eventlog.TopicPartition]int64) eventlog.Reader {
	t.Helper()
	r, err := l.NewReader(positions)
	if err != nil {
		t.Fatalf("new reader: %v", err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("close reader: %v", err)
		}
	})
	return r
}

// newAdmin returns an admin client of c that is independent of any log.
func newAdmin(t *testing.T, c *kfake.Cluster) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// clusters maps each log the conformance suite holds to its cluster, for
// Reopen.
var clusters sync.Map // eventlog.Log -> *kfake.Cluster

func TestConformance(t *testing.T) {
	open := func(t *testing.T) eventlog.Log {
		l, c := newTestLog(t)
		clusters.Store(eventlog.Log(l), c)
		t.Cleanup(func() { clusters.Delete(eventlog.Log(l)) })
		return l
	}
	reopen := func(t *testing.T, l eventlog.Log) eventlog.Log {
		v, ok := clusters.Load(l)
		if !ok {
			t.Fatalf("reopen: log %p was not opened by this test", l)
		}
		c := v.(*kfake.Cluster)
		if err := l.Close(); err != nil {
			t.Fatalf("reopen: close: %v", err)
		}
		nl := openLog(t, c)
		clusters.Store(eventlog.Log(nl), c)
		t.Cleanup(func() { clusters.Delete(eventlog.Log(nl)) })
		return nl
	}
	logtest.Run(t, open, logtest.Options{Reopen: reopen})
}

func TestOptions(t *testing.T) {
	if err := (kafkalog.Options{}).Validate(); err == nil {
		t.Error("zero options validate without brokers")
	}
	o := kafkalog.DefaultOptions()
	if o.ClientID != "newsflow" || o.ReplicationFactor != -1 {
		t.Errorf("defaults = %+v", o)
	}
	o.Brokers = []string{"localhost:9092"}
	if err := o.Validate(); err != nil {
		t.Errorf("defaults with brokers: %v", err)
	}
	if err := (kafkalog.Options{Brokers: []string{"b:9092"}, ReplicationFactor: -2}).Validate(); err == nil {
		t.Error("replication factor -2 validates")
	}
	if err := (kafkalog.Options{Brokers: []string{""}}).Validate(); err == nil {
		t.Error("empty broker address validates")
	}
}

func TestOpenUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	_, err = kafkalog.Open(ctx, kafkalog.Options{Brokers: []string{addr}, Logger: logger})
	if err == nil || !strings.HasPrefix(err.Error(), "kafka: connect to brokers ["+addr+"]") {
		t.Fatalf("open unreachable: %v", err)
	}
	if strings.Contains(logs.String(), "level=INFO") || strings.Contains(logs.String(), "level=DEBUG") {
		t.Errorf("franz-go logged below warn:\n%s", logs.String())
	}
}

// TestDefaultPartitionerMatchesPartitionFor proves murmur2 compatibility end
// to end: a plain kgo producer (default partitioner, StickyKeyPartitioner
// with Kafka's murmur2 hasher) puts every keyed record in the partition
// eventlog.PartitionFor computes, and the log reads it back there.
func TestDefaultPartitionerMatchesPartitionFor(t *testing.T) {
	const (
		topic      = "keyed"
		partitions = 8
		n          = 200
	)
	l, c := newTestLog(t)
	createTopic(t, l, topic, partitions)

	producer, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()

	// Keys of many lengths, to cover every tail case of murmur2.
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s-%d", strings.Repeat("k", i%13), i)
	}
	var krs []*kgo.Record
	for _, k := range keys {
		krs = append(krs, &kgo.Record{Topic: topic, Key: []byte(k), Value: []byte("v")})
	}
	if err := producer.ProduceSync(testCtx(t), krs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	used := make(map[int32]bool)
	for _, kr := range krs {
		if want := eventlog.PartitionFor(kr.Key, partitions); kr.Partition != want {
			t.Errorf("kgo put key %q in partition %d, PartitionFor says %d", kr.Key, kr.Partition, want)
		}
		used[kr.Partition] = true
	}
	if len(used) != partitions {
		t.Errorf("keys used %d of %d partitions", len(used), partitions)
	}

	positions := make(map[eventlog.TopicPartition]int64)
	for p := range int32(partitions) {
		positions[eventlog.TopicPartition{Topic: topic, Partition: p}] = 0
	}
	seen := make(map[string]bool)
	for _, rec := range logtest.ReadN(t, newReader(t, l, positions), n, 64) {
		if want := eventlog.PartitionFor(rec.Key, partitions); rec.Partition != want {
			t.Errorf("read key %q from partition %d, PartitionFor says %d", rec.Key, rec.Partition, want)
		}
		seen[string(rec.Key)] = true
	}
	if len(seen) != n {
		t.Errorf("read %d distinct keys, want %d", len(seen), n)
	}
}

func TestAppendRoundTrip(t *testing.T) {
	l, _ := newTestLog(t)
	ctx := testCtx(t)
	createTopic(t, l, "t", 2)

	ts := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC).UnixMilli()
	recs := []*eventlog.Record{
		{Topic: "t", Partition: 1, Key: []byte("a"), Value: []byte("1"), Timestamp: ts,
			Headers: []eventlog.Header{{Key: "h", Value: []byte("x")}, {Key: "h", Value: []byte("y")}}},
		{Topic: "t", Partition: 1, Key: []byte("b"), Value: []byte("2"), Timestamp: ts + 1},
		{Topic: "t", Partition: 0, Value: []byte("3"), Timestamp: ts - 5},
	}
	if err := l.Append(ctx, recs); err != nil {
		t.Fatalf("append: %v", err)
	}
	if recs[0].Offset != 0 || recs[1].Offset != 1 || recs[2].Offset != 0 {
		t.Fatalf("offsets = %d %d %d, want 0 1 0", recs[0].Offset, recs[1].Offset, recs[2].Offset)
	}

	tp1 := eventlog.TopicPartition{Topic: "t", Partition: 1}
	got := logtest.ReadN(t, newReader(t, l, map[eventlog.TopicPartition]int64{tp1: 0}), 2, 10)
	for i, want := range recs[:2] {
		g := got[i]
		if g.Topic != want.Topic || g.Partition != want.Partition || g.Offset != want.Offset ||
			string(g.Key) != string(want.Key) || string(g.Value) != string(want.Value) ||
			g.Timestamp != want.Timestamp || len(g.Headers) != len(want.Headers) {
			t.Errorf("record %d = %+v, want %+v", i, g, want)
		}
		for j := range want.Headers {
			if g.Headers[j].Key != want.Headers[j].Key || string(g.Headers[j].Value) != string(want.Headers[j].Value) {
				t.Errorf("record %d header %d = %+v, want %+v", i, j, g.Headers[j], want.Headers[j])
			}
		}
	}

	off, err := l.Offsets(ctx, tp1)
	if err != nil || off != (eventlog.Offsets{Start: 0, End: 2}) {
		t.Errorf("offsets = %+v, %v; want {0 2}", off, err)
	}
	for _, tc := range []struct{ ts, want int64 }{{ts - 1, 0}, {ts, 0}, {ts + 1, 1}, {ts + 2, 2}, {-1, 0}} {
		if got, err := l.OffsetForTime(ctx, tp1, tc.ts); err != nil || got != tc.want {
			t.Errorf("offset for time %d = %d, %v; want %d", tc.ts, got, err, tc.want)
		}
	}
}

func TestErrors(t *testing.T) {
	l, _ := newTestLog(t)
	ctx := testCtx(t)
	createTopic(t, l, "t", 2)

	if err := l.CreateTopic(ctx, "t", 2); !errors.Is(err, eventlog.ErrTopicExists) {
		t.Errorf("create existing topic: %v", err)
	}
	if _, err := l.Partitions(ctx, "missing"); !errors.Is(err, eventlog.ErrUnknownTopic) {
		t.Errorf("partitions of missing topic: %v", err)
	}
	if n, err := l.Partitions(ctx, "t"); err != nil || n != 2 {
		t.Errorf("partitions = %d, %v; want 2", n, err)
	}
	for _, p := range []int32{-1, 2, 100} {
		err := l.Append(ctx, []*eventlog.Record{{Topic: "t", Partition: p, Value: []byte("v")}})
		if !errors.Is(err, eventlog.ErrInvalidPartition) {
			t.Errorf("append to partition %d: %v", p, err)
		}
		tp := eventlog.TopicPartition{Topic: "t", Partition: p}
		if _, err := l.Offsets(ctx, tp); !errors.Is(err, eventlog.ErrInvalidPartition) {
			t.Errorf("offsets of %s: %v", tp, err)
		}
		if _, err := l.NewReader(map[eventlog.TopicPartition]int64{tp: 0}); !errors.Is(err, eventlog.ErrInvalidPartition) {
			t.Errorf("reader of %s: %v", tp, err)
		}
	}
	missing := eventlog.TopicPartition{Topic: "missing", Partition: 0}
	if err := l.Append(ctx, []*eventlog.Record{{Topic: "missing", Value: []byte("v")}}); !errors.Is(err, eventlog.ErrUnknownTopic) {
		t.Errorf("append to missing topic: %v", err)
	}
	if _, err := l.Offsets(ctx, missing); !errors.Is(err, eventlog.ErrUnknownTopic) {
		t.Errorf("offsets of missing topic: %v", err)
	}
	if _, err := l.OffsetForTime(ctx, missing, 0); !errors.Is(err, eventlog.ErrUnknownTopic) {
		t.Errorf("offset for time of missing topic: %v", err)
	}

	// A topic asked about before it exists is usable right after creation.
	createTopic(t, l, "missing", 1)
	if off, err := l.Offsets(ctx, missing); err != nil || off != (eventlog.Offsets{}) {
		t.Errorf("offsets of new topic = %+v, %v", off, err)
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := l.Append(cancelled, []*eventlog.Record{{Topic: "t", Value: []byte("v")}}); !errors.Is(err, context.Canceled) {
		t.Errorf("append with cancelled context: %v", err)
	}

	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Append(ctx, []*eventlog.Record{{Topic: "t", Value: []byte("v")}}); !errors.Is(err, eventlog.ErrClosed) {
		t.Errorf("append after close: %v", err)
	}
	if _, err := l.NewReader(nil); !errors.Is(err, eventlog.ErrClosed) {
		t.Errorf("reader after close: %v", err)
	}
}

// TestConcurrentAppendsAreContiguous checks that the records of one Append
// get consecutive offsets even when other Appends to the same partition run
// at the same time.
func TestConcurrentAppendsAreContiguous(t *testing.T) {
	l, _ := newTestLog(t)
	ctx := testCtx(t)
	createTopic(t, l, "t", 1)

	const writers, batches, size = 4, 10, 20
	var wg sync.WaitGroup
	errs := make(chan error, writers*batches)
	for w := range writers {
		wg.Go(func() {
			for b := range batches {
				recs := make([]*eventlog.Record, size)
				for i := range recs {
					recs[i] = &eventlog.Record{Topic: "t", Value: fmt.Appendf(nil, "%d/%d/%d", w, b, i)}
				}
				if err := l.Append(ctx, recs); err != nil {
					errs <- err
					return
				}
				for i, r := range recs {
					if r.Offset != recs[0].Offset+int64(i) {
						errs <- fmt.Errorf("writer %d batch %d: offsets %d..., record %d at %d", w, b, recs[0].Offset, i, r.Offset)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestCommitGroupOffsets(t *testing.T) {
	l, c := newTestLog(t)
	ctx := testCtx(t)
	createTopic(t, l, "t", 2)

	var recs []*eventlog.Record
	for i := range 10 {
		recs = append(recs, &eventlog.Record{Topic: "t", Partition: int32(i % 2), Value: []byte("v")})
	}
	if err := l.Append(ctx, recs); err != nil {
		t.Fatal(err)
	}
	tp0 := eventlog.TopicPartition{Topic: "t", Partition: 0}
	tp1 := eventlog.TopicPartition{Topic: "t", Partition: 1}
	var gc eventlog.GroupCommitter = l
	if err := gc.CommitGroupOffsets(ctx, "newsflow-test", map[eventlog.TopicPartition]int64{tp0: 3, tp1: 5}); err != nil {
		t.Fatalf("commit: %v", err)
	}

	adm := newAdmin(t, c)

	fetched, err := adm.FetchOffsets(ctx, "newsflow-test")
	if err != nil {
		t.Fatalf("fetch offsets: %v", err)
	}
	for tp, want := range map[eventlog.TopicPartition]int64{tp0: 3, tp1: 5} {
		o, ok := fetched.Lookup(tp.Topic, tp.Partition)
		if !ok || o.Err != nil || o.At != want {
			t.Errorf("fetched offset of %s = %+v (found %v), want %d", tp, o, ok, want)
		}
	}

	lags, err := adm.Lag(ctx, "newsflow-test")
	if err != nil {
		t.Fatalf("lag: %v", err)
	}
	gl, ok := lags["newsflow-test"]
	if !ok || gl.Error() != nil {
		t.Fatalf("lag of group = %+v (found %v)", gl, ok)
	}
	for tp, want := range map[eventlog.TopicPartition]int64{tp0: 2, tp1: 0} {
		ml, ok := gl.Lag.Lookup(tp.Topic, tp.Partition)
		if !ok || ml.Err != nil || ml.Lag != want {
			t.Errorf("lag of %s = %+v (found %v), want %d", tp, ml, ok, want)
		}
	}

	if err := gc.CommitGroupOffsets(ctx, "g", map[eventlog.TopicPartition]int64{{Topic: "missing"}: 1}); !errors.Is(err, eventlog.ErrUnknownTopic) {
		t.Errorf("commit to missing topic: %v", err)
	}
	if err := gc.CommitGroupOffsets(ctx, "g", map[eventlog.TopicPartition]int64{{Topic: "t", Partition: 9}: 1}); !errors.Is(err, eventlog.ErrInvalidPartition) {
		t.Errorf("commit to invalid partition: %v", err)
	}
}

func TestPollCancelled(t *testing.T) {
	l, _ := newTestLog(t)
	createTopic(t, l, "t", 1)
	r := newReader(t, l, map[eventlog.TopicPartition]int64{{Topic: "t"}: 0})

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if recs, err := r.Poll(ctx, 10); !errors.Is(err, context.Canceled) || recs != nil {
		t.Errorf("poll with cancelled context = %d records, %v", len(recs), err)
	}

	ctx, cancel = context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if recs, err := r.Poll(ctx, 10); !errors.Is(err, context.DeadlineExceeded) || recs != nil {
		t.Errorf("poll of empty partition = %d records, %v", len(recs), err)
	}

	// A reader of no partitions just waits.
	empty := newReader(t, l, nil)
	ctx, cancel = context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := empty.Poll(ctx, 10); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("poll of no partitions: %v", err)
	}

	// The reader still works after a cancelled poll.
	if err := l.Append(testCtx(t), []*eventlog.Record{{Topic: "t", Value: []byte("v")}}); err != nil {
		t.Fatal(err)
	}
	if got := logtest.ReadN(t, r, 1, 10); got[0].Offset != 0 {
		t.Errorf("read offset %d, want 0", got[0].Offset)
	}
}

func TestPollClosed(t *testing.T) {
	l, _ := newTestLog(t)
	createTopic(t, l, "t", 1)
	r, err := l.NewReader(map[eventlog.TopicPartition]int64{{Topic: "t"}: 0})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	done := make(chan error, 1)
	go func() {
		_, err := r.Poll(ctx, 10)
		done <- err
	}()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, eventlog.ErrClosed) {
		t.Errorf("poll across close: %v", err)
	}
	if _, err := r.Poll(ctx, 10); !errors.Is(err, eventlog.ErrClosed) {
		t.Errorf("poll after close: %v", err)
	}
	if err := r.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
}

// TestPollSplitsWithoutLoss reads more records than max per poll from
// several partitions and checks order, density and high watermarks.
func TestPollSplitsWithoutLoss(t *testing.T) {
	l, c := newTestLog(t)
	ctx := testCtx(t)
	createTopic(t, l, "t", 3)

	const perPartition = 50
	positions := make(map[eventlog.TopicPartition]int64)
	for p := range int32(3) {
		var recs []*eventlog.Record
		for i := range perPartition {
			recs = append(recs, &eventlog.Record{Topic: "t", Partition: p, Value: fmt.Appendf(nil, "%d", i)})
		}
		if err := l.Append(ctx, recs); err != nil {
			t.Fatal(err)
		}
		positions[eventlog.TopicPartition{Topic: "t", Partition: p}] = 5
	}
	// Partition 2 starts below its log start after a deletion.
	tp2 := eventlog.TopicPartition{Topic: "t", Partition: 2}
	var del kadm.Offsets
	del.AddOffset(tp2.Topic, tp2.Partition, 10, -1)
	if resps, err := newAdmin(t, c).DeleteRecords(ctx, del); err != nil || resps.Error() != nil {
		t.Fatalf("delete records: %v, %v", err, resps.Error())
	}
	if off, err := l.Offsets(ctx, tp2); err != nil || off != (eventlog.Offsets{Start: 10, End: perPartition}) {
		t.Fatalf("offsets after delete = %+v, %v", off, err)
	}

	r := newReader(t, l, positions)
	const max = 7
	want := 2*(perPartition-5) + (perPartition - 10)
	next := map[eventlog.TopicPartition]int64{{Topic: "t", Partition: 0}: 5, {Topic: "t", Partition: 1}: 5, tp2: 10}
	for _, rec := range logtest.ReadN(t, r, want, max) {
		tp := eventlog.TopicPartition{Topic: rec.Topic, Partition: rec.Partition}
		if rec.Offset != next[tp] {
			t.Fatalf("%s: read offset %d, want %d", tp, rec.Offset, next[tp])
		}
		if string(rec.Value) != fmt.Sprint(rec.Offset) {
			t.Fatalf("%s@%d: value %q", tp, rec.Offset, rec.Value)
		}
		next[tp]++
	}
	ctxShort, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if recs, err := r.Poll(ctxShort, max); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("poll past the end = %d records, %v", len(recs), err)
	}
	hwm := r.HighWatermarks()
	for tp := range positions {
		if hwm[tp] != perPartition {
			t.Errorf("high watermark of %s = %d, want %d", tp, hwm[tp], perPartition)
		}
	}
}
