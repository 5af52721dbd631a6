package crawl

import (
	"context"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/newsflow/newsflow/demo/feedfarm"
	"go.uber.org/goleak"
)

// Every way a feed server misbehaves is handled as specified and recorded
// on its source, while healthy sources crawled alongside are unaffected.
//
// It is one scenario checked step by step (cyclomatic 49): the steps
// depend on each other's state, so they stay in order in one function.
func TestFaultFarm(t *testing.T) {
	// Registered first, so it runs after the harness has closed everything.
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
	h := newCrawlHarness(t, feedfarm.Options{Faults: true, Items: 10}, func(o *Options) {
		o.Fetch.Timeout = 2 * time.Second
		o.Fetch.MaxBodyBytes = 1 << 20
	})
	ctx := context.Background()
	ids := map[string]string{}
	for _, kind := range []string{"slow", "endless", "gzip-bomb", "redirect-loop", "301-chain", "302", "410",
		"500-burst", "invalid-xml", "wrong-charset", "html"} {
		ids[kind] = h.add("/fault/" + kind).ID
	}
	// A 429 pauses its whole host, so it gets a host of its own (the same
	// server, named differently).
	rl, err := h.sources.Add(ctx, Source{FeedURL: strings.Replace(h.srv.URL, "127.0.0.1", "localhost", 1) + "/fault/429"})
	if err != nil {
		t.Fatal(err)
	}
	ids["429"] = rl.ID
	private, err := h.sources.Add(ctx, Source{FeedURL: "http://169.254.169.254/latest/feed"}) // cloud metadata
	if err != nil {
		t.Fatal(err)
	}
	ids["private"] = private.ID
	var healthy []string
	for i := 1; i <= 5; i++ {
		healthy = append(healthy, h.add("/gen/"+string(rune('0'+i))+".xml").ID)
	}

	// Sample the heap while the bomb, the endless body and the rest are
	// crawled: it must stay far below what they would make it hold.
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	var peak atomic.Uint64
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if m.HeapInuse > peak.Load() {
				peak.Store(m.HeapInuse)
			}
			select {
			case <-stopSampling:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	start := time.Now()
	recs := h.crawlAll()
	elapsed := time.Since(start)
	close(stopSampling)
	<-sampled
	if grew := int64(peak.Load()) - int64(base); grew > 64<<20 {
		t.Errorf("heap grew by %d MiB while crawling the fault farm", grew>>20)
	} else {
		t.Logf("peak heap growth while crawling faults: %d MiB", max(grew, 0)>>20)
	}
	get := func(kind string) Source {
		s, err := h.sources.Get(ctx, ids[kind])
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	checked := time.Now()
	expectError := func(kind, want string) {
		t.Helper()
		s := get(kind)
		r := recs[ids[kind]]
		if r.Outcome != "error" || !strings.Contains(r.Error, want) || s.Crawl.ConsecutiveErrors != 1 || !strings.Contains(s.Crawl.LastError, want) {
			t.Errorf("%s: outcome %q error %q (errors %d); want an error containing %q", kind, r.Outcome, r.Error, s.Crawl.ConsecutiveErrors, want)
		}
		if !s.Crawl.NextCrawl.After(checked.Add(20 * time.Second)) {
			t.Errorf("%s: next crawl %s is not backed off", kind, s.Crawl.NextCrawl)
		}
	}
	expectError("slow", "timeout")
	expectError("endless", "too large")
	expectError("gzip-bomb", "too large")
	expectError("redirect-loop", "redirect loop")
	expectError("html", "HTML page")
	expectError("private", "blocked")
	// A page that is not a feed cannot become one by retrying sooner: it
	// is tried again after the source's max interval, not backed off, and
	// the other failures are transient.
	if s, r := get("html"), recs[ids["html"]]; r.Class != "permanent" || s.Crawl.NextCrawl.Before(checked.Add(DefaultMaxInterval-time.Minute)) {
		t.Errorf("html: class %q next crawl %s, want permanent and a retry after %s", r.Class, s.Crawl.NextCrawl, DefaultMaxInterval)
	}
	for _, kind := range []string{"slow", "endless", "redirect-loop", "private", "500-burst"} {
		if c := recs[ids[kind]].Class; c != "" {
			t.Errorf("%s: class %q, want transient", kind, c)
		}
	}
	if r := recs[ids["500-burst"]]; r.Outcome != "error" || r.Status != 500 {
		t.Errorf("500-burst: %+v", r)
	}

	// 301s update the stored URL; a 302 does not.
	if s := get("301-chain"); recs[ids["301-chain"]].Outcome != "ok" || !strings.HasSuffix(s.FeedURL, "/fault/301-chain/0") {
		t.Errorf("301 chain: outcome %q, feed URL %s", recs[ids["301-chain"]].Outcome, s.FeedURL)
	}
	if s := get("302"); recs[ids["302"]].Outcome != "ok" || !strings.HasSuffix(s.FeedURL, "/fault/302") {
		t.Errorf("302: outcome %q, feed URL %s", recs[ids["302"]].Outcome, s.FeedURL)
	}
	// 410 stops the source and says why.
	if s := get("410"); s.Status != StatusGone || !strings.Contains(s.StatusReason, "410") {
		t.Errorf("410: status %q reason %q", s.Status, s.StatusReason)
	}
	// 429 honours Retry-After and does not count toward disabling.
	if s := get("429"); recs[ids["429"]].Outcome != "rate_limited" || s.Crawl.ConsecutiveErrors != 0 ||
		s.Crawl.NextCrawl.Before(checked.Add(115*time.Second)) {
		t.Errorf("429: outcome %q errors %d next %s", recs[ids["429"]].Outcome, s.Crawl.ConsecutiveErrors, s.Crawl.NextCrawl)
	}
	// A body in the wrong charset is still read.
	if r := recs[ids["wrong-charset"]]; r.Outcome != "ok" || r.ItemsNew != 1 {
		t.Errorf("wrong charset: %+v", r)
	}
	// Invalid XML is an error or, when the parser can cut the document back
	// to its last complete item, a crawl with no items; never a crash.
	if r := recs[ids["invalid-xml"]]; !(r.Outcome == "error" && strings.Contains(r.Error, "parse")) && !(r.Outcome == "ok" && r.ItemsNew == 0) {
		t.Errorf("invalid XML: %+v", r)
	}
	for _, id := range healthy {
		if r := recs[id]; r.Outcome != "ok" || r.ItemsNew != 10 {
			t.Errorf("healthy source %s: %+v", id, r)
		}
	}
	t.Logf("one crawl of %d sources in %s (the slow source is cut at its 2s timeout)", len(recs), elapsed.Round(time.Millisecond))

	// Repeated failures open the circuit: later crawls are skipped without
	// touching the server until the breaker lets a trial through.
	id := ids["redirect-loop"]
	for i := 0; i < 5; i++ {
		h.c.crawl(ctx, id, true)
	}
	before := h.farm.Requests()
	res := h.c.crawl(ctx, id, true)
	s, _ := h.sources.Get(ctx, id)
	if res.record.Outcome != "skipped" || h.farm.Requests() != before || !strings.Contains(string(s.Crawl.Circuit), `"open"`) {
		t.Errorf("after repeated failures: outcome %q, requests %d→%d, circuit %s", res.record.Outcome, before, h.farm.Requests(), s.Crawl.Circuit)
	}
	// Permanent failures do not count toward the host's circuit breaker.
	id = ids["html"]
	for i := 0; i < 6; i++ {
		if r := h.c.crawl(ctx, id, true).record; r.Outcome != "error" || r.Class != "permanent" {
			t.Fatalf("html crawl %d: %+v", i, r)
		}
	}
	if s, _ := h.sources.Get(ctx, id); strings.Contains(string(s.Crawl.Circuit), `"open"`) || s.Crawl.ConsecutiveErrors != 7 {
		t.Errorf("after repeated permanent failures: circuit %s, errors %d (want closed, 7)", s.Crawl.Circuit, s.Crawl.ConsecutiveErrors)
	}
}
