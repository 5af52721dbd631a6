package crawl

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/newsflow/newsflow/demo/feedfarm"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/internal/feed"
	"github.com/newsflow/newsflow/internal/schema"
)

// pageSite serves feeds whose items carry one line, the items' article
// pages, and a robots.txt that keeps /private/ out; it counts requests
// per path.
type pageSite struct {
	mu   sync.Mutex
	hits map[string]int
}

func articlePage(n int) string {
	return fmt.Sprintf(`<!DOCTYPE html><html><head><title>Story %d</title></head><body>
<nav><a href="/">Home</a> <a href="/subscribe">Subscribe</a></nav>
<article><h1>Story %d</h1>
<p>The council of Vestby voted on Tuesday to close the old harbour bridge number %d for eleven weeks of repairs to its corroded cables.</p>
<p>Engineers will replace 42 of the bridge's 96 suspension cables, the roads authority said, at a cost of 18 million kronor.</p>
<p>Commuters face detours of up to forty minutes while the work goes on, and ferries will run every twenty minutes at peak hours.</p>
</article><footer>All rights reserved</footer></body></html>`, n, n, n)
}

func (s *pageSite) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.hits[r.URL.Path]++
	s.mu.Unlock()
	item := func(path, summary string) string {
		return fmt.Sprintf(`<item><title>Item at %s</title><link>http://%s%s</link><guid>%s</guid><description>%s</description></item>`,
			path, r.Host, path, path, summary)
	}
	rss := func(items ...string) {
		w.Header().Set("Content-Type", "application/rss+xml")
		fmt.Fprintf(w, `<?xml version="1.0"?><rss version="2.0"><channel><title>Site</title><link>http://%s/</link><description>d</description>%s</channel></rss>`,
			r.Host, strings.Join(items, ""))
	}
	long := strings.Repeat("A long summary sentence that carries plenty of words about the event. ", 4)
	switch p := r.URL.Path; {
	case p == "/robots.txt":
		fmt.Fprint(w, "User-agent: *\nDisallow: /private/\n")
	case p == "/short.xml":
		rss(item("/a/1", "Bridge to close for repairs."), item("/private/3", "A line."), item("/a/2", "Another line."))
	case p == "/never.xml":
		rss(item("/a/4", "Bridge to close for repairs."))
	case p == "/long.xml":
		rss(item("/a/5", long), item("/a/6", long), item("/a/7", "A line."))
	case p == "/always.xml":
		rss(item("/a/8", long))
	case p == "/a/2":
		http.Error(w, "boom", http.StatusInternalServerError)
	case strings.HasPrefix(p, "/a/") || strings.HasPrefix(p, "/private/"):
		var n int
		fmt.Sscanf(p[strings.LastIndexByte(p, '/')+1:], "%d", &n)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, articlePage(n))
	default:
		http.NotFound(w, r)
	}
}

func (s *pageSite) hit(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[path]
}

// TestCrawlFetchesFullTextForOneLineFeeds crawls four feeds of one site:
// one whose items carry a line (auto: pages fetched, robots.txt obeyed, a
// failing page keeps the feed's line), the same kind with full_text never,
// one whose items mostly carry a long summary (auto: nothing fetched), and
// one with full_text always. It checks what reaches articles.raw and which
// pages were requested.
func TestCrawlFetchesFullTextForOneLineFeeds(t *testing.T) {
	h := newCrawlHarness(t, feedfarm.Options{}, func(o *Options) { o.FullText.Disabled = false })
	site := &pageSite{hits: map[string]int{}}
	srv := httptest.NewServer(site)
	defer srv.Close()
	add := func(path, mode string) Source {
		s, err := h.sources.Add(t.Context(), Source{FeedURL: srv.URL + path, FullText: mode})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	short, never, long, always := add("/short.xml", ""), add("/never.xml", FullTextNever), add("/long.xml", ""), add("/always.xml", FullTextAlways)
	if short.FullText != FullTextAuto {
		t.Errorf("full_text defaulted to %q, want auto", short.FullText)
	}
	if _, err := h.sources.Add(t.Context(), Source{FeedURL: srv.URL + "/x.xml", FullText: "sometimes"}); err == nil || !strings.Contains(err.Error(), "full_text") {
		t.Errorf("invalid full_text mode: err %v", err)
	}
	recs := h.crawlAll()

	content := map[string]string{} // item path → content written
	h.eachRaw(func(rec *eventlog.Record) {
		var a schema.RawArticle
		if err := json.Unmarshal(rec.Value, &a); err != nil {
			t.Fatal(err)
		}
		content[a.URL[strings.Index(a.URL[7:], "/")+7:]] = a.Content
	})
	if len(content) != 8 {
		t.Fatalf("articles.raw holds %d items, want 8: %v", len(content), content)
	}
	for path, want := range map[string]bool{"/a/1": true, "/private/3": false, "/a/2": false, "/a/4": false, "/a/5": false, "/a/6": false, "/a/7": false, "/a/8": true} {
		got := content[path]
		if has := strings.Contains(got, "Engineers will replace 42 of the bridge"); has != want {
			t.Errorf("%s: full text %v, want %v (content %q)", path, has, want, got)
		}
		if strings.Contains(got, "Subscribe") || strings.Contains(got, "All rights reserved") {
			t.Errorf("%s: page furniture in the content: %q", path, got)
		}
	}
	// The text must survive the articles stage's cleaning as plain text.
	if got := feed.Text(content["/a/1"], 1<<20); !strings.HasPrefix(got, "The council of Vestby voted") || strings.Contains(got, "<p>") {
		t.Errorf("cleaned full text: %q", got)
	}
	if n := site.hit("/private/3"); n != 0 {
		t.Errorf("a page robots.txt disallows was fetched %d times", n)
	}
	for _, p := range []string{"/a/4", "/a/5", "/a/6", "/a/7"} {
		if n := site.hit(p); n != 0 {
			t.Errorf("%s fetched %d times; its source does not want full text", p, n)
		}
	}
	for id, want := range map[string][2]int{short.ID: {1, 2}, never.ID: {0, 0}, long.ID: {0, 0}, always.ID: {1, 0}} {
		if r := recs[id]; r.Outcome != "ok" || r.FullText != want[0] || r.FullTextFailed != want[1] {
			t.Errorf("source %s: crawl %s, full text %d, failed %d; want ok, %d, %d", id, r.Outcome, r.FullText, r.FullTextFailed, want[0], want[1])
		}
	}

	// A second crawl sees nothing new and fetches no page again.
	before := site.hit("/a/1")
	h.crawlAll()
	if site.hit("/a/1") != before {
		t.Error("a page was fetched again for an item already seen")
	}
}
