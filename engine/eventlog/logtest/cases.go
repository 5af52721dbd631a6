package logtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/newsflow/newsflow/engine/eventlog"
)

func init() {
	cases = []testCase{
		{"TopicLifecycle", testTopicLifecycle},
		{"AppendAndReadByOffset", testAppendAndReadByOffset},
		{"RoundTripKeyHeadersTimestamp", testRoundTrip},
		{"DenseMonotonicOffsets", testDenseOffsets},
		{"ConcurrentAppends", testConcurrentAppends},
		{"ReadFromTimestamp", testOffsetForTime},
		{"PollBlocksUntilAppend", testPollBlocks},
		{"PollHonoursMax", testPollMax},
		{"ReaderSeveralPartitions", testSeveralPartitions},
		{"InvalidPartitionAndTopic", testInvalid},
		{"PartitionForPlacement", testPartitionFor},
		{"LargeValue", testLargeValue},
		{"DurableAcrossRestart", testRestart},
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustCreate(t *testing.T, l eventlog.Log, topic string, parts int32) {
	t.Helper()
	if err := l.CreateTopic(ctxT(t), topic, parts); err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

func rec(topic string, p int32, key, value string, ts int64) *eventlog.Record {
	r := &eventlog.Record{Topic: topic, Partition: p, Value: []byte(value), Timestamp: ts}
	if key != "" {
		r.Key = []byte(key)
	}
	return r
}

func mustAppend(t *testing.T, l eventlog.Log, recs ...*eventlog.Record) {
	t.Helper()
	if err := l.Append(ctxT(t), recs); err != nil {
		t.Fatalf("append: %v", err)
	}
}

// readAll reads n records starting at the given positions, failing the test
// if they do not arrive in time.
func readAll(t *testing.T, l eventlog.Log, pos map[eventlog.TopicPartition]int64, n int) []*eventlog.Record {
	t.Helper()
	r, err := l.NewReader(pos)
	if err != nil {
		t.Fatalf("new reader: %v", err)
	}
	defer r.Close()
	return ReadN(t, r, n, n)
}

func at(topic string, p int32, off int64) map[eventlog.TopicPartition]int64 {
	return map[eventlog.TopicPartition]int64{{Topic: topic, Partition: p}: off}
}

func testTopicLifecycle(t *testing.T, open Open, _ Options) {
	l := open(t)
	ctx := ctxT(t)
	if _, err := l.Partitions(ctx, "nope"); !errors.Is(err, eventlog.ErrUnknownTopic) {
		t.Fatalf("Partitions(unknown) = %v, want ErrUnknownTopic", err)
	}
	mustCreate(t, l, "t1", 3)
	n, err := l.Partitions(ctx, "t1")
	if err != nil || n != 3 {
		t.Fatalf("Partitions = %d, %v; want 3", n, err)
	}
	if err := l.CreateTopic(ctx, "t1", 3); !errors.Is(err, eventlog.ErrTopicExists) {
		t.Fatalf("second CreateTopic = %v, want ErrTopicExists", err)
	}
	n, err = eventlog.EnsureTopic(ctx, l, "t1", 8)
	if err != nil || n != 3 {
		t.Fatalf("EnsureTopic(existing) = %d, %v; want 3 (existing count)", n, err)
	}
	n, err = eventlog.EnsureTopic(ctx, l, "t2", 5)
	if err != nil || n != 5 {
		t.Fatalf("EnsureTopic(new) = %d, %v; want 5", n, err)
	}
	for p := int32(0); p < 3; p++ {
		o, err := l.Offsets(ctx, eventlog.TopicPartition{Topic: "t1", Partition: p})
		if err != nil || o.Start != 0 || o.End != 0 {
			t.Fatalf("Offsets(empty p%d) = %+v, %v; want 0,0", p, o, err)
		}
	}
}

func testAppendAndReadByOffset(t *testing.T, open Open, _ Options) {
	l := open(t)
	mustCreate(t, l, "a", 2)
	var batch []*eventlog.Record
	for i := 0; i < 10; i++ {
		batch = append(batch, rec("a", int32(i%2), fmt.Sprint("k", i), fmt.Sprint("v", i), int64(1000+i)))
	}
	mustAppend(t, l, batch...)
	for i, r := range batch {
		if want := int64(i / 2); r.Offset != want {
			t.Fatalf("record %d got offset %d, want %d", i, r.Offset, want)
		}
	}
	got := readAll(t, l, at("a", 1, 2), 3)
	for i, r := range got {
		want := fmt.Sprint("v", 2*(i+2)+1)
		if r.Offset != int64(i+2) || string(r.Value) != want || r.Partition != 1 || r.Topic != "a" {
			t.Fatalf("read %d = %s/%d@%d %q, want a/1@%d %q", i, r.Topic, r.Partition, r.Offset, r.Value, i+2, want)
		}
	}
	o, err := l.Offsets(ctxT(t), eventlog.TopicPartition{Topic: "a", Partition: 0})
	if err != nil || o.Start != 0 || o.End != 5 {
		t.Fatalf("Offsets = %+v, %v; want {0 5}", o, err)
	}
}

func testRoundTrip(t *testing.T, open Open, _ Options) {
	l := open(t)
	mustCreate(t, l, "rt", 1)
	in := []*eventlog.Record{
		{Topic: "rt", Key: []byte("article-1"), Value: []byte(`{"x":1}`), Timestamp: 1700000000123,
			Headers: []eventlog.Header{{Key: "a", Value: []byte("1")}, {Key: "a", Value: []byte("2")}, {Key: "bin", Value: []byte{0, 255, 10}}}},
		{Topic: "rt", Value: []byte("no key"), Timestamp: 1},
		{Topic: "rt", Key: []byte{0, 1, 2, 0xff}, Value: []byte{}, Timestamp: 1700000000999},
	}
	mustAppend(t, l, in...)
	out := readAll(t, l, at("rt", 0, 0), len(in))
	for i := range in {
		a, b := in[i], out[i]
		if !bytes.Equal(a.Key, b.Key) || !bytes.Equal(a.Value, b.Value) || a.Timestamp != b.Timestamp {
			t.Fatalf("record %d: got key=%q value=%q ts=%d, want key=%q value=%q ts=%d",
				i, b.Key, b.Value, b.Timestamp, a.Key, a.Value, a.Timestamp)
		}
		if len(a.Headers) != len(b.Headers) {
			t.Fatalf("record %d: %d headers, want %d", i, len(b.Headers), len(a.Headers))
		}
		for j := range a.Headers {
			if a.Headers[j].Key != b.Headers[j].Key || !bytes.Equal(a.Headers[j].Value, b.Headers[j].Value) {
				t.Fatalf("record %d header %d = %q:%q, want %q:%q", i, j,
					b.Headers[j].Key, b.Headers[j].Value, a.Headers[j].Key, a.Headers[j].Value)
			}
		}
	}
	if v, ok := out[0].Header("a"); !ok || string(v) != "1" {
		t.Fatalf("Header(a) = %q, %v; want first value", v, ok)
	}
}

func testDenseOffsets(t *testing.T, open Open, _ Options) {
	l := open(t)
	mustCreate(t, l, "d", 1)
	total := 0
	for b := 1; b <= 20; b++ {
		var batch []*eventlog.Record
		for i := 0; i < b; i++ {
			batch = append(batch, rec("d", 0, "", fmt.Sprint(total), int64(total)))
			total++
		}
		mustAppend(t, l, batch...)
	}
	out := readAll(t, l, at("d", 0, 0), total)
	for i, r := range out {
		if r.Offset != int64(i) || string(r.Value) != fmt.Sprint(i) {
			t.Fatalf("position %d has offset %d value %q", i, r.Offset, r.Value)
		}
	}
}

func testConcurrentAppends(t *testing.T, open Open, _ Options) {
	l := open(t)
	mustCreate(t, l, "c", 2)
	const writers, per = 8, 50
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				r := rec("c", int32(i%2), "", fmt.Sprintf("%d-%d", w, i), int64(i))
				if err := l.Append(context.Background(), []*eventlog.Record{r}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent append: %v", err)
	}
	seen := map[string]bool{}
	for p := int32(0); p < 2; p++ {
		out := readAll(t, l, at("c", p, 0), writers*per/2)
		for i, r := range out {
			if r.Offset != int64(i) {
				t.Fatalf("partition %d position %d has offset %d", p, i, r.Offset)
			}
			if seen[string(r.Value)] {
				t.Fatalf("record %q read twice", r.Value)
			}
			seen[string(r.Value)] = true
		}
	}
	if len(seen) != writers*per {
		t.Fatalf("read %d distinct records, want %d", len(seen), writers*per)
	}
}

func testOffsetForTime(t *testing.T, open Open, _ Options) {
	l := open(t)
	mustCreate(t, l, "ts", 1)
	// Timestamps are not monotonic: a late record sits between newer ones.
	tss := []int64{1000, 2000, 1500, 3000, 2500, 4000, 4000, 5000}
	var batch []*eventlog.Record
	for i, ts := range tss {
		batch = append(batch, rec("ts", 0, "", fmt.Sprint(i), ts))
	}
	mustAppend(t, l, batch...)
	tp := eventlog.TopicPartition{Topic: "ts", Partition: 0}
	for _, c := range []struct {
		ts   int64
		want int64
	}{{0, 0}, {1000, 0}, {1001, 1}, {1500, 1}, {2001, 3}, {2600, 3}, {3001, 5}, {4000, 5}, {4001, 7}, {5000, 7}, {5001, 8}} {
		got, err := l.OffsetForTime(ctxT(t), tp, c.ts)
		if err != nil || got != c.want {
			t.Errorf("OffsetForTime(%d) = %d, %v; want %d", c.ts, got, err, c.want)
		}
	}
}

func testPollBlocks(t *testing.T, open Open, _ Options) {
	l := open(t)
	mustCreate(t, l, "b", 1)
	r, err := l.NewReader(at("b", 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()

	// A cancelled poll on an empty partition returns the context's error.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	_, err = r.Poll(ctx, 10)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Poll on empty partition = %v, want context.DeadlineExceeded", err)
	}

	done := make(chan []*eventlog.Record, 1)
	pollErr := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		recs, err := r.Poll(ctx, 10)
		if err != nil {
			pollErr <- err
			return
		}
		done <- recs
	}()
	mustAppend(t, l, rec("b", 0, "k", "wake", 1))
	select {
	case recs := <-done:
		if len(recs) != 1 || string(recs[0].Value) != "wake" {
			t.Fatalf("blocked Poll returned %d records", len(recs))
		}
	case err := <-pollErr:
		t.Fatalf("blocked Poll: %v", err)
	}
}

func testPollMax(t *testing.T, open Open, _ Options) {
	l := open(t)
	mustCreate(t, l, "m", 1)
	var batch []*eventlog.Record
	for i := 0; i < 25; i++ {
		batch = append(batch, rec("m", 0, "", fmt.Sprint(i), int64(i)))
	}
	mustAppend(t, l, batch...)
	r, err := l.NewReader(at("m", 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	next := int64(0)
	for next < 25 {
		recs, err := r.Poll(ctxT(t), 4)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == 0 || len(recs) > 4 {
			t.Fatalf("Poll(max=4) returned %d records", len(recs))
		}
		for _, rc := range recs {
			if rc.Offset != next {
				t.Fatalf("got offset %d, want %d", rc.Offset, next)
			}
			next++
		}
	}
	hw := r.HighWatermarks()[eventlog.TopicPartition{Topic: "m", Partition: 0}]
	if hw != 25 {
		t.Fatalf("HighWatermarks = %d, want 25", hw)
	}
}

func testSeveralPartitions(t *testing.T, open Open, _ Options) {
	l := open(t)
	mustCreate(t, l, "s", 4)
	mustCreate(t, l, "s2", 1)
	var batch []*eventlog.Record
	for i := 0; i < 40; i++ {
		batch = append(batch, rec("s", int32(i%4), "", fmt.Sprint(i), int64(i)))
	}
	batch = append(batch, rec("s2", 0, "", "other", 1))
	mustAppend(t, l, batch...)
	pos := map[eventlog.TopicPartition]int64{{Topic: "s2", Partition: 0}: 0}
	for p := int32(0); p < 4; p++ {
		pos[eventlog.TopicPartition{Topic: "s", Partition: p}] = 0
	}
	out := readAll(t, l, pos, 41)
	last := map[eventlog.TopicPartition]int64{}
	for _, r := range out {
		tp := eventlog.TopicPartition{Topic: r.Topic, Partition: r.Partition}
		if prev, ok := last[tp]; ok && r.Offset != prev+1 {
			t.Fatalf("%s: offset %d after %d", tp, r.Offset, prev)
		}
		last[tp] = r.Offset
	}
	if len(last) != 5 {
		t.Fatalf("read from %d partitions, want 5", len(last))
	}
}

func testInvalid(t *testing.T, open Open, _ Options) {
	l := open(t)
	mustCreate(t, l, "v", 2)
	err := l.Append(ctxT(t), []*eventlog.Record{rec("v", 2, "", "x", 1)})
	if !errors.Is(err, eventlog.ErrInvalidPartition) {
		t.Fatalf("append to partition 2 of 2 = %v, want ErrInvalidPartition", err)
	}
	err = l.Append(ctxT(t), []*eventlog.Record{rec("v", -1, "", "x", 1)})
	if !errors.Is(err, eventlog.ErrInvalidPartition) {
		t.Fatalf("append to partition -1 = %v, want ErrInvalidPartition", err)
	}
	err = l.Append(ctxT(t), []*eventlog.Record{rec("missing", 0, "", "x", 1)})
	if !errors.Is(err, eventlog.ErrUnknownTopic) {
		t.Fatalf("append to unknown topic = %v, want ErrUnknownTopic", err)
	}
}

func testPartitionFor(t *testing.T, open Open, _ Options) {
	l := open(t)
	const parts = 8
	mustCreate(t, l, "p", parts)
	want := map[int32][]string{}
	var batch []*eventlog.Record
	for i := 0; i < 100; i++ {
		k := fmt.Sprintf("article-%d", i)
		p := eventlog.PartitionFor([]byte(k), parts)
		want[p] = append(want[p], k)
		batch = append(batch, rec("p", p, k, k, 1))
	}
	mustAppend(t, l, batch...)
	for p := int32(0); p < parts; p++ {
		if len(want[p]) == 0 {
			continue
		}
		out := readAll(t, l, at("p", p, 0), len(want[p]))
		var got []string
		for _, r := range out {
			got = append(got, string(r.Key))
		}
		sort.Strings(got)
		exp := append([]string(nil), want[p]...)
		sort.Strings(exp)
		if fmt.Sprint(got) != fmt.Sprint(exp) {
			t.Fatalf("partition %d holds %v, want %v", p, got, exp)
		}
	}
}

func testLargeValue(t *testing.T, open Open, _ Options) {
	l := open(t)
	mustCreate(t, l, "big", 1)
	v := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
	mustAppend(t, l, &eventlog.Record{Topic: "big", Value: v, Timestamp: 5})
	out := readAll(t, l, at("big", 0, 0), 1)
	if !bytes.Equal(out[0].Value, v) {
		t.Fatalf("1 MiB value did not round-trip (got %d bytes)", len(out[0].Value))
	}
}

func testRestart(t *testing.T, open Open, opts Options) {
	if opts.Reopen == nil {
		t.Skip("backend has no reopen")
	}
	l := open(t)
	mustCreate(t, l, "dur", 2)
	var batch []*eventlog.Record
	for i := 0; i < 10; i++ {
		batch = append(batch, rec("dur", int32(i%2), fmt.Sprint(i), fmt.Sprint(i), int64(100+i)))
	}
	mustAppend(t, l, batch...)
	l = opts.Reopen(t, l)
	n, err := l.Partitions(ctxT(t), "dur")
	if err != nil || n != 2 {
		t.Fatalf("after reopen Partitions = %d, %v", n, err)
	}
	more := rec("dur", 0, "k", "after", 200)
	mustAppend(t, l, more)
	if more.Offset != 5 {
		t.Fatalf("first offset after reopen = %d, want 5", more.Offset)
	}
	out := readAll(t, l, at("dur", 0, 0), 6)
	for i, r := range out[:5] {
		if string(r.Value) != fmt.Sprint(2*i) || r.Timestamp != int64(100+2*i) {
			t.Fatalf("after reopen record %d = %q ts %d", i, r.Value, r.Timestamp)
		}
	}
	if string(out[5].Value) != "after" {
		t.Fatalf("record appended after reopen = %q", out[5].Value)
	}
	got, err := l.OffsetForTime(ctxT(t), eventlog.TopicPartition{Topic: "dur", Partition: 1}, 105)
	if err != nil || got != 2 { // partition 1 holds ts 101, 103, 105, ...
		t.Fatalf("OffsetForTime after reopen = %d, %v; want 2", got, err)
	}
}
