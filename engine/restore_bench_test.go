package engine

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/engine/eventlog/kafkalog"
	"github.com/newsflow/newsflow/state"
	"github.com/twmb/franz-go/pkg/kfake"
)

// Shape of BenchmarkPartitionRestore.
const (
	restoreStage      = "restorebench"
	restorePartitions = 8
	restorePartition  = 3 // the partition whose changelog is filled
	// restoreDefaultMB is the state written to the changelog, in MB
	// (10^6 bytes of keys and values); NEWSFLOW_BENCH_RESTORE_MB
	// overrides it for quick runs.
	restoreDefaultMB = 1000
	// restoreTailPercent is the part of the state the incremental case
	// finds missing from its local copy.
	restoreTailPercent = 1
	// restoreCommitBytes and restoreCommitChanges bound one changelog
	// commit, about what a busy task commits per commit interval.
	restoreCommitBytes   = 1 << 20
	restoreCommitChanges = 4096
	restoreTimeout       = 10 * time.Minute
)

// BenchmarkPartitionRestore measures how long a node that gains a
// partition takes to bring its state from the changelog into its local
// Pebble store, until the engine reports ready (every task of the
// assignment restored and processing).
//
// Setup (untimed, once): an in-process kfake broker; the changelog
// partition of one task is filled with 1 GB of state (keys and values;
// NEWSFLOW_BENCH_RESTORE_MB=N for another size) through the real path,
// kafkalog's Changelog.Commit, one Kafka transaction per commit of up to
// 4096 changes or 1 MiB, with unique keys (so compaction would keep them
// all) and the sizes of the operators' state: trending cells (≈35 B keys,
// 8 B counts, 55% of the entries), article versions (24 B, 15%), reader
// profiles (200–900 B of text, 15%), story articles (SimHash, a 512 B
// MinHash signature and text, 10%) and stories (1–4 KB of text, 5%); 313 B
// per entry on average, about 3.2 million entries per GB.
//
// Sub-benchmarks; an op is one restore, timed from engine.Run and Assign of
// the partition to Engine.Ready (opening the Kafka client and the empty
// Pebble store before, and stopping the engine after, are not timed):
//
//   - full: a fresh node with an empty store: it claims the changelog
//     (fencing earlier writers) and applies every change in it.
//   - incremental: a node whose store holds a copy of the partition from an
//     earlier restore; before each op, 1% of the state (10 MB, updates of
//     existing keys and new ones) is committed to the changelog by another
//     writer, and the node restores only that tail.
//
// MB/s is state bytes restored per second; restore-s is seconds per
// restore, changes/s changelog records applied per second, state-MB the
// size of the partition's state and tail-MB what the incremental restore
// read. kfake, the restoring engine and Pebble share this process and its
// cores; kfake keeps the changelog in memory (snappy-compressed as the
// producer sent it): with 1 GB of state the process peaks at about 1.4 GB
// resident, and the run takes about a minute.
func BenchmarkPartitionRestore(b *testing.B) {
	mb := restoreDefaultMB
	if s := os.Getenv("NEWSFLOW_BENCH_RESTORE_MB"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v <= 0 {
			b.Fatalf("NEWSFLOW_BENCH_RESTORE_MB=%q: want a positive integer", s)
		}
		mb = v
	}
	f := &restoreFixture{dir: b.TempDir(), target: int64(mb) * 1e6, rng: rand.New(rand.NewPCG(1, 2))}
	defer f.close()

	b.Run("full", func(b *testing.B) {
		f.setup(b)
		b.ResetTimer()
		var took time.Duration
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			// One copy on disk at a time; the last one stays for the
			// incremental case.
			if f.copyDir != "" {
				if err := os.RemoveAll(f.copyDir); err != nil {
					b.Fatal(err)
				}
			}
			f.copyDir = filepath.Join(f.dir, fmt.Sprintf("full-%d", f.epoch))
			took += f.restore(b, f.copyDir, i == 0)
		}
		b.SetBytes(f.bytes)
		b.ReportMetric(took.Seconds()/float64(b.N), "restore-s")
		b.ReportMetric(float64(f.changes)*float64(b.N)/took.Seconds(), "changes/s")
		b.ReportMetric(float64(f.bytes)/1e6, "state-MB")
	})

	b.Run("incremental", func(b *testing.B) {
		f.setup(b)
		if f.copyDir == "" {
			// Run alone (-bench .../incremental): make the local copy.
			f.copyDir = filepath.Join(f.dir, "copy")
			f.restore(b, f.copyDir, false)
		}
		b.ResetTimer()
		tail := f.target * restoreTailPercent / 100
		var took time.Duration
		var tailBytes, tailChanges int64
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			n, c := f.writeTail(b, tail)
			tailBytes += n
			tailChanges += c
			took += f.restore(b, f.copyDir, i == 0)
		}
		b.SetBytes(tailBytes / int64(b.N))
		b.ReportMetric(took.Seconds()/float64(b.N), "restore-s")
		b.ReportMetric(float64(tailChanges)/took.Seconds(), "changes/s")
		b.ReportMetric(float64(tailBytes)/float64(b.N)/1e6, "tail-MB")
		b.ReportMetric(float64(f.bytes)/1e6, "state-MB")
	})
}

