package bench

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/engine/eventlog/embedded"
	"github.com/newsflow/newsflow/engine/eventlog/kafkalog"
	"github.com/twmb/franz-go/pkg/kfake"
)

func TestMain(m *testing.M) {
	code := m.Run()
	cleanupBinary()
	os.Exit(code)
}

// Stream sizes of the end-to-end benchmarks: large enough that a run takes
// seconds to tens of seconds on two cores.
const (
	e2eEmbeddedEvents = 2_000_000
	e2eHTTPEvents     = 1_000_000
	e2eKfakeEvents    = 300_000
	e2eSpan           = 10 * time.Minute // event times of a stream
)

// streams caches the generated record batches per (size, partitioner): the
// sub-benchmarks of one size share a stream.
var streams struct {
	sync.Mutex
	recs   map[string][][]*eventlog.Record
	bodies map[int][][]byte
}

func cachedRecords(n int, name string, part partitioner) [][]*eventlog.Record {
	streams.Lock()
	defer streams.Unlock()
	key := fmt.Sprint(n, name)
	if r, ok := streams.recs[key]; ok {
		return r
	}
	if streams.recs == nil {
		streams.recs = map[string][][]*eventlog.Record{}
	}
	r := recordBatches(newStream(n, e2eSpan, 1), part)
	streams.recs[key] = r
	return r
}

func cachedBodies(n int) [][]byte {
	streams.Lock()
	defer streams.Unlock()
	if r, ok := streams.bodies[n]; ok {
		return r
	}
	if streams.bodies == nil {
		streams.bodies = map[int][][]byte{}
	}
	r := ndjsonBatches(newStream(n, e2eSpan, 2))
	streams.bodies[n] = r
	return r
}

func openEmbedded(policy embedded.FsyncPolicy) func(dir string) (eventlog.Log, func() error, error) {
	return func(dir string) (eventlog.Log, func() error, error) {
		l, err := embedded.Open(embedded.Options{Dir: dir + "/log", Fsync: policy})
		if err != nil {
			return nil, nil, err
		}
		return l, l.Close, nil
	}
}

func appendAll(batches [][]*eventlog.Record) ingestFunc {
	return func(ctx context.Context, p *pipeline) error { return appendBatches(ctx, p.log, batches) }
}

// BenchmarkEndToEndEmbedded measures shares per second from the first
// Append to the embedded log until the trending tasks have committed every
// share (engine.CaughtUp), over a stream of 2,000,000 Zipf-skewed shares of
// 100,000 articles appended in batches of 1000 by 4 goroutines, partitioned
// by murmur2 as the HTTP server does.
//
// The http sub-benchmark ingests 1,000,000 shares through the query server
// on loopback instead: POST /api/v1/events/share/batch with 1000 NDJSON
// lines from 4 client goroutines (in the same process, on the same cores).
//
// MB/partition is trending.Operator.MemoryBytes averaged over partitions at
// the end of the run.
func BenchmarkEndToEndEmbedded(b *testing.B) {
	for _, policy := range []embedded.FsyncPolicy{embedded.FsyncAlways, embedded.FsyncNever} {
		b.Run("fsync="+string(policy), func(b *testing.B) {
			batches := cachedRecords(e2eEmbeddedEvents, "murmur2", murmur2)
			var runs []e2eResult
			for b.Loop() {
				runs = append(runs, runEndToEnd(b, e2eEmbeddedEvents, openEmbedded(policy), appendAll(batches)))
			}
			reportEndToEnd(b, e2eEmbeddedEvents, runs)
		})
	}
	b.Run("http/fsync=always", func(b *testing.B) {
		bodies := cachedBodies(e2eHTTPEvents)
		ingest := func(ctx context.Context, p *pipeline) error {
			h, err := startHTTP(p)
			if err != nil {
				return err
			}
			err = postBatches(ctx, h.addr, bodies)
			if serr := h.stop(); err == nil {
				err = serr
			}
			return err
		}
		var runs []e2eResult
		for b.Loop() {
			runs = append(runs, runEndToEnd(b, e2eHTTPEvents, openEmbedded(embedded.FsyncAlways), ingest))
		}
		reportEndToEnd(b, e2eHTTPEvents, runs)
	})
}

// BenchmarkEndToEndKfake is BenchmarkEndToEndEmbedded on the Kafka backend
// against an in-process kfake cluster (one broker), with 300,000 shares.
// The murmur2 sub-benchmark partitions like Kafka's default partitioner, so
// the repartition stage forwards nothing; round-robin spreads records over
// partitions regardless of key (as a non-Java client might), so 7/8 of the
// shares go through the repartition topic.
func BenchmarkEndToEndKfake(b *testing.B) {
	for _, pc := range []struct {
		name string
		part partitioner
	}{{"murmur2", murmur2}, {"round-robin", roundRobin}} {
		b.Run(pc.name, func(b *testing.B) {
			batches := cachedRecords(e2eKfakeEvents, pc.name, pc.part)
			open := func(string) (eventlog.Log, func() error, error) {
				c, err := kfake.NewCluster(kfake.NumBrokers(1))
				if err != nil {
					return nil, nil, err
				}
				ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
				defer cancel()
				l, err := kafkalog.Open(ctx, kafkalog.Options{Brokers: c.ListenAddrs()})
				if err != nil {
					c.Close()
					return nil, nil, err
				}
				return l, func() error { err := l.Close(); c.Close(); return err }, nil
			}
			var runs []e2eResult
			for b.Loop() {
				runs = append(runs, runEndToEnd(b, e2eKfakeEvents, open, appendAll(batches)))
			}
			reportEndToEnd(b, e2eKfakeEvents, runs)
		})
	}
}
