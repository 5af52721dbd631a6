package crawl

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/newsflow/newsflow/demo/feedfarm"
	"github.com/newsflow/newsflow/internal/polite"
	"github.com/newsflow/newsflow/internal/testutil"
)

// captured is a slog handler that keeps every record.
type captured struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (c *captured) Enabled(context.Context, slog.Level) bool { return true }
func (c *captured) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.recs = append(c.recs, r.Clone())
	return nil
}
func (c *captured) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *captured) WithGroup(string) slog.Handler      { return c }

func (c *captured) records() []slog.Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]slog.Record(nil), c.recs...)
}

func attr(r slog.Record, key string) string {
	v := ""
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v = a.Value.String()
			return false
		}
		return true
	})
	return v
}

func TestClassifyFailure(t *testing.T) {
	for _, c := range []struct{ msg, key string }{
		{"fetch http://feeds.example/rss: request: dial tcp: lookup feeds.example on 10.0.0.53:53: no such host", "dns"},
		{"robots.txt: fetch http://feeds.example/robots.txt: request: dial tcp: lookup feeds.example: no such host", "dns"},
		{"fetch http://x/: request: dial tcp 192.0.2.1:80: connect: network is unreachable", "unreachable"},
		{"fetch http://x/: request: timeout: dial tcp 192.0.2.1:80: i/o timeout", "timeout"},
		{"fetch http://x/: request: dial tcp 127.0.0.1:80: blocked address 127.0.0.1", "blocked"},
		{"fetch http://x/: request: dial tcp 198.51.100.7:81: connect: connection refused", "refused"},
		{"fetch https://x/: request: tls: failed to verify certificate: x509: certificate signed by unknown authority", "tls"},
		{"http 404 Not Found", "http_404"},
		{"fetch http://x/: http 500 Internal Server Error", "http_500"},
		{"robots.txt: http 500 Internal Server Error", "robots"},
		{"parse: not a feed: html page", "parse"},
		{"disallowed by robots.txt", "disallowed"},
		{"something else", "other"},
	} {
		if got := ClassifyFailure(c.msg); got.Key != c.key || got.Hint == "" {
			t.Errorf("ClassifyFailure(%q) = %+v, want key %s", c.msg, got, c.key)
		}
	}
	if h := ClassifyFailure("dial tcp: lookup a.example: no such host").Hint; !strings.Contains(h, "offline") {
		t.Errorf("dns hint %q does not ask whether the machine is offline", h)
	}
}

// One round's summary counts crawls, fetches, new articles and failing
// sources by reason; a round without crawls logs nothing.
func TestRoundLogSummary(t *testing.T) {
	var h captured
	l := slog.New(&h)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := newRoundLog(t0)
	owned := map[string]bool{}
	for i := range 12 {
		owned[fmt.Sprint("s", i)] = true
	}
	r.setSources(owned)
	dns := "dial tcp: lookup a.example: no such host"
	shown := 0
	for i := range 9 {
		msg := dns
		if i >= 7 {
			msg = "request: timeout: i/o timeout"
		}
		if tr, show := r.record(fmt.Sprint("s", i), 0, CrawlRecord{Outcome: "error", Error: msg}); tr != startedFailing {
			t.Fatalf("first failure of s%d: transition %v", i, tr)
		} else if show {
			shown++
		}
	}
	if shown != maxTransitionLogs {
		t.Fatalf("%d transitions to be logged, want %d", shown, maxTransitionLogs)
	}
	r.record("s9", 0, CrawlRecord{Outcome: "ok", ItemsNew: 4})
	r.record("s10", 0, CrawlRecord{Outcome: "not_modified"})
	r.record("s11", 0, CrawlRecord{Outcome: "ok"})
	r.flush(l, t0.Add(time.Minute))
	recs := h.records()
	if len(recs) != 1 || recs[0].Level != slog.LevelInfo {
		t.Fatalf("records %v", recs)
	}
	want := "crawl round: 12 sources, 12 crawls, 3 fetched, 4 new articles, 9 failing (dns: 7, timeout: 2)"
	if recs[0].Message != want {
		t.Fatalf("summary\n%q, want\n%q", recs[0].Message, want)
	}
	if attr(recs[0], "transitions_not_logged") != "4" {
		t.Errorf("transitions_not_logged = %q", attr(recs[0], "transitions_not_logged"))
	}

	// A quiet round logs nothing; a recovery and a deleted source show in
	// the next one.
	r.flush(l, t0.Add(2*time.Minute))
	if tr, show := r.record("s0", 3, CrawlRecord{Outcome: "ok"}); tr != recovered || !show {
		t.Fatalf("recovery: %v %v", tr, show)
	}
	delete(owned, "s8")
	r.setSources(owned)
	r.flush(l, t0.Add(3*time.Minute))
	recs = h.records()
	if len(recs) != 2 {
		t.Fatalf("%d records after a quiet round and a busy one, want 2", len(recs))
	}
	if want := "crawl round: 11 sources, 1 crawls, 1 fetched, 0 new articles, 7 failing (dns: 6, timeout: 1)"; recs[1].Message != want {
		t.Fatalf("summary\n%q, want\n%q", recs[1].Message, want)
	}
}