// restoreFixture is the broker and the changelog BenchmarkPartitionRestore
// restores from, shared by its sub-benchmarks.
type restoreFixture struct {
	dir     string // holds the stores
	target  int64  // state bytes to write
	rng     *rand.Rand
	kafka   *kfake.Cluster
	brokers []string
	keys    uint64  // entries 0..keys-1 exist
	bytes   int64   // state bytes: the latest value of every key, plus keys
	changes int64   // changelog records written
	sizes   []int32 // size of entry i
	epoch   uint64
	copyDir string // a store holding a restored copy of the partition
}

func (f *restoreFixture) close() {
	if f.kafka != nil {
		f.kafka.Close()
	}
}

// setup starts the broker and fills the changelog, once.
func (f *restoreFixture) setup(b *testing.B) {
	b.Helper()
	b.StopTimer()
	defer b.StartTimer()
	if f.kafka != nil {
		return
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		b.Fatal(err)
	}
	f.kafka, f.brokers = c, c.ListenAddrs()
	start := time.Now()
	f.commit(b, func(emit func(i uint64) int64) {
		for f.bytes < f.target {
			emit(f.keys)
		}
	})
	b.Logf("changelog filled: %d entries, %.0f MB of state in %s", f.keys, float64(f.bytes)/1e6, time.Since(start).Round(time.Second))
}

// writeTail commits about n bytes of changes as a new writer would: 80%
// updates of existing entries, 20% new ones. It returns the bytes and
// records written.
func (f *restoreFixture) writeTail(b *testing.B, n int64) (int64, int64) {
	b.Helper()
	var written, changes int64
	f.commit(b, func(emit func(i uint64) int64) {
		for written < n {
			i := f.keys
			if f.rng.IntN(5) > 0 {
				i = f.rng.Uint64N(f.keys)
			}
			written += emit(i)
			changes++
		}
	})
	return written, changes
}

// openLog opens a client of the fixture's broker; the caller closes it.
func (f *restoreFixture) openLog(b *testing.B, ctx context.Context) *kafkalog.Log {
	b.Helper()
	l, err := kafkalog.Open(ctx, kafkalog.Options{Brokers: f.brokers})
	if err != nil {
		b.Fatal(err)
	}
	return l
}

// commit claims the changelog and commits the entries gen emits, in
// batches, through kafkalog's Changelog.
func (f *restoreFixture) commit(b *testing.B, gen func(emit func(i uint64) int64)) {
	b.Helper()
	ctx := context.Background()
	l := f.openLog(b, ctx)
	defer l.Close()
	if _, err := l.EnsureChangelogTopic(ctx, ChangelogTopic(restoreStage), restorePartitions); err != nil {
		b.Fatal(err)
	}
	tp := eventlog.TopicPartition{Topic: ChangelogTopic(restoreStage), Partition: restorePartition}
	cl, err := l.OpenChangelog(ctx, tp, changelogWriter(restoreStage, restorePartition))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	var batch []eventlog.Change
	size := 0
	flush := func() {
		if _, err := cl.Commit(ctx, batch); err != nil {
			b.Fatal(err)
		}
		batch, size = batch[:0], 0
	}
	gen(func(i uint64) int64 {
		k, v := stateEntry(f.rng, i)
		n := len(k) + len(v)
		batch = append(batch, eventlog.Change{Key: k, Value: v})
		size += n
		if i == f.keys {
			f.keys++
			f.sizes = append(f.sizes, 0)
		}
		f.bytes += int64(n - int(f.sizes[i]))
		f.sizes[i] = int32(n)
		f.changes++
		if size >= restoreCommitBytes || len(batch) >= restoreCommitChanges {
			flush()
		}
		return int64(n)
	})
	if len(batch) > 0 {
		flush()
	}
}

