package bench

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/newsflow/newsflow/crawl"
	"github.com/newsflow/newsflow/demo/feedfarm"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/engine/eventlog/embedded"
	"github.com/newsflow/newsflow/internal/fetch"
	"github.com/newsflow/newsflow/internal/meta"
	"github.com/newsflow/newsflow/internal/polite"
	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/internal/testutil"
	"github.com/newsflow/newsflow/state"
	"github.com/prometheus/client_golang/prometheus"
)

// crawlBenchSources is how many sources BenchmarkCrawl crawls unless
// NEWSFLOW_BENCH_SOURCES says otherwise. NEWSFLOW_BENCH_FULLTEXT=1 makes
// the feeds carry one line per item, so that the crawler fetches the pages
// of new items for their full text (at most 10 per crawl); pages/fetch
// reports how many it fetched.
const crawlBenchSources = 10_000

// BenchmarkCrawl measures crawl throughput: sources on an in-process
// feedfarm (generated RSS feeds /gen/N.xml of 50 items, about 25 KB each,
// gzip on the wire) crawled by crawl.Crawler.Run as production runs it,
// appending to an embedded log (FsyncNever) with seen sets and sources in a
// state DB, all in b.TempDir(). 10,000 sources by default;
// NEWSFLOW_BENCH_SOURCES=N overrides it for quick runs.
//
// Every source is on the same host (the farm's loopback listener), so the
// host limiter is opened wide (HostRate +Inf, HostConcurrency and
// GlobalConcurrency 64) and robots.txt is ignored; the farm serves from the
// same process, so its CPU (feed generation, sha256 ETag, gzip) is counted
// in cpu-ms/fetch too.
//
// Two phases, each a sub-benchmark whose op is one crawl of one source:
//
//   - first: Run starts with every source due; each crawl fetches (200),
//     parses, and appends 50 new articles.
//   - advance: after farm.Advance() every feed has one new item and a new
//     ETag, so each crawl fetches and parses the whole feed again and
//     appends 1 article. The crawler's clock (Options.Now) jumps forward
//     so that every source is due, and Kick wakes Run.
//
// A phase ends when the crawler has counted one ok crawl per source (in
// newsflow_crawl_fetches_total); every source must then show that crawl
// with the expected number of new articles (or, if Run crawled it again, a
// not_modified one: see dup-crawls), no crawl may have failed, and the log
// must have grown by exactly sources × new articles records.
//
// Metrics: fetches/s (fetch+parse+append per second), articles/s appended,
// cpu-ms/fetch (getrusage user+sys of the whole process over the phase, per
// fetch), lag-mean-s and lag-max-s (how long after the phase started the
// crawls started, from the sources' LastCrawl: the time a due source waits
// for a worker), conns/fetch (TCP connections the farm accepted per
// fetch), wire-KB/fetch, alloc-KB/fetch (heap allocated per fetch, farm
// included), dup-crawls (sources Run crawled a second time within the
// phase, which it should not), and peak-rss-MB (VmHWM, reset at the start
// of each phase where the kernel allows). ns/op is elapsed time per source.
func BenchmarkCrawl(b *testing.B) {
	n := testutil.EnvInt(b, "NEWSFLOW_BENCH_SOURCES", crawlBenchSources)
	b.Run(fmt.Sprintf("sources=%d", n), func(b *testing.B) {
		var env *crawlEnv
		defer func() {
			if env != nil {
				env.close(b)
			}
		}()
		outer := b
		ok := b.Run("phase=first", func(b *testing.B) {
			var runs []crawlPhase
			for b.Loop() {
				b.StopTimer()
				if env != nil {
					env.close(b)
				}
				env = newCrawlEnv(b, outer.TempDir(), n)
				runs = append(runs, env.phase(b, true, 50))
				b.StartTimer() // b.Loop wants it running
			}
			reportCrawl(b, runs)
		})
		b.Run("phase=advance", func(b *testing.B) {
			if !ok || env == nil {
				skip(b, "the first phase failed")
			}
			var runs []crawlPhase
			for b.Loop() {
				b.StopTimer()
				env.farm.Advance()
				runs = append(runs, env.phase(b, false, 1))
				b.StartTimer()
			}
			reportCrawl(b, runs)
		})
	})
}

