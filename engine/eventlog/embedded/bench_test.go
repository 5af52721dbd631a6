package embedded

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/newsflow/newsflow/engine/eventlog"
)

// benchRecords returns n records of about 150 bytes spread over 8
// partitions, shaped like a share event.
func benchRecords(topic string, n int) []*eventlog.Record {
	now := time.Now().UnixMilli()
	recs := make([]*eventlog.Record, n)
	for i := range recs {
		key := fmt.Appendf(nil, "article-%012d", i)
		recs[i] = &eventlog.Record{
			Topic:     topic,
			Partition: eventlog.PartitionFor(key, 8),
			Key:       key,
			Value: fmt.Appendf(nil, `{"event_id":"e%09d","article_id":"%s","user_id":"u%06d","share_type":"link","ts":%d}`,
				i, key, i%100000, now),
			Timestamp: now,
		}
	}
	return recs
}

func BenchmarkAppend(b *testing.B) {
	for _, policy := range []FsyncPolicy{FsyncAlways, FsyncNever} {
		b.Run("fsync="+string(policy), func(b *testing.B) {
			l := newTestLog(b, func(o *Options) { o.Fsync = policy })
			mustCreate(b, l, "bench", 8)
			recs := benchRecords("bench", 1000)
			b.SetBytes(int64(1000 * encodedLen(recs[0])))
			ctx := context.Background()
			n := 0
			for b.Loop() {
				if err := l.Append(ctx, recs); err != nil {
					b.Fatal(err)
				}
				n += len(recs)
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// BenchmarkAppendConcurrent appends one record per call from many
// goroutines: group commit shares each fsync among the waiting calls.
func BenchmarkAppendConcurrent(b *testing.B) {
	l := newTestLog(b, nil)
	mustCreate(b, l, "bench", 8)
	recs := benchRecords("bench", 1024)
	b.SetParallelism(32)
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			r := *recs[i%len(recs)]
			if err := l.Append(context.Background(), []*eventlog.Record{&r}); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
}

func BenchmarkRead(b *testing.B) {
	l := newTestLog(b, func(o *Options) { o.Fsync = FsyncNever })
	mustCreate(b, l, "bench", 8)
	const total = 200_000
	for range total / 1000 {
		mustAppend(b, l, benchRecords("bench", 1000)...)
	}
	pos := map[eventlog.TopicPartition]int64{}
	for p := int32(0); p < 8; p++ {
		pos[tpOf("bench", p)] = 0
	}
	ctx := context.Background()
	var r eventlog.Reader
	read, n := 0, 0
	for b.Loop() {
		if r == nil || read == total {
			if r != nil {
				r.Close()
			}
			var err error
			if r, err = l.NewReader(pos); err != nil {
				b.Fatal(err)
			}
			read = 0
		}
		recs, err := r.Poll(ctx, 1000)
		if err != nil {
			b.Fatal(err)
		}
		read += len(recs)
		n += len(recs)
	}
	r.Close()
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "records/s")
}
