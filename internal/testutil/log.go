package testutil

import (
	"context"
	"testing"
	"time"

	"github.com/newsflow/newsflow/engine/eventlog"
)

// ReadTopic returns every record the log holds of topic, partition by
// partition.
func ReadTopic(tb testing.TB, l eventlog.Log, topic string) []*eventlog.Record {
	tb.Helper()
	parts, err := l.Partitions(context.Background(), topic)
	if err != nil {
		tb.Fatal(err)
	}
	var out []*eventlog.Record
	for p := range parts {
		out = append(out, ReadPartition(tb, l, eventlog.TopicPartition{Topic: topic, Partition: p})...)
	}
	return out
}

// ReadPartition returns every record the log holds of one partition.
func ReadPartition(tb testing.TB, l eventlog.Log, tp eventlog.TopicPartition) []*eventlog.Record {
	tb.Helper()
	ctx := context.Background()
	offs, err := l.Offsets(ctx, tp)
	if err != nil {
		tb.Fatal(err)
	}
	if offs.End <= offs.Start {
		return nil
	}
	r, err := l.NewReader(map[eventlog.TopicPartition]int64{tp: offs.Start})
	if err != nil {
		tb.Fatal(err)
	}
	defer r.Close()
	var out []*eventlog.Record
	for int64(len(out)) < offs.End-offs.Start {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		recs, err := r.Poll(pctx, 1000)
		cancel()
		if err != nil {
			tb.Fatalf("read %s: %v after %d of %d records", tp, err, len(out), offs.End-offs.Start)
		}
		out = append(out, recs...)
	}
	return out
}