// A crawler whose sources all fail keeps failing them over many crawls
// and several rounds, yet logs a bounded number of lines: a summary per
// round, and a few "source failing" lines; each crawl only at Debug.
//
// It is one scenario checked step by step (cyclomatic 27): the steps
// depend on each other's state, so they stay in order in one function.
func TestRunLogsRoundsNotEveryFailure(t *testing.T) {
	var h captured
	interval := 100 * time.Millisecond
	c := newCrawlHarness(t, feedfarm.Options{Items: 3}, func(o *Options) {
		o.Logger = slog.New(&h)
		o.SummaryInterval = interval
		o.ErrorBackoff, o.MaxErrorBackoff = 5*time.Millisecond, 20*time.Millisecond
		o.Breaker = polite.BreakerOptions{FailureThreshold: 1 << 20}
		o.IgnoreRobots = true
	})
	// A port nothing listens on: connection refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	const failing = 20
	for i := range failing {
		url := fmt.Sprintf("%s/missing/%d.xml", c.srv.URL, i)
		if i%4 == 0 {
			url = fmt.Sprintf("http://%s/feed/%d.xml", closed, i)
		}
		if _, err := c.sources.Add(context.Background(), Source{FeedURL: url}); err != nil {
			t.Fatal(err)
		}
	}
	c.add("/gen/1.xml")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- c.c.Run(ctx); close(done) }()
	// Should the test fail first, the crawler stops before the harness
	// closes what it uses.
	defer func() { cancel(); <-done }()
	// Run until every failing source failed at least three times and a
	// few rounds have been summed up.
	testutil.Eventually(t, 20*time.Second, func() error {
		failed := map[string]int{}
		rounds := 0
		for _, r := range h.records() {
			if r.Message == "crawl" && attr(r, "outcome") == "error" {
				failed[attr(r, "source")]++
			}
			if strings.HasPrefix(r.Message, "crawl round:") {
				rounds++
			}
		}
		enough := len(failed) == failing && rounds >= 3
		for _, n := range failed {
			enough = enough && n >= 3
		}
		if !enough {
			return fmt.Errorf("%d sources failed (want %d, 3 times each: %v), %d rounds", len(failed), failing, failed, rounds)
		}
		return nil
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)

	// At most maxTransitionLogs "source failing" lines per round (between
	// two summaries): on a busy machine the first failures of the 20
	// sources may fall in more than one round.
	var summaries, warns, roundWarns, infos, crawls int
	var last slog.Record
	for _, r := range h.records() {
		switch {
		case r.Level == slog.LevelDebug && r.Message == "crawl":
			crawls++
		case r.Level < slog.LevelInfo:
		case strings.HasPrefix(r.Message, "crawl round:"):
			summaries++
			last = r
			roundWarns = 0
		case r.Level == slog.LevelWarn:
			warns++
			if roundWarns++; roundWarns > maxTransitionLogs {
				t.Errorf("more than %d warnings in one round", maxTransitionLogs)
			}
			if !strings.HasPrefix(r.Message, "crawl: source failing") {
				t.Errorf("unexpected warning %q", r.Message)
			}
		default:
			infos++
			t.Errorf("unexpected line %v %q", r.Level, r.Message)
		}
	}
	if most := int(elapsed/interval) + 1; summaries > most {
		t.Errorf("%d summaries in %s, want at most one per %s", summaries, elapsed, interval)
	}
	if warns >= failing {
		t.Errorf("%d warnings for %d failing sources: each failure was logged", warns, failing)
	}
	if crawls < 3*failing {
		t.Errorf("only %d crawls logged at debug", crawls)
	}
	want := "21 sources, "
	if !strings.Contains(last.Message, want) || !strings.Contains(last.Message, "20 failing (http_404: 15, refused: 5)") {
		t.Errorf("last summary %q", last.Message)
	}
	t.Logf("%d crawls in %s: %d summaries, %d warnings; last: %s", crawls, elapsed.Round(time.Millisecond), summaries, warns, last.Message)
}
