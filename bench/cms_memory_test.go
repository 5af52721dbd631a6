package bench

import (
	"os"
	"slices"
	"testing"
	"time"

	"github.com/newsflow/newsflow/cmd/newsflow/nodeproc"
)

// BenchmarkCMSIngestMemory measures the peak RSS of a whole cms node
// (trending.counter: cms, otherwise the default configuration, with its
// memory_limit) while it ingests:
// the real binary, embedded log, loaded over HTTP by 4 posters with
//
//   - 10,000,000 shares over 5,000,000 and over 10,000,000 distinct
//     articles in 2,000-line batches, event times rising at the design's
//     100,000 shares a second (the stream of BenchmarkTrendingIngest);
//   - 1,000,000 shares over 500,000 articles in 100,000-line batches
//     (12 MB bodies).
//
// NEWSFLOW_BENCH_TRENDING_SHARES=N loads N shares instead of 10,000,000
// (and N/10 in the large batches). Each load runs on a fresh node, once
// an op. Reported per load: peak-rss-MB (VmHWM when everything is
// committed), events/s (from the first request to everything committed)
// and cpu-us/event (the node's CPU time a share). With
// NEWSFLOW_BENCH_BASELINE_BINARY naming another release's binary, each
// load runs first on a node of that binary (on its own defaults), and
// base-* and the ratios (this one over the baseline) are reported too.
// NEWSFLOW_BENCH_CMS_MEMORY_LIMIT=BYTES runs this binary's nodes with that
// memory_limit instead of the default.
func BenchmarkCMSIngestMemory(b *testing.B) {
	if testing.Short() {
		b.Skip("loads 21,000,000 shares into three nodes")
	}
	shares := trendingShares(b)
	loads := []struct {
		name string
		m    manyArticles
	}{
		{"shares=" + countName(shares) + "/articles=" + countName(shares/2), manyArticles{n: shares, distinct: shares / 2}},
		{"shares=" + countName(shares) + "/articles=" + countName(shares), manyArticles{n: shares, distinct: shares}},
		{"shares=" + countName(shares/10) + "/articles=" + countName(shares/20) + "/batch=" + countName(100_000),
			manyArticles{n: shares / 10, distinct: shares / 20, batch: 100_000}},
	}
	baseline := os.Getenv("NEWSFLOW_BENCH_BASELINE_BINARY")
	load := func(b *testing.B, m manyArticles, bin string) loadFigures {
		env := append(slices.Clip(benchEnv), "NEWSFLOW_TRENDING_COUNTER=cms")
		if v := os.Getenv("NEWSFLOW_BENCH_CMS_MEMORY_LIMIT"); v != "" && bin == "" {
			env = append(env, "NEWSFLOW_MEMORY_LIMIT="+v)
		}
		n := &nodeProc{Proc: nodeproc.New(b, nodeproc.Options{Env: env, Binary: bin}), b: b}
		n.Start()
		n.WaitReady(time.Minute)
		f := m.load(n, time.Duration(m.n)*time.Second/trendingIngestRate)
		n.Kill()
		if err := os.RemoveAll(n.DataDir); err != nil {
			b.Fatal(err)
		}
		return f
	}
	for _, l := range loads {
		b.Run(l.name, func(b *testing.B) {
			var f, base loadFigures
			for b.Loop() {
				if baseline != "" {
					base = load(b, l.m, baseline)
				}
				f = load(b, l.m, "")
			}
			b.ReportMetric(f.rss, "peak-rss-MB")
			b.ReportMetric(f.rate, "events/s")
			b.ReportMetric(f.cpu, "cpu-us/event")
			b.Logf("%.0f shares/s, %.2f µs CPU a share, peak RSS %.0f MB", f.rate, f.cpu, f.rss)
			if baseline != "" {
				b.ReportMetric(base.rss, "base-peak-rss-MB")
				b.ReportMetric(base.rate, "base-events/s")
				b.ReportMetric(base.cpu, "base-cpu-us/event")
				b.ReportMetric(f.rss/base.rss, "rss-ratio")
				b.ReportMetric(f.rate/base.rate, "events-ratio")
				b.Logf("baseline %s: %.0f shares/s, %.2f µs CPU a share, peak RSS %.0f MB", baseline, base.rate, base.cpu, base.rss)
			}
		})
	}
}