// crawlEnv is a crawler over n farm sources, and what it needs.
type crawlEnv struct {
	n        int
	fullText bool // one-line feeds whose items' pages are fetched
	dir      string
	farm     *feedfarm.Farm
	srv      *httptest.Server
	conns    atomic.Int64 // connections the farm accepted
	log      *embedded.Log
	db       *state.DB
	sources  *crawl.Sources
	c        *crawl.Crawler
	reg      *prometheus.Registry
	offset   atomic.Int64 // of the crawler's clock from time.Now, in ns
	cancel   context.CancelFunc
	done     chan error // Run's result, once started
}

func (e *crawlEnv) now() time.Time { return time.Now().Add(time.Duration(e.offset.Load())) }

func newCrawlEnv(b *testing.B, dir string, n int) *crawlEnv {
	b.Helper()
	e := &crawlEnv{n: n, dir: dir, fullText: os.Getenv("NEWSFLOW_BENCH_FULLTEXT") != "", reg: prometheus.NewRegistry()}
	e.farm = feedfarm.New(feedfarm.Options{Items: 50, OneLine: e.fullText})
	e.srv = httptest.NewUnstartedServer(e.farm)
	e.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			e.conns.Add(1)
		}
	}
	e.srv.Start()
	var err error
	if e.log, err = embedded.Open(embedded.Options{Dir: filepath.Join(dir, "log"), Fsync: embedded.FsyncNever}); err != nil {
		b.Fatal(err)
	}
	if e.db, err = state.Open(filepath.Join(dir, "state"), state.Options{}); err != nil {
		b.Fatal(err)
	}
	e.sources = crawl.NewSources(meta.NewLocal(e.db), nil)
	opts := crawl.Options{
		Fetch:        fetch.Options{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, Timeout: 30 * time.Second},
		Limiter:      polite.LimiterOptions{HostRate: math.Inf(1), HostConcurrency: 64, GlobalConcurrency: 64},
		IgnoreRobots: true,
		Registerer:   e.reg,
		Now:          e.now,
	}
	if e.c, err = crawl.New(e.sources, e.log, e.db, opts); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for i := range n {
		if _, err := e.sources.Add(ctx, crawl.Source{FeedURL: fmt.Sprintf("%s/gen/%d.xml", e.srv.URL, i)}); err != nil {
			b.Fatal(err)
		}
	}
	return e
}

func (e *crawlEnv) close(b *testing.B) {
	b.Helper()
	if e.cancel != nil {
		e.cancel()
		if err := <-e.done; err != nil {
			b.Error(err)
		}
		e.cancel = nil
	}
	e.srv.Close()
	if err := e.db.Close(); err != nil {
		b.Error(err)
	}
	if err := e.log.Close(); err != nil {
		b.Error(err)
	}
	os.RemoveAll(e.dir) // the log of one run is hundreds of MB
}

// crawlPhase is what one crawl of every source measured.
type crawlPhase struct {
	fetches, articles, wireBytes float64
	pages                        float64 // fetched for full text
	elapsed, cpu                 time.Duration
	lagSum, lagMax               time.Duration
	conns                        int64
	dupCrawls                    int // sources crawled again (not_modified) in the phase
	allocBytes                   uint64
	peakRSSMB                    float64
}

