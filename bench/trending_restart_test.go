package bench

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/newsflow/newsflow/internal/testutil"
)

// Shape of BenchmarkTrendingRestart.
const (
	// trendingRestartShares is the default stream: 10,000,000 shares over
	// 5,000,000 distinct articles. NEWSFLOW_BENCH_TRENDING_SHARES=N runs
	// N shares over N/2 articles instead (1000000: about 15 s in all, the
	// full size about 80 s on two cores).
	trendingRestartShares = 10_000_000
	// trendingRestartSpan is the event-time span of the stream, ending at
	// the start of ingestion: as much of the 24h window as HTTP ingestion
	// accepts (it refuses shares more than 23h45m old).
	trendingRestartSpan  = 23*time.Hour + 40*time.Minute
	trendingRestartRuns  = 3 // restarts per way of stopping
	trendingRestartBatch = 2000
)

// manyArticles is the stream of BenchmarkTrendingRestart: n shares whose
// event times rise evenly over span from start; distinct of them (evenly
// spread) introduce a new article each, the others go to Zipf(1.1)-popular
// articles; one category per article; event ids unique. With distinct =
// n/2 every other share is a new article; with distinct = n, every share.
type manyArticles struct {
	n        int
	distinct int
	start    int64 // ms
	span     int64 // ms
	batch    int   // lines a request; 0: trendingRestartBatch
}

// ndjson appends shares [from, to) as NDJSON lines; rng draws the popular
// articles and the users.
func (m manyArticles) ndjson(dst []byte, from, to int, rng *rand.Rand, zipf *rand.Zipf) []byte {
	nArts := uint64(max(m.distinct, 1))
	for i := from; i < to; i++ {
		a := uint64(i) * nArts / uint64(m.n)
		if uint64(i)*nArts%uint64(m.n) >= nArts {
			a = (zipf.Uint64()*7919 + 13) % nArts
		}
		dst = append(dst, `{"event_id":"tr-`...)
		dst = strconv.AppendInt(dst, int64(i), 36)
		dst = append(dst, `","article_id":"art-`...)
		dst = strconv.AppendUint(dst, a, 36)
		dst = append(dst, `","user_id":"u-`...)
		dst = strconv.AppendInt(dst, int64(rng.IntN(2_000_000)), 10)
		dst = append(dst, `","share_type":"`...)
		dst = append(dst, shareTypes[rng.IntN(len(shareTypes))]...)
		dst = append(dst, `","category":"`...)
		dst = append(dst, categories[a%uint64(len(categories))]...)
		dst = append(dst, `","timestamp":`...)
		dst = strconv.AppendInt(dst, m.start+int64(i)*m.span/int64(m.n), 10)
		dst = append(dst, "}\n"...)
	}
	return dst
}

// ingest posts the stream to the node's batch endpoint from workers
// goroutines, in order of batch number.
func (m manyArticles) ingest(ctx context.Context, n *nodeProc, workers int) error {
	size := cmp.Or(m.batch, trendingRestartBatch)
	batches := (m.n + size - 1) / size
	return ingestBatches(ctx, n.URL("/api/v1/events/share/batch"), 5*time.Minute, workers, batches, func(w int) func([]byte, int) []byte {
		rng := rand.New(rand.NewPCG(uint64(m.n), uint64(w)))
		zipf := rand.NewZipf(rng, 1.1, 1, uint64(max(m.distinct, 2)-1))
		return func(dst []byte, i int) []byte {
			return m.ndjson(dst, i*size, min((i+1)*size, m.n), rng, zipf)
		}
	})
}