// restore starts an engine over the store in dir, assigns it the
// partition and waits until it is ready; only that is timed (the caller
// has stopped the timer). With verify it then checks that the store holds
// every entry.
func (f *restoreFixture) restore(b *testing.B, dir string, verify bool) time.Duration {
	b.Helper()
	ctx := context.Background()
	l := f.openLog(b, ctx)
	defer l.Close()
	db, err := state.Open(dir, state.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	e, err := New(l, db, Options{Partitions: restorePartitions, Cluster: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	if err := e.Register(restoreOp{}); err != nil {
		b.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	f.epoch++

	b.StartTimer()
	start := time.Now()
	go func() { done <- e.Run(rctx) }()
	e.Assign(map[int32]uint64{restorePartition: f.epoch})
	for !e.Ready() {
		select {
		case err := <-done:
			b.Fatalf("engine stopped while restoring: %v", err)
		case <-time.After(time.Millisecond):
		}
		if time.Since(start) > restoreTimeout {
			b.Fatalf("partition not restored after %s", restoreTimeout)
		}
	}
	took := time.Since(start)
	b.StopTimer()

	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	if verify {
		var n uint64
		var size int64
		err := db.Namespace(namespaceName(restoreStage, restorePartition)).Scan(nil, nil, func(k, v []byte) error {
			if k[0] != 0xff { // the engine's own keys
				n++
				size += int64(len(k) + len(v))
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		if n != f.keys || size != f.bytes {
			b.Fatalf("restored %d entries, %d bytes; want %d, %d", n, size, f.keys, f.bytes)
		}
	}
	return took
}

// restoreOp is an operator whose tasks keep their state in the store
// (Restore reads nothing into memory) and change nothing: the benchmark
// times the changelog restore alone.
type restoreOp struct{}

func (restoreOp) Spec() Spec {
	return Spec{Name: restoreStage, Inputs: []Input{{Topic: restoreStage + "-in"}}}
}

func (restoreOp) NewTask(TaskContext) (Task, error) { return restoreTask{}, nil }

type restoreTask struct{}

func (restoreTask) Restore(state.Reader) error                      { return nil }
func (restoreTask) Process(*ProcessContext, *eventlog.Record) error { return nil }
func (restoreTask) Flush(state.Writer) error                        { return nil }
func (restoreTask) Committed(CommitInfo)                            {}
func (restoreTask) Close() error                                    { return nil }

// stateText is text-like filler for values: words drawn from a small
// vocabulary, long enough that values rarely repeat a stretch of it within
// one record batch (which would flatter the compression).
var stateText = func() []byte {
	words := []string{"the", "of", "and", "to", "in", "said", "minister", "market", "election", "storm",
		"shares", "rose", "fell", "percent", "government", "talks", "company", "report", "police", "court",
		"league", "season", "climate", "energy", "prices", "inflation", "bank", "rates", "trade", "deal",
		"world", "business", "tech", "science", "sports", "health", "city", "council", "vote", "leader",
		"after", "before", "during", "against", "over", "new", "first", "last", "year", "week"}
	rng := rand.New(rand.NewPCG(3, 4))
	out := make([]byte, 0, 16<<20)
	for len(out) < 16<<20 {
		out = append(out, words[rng.IntN(len(words))]...)
		out = append(out, ' ')
	}
	return out
}()

func text(rng *rand.Rand, dst []byte, n int) []byte {
	off := rng.IntN(len(stateText) - n)
	return append(dst, stateText[off:off+n]...)
}

func randomBytes(rng *rand.Rand, dst []byte, n int) []byte {
	for ; n >= 8; n -= 8 {
		dst = binary.LittleEndian.AppendUint64(dst, rng.Uint64())
	}
	for ; n > 0; n-- {
		dst = append(dst, byte(rng.Uint32()))
	}
	return dst
}

// stateEntry returns entry i of the benchmark's state with a new value.
// The key depends on i only; its kind (and so the sizes) on i mod 20.
func stateEntry(rng *rand.Rand, i uint64) (key, value []byte) {
	switch k := i % 20; {
	case k <= 10: // trending cell: window, bucket, category, article → count
		key = fmt.Appendf(nil, "t/%d/%03d/%s/art-%012x", i%3, i%96, []string{"world", "business", "tech", "science", "sports"}[i%5], i)
		value = binary.BigEndian.AppendUint64(nil, rng.Uint64N(5000))
	case k <= 13: // article version: version and text hash
		key = fmt.Appendf(nil, "v/%016x", i)
		value = randomBytes(rng, binary.BigEndian.AppendUint64(nil, rng.Uint64N(4)+1), 16)
	case k <= 16: // reader profile: topic weights and history
		key = fmt.Appendf(nil, "p/user-%012d", i)
		value = text(rng, nil, 200+rng.IntN(700))
	case k <= 18: // story article: SimHash, MinHash signature, title
		key = fmt.Appendf(nil, "a/%016x", i)
		value = text(rng, randomBytes(rng, nil, 8+512), 100+rng.IntN(200))
	default: // story: aggregates, centroid terms, sources
		key = fmt.Appendf(nil, "s/%016x", i)
		value = text(rng, nil, 1000+rng.IntN(3000))
	}
	return key, value
}
