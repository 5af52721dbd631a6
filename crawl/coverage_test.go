package crawl

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/newsflow/newsflow/demo/feedfarm"
	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/prometheus/client_golang/prometheus"
)

// Crawl coverage counts a source on time while its feed was read within
// twice its interval (or it is younger than that), whatever its failed
// attempts since; the records a crawl appends carry the crawl time as
// their origin, and the delay since each item's publication is observed.
func TestCoverageAndOrigin(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Now().UnixMilli())
	clock := func() time.Time { return time.UnixMilli(now.Load()) }
	reg := prometheus.NewRegistry()
	h := newCrawlHarness(t, feedfarm.Options{Items: 5}, func(o *Options) {
		o.Now, o.Registerer, o.IgnoreRobots = clock, reg, true
	})
	ok1, ok2 := h.add("/gen/1.xml"), h.add("/gen/2.xml")
	bad := h.add("/missing.xml")
	crawlOnce := func() {
		for _, s := range []Source{ok1, ok2, bad} {
			h.c.crawl(context.Background(), s.ID, true)
		}
	}
	coverage := func() (float64, float64) {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var active, onTime float64
		for _, mf := range mfs {
			switch mf.GetName() {
			case "newsflow_crawl_sources_active":
				active = mf.GetMetric()[0].GetGauge().GetValue()
			case "newsflow_crawl_sources_on_time":
				onTime = mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		return active, onTime
	}
	crawlOnce()
	if a, o := coverage(); a != 3 || o != 3 {
		t.Fatalf("after the first crawl: %v active, %v on time; want 3 and 3 (the failing source is new)", a, o)
	}
	// Past twice the failing source's interval (its minimum: it never
	// adapted), all crawled again: only it is late.
	now.Add((2*DefaultMinInterval + time.Minute).Milliseconds())
	crawlOnce()
	if a, o := coverage(); a != 3 || o != 2 {
		t.Fatalf("later: %v active, %v on time; want 3 and 2", a, o)
	}
	// Nothing read for long: none on time.
	now.Add(3 * time.Duration(DefaultMaxInterval).Milliseconds())
	if a, o := coverage(); a != 3 || o != 0 {
		t.Fatalf("much later, without crawls: %v active, %v on time; want 3 and 0", a, o)
	}

	n := 0
	h.eachRaw(func(rec *eventlog.Record) {
		n++
		if got := engine.OriginOf(rec); strconv.FormatInt(got, 10) != strconv.FormatInt(rec.Timestamp, 10) {
			t.Errorf("record %s: origin %d, want the crawl time %d", rec.Key, got, rec.Timestamp)
		}
		if _, ok := rec.Header(engine.HeaderOrigin); !ok {
			t.Errorf("record %s without an origin header", rec.Key)
		}
	})
	if n == 0 {
		t.Fatal("no records appended")
	}
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == "newsflow_article_publication_delay_seconds" {
			if c := mf.GetMetric()[0].GetHistogram().GetSampleCount(); c != uint64(n) {
				t.Errorf("publication delay observed %d times, want %d (one per new item)", c, n)
			}
			return
		}
	}
	t.Error("no publication delay histogram")
}

// A crawl state stored before LastSuccess was kept counts its last crawl
// when that crawl read the feed; otherwise the source's age.
func TestOnTimeWithoutLastSuccess(t *testing.T) {
	now := time.Now()
	src := func(outcome string) Source {
		s := Source{MinInterval: Duration(5 * time.Minute)}
		s.CreatedAt.Time = now.Add(-24 * time.Hour)
		s.Crawl = CrawlState{Interval: Duration(5 * time.Minute), LastCrawl: now.Add(-3 * time.Minute), LastResult: &CrawlRecord{Outcome: outcome}}
		return s
	}
	for outcome, want := range map[string]bool{"ok": true, "not_modified": true, "error": false} {
		s := src(outcome)
		if got := s.OnTime(now); got != want {
			t.Errorf("last crawl %s 3 minutes ago, no LastSuccess: on time %v, want %v", outcome, got, want)
		}
	}
	s := src("error")
	s.Crawl.LastSuccess = now.Add(-9 * time.Minute)
	if !s.OnTime(now) {
		t.Error("read 9 minutes ago with a 5-minute interval: not on time")
	}
	s.Crawl.LastSuccess = now.Add(-11 * time.Minute)
	if s.OnTime(now) {
		t.Error("read 11 minutes ago with a 5-minute interval: on time")
	}
}