// phase crawls every source once, with the benchmark timer running only
// while the crawler works, and checks that each crawl appended wantNew
// articles. The first phase starts Run; later ones move the crawler's clock
// past every source's NextCrawl and kick it.
//
// It runs one phase of the crawl benchmark and checks each of its figures
// (cyclomatic 23): one branch per figure.
func (e *crawlEnv) phase(b *testing.B, start bool, wantNew int) crawlPhase {
	b.Helper()
	ctx := context.Background()
	list, err := e.sources.List(ctx)
	if err != nil {
		b.Fatal(err)
	}
	var due time.Time
	for _, s := range list {
		if s.Crawl.NextCrawl.After(due) {
			due = s.Crawl.NextCrawl
		}
	}
	if late := due.Sub(e.now()); late > 0 {
		e.offset.Add(int64(late + time.Millisecond))
	}
	phaseStart := e.now()
	c0 := e.counters(b)
	logEnd0 := e.logEnd(b, !start)
	conns0 := e.conns.Load()
	resetPeakRSS()
	cpu0 := processCPU()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	alloc0 := ms.TotalAlloc

	b.StartTimer()
	t0 := time.Now()
	if start {
		var rctx context.Context
		rctx, e.cancel = context.WithCancel(context.Background())
		e.done = make(chan error, 1)
		go func() { e.done <- e.c.Run(rctx) }()
	} else {
		e.c.Kick()
	}
	// Checked every 10ms: elapsed is measured to that.
	var c1 crawlCounters
	testutil.EventuallyEvery(b, time.Duration(e.n)*20*time.Millisecond+time.Minute, 10*time.Millisecond, func() error {
		if c1 = e.counters(b); c1.ok-c0.ok >= float64(e.n) {
			return nil
		}
		if c1.other > c0.other {
			b.Fatalf("%.0f crawls failed (see newsflow_crawl_fetches_total)", c1.other-c0.other)
		}
		select {
		case err := <-e.done:
			b.Fatalf("Run returned early: %v", err)
		default:
		}
		return fmt.Errorf("only %.0f of %d sources crawled", c1.ok-c0.ok, e.n)
	})
	elapsed := time.Since(t0)
	b.StopTimer()

	p := crawlPhase{elapsed: elapsed, cpu: processCPU() - cpu0, conns: e.conns.Load() - conns0, peakRSSMB: selfPeakRSSMB(b)}
	runtime.ReadMemStats(&ms)
	p.allocBytes = ms.TotalAlloc - alloc0
	p.fetches, p.articles, p.wireBytes = c1.ok-c0.ok, c1.itemsNew-c0.itemsNew, c1.wireBytes-c0.wireBytes
	p.pages = c1.pages - c0.pages
	if e.fullText {
		// Each crawl fetches the pages of its new items, at most the
		// crawler's default of 10.
		if want := float64(e.n * min(wantNew, 10)); p.pages != want || c1.pageFailures != c0.pageFailures {
			b.Fatalf("%.0f pages fetched for full text, %.0f failed; want %.0f and none", p.pages, c1.pageFailures-c0.pageFailures, want)
		}
	} else if p.pages != 0 {
		b.Fatalf("%.0f pages fetched for feeds that carry more than a line", p.pages)
	}

	// The fetch counter moves just before the crawl is recorded on the
	// source: give the last few crawls a moment (a second) to be recorded.
	// A source Run crawled twice (see dupCrawls) shows the second,
	// not_modified, crawl; the log's growth still checks what the first
	// appended.
	testutil.Eventually(b, time.Second, func() error {
		if list, err = e.sources.List(ctx); err != nil {
			b.Fatal(err)
		}
		var problems []string
		p.lagSum, p.lagMax, p.dupCrawls = 0, 0, 0
		for _, s := range list {
			r := s.Crawl.LastResult
			switch {
			case s.Crawl.LastCrawl.Before(phaseStart) || r == nil:
				problems = append(problems, s.ID+" not crawled")
			case r.Outcome == "not_modified":
				p.dupCrawls++
			case r.Outcome != "ok" || r.ItemsNew != wantNew:
				problems = append(problems, fmt.Sprintf("%s: %s %d new, %s", s.ID, r.Outcome, r.ItemsNew, r.Error))
			default:
				lag := s.Crawl.LastCrawl.Sub(phaseStart)
				p.lagSum += lag
				p.lagMax = max(p.lagMax, lag)
			}
		}
		if len(problems) > 0 {
			return fmt.Errorf("%d of %d sources not crawled as expected, e.g. %s", len(problems), e.n, strings.Join(problems[:min(3, len(problems))], "; "))
		}
		return nil
	})
	if got, want := e.logEnd(b, true)-logEnd0, int64(e.n*wantNew); got != want || p.articles != float64(want) {
		b.Fatalf("articles.raw grew by %d records and the crawler counted %.0f new items; want %d", got, p.articles, want)
	}
	return p
}

// crawlCounters are the crawler's counters that the benchmark follows.
type crawlCounters struct {
	ok, notModified, other float64 // crawls by outcome
	itemsNew, wireBytes    float64
	pages, pageFailures    float64 // article pages fetched for full text
}

