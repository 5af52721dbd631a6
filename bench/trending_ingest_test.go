package bench

import (
	"fmt"
	"os"
	"slices"
	"testing"
	"time"
)

// Shape of BenchmarkTrendingIngest.
const (
	// trendingIngestRate is the event-time rate of its stream: the
	// design's 100,000 shares a second.
	trendingIngestRate  = 100_000
	trendingIngestPairs = 3
)

// BenchmarkTrendingIngest measures how fast a node ingests shares with
// each counter (trending.counter: exact and cms), at the design's rate: the
// real binary (default configuration, embedded log) is loaded over HTTP
// with 10,000,000 shares over 5,000,000 distinct articles (the stream of
// BenchmarkTrendingRestart) whose event times rise
// at 100,000 shares a second, ending at the start of ingestion.
// NEWSFLOW_BENCH_TRENDING_SHARES=N loads N shares instead. The stream over
// as many articles as shares runs only with
// NEWSFLOW_BENCH_TRENDING_INGEST_ALL=1: exact's counts then outgrow its
// memory budget and one load takes about 16 minutes on two cores (10.5k
// shares a second, 3.7 GB).
//
// The counters run in three pairs on fresh nodes, one after the other,
// alternating which goes first, so that both see the same machine; each
// pair gives a ratio. Reported: exact-events/s and cms-events/s, the
// median load rates (from the first request to everything committed);
// exact-cpu-us/event and cms-cpu-us/event, the median CPU time (user and
// system) of the node per share, which depends less on what else runs on
// the machine; cms/exact-events and cms/exact-cpu, the medians of the
// pairs' ratios; exact-peak-rss-MB and cms-peak-rss-MB, the median peak
// RSS of the loaded nodes.
//
// BenchmarkTrendingRestart's stream spreads the same shares over 24h, 14
// a second per partition, so that the 1m window moves on a bucket every
// 14 shares; that is its own measure of the load, slower for cms, whose
// every bucket that leaves a window costs a pass over its counters and
// the candidates that read them.
func BenchmarkTrendingIngest(b *testing.B) {
	if testing.Short() {
		b.Skip("loads 10,000,000 shares into six nodes")
	}
	shares := trendingShares(b)
	span := time.Duration(shares) * time.Second / trendingIngestRate
	distincts := []int{shares / 2}
	if os.Getenv("NEWSFLOW_BENCH_TRENDING_INGEST_ALL") == "1" {
		// exact over 10M articles: about 16 minutes a load here.
		distincts = append(distincts, shares)
	}
	for _, distinct := range distincts {
		m := manyArticles{n: shares, distinct: distinct}
		b.Run(fmt.Sprintf("shares=%s/articles=%s", countName(shares), countName(distinct)), func(b *testing.B) {
			for b.Loop() {
				benchTrendingIngest(b, m, span)
			}
		})
	}
}

func benchTrendingIngest(b *testing.B, m manyArticles, span time.Duration) {
	loadWith := func(counter string) loadFigures {
		n := startNodeIn(b, "", "NEWSFLOW_TRENDING_COUNTER="+counter)
		n.WaitReady(time.Minute)
		f := m.load(n, span)
		n.Kill()
		// Six loaded nodes would hold gigabytes until the benchmark ends.
		if err := os.RemoveAll(n.Args[slices.Index(n.Args, "--data")+1]); err != nil {
			b.Fatal(err)
		}
		b.Logf("%s: %.0f shares/s, %.2f µs CPU a share, peak RSS %.0f MB", counter, f.rate, f.cpu, f.rss)
		return f
	}
	var exact, cms []loadFigures
	var rateRatio, cpuRatio []float64
	for i := range trendingIngestPairs {
		var e, c loadFigures
		if i%2 == 0 {
			e = loadWith("exact")
			c = loadWith("cms")
		} else {
			c = loadWith("cms")
			e = loadWith("exact")
		}
		exact, cms = append(exact, e), append(cms, c)
		rateRatio, cpuRatio = append(rateRatio, c.rate/e.rate), append(cpuRatio, c.cpu/e.cpu)
	}
	field := func(fs []loadFigures, get func(loadFigures) float64) float64 {
		xs := make([]float64, len(fs))
		for i, f := range fs {
			xs[i] = get(f)
		}
		return median(xs)
	}
	rate := func(f loadFigures) float64 { return f.rate }
	cpu := func(f loadFigures) float64 { return f.cpu }
	rss := func(f loadFigures) float64 { return f.rss }
	b.ReportMetric(field(exact, rate), "exact-events/s")
	b.ReportMetric(field(cms, rate), "cms-events/s")
	b.ReportMetric(field(exact, cpu), "exact-cpu-us/event")
	b.ReportMetric(field(cms, cpu), "cms-cpu-us/event")
	b.ReportMetric(median(rateRatio), "cms/exact-events")
	b.ReportMetric(median(cpuRatio), "cms/exact-cpu")
	b.ReportMetric(field(exact, rss), "exact-peak-rss-MB")
	b.ReportMetric(field(cms, rss), "cms-peak-rss-MB")
}