// BenchmarkTrendingRestart measures a node whose trending state is large,
// with each counter (trending.counter: exact and cms): the real binary
// (default configuration, embedded log) is loaded over HTTP with
// 10,000,000 shares over 5,000,000 and over 10,000,000 distinct articles
// spread over 23h40m of event time (so that every share still counts in
// the 24h window), then stopped and started again three times with
// SIGTERM (a clean stop) and three times with SIGKILL (a crash).
// NEWSFLOW_BENCH_TRENDING_SHARES=N loads N shares instead (over N/2 and N
// articles), for quick iterations; NEWSFLOW_BENCH_TRENDING_COUNTER=exact
// or cms runs one counter only. The sub-benchmarks' names say which.
//
// Reported, medians over the restarts of each kind: term-ready-s and
// kill-ready-s, from starting the process until /health/ready answers 200
// (target <= 5 s); term-ready-cpu-s and kill-ready-cpu-s, the CPU time
// (user and system) the process used until then, which depends less on
// what else runs on the machine; term-peak-rss-MB and kill-peak-rss-MB,
// the restarted process's VmHWM once it is ready and has caught up. load-peak-rss-MB is
// the loading process's VmHWM, load-events/s its rate from the first
// request to everything committed, load-cpu-us/event the node's CPU time
// (user and system) per share over the same span (which depends less on
// what else runs on the machine), state-MB and log-MB the size of
// data/state and data/log on disk after the last restart. Every restart
// must answer the same 24h top 100 as before it. With cms, three more
// SIGTERM restarts run with small Pebble caches (smallCaches):
// small-caches-peak-rss-MB.
//
// One op is the whole run (load and six restarts); run it with
// -benchtime 1x. NEWSFLOW_BENCH_TRENDING_DATA=DIR keeps each node's data
// directory under DIR (one per sub-benchmark), and a later run with the
// same DIR restarts the node it holds without loading it again (for
// iterating on the restart path; the load figures are then not reported).
func BenchmarkTrendingRestart(b *testing.B) {
	if testing.Short() {
		b.Skip("loads 10,000,000 shares into a node")
	}
	shares := trendingShares(b)
	counters := []string{"exact", "cms"}
	if v := os.Getenv("NEWSFLOW_BENCH_TRENDING_COUNTER"); v != "" {
		if v != "exact" && v != "cms" {
			b.Fatalf("NEWSFLOW_BENCH_TRENDING_COUNTER=%q: want exact or cms", v)
		}
		counters = []string{v}
	}
	for _, distinct := range []int{shares / 2, shares} {
		for _, counter := range counters {
			name := fmt.Sprintf("shares=%s/articles=%s/counter=%s", countName(shares), countName(distinct), counter)
			b.Run(name, func(b *testing.B) {
				for b.Loop() {
					benchTrendingRestart(b, manyArticles{n: shares, distinct: distinct}, counter)
				}
			})
		}
	}
}

// trendingShares returns the size of the trending benchmarks' stream:
// NEWSFLOW_BENCH_TRENDING_SHARES, or 10,000,000.
func trendingShares(b *testing.B) int {
	v := os.Getenv("NEWSFLOW_BENCH_TRENDING_SHARES")
	if v == "" {
		return trendingRestartShares
	}
	shares, err := strconv.Atoi(v)
	if err != nil || shares < 2 {
		b.Fatalf("NEWSFLOW_BENCH_TRENDING_SHARES=%q: want a number of shares >= 2", v)
	}
	return shares
}

// countName writes 10000000 as 10M and 1500000 as 1500k.
func countName(n int) string {
	switch {
	case n%1_000_000 == 0:
		return strconv.Itoa(n/1_000_000) + "M"
	case n%1000 == 0:
		return strconv.Itoa(n/1000) + "k"
	}
	return strconv.Itoa(n)
}

func benchTrendingRestart(b *testing.B, m manyArticles, counter string) {
	shares := m.n
	keep := os.Getenv("NEWSFLOW_BENCH_TRENDING_DATA")
	if keep != "" {
		keep = filepath.Join(keep, fmt.Sprintf("%s-%s-%s", countName(m.n), countName(m.distinct), counter))
	}
	_, err := os.Stat(keep)
	reuse := keep != "" && err == nil
	n := startNodeIn(b, keep, "NEWSFLOW_TRENDING_COUNTER="+counter)
	n.WaitReady(10 * time.Minute)
	dataDir := n.Args[slices.Index(n.Args, "--data")+1]
	var load loadFigures
	if !reuse {
		load = m.load(n, trendingRestartSpan)
	} else if p := n.WaitCaughtUp(5 * time.Minute); p.Applied() != int64(shares) {
		n.Fatalf("%s holds %d shares, want %d", keep, p.Applied(), shares)
	}
	top := n.top24h()

	restart := func(sig syscall.Signal) (ready, cpu, rss float64) {
		n.Stop(sig)
		n.Start()
		d := n.WaitReady(5 * time.Minute)
		cpu = n.CPUSeconds()
		if p := n.WaitCaughtUp(5 * time.Minute); p.Applied() != int64(shares) {
			n.Fatalf("after restart, trending committed %d shares, want %d", p.Applied(), shares)
		}
		if got := n.top24h(); !bytes.Equal(got, top) {
			n.Fatalf("24h top 100 after restart differs:\n%s\nwant\n%s", got, top)
		}
		return d.Seconds(), cpu, n.PeakRSSMB()
	}
	var termReady, termCPU, termRSS, killReady, killCPU, killRSS []float64
	for range trendingRestartRuns {
		r, c, m := restart(syscall.SIGTERM)
		termReady, termCPU, termRSS = append(termReady, r), append(termCPU, c), append(termRSS, m)
		b.Logf("SIGTERM restart: ready %.2fs (%.2fs CPU), peak RSS %.0f MB", r, c, m)
	}
	for range trendingRestartRuns {
		r, c, m := restart(syscall.SIGKILL)
		killReady, killCPU, killRSS = append(killReady, r), append(killCPU, c), append(killRSS, m)
		b.Logf("SIGKILL restart: ready %.2fs (%.2fs CPU), peak RSS %.0f MB", r, c, m)
	}
	if counter == "cms" {
		// The same node with small Pebble caches: what the node itself
		// holds, beyond the block cache that the restart's reads fill.
		n.Env = append(n.Env, smallCaches...)
		var small []float64
		for range trendingRestartRuns {
			_, _, m := restart(syscall.SIGTERM)
			small = append(small, m)
			b.Logf("SIGTERM restart with small caches: peak RSS %.0f MB", m)
		}
		b.ReportMetric(median(small), "small-caches-peak-rss-MB")
	}
	b.ReportMetric(median(termReady), "term-ready-s")
	b.ReportMetric(median(killReady), "kill-ready-s")
	b.ReportMetric(median(termCPU), "term-ready-cpu-s")
	b.ReportMetric(median(killCPU), "kill-ready-cpu-s")
	b.ReportMetric(median(termRSS), "term-peak-rss-MB")
	b.ReportMetric(median(killRSS), "kill-peak-rss-MB")
	if !reuse {
		b.ReportMetric(load.rss, "load-peak-rss-MB")
		b.ReportMetric(load.rate, "load-events/s")
		b.ReportMetric(load.cpu, "load-cpu-us/event")
	}
	b.ReportMetric(float64(dirBytes(b, filepath.Join(dataDir, "state")))/1e6, "state-MB")
	b.ReportMetric(float64(dirBytes(b, filepath.Join(dataDir, "log")))/1e6, "log-MB")
	n.Kill()
}

