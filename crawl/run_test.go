package crawl

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/demo/feedfarm"
	"github.com/newsflow/newsflow/internal/testutil"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func TestResolveDiscoversFeed(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "plain.html"), []byte("<html><head><title>No feed</title></head><body>hi</body></html>"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := newCrawlHarness(t, feedfarm.Options{Dir: dir, Faults: true, Items: 3}, nil)
	ctx := context.Background()
	r, err := h.c.Resolve(ctx, h.srv.URL+"/fault/html")
	if err != nil || r.FeedURL != h.srv.URL+"/gen/0.xml" || r.Homepage != h.srv.URL+"/fault/html" || r.Title != "Generated feed 0" {
		t.Fatalf("Resolve(page) = %+v, %v", r, err)
	}
	r, err = h.c.Resolve(ctx, h.srv.URL+"/gen/4.xml")
	if err != nil || r.FeedURL != h.srv.URL+"/gen/4.xml" || r.Homepage != "https://gen.example/4" || r.Title != "Generated feed 4" {
		t.Fatalf("Resolve(feed) = %+v, %v", r, err)
	}
	if _, err := h.c.Resolve(ctx, h.srv.URL+"/fault/410"); err == nil {
		t.Fatal("Resolve of a 410 succeeded")
	}
	if _, err := h.c.Resolve(ctx, h.srv.URL+"/files/plain.html"); err == nil || !strings.Contains(err.Error(), "links to none") {
		t.Fatalf("Resolve of a page without feeds: %v", err)
	}
}

func TestCrawlNowIsRateLimited(t *testing.T) {
	h := newCrawlHarness(t, feedfarm.Options{Items: 3}, nil)
	ctx := context.Background()
	s := h.add("/gen/1.xml")
	rec, err := h.c.CrawlNow(ctx, s.ID)
	if err != nil || rec.Outcome != "ok" || rec.ItemsNew != 3 {
		t.Fatalf("first manual crawl: %+v %v", rec, err)
	}
	if _, err := h.c.CrawlNow(ctx, s.ID); !errors.Is(err, ErrTooSoon) {
		t.Fatalf("second manual crawl: %v, want ErrTooSoon", err)
	}
	if _, err := h.c.CrawlNow(ctx, "src-missing"); !errors.Is(err, ErrSourceNotFound) {
		t.Fatalf("unknown source: %v", err)
	}
}

// A manual crawl of a source being crawled waits for that crawl to end,
// then crawls; given up (its context), it says so.
func TestCrawlNowWaitsForCrawlUnderWay(t *testing.T) {
	h := newCrawlHarness(t, feedfarm.Options{Items: 3}, nil)
	s := h.add("/gen/1.xml")
	if !h.c.startCrawling(s.ID) { // as the scheduler does
		t.Fatal("source marked already")
	}
	type result struct {
		rec CrawlRecord
		err error
	}
	done := make(chan result, 1)
	go func() {
		rec, err := h.c.CrawlNow(context.Background(), s.ID)
		done <- result{rec, err}
	}()
	select {
	case r := <-done:
		t.Fatalf("manual crawl did not wait for the crawl under way: %+v %v", r.rec, r.err)
	case <-time.After(200 * time.Millisecond):
	}
	h.c.stopCrawling(s.ID)
	if r := <-done; r.err != nil || r.rec.Outcome != "ok" || r.rec.ItemsNew != 3 {
		t.Fatalf("manual crawl after the crawl under way: %+v %v", r.rec, r.err)
	}
	s2 := h.add("/gen/2.xml")
	h.c.startCrawling(s2.ID)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := h.c.CrawlNow(ctx, s2.ID); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("manual crawl given up while waiting: %v", err)
	}
}

func histogramCount(t *testing.T, reg *prometheus.Registry, name string) (uint64, float64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			var h *dto.Histogram = mf.GetMetric()[0].GetHistogram()
			return h.GetSampleCount(), h.GetSampleSum()
		}
	}
	return 0, 0
}

// Run crawls every due source; misbehaving sources (slow, endless,
// rate-limited) do not hold up healthy ones, and a restarted crawler picks
// up each source's schedule where it was.
func TestRunCrawlsOnScheduleDespiteFaults(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := newCrawlHarness(t, feedfarm.Options{Faults: true, Items: 5}, func(o *Options) {
		o.Registerer = reg
		o.Fetch.Timeout = 3 * time.Second
		o.Fetch.MaxBodyBytes = 1 << 20
	})
	ctx, cancel := context.WithCancel(context.Background())
	var healthy []string
	for _, kind := range []string{"slow", "endless", "500-burst", "redirect-loop"} {
		h.add("/fault/" + kind)
	}
	for i := 0; i < 30; i++ {
		healthy = append(healthy, h.add(fmt.Sprintf("/gen/%d.xml", i)).ID)
	}
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- h.c.Run(ctx); close(done) }()
	// Should the test fail first, the crawler stops before the harness
	// closes what it uses.
	defer func() { cancel(); <-done }()
	// Reloads while crawls finish must not queue a source twice.
	kicking := make(chan struct{})
	go func() {
		for {
			select {
			case <-kicking:
				return
			case <-time.After(time.Millisecond):
				h.c.Kick()
			}
		}
	}()
	testutil.Eventually(t, 20*time.Second, func() error {
		crawled := 0
		for _, id := range healthy {
			s, err := h.sources.Get(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			if s.Crawl.LastResult != nil && s.Crawl.LastResult.Outcome == "ok" {
				crawled++
			}
		}
		if crawled < len(healthy) {
			return fmt.Errorf("%d of %d healthy sources crawled", crawled, len(healthy))
		}
		return nil
	})
	took := time.Since(start)
	close(kicking)
	n, sum := histogramCount(t, reg, "newsflow_crawl_schedule_lag_seconds")
	if dup := testutil.Counter(t, reg, "newsflow_crawl_fetches_total", "outcome", "not_modified"); dup != 0 {
		t.Errorf("%v sources were crawled twice (answered 304)", dup)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if took > 3*time.Second {
		t.Errorf("healthy sources waited %s behind slow ones", took)
	}
	if n < uint64(len(healthy)) {
		t.Fatalf("schedule lag observed %d times", n)
	}
	t.Logf("30 healthy + 4 faulty sources: healthy all crawled %s after start; mean schedule lag %.1f ms", took.Round(time.Millisecond), 1000*sum/float64(n))

	// The schedule survives a restart: every healthy source is next due
	// minutes from now, so a new crawler does not crawl it again at once.
	s, _ := h.sources.Get(context.Background(), healthy[0])
	if until := time.Until(s.Crawl.NextCrawl); until < 4*time.Minute {
		t.Fatalf("next crawl of a healthy source in %s, want about its 5 min minimum", until)
	}
	before := h.farm.Requests()
	c2, err := New(h.sources, h.log, h.db, Options{Registerer: prometheus.NewRegistry(), Fetch: h.c.opts.Fetch, Limiter: h.c.opts.Limiter})
	if err != nil {
		t.Fatal(err)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel2()
	if err := c2.Run(ctx2); err != nil {
		t.Fatal(err)
	}
	// Only the failing sources, due again after their backoff of at most a
	// couple of minutes, could have been fetched; the healthy ones not.
	if got := h.farm.Requests() - before; got > 4 {
		t.Fatalf("a restarted crawler fetched %d times within 0.5s", got)
	}
}
