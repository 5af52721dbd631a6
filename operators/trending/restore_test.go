package trending

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/state"
	"golang.org/x/sync/errgroup"
)

// manyArticles describes the share stream of the restart benchmarks: n
// shares whose event times rise evenly over span, about n/2 distinct
// articles (every other share introduces a new article; the rest go to
// Zipf(1.1)-popular ones), a category per article, and a unique event id
// per share. Shares are split over parts partitions by murmur2 of the
// article id, as the engine routes them.
type manyArticles struct {
	n     int
	span  int64 // ms
	t0    int64
	parts int32
}

// records calls fn with each share record of partition p, in time order.
func (m manyArticles) records(p int32, fn func(rec *eventlog.Record)) {
	nArts := max(m.n/2, 1)
	rng := rand.New(rand.NewPCG(uint64(m.n), 5))
	zipf := rand.NewZipf(rng, 1.1, 1, uint64(nArts-1))
	var buf, key []byte
	for i := range m.n {
		a := i / 2
		if i%2 == 1 {
			a = int((zipf.Uint64()*7919 + 13) % uint64(nArts))
		}
		key = append(key[:0], "art-"...)
		key = strconv.AppendInt(key, int64(a), 36)
		if eventlog.PartitionFor(key, m.parts) != p {
			continue
		}
		ts := m.t0 + int64(i)*m.span/int64(m.n)
		buf = append(buf[:0], `{"event_id":"e`...)
		buf = strconv.AppendInt(buf, int64(i), 36)
		buf = append(buf, `","article_id":"`...)
		buf = append(buf, key...)
		buf = append(buf, `","user_id":"u`...)
		buf = strconv.AppendInt(buf, int64(i), 36)
		buf = append(buf, `","category":"`...)
		buf = append(buf, benchCategories[a%len(benchCategories)]...)
		buf = append(buf, `","timestamp":`...)
		buf = strconv.AppendInt(buf, ts, 10)
		buf = append(buf, '}')
		fn(&eventlog.Record{Topic: schema.TopicShares, Partition: p, Key: key, Value: buf, Timestamp: ts})
	}
}

var benchCategories = []string{"world", "business", "tech", "science", "sports", "culture", "politics", "health"}

// restoreShares is the default size of BenchmarkRestore: the stream of the
// restart target (10,000,000 shares over 5,000,000 articles in 24h, 8
// partitions). NEWSFLOW_BENCH_RESTORE_SHARES=N sets another.
const restoreShares = 10_000_000

// buildRestoreState fills one namespace per partition of db with the
// committed state of m, through the operator's tasks (Process, then Flush
// and commit every 20,000 records, as the engine does).
func buildRestoreState(tb testing.TB, db *state.DB, m manyArticles) {
	o, err := New(OperatorOptions{}, m.parts, nil)
	if err != nil {
		tb.Fatal(err)
	}
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for p := range m.parts {
		g.Go(func() error {
			ns := db.Namespace(fmt.Sprintf("trending/%d", p))
			tk, err := o.NewTask(engine.TaskContext{Partition: p, Partitions: m.parts})
			if err != nil {
				return err
			}
			defer tk.Close()
			if err := tk.Restore(ns); err != nil {
				return err
			}
			commit := func() error {
				b := ns.NewBatch()
				if err := tk.Flush(b); err != nil {
					b.Discard()
					return err
				}
				return b.Commit()
			}
			var pc engine.ProcessContext
			pending := 0
			m.records(p, func(rec *eventlog.Record) {
				if err == nil {
					err = tk.Process(&pc, rec)
				}
				if pending++; pending == 20_000 && err == nil {
					err, pending = commit(), 0
				}
			})
			if err != nil {
				return err
			}
			return commit()
		})
	}
	if err := g.Wait(); err != nil {
		tb.Fatal(err)
	}
}

// cpuTime returns the CPU time (user and system) the process has used.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRestore measures the trending operator's restart: every
// partition's task restored from its committed Pebble state at once, one
// goroutine each, as the engine restores them (Counts.Load, the event id
// set, the article topics, the first top-K snapshot). The state is that
// of 10,000,000 shares over 5,000,000 articles in 24h in 8 partitions
// (NEWSFLOW_BENCH_RESTORE_SHARES=N for another size), written once through
// the tasks before the timed part.
//
// restore-s is the time until every task has restored, restore-cpu-s the
// process's CPU time meanwhile (user and system, GC included);
// MB/partition the operator's MemoryBytes (counts and event ids) averaged
// over partitions after it, counts-MB/partition the counts' alone
// (Counts.MemoryBytes), heap-MB the Go
// heap in use after restore (runtime.MemStats.HeapAlloc after a GC),
// state-MB the state's size on disk.
func BenchmarkRestore(b *testing.B) {
	if testing.Short() {
		b.Skip("builds the state of 10,000,000 shares first")
	}
	n := restoreShares
	if v := os.Getenv("NEWSFLOW_BENCH_RESTORE_SHARES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatal(err)
		}
	}
	m := manyArticles{n: n, span: (24 * time.Hour).Milliseconds(), t0: 1_780_000_000_000, parts: 8}
	db, err := state.Open(b.TempDir(), state.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	buildRestoreState(b, db, m)
	if err := db.Pebble().Flush(); err != nil {
		b.Fatal(err)
	}
	diskBytes := db.Pebble().Metrics().DiskSpaceUsage()
	var o *Operator
	var tasks []engine.Task
	var restored, cpu time.Duration
	runs := 0
	for b.Loop() {
		for _, tk := range tasks {
			tk.Close()
		}
		o, tasks = nil, nil
		runtime.GC()
		if o, err = New(OperatorOptions{}, m.parts, nil); err != nil {
			b.Fatal(err)
		}
		t0, c0 := time.Now(), cpuTime(b)
		var mu sync.Mutex
		var g errgroup.Group
		for p := range m.parts {
			g.Go(func() error {
				tk, err := o.NewTask(engine.TaskContext{Partition: p, Partitions: m.parts})
				if err != nil {
					return err
				}
				mu.Lock()
				tasks = append(tasks, tk)
				mu.Unlock()
				return tk.Restore(db.Namespace(fmt.Sprintf("trending/%d", p)))
			})
		}
		if err := g.Wait(); err != nil {
			b.Fatal(err)
		}
		restored += time.Since(t0)
		cpu += cpuTime(b) - c0
		runs++
	}
	defer func() {
		for _, tk := range tasks {
			tk.Close()
		}
	}()
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	total := 0
	for _, x := range o.MemoryBytes() {
		total += x
	}
	var counts int64
	for _, p := range o.ExactMemory().Partitions {
		counts += p.Bytes
	}
	b.ReportMetric(restored.Seconds()/float64(runs), "restore-s")
	b.ReportMetric(cpu.Seconds()/float64(runs), "restore-cpu-s")
	b.ReportMetric(float64(total)/float64(m.parts)/1e6, "MB/partition")
	b.ReportMetric(float64(counts)/float64(m.parts)/1e6, "counts-MB/partition")
	b.ReportMetric(float64(ms.HeapAlloc)/1e6, "heap-MB")
	b.ReportMetric(float64(diskBytes)/1e6, "state-MB")
}