// loadFigures describe one load of a node: shares per second from the
// first request to everything committed, the node's CPU time (user and
// system) per share in µs over the same span, and its peak RSS in MB.
type loadFigures struct{ rate, cpu, rss float64 }

// load posts the stream to n over HTTP with event times spread evenly over
// span and ending now, waits until trending has committed every share,
// and returns the figures of the load.
func (m manyArticles) load(n *nodeProc, span time.Duration) loadFigures {
	n.b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), restartProcessTimeout)
	defer cancel()
	m.start, m.span = time.Now().Add(-span).UnixMilli(), span.Milliseconds()
	start, cpu0 := time.Now(), n.CPUSeconds()
	if err := m.ingest(ctx, n, restartIngestWorkers); err != nil {
		n.Fatalf("ingest: %v", err)
	}
	if p := n.WaitCaughtUp(restartProcessTimeout); p.Applied() != int64(m.n) {
		n.Fatalf("trending committed %d shares, want %d", p.Applied(), m.n)
	}
	return loadFigures{
		rate: float64(m.n) / time.Since(start).Seconds(),
		cpu:  (n.CPUSeconds() - cpu0) / float64(m.n) * 1e6,
		rss:  n.PeakRSSMB(),
	}
}

// smallCaches is the environment of a node with a 16 MiB state block cache
// and 8 MiB memtables (state and log), as README's memory section gives.
var smallCaches = []string{"NEWSFLOW_STATE_CACHE_SIZE=16777216", "NEWSFLOW_STATE_MEMTABLE_SIZE=8388608", "NEWSFLOW_LOG_MEMTABLE_SIZE=8388608"}

// startNodeIn is startNode with the data directory dir (a temporary one
// if dir is empty) and env added to its environment.
func startNodeIn(b *testing.B, dir string, env ...string) *nodeProc {
	b.Helper()
	n := newNode(b)
	if dir != "" {
		n.Args[slices.Index(n.Args, "--data")+1] = dir
	}
	n.Env = env
	n.Start()
	return n
}

// top24h returns the node's global 24h top 100 as JSON, without as_of,
// once the node has caught up: two answers a snapshot interval (200ms)
// apart agree.
func (n *nodeProc) top24h() []byte {
	n.b.Helper()
	var prev, cur []byte
	testutil.EventuallyEvery(n.b, 30*time.Second, 300*time.Millisecond, func() error {
		if prev, cur = cur, n.top24hOnce(); prev == nil || !bytes.Equal(cur, prev) {
			return errors.New("24h top 100 still changing")
		}
		return nil
	})
	return cur
}

func (n *nodeProc) top24hOnce() []byte {
	resp, err := http.Get(n.URL("/api/v1/trending?window=24h&k=100"))
	if err != nil {
		n.Fatalf("trending: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		n.Fatalf("trending: %v %d %s", err, resp.StatusCode, body)
	}
	if i := bytes.Index(body, []byte(`"items":`)); i >= 0 {
		if j := bytes.Index(body[i:], []byte("]")); j >= 0 {
			return body[i : i+j+1]
		}
	}
	n.Fatalf("trending: no items in %s", body)
	return nil
}

// median returns the median of xs (the mean of the middle two for an even
// count).
func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// dirBytes returns the size of the regular files under dir.
func dirBytes(b *testing.B, dir string) int64 {
	b.Helper()
	var total int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			info, err := d.Info()
			if err != nil {
				return err
			}
			total += info.Size()
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return total
}