// counters reads the crawler's counters.
func (e *crawlEnv) counters(b *testing.B) crawlCounters {
	b.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		b.Fatal(err)
	}
	var c crawlCounters
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			v := m.GetCounter().GetValue()
			switch mf.GetName() {
			case "newsflow_crawl_fetches_total":
				outcome := ""
				for _, l := range m.GetLabel() {
					if l.GetName() == "outcome" {
						outcome = l.GetValue()
					}
				}
				switch outcome {
				case "ok":
					c.ok += v
				case "not_modified":
					c.notModified += v
				default:
					c.other += v
				}
			case "newsflow_crawl_items_new_total":
				c.itemsNew += v
			case "newsflow_crawl_fulltext_total":
				if m.GetLabel()[0].GetValue() == "ok" {
					c.pages += v
				} else {
					c.pageFailures += v
				}
			case "newsflow_crawl_bytes_total":
				c.wireBytes += v
			}
		}
	}
	return c
}

// logEnd is the number of records in articles.raw; 0 if the topic does not
// exist yet and may not (before Run created it).
func (e *crawlEnv) logEnd(b *testing.B, mustExist bool) int64 {
	b.Helper()
	ctx := context.Background()
	parts, err := e.log.Partitions(ctx, schema.TopicArticlesRaw)
	if err != nil {
		if !mustExist {
			return 0
		}
		b.Fatal(err)
	}
	var end int64
	for p := range parts {
		o, err := e.log.Offsets(ctx, eventlog.TopicPartition{Topic: schema.TopicArticlesRaw, Partition: p})
		if err != nil {
			b.Fatal(err)
		}
		end += o.End - o.Start
	}
	return end
}

func reportCrawl(b *testing.B, runs []crawlPhase) {
	var t crawlPhase
	for _, r := range runs {
		t.fetches += r.fetches
		t.articles += r.articles
		t.wireBytes += r.wireBytes
		t.pages += r.pages
		t.elapsed += r.elapsed
		t.cpu += r.cpu
		t.lagSum += r.lagSum
		t.lagMax = max(t.lagMax, r.lagMax)
		t.conns += r.conns
		t.dupCrawls += r.dupCrawls
		t.allocBytes += r.allocBytes
		t.peakRSSMB = max(t.peakRSSMB, r.peakRSSMB)
	}
	if t.fetches == 0 {
		return
	}
	b.ReportMetric(t.fetches/t.elapsed.Seconds(), "fetches/s")
	b.ReportMetric(t.articles/t.elapsed.Seconds(), "articles/s")
	b.ReportMetric(float64(t.cpu.Milliseconds())/t.fetches, "cpu-ms/fetch")
	b.ReportMetric(t.lagSum.Seconds()/t.fetches, "lag-mean-s")
	b.ReportMetric(t.lagMax.Seconds(), "lag-max-s")
	b.ReportMetric(float64(t.conns)/t.fetches, "conns/fetch")
	b.ReportMetric(t.wireBytes/1024/t.fetches, "wire-KB/fetch")
	b.ReportMetric(float64(t.allocBytes)/1024/t.fetches, "alloc-KB/fetch")
	b.ReportMetric(t.peakRSSMB, "peak-rss-MB")
	b.ReportMetric(t.pages/t.fetches, "pages/fetch")
	b.ReportMetric(float64(t.dupCrawls)/float64(len(runs)), "dup-crawls")
	// ns/op is the crawl time per source. (-benchmem's B/op and
	// allocs/op are per phase, since an op of b.Loop is a phase; see
	// alloc-KB/fetch instead.)
	b.ReportMetric(float64(t.elapsed.Nanoseconds())/t.fetches, "ns/op")
}

// processCPU is the user+system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// resetPeakRSS resets VmHWM to the current RSS (Linux 4.0+); where that
// is not allowed the peak stays the process's lifetime peak.
func resetPeakRSS() {
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// selfPeakRSSMB is this process's peak resident set size (VmHWM) in MB.
func selfPeakRSSMB(b *testing.B) float64 {
	b.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0 // not Linux
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				b.Fatalf("parse VmHWM %q: %v", rest, err)
			}
			return kb * 1024 / 1e6
		}
	}
	return 0
}
