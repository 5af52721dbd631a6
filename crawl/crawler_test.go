package crawl

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/demo/feedfarm"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/engine/eventlog/embedded"
	"github.com/newsflow/newsflow/internal/feed"
	"github.com/newsflow/newsflow/internal/fetch"
	"github.com/newsflow/newsflow/internal/meta"
	"github.com/newsflow/newsflow/internal/polite"
	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/internal/testutil"
	"github.com/newsflow/newsflow/state"
)

const realFeeds = "../../shared/data/feeds/real"

type crawlHarness struct {
	t       *testing.T
	log     eventlog.Log
	db      *state.DB
	sources *Sources
	c       *Crawler
	farm    *feedfarm.Farm
	srv     *httptest.Server
}

func newCrawlHarness(t *testing.T, farm feedfarm.Options, mutate func(*Options)) *crawlHarness {
	t.Helper()
	dir := t.TempDir()
	l, err := embedded.Open(embedded.Options{Dir: filepath.Join(dir, "log"), Fsync: embedded.FsyncNever})
	if err != nil {
		t.Fatal(err)
	}
	db, err := state.Open(filepath.Join(dir, "state"), state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := &crawlHarness{t: t, log: l, db: db, farm: feedfarm.New(farm)}
	h.srv = httptest.NewServer(h.farm)
	t.Cleanup(func() {
		h.srv.Close()
		db.Close()
		l.Close()
	})
	h.sources = NewSources(meta.NewLocal(db), nil)
	opts := Options{
		Fetch:   fetch.Options{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, Timeout: 30 * time.Second},
		Limiter: polite.LimiterOptions{HostRate: math.Inf(1), HostConcurrency: 16, GlobalConcurrency: 16},
		// The real feeds' items link to sites this machine must not reach
		// from a test; the full-text tests turn it on.
		FullText: FullTextOptions{Disabled: true},
	}
	if mutate != nil {
		mutate(&opts)
	}
	if h.c, err = New(h.sources, l, db, opts); err != nil {
		t.Fatal(err)
	}
	if _, err := eventlog.EnsureTopic(context.Background(), l, schema.TopicArticlesRaw, 4); err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *crawlHarness) add(path string) Source {
	h.t.Helper()
	s, err := h.sources.Add(context.Background(), Source{FeedURL: h.srv.URL + path})
	if err != nil {
		h.t.Fatal(err)
	}
	return s
}

// crawlAll crawls every source once, in parallel batches, and returns the
// outcome per source id.
func (h *crawlHarness) crawlAll() map[string]CrawlRecord {
	h.t.Helper()
	list, err := h.sources.List(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	out := map[string]CrawlRecord{}
	type r struct {
		id  string
		res crawlResult
	}
	ch := make(chan r, len(list))
	sem := make(chan struct{}, 8)
	for _, s := range list {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			ch <- r{s.ID, h.c.crawl(context.Background(), s.ID, true)}
		}()
	}
	for range list {
		x := <-ch
		out[x.id] = x.res.record
	}
	return out
}

// raw reads articles.raw and counts records per (source, article id).
func (h *crawlHarness) raw() map[[2]string]int {
	h.t.Helper()
	out := map[[2]string]int{}
	h.eachRaw(func(rec *eventlog.Record) {
		src, _ := rec.Header("source_id")
		out[[2]string{string(src), string(rec.Key)}]++
	})
	return out
}

// eachRaw calls fn with every record of articles.raw.
func (h *crawlHarness) eachRaw(fn func(*eventlog.Record)) {
	h.t.Helper()
	ctx := context.Background()
	parts, _ := h.log.Partitions(ctx, schema.TopicArticlesRaw)
	for p := int32(0); p < parts; p++ {
		tp := eventlog.TopicPartition{Topic: schema.TopicArticlesRaw, Partition: p}
		o, err := h.log.Offsets(ctx, tp)
		if err != nil {
			h.t.Fatal(err)
		}
		if o.End == 0 {
			continue
		}
		rd, _ := h.log.NewReader(map[eventlog.TopicPartition]int64{tp: 0})
		for n := int64(0); n < o.End; {
			recs, err := rd.Poll(ctx, 10000)
			if err != nil {
				h.t.Fatal(err)
			}
			for _, rec := range recs {
				fn(rec)
				n = rec.Offset + 1
			}
		}
		rd.Close()
	}
}

// TestCrawlRealFeedsExactlyOnce is one scenario checked step by step (cyclomatic 41): the steps
// depend on each other's state, so they stay in order in one function.
func TestCrawlRealFeedsExactlyOnce(t *testing.T) {
	if _, err := os.Stat(realFeeds); err != nil {
		testutil.NoSharedData(t, "shared feed data not found at %s: %v", realFeeds, err)
	}
	h := newCrawlHarness(t, feedfarm.Options{Dir: realFeeds, Items: 20}, nil)
	want := map[string]map[string]bool{} // source id -> article ids
	var files int
	err := filepath.WalkDir(realFeeds, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		ext := strings.ToLower(filepath.Ext(p))
		if ext != ".xml" && ext != ".rss" && ext != ".atom" && ext != ".json" && ext != ".rdf" {
			return nil
		}
		rel, _ := filepath.Rel(realFeeds, p)
		s := h.add("/files/" + filepath.ToSlash(rel))
		files++
		body, _ := os.ReadFile(p)
		u, _ := url.Parse(s.FeedURL)
		f, err := feed.Parse(body, "", u, time.Now())
		ids := map[string]bool{}
		if err == nil {
			for _, it := range f.Items {
				ids[it.ArticleID] = true
			}
		}
		want[s.ID] = ids
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	gen := map[string]bool{}
	for i := 0; i < 10; i++ {
		gen[h.add("/gen/"+string(rune('0'+i))+".xml").ID] = true
	}

	first := h.crawlAll()
	for id, rec := range first {
		if time.Duration(rec.Duration) > time.Second || (rec.Outcome == "error" && len(want[id]) > 0) {
			s, _ := h.sources.Get(context.Background(), id)
			t.Logf("slow or failed: %s %s %+v", id, s.FeedURL, rec)
		}
	}
	got := h.raw()
	var items, failed int
	for id, ids := range want {
		for a := range ids {
			if n := got[[2]string{id, a}]; n != 1 {
				t.Fatalf("source %s article %s appended %d times after one crawl", id, a, n)
			}
		}
		items += len(ids)
		if first[id].Outcome == "error" {
			failed++
			if len(ids) > 0 {
				t.Errorf("source %s failed (%s) but its file parses", id, first[id].Error)
			}
		}
	}
	for id := range gen {
		if first[id].Outcome != "ok" || first[id].ItemsNew != 20 {
			t.Fatalf("generated source %s: %+v", id, first[id])
		}
	}
	t.Logf("%d real feed files: %d items appended, %d files unparseable", files, items, failed)

	// Second crawl: conditional GET answered 304 everywhere, nothing new.
	second := h.crawlAll()
	for id, rec := range second {
		if first[id].Outcome == "ok" && rec.Outcome != "not_modified" {
			t.Errorf("second crawl of %s: %+v, want not_modified", id, rec)
		}
	}
	if again := h.raw(); len(again) != len(got) {
		t.Fatalf("second crawl appended: %d keys, was %d", len(again), len(got))
	}

	// The generated feeds publish one more item: it lands exactly once.
	h.farm.Advance()
	third := h.crawlAll()
	final := h.raw()
	for id := range gen {
		if third[id].Outcome != "ok" || third[id].ItemsNew != 1 || third[id].ItemsSeen != 20 {
			t.Fatalf("after advance, %s: %+v", id, third[id])
		}
	}
	for k, n := range final {
		if n != 1 {
			t.Fatalf("%v appended %d times", k, n)
		}
	}
	if len(final) != len(got)+len(gen) {
		t.Fatalf("%d records after advance, want %d", len(final), len(got)+len(gen))
	}
	s, err := h.sources.Get(context.Background(), func() string {
		for id := range gen {
			return id
		}
		return ""
	}())
	if err != nil || s.Crawl.ETag == "" || s.Crawl.LastResult == nil || s.Crawl.NextCrawl.IsZero() {
		t.Fatalf("crawl state not recorded: %+v %v", s.Crawl, err)
	}
}

// A crawl cut short by shutdown gives its claim back: the source is due
// again at once rather than one interval later.
func TestCrawlCutShortGivesClaimBack(t *testing.T) {
	h := newCrawlHarness(t, feedfarm.Options{Faults: true, Items: 3}, func(o *Options) { o.IgnoreRobots = true })
	s := h.add("/fault/slow") // a feed at 1 byte per second
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan crawlResult, 1)
	start := time.Now()
	go func() { done <- h.c.crawl(ctx, s.ID, false) }()
	// Claimed: due one interval from now.
	testutil.Eventually(t, 5*time.Second, func() error {
		got, err := h.sources.Get(context.Background(), s.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !got.Crawl.NextCrawl.After(start.Add(time.Minute)) || got.Crawl.Claim == "" {
			return fmt.Errorf("source not claimed: %+v", got.Crawl)
		}
		return nil
	})
	cancel()
	res := <-done
	got, err := h.sources.Get(context.Background(), s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !res.reschedule || got.Crawl.NextCrawl.After(time.Now()) || got.Crawl.Claim != "" {
		t.Fatalf("after a crawl cut short: reschedule %v, next crawl in %s, claim %q", res.reschedule,
			time.Until(got.Crawl.NextCrawl).Round(time.Second), got.Crawl.Claim)
	}
}

// The crawler's log names a failing source's URL without the credentials
// it carries.
func TestCrawlLogsNoCredentials(t *testing.T) {
	var log bytes.Buffer
	h := newCrawlHarness(t, feedfarm.Options{Faults: true}, func(o *Options) {
		o.IgnoreRobots = true
		o.Logger = slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	u := strings.Replace(h.srv.URL, "http://", "http://ann:hunter22@", 1) + "/fault/html?token=t0kenvalue&page=2"
	if _, err := h.sources.Add(context.Background(), Source{FeedURL: u}); err != nil {
		t.Fatal(err)
	}
	for _, rec := range h.crawlAll() {
		if rec.Outcome != "error" {
			t.Fatalf("crawl of a page that is no feed: %+v", rec)
		}
	}
	out := log.String()
	if !strings.Contains(out, "source failing") || !strings.Contains(out, "page=2") {
		t.Fatalf("log:\n%s", out)
	}
	for _, s := range []string{"hunter22", "t0kenvalue"} {
		if strings.Contains(out, s) {
			t.Errorf("the log carries %q:\n%s", s, out)
		}
	}
}
