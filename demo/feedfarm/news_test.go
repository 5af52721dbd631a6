package feedfarm

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/internal/classify"
	"github.com/newsflow/newsflow/internal/feed"
	"github.com/newsflow/newsflow/internal/opml"
	"github.com/newsflow/newsflow/internal/testutil"
)

// newsFarm returns a farm whose clock moves 20 seconds before each Advance,
// as in the demo, its clock, and a function that advances it n
// generations. Only Advance reads the clock, on the test's goroutine.
func newsFarm(opts Options) (f *Farm, now func() time.Time, advance func(n int)) {
	t := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	opts.Now = func() time.Time { return t }
	f = New(opts)
	return f, opts.Now, func(n int) {
		for range n {
			t = t.Add(20 * time.Second)
			f.Advance()
		}
	}
}

// TestNewsTopics checks that the keyword rules of configs/topics.yaml label
// articles with the topic of their event.
func TestNewsTopics(t *testing.T) {
	f, _, advance := newsFarm(Options{Items: 1000})
	advance(70) // 100 events: every kind at least three times
	cls, err := classify.New(classify.Options{})
	if err != nil {
		t.Fatal(err)
	}
	right, total := 0, 0
	for n := range f.opts.Outlets {
		for _, a := range f.Articles(n, 70, 0) {
			total++
			labels := cls.Classify(classify.Document{Title: a.Title, Summary: a.Summary})
			if len(labels) > 0 && labels[0].Topic == a.Topic {
				right++
			}
		}
	}
	if right < total*9/10 {
		t.Fatalf("%d of %d articles labelled with their event's topic, want 90%%", right, total)
	}
}

func TestNewsFeeds(t *testing.T) {
	f, now, advance := newsFarm(Options{Items: 20})
	srv := httptest.NewServer(f)
	defer srv.Close()
	c := &http.Client{Transport: &http.Transport{DisableCompression: true}}

	advance(5)
	g := f.Generation()
	links := map[string]bool{}
	for n := range f.opts.Outlets {
		resp, body := get(t, c, fmt.Sprintf("%s/news/%d.xml", srv.URL, n), nil)
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/rss+xml") {
			t.Fatalf("outlet %d: %d %s", n, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		u, _ := url.Parse(srv.URL)
		fd, err := feed.Parse([]byte(body), resp.Header.Get("Content-Type"), u, now())
		if err != nil {
			t.Fatalf("outlet %d: %v", n, err)
		}
		out := f.Outlet(n)
		if fd.Title != out.Name || len(fd.Skipped) > 0 {
			t.Errorf("outlet %d: title %q, skipped %v", n, fd.Title, fd.Skipped)
		}
		want := f.Articles(n, g, 20)
		if len(fd.Items) != len(want) || len(want) == 0 || len(want) > 20 {
			t.Fatalf("outlet %d: %d items, want %d (at most 20)", n, len(fd.Items), len(want))
		}
		for i, it := range fd.Items {
			if it.Title != want[i].Title || it.Summary != want[i].Summary || !it.PublishedAt.Equal(want[i].Published) {
				t.Errorf("outlet %d item %d: %+v, want %+v", n, i, it, want[i])
			}
			if !strings.HasPrefix(it.URL, "https://"+out.Domain+"/") || links[it.URL] {
				t.Errorf("outlet %d: link %s not its own or not unique", n, it.URL)
			}
			links[it.URL] = true
			if it.PublishedAt.After(now()) {
				t.Errorf("outlet %d: %s published in the future (%s)", n, it.URL, it.PublishedAt)
			}
			if s := strings.Count(it.Summary, ". "); s < 1 || s > 2 {
				t.Errorf("summary of %d sentences: %q", s+1, it.Summary)
			}
		}
		if i := slices.IndexFunc(fd.Items[1:], func(it feed.Item) bool { return it.PublishedAt.After(fd.Items[0].PublishedAt) }); i >= 0 {
			t.Errorf("outlet %d: item %d newer than the first", n, i+1)
		}
	}
	for _, p := range []string{"/news/8.xml", "/news/-1.xml", "/news/x.xml", "/news/3.json", "/news/"} {
		if resp, _ := get(t, c, srv.URL+p, nil); resp.StatusCode != 404 {
			t.Errorf("%s: %d, want 404", p, resp.StatusCode)
		}
	}

	// Conditional GET, until the next generation.
	resp, _ := get(t, c, srv.URL+"/news/0.xml", nil)
	etag := resp.Header.Get("ETag")
	if resp, _ := get(t, c, srv.URL+"/news/0.xml", map[string]string{"If-None-Match": etag}); resp.StatusCode != 304 {
		t.Fatalf("conditional GET: %d", resp.StatusCode)
	}
	advance(1)
	if resp, _ := get(t, c, srv.URL+"/news/0.xml", map[string]string{"If-None-Match": etag}); resp.StatusCode != 200 {
		t.Fatalf("conditional GET after Advance: %d", resp.StatusCode)
	}
}

func TestNewsOPML(t *testing.T) {
	f := New(Options{Outlets: 11})
	srv := httptest.NewServer(f)
	defer srv.Close()
	resp, body := get(t, http.DefaultClient, srv.URL+"/news/sources.opml", nil)
	if resp.StatusCode != 200 {
		t.Fatalf("opml: %d", resp.StatusCode)
	}
	entries, err := opml.Parse(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 11 {
		t.Fatalf("%d entries, want 11", len(entries))
	}
	names := map[string]bool{}
	for i, e := range entries {
		out := f.Outlet(i)
		if e.FeedURL != fmt.Sprintf("%s/news/%d.xml", srv.URL, i) || e.Title != out.Name || e.Authority <= 0 || names[e.Title] {
			t.Errorf("entry %d: %+v (outlet %+v)", i, e, out)
		}
		names[e.Title] = true
		resp, body := get(t, http.DefaultClient, e.FeedURL, nil)
		if resp.StatusCode != 200 || !strings.Contains(body, "<title>"+strings.ReplaceAll(out.Name, "'", "&#39;")+"</title>") {
			t.Errorf("%s: %d", e.FeedURL, resp.StatusCode)
		}
	}
	if f.Outlet(0).Name != "The Harbor Ledger" || f.Outlet(0).Domain != "harborledger.example" {
		t.Errorf("outlet 0: %+v", f.Outlet(0))
	}
}

func TestNewsDeterministic(t *testing.T) {
	feeds := func(opts Options, gens int) [][]byte {
		f, _, advance := newsFarm(opts)
		advance(gens)
		var out [][]byte
		for n := range f.opts.Outlets {
			b, err := f.NewsFeed(n, f.Generation())
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, b)
		}
		o, err := f.NewsOPML("http://farm.test")
		if err != nil {
			t.Fatal(err)
		}
		return append(out, o)
	}
	a, b := feeds(Options{Seed: 7}, 12), feeds(Options{Seed: 7}, 12)
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			t.Fatalf("feed %d differs between two farms with the same seed and clock", i)
		}
	}
	c := feeds(Options{Seed: 8}, 12)
	if bytes.Equal(a[0], c[0]) && bytes.Equal(a[1], c[1]) {
		t.Fatal("another seed gives the same world")
	}

	// Later generations add articles and change none.
	f, _, advance := newsFarm(Options{})
	before := f.Articles(2, 0, 0)
	advance(10)
	after := map[string]Article{}
	for _, a := range f.Articles(2, 10, 0) {
		after[a.Link] = a
	}
	if len(after) <= len(before) {
		t.Fatalf("generation 10 has %d articles, generation 0 %d", len(after), len(before))
	}
	for _, a := range before {
		if after[a.Link] != a {
			t.Fatalf("article changed by later generations: %+v, then %+v", a, after[a.Link])
		}
	}
}

func TestNewsTimes(t *testing.T) {
	f, now, advance := newsFarm(Options{Base: 10, PerGeneration: 3, Items: 1000})
	start := now()
	advance(4)
	var all []Article
	for n := range f.opts.Outlets {
		all = append(all, f.Articles(n, 4, 0)...)
	}
	if got := f.Events(4); got != 22 {
		t.Fatalf("%d events at generation 4, want 22", got)
	}
	newest := map[int]time.Time{}
	for _, a := range all {
		if a.Published.After(now()) || a.Published.Before(start.Add(-9*4*time.Minute-3*time.Minute)) {
			t.Errorf("event %d published at %s, outside [%s, %s]", a.Event, a.Published, start.Add(-39*time.Minute), now())
		}
		if a.Event >= 10 && a.Published.Before(start.Add(-3*time.Minute)) {
			t.Errorf("event %d of a later generation published at %s, before generation 0", a.Event, a.Published)
		}
		if a.Published.After(newest[a.Event]) {
			newest[a.Event] = a.Published
		}
	}
	if last := newest[21]; now().Sub(last) > 3*time.Minute {
		t.Errorf("newest event published %s before now", now().Sub(last))
	}
}

var slot = regexp.MustCompile(`\{[A-Z0-9]+\}`)

// TestVocabulary checks the templates and the invariant the clustering
// relies on: the facts of two kinds of a topic share no word.
func TestVocabulary(t *testing.T) {
	words := func(s string) []string {
		return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9') })
	}
	owner := map[string]map[string]int{} // topic → word → kind
	stop := map[string]bool{"a": true, "an": true, "the": true, "of": true, "on": true, "for": true, "to": true, "in": true, "s": true, "its": true}
	for i, k := range kinds {
		if len(k.headlines) < 4 || len(k.leads) < 3 || len(k.seconds) < 2 || len(k.thirds) < 2 {
			t.Errorf("kind %d: too few templates", i)
		}
		has := map[string]bool{"{P}": true, "{L}": true, "{Q}": true, "{QL}": true, "{O}": true, "{C}": true, "{N}": true, "{M}": true,
			"{T}": k.t.len() > 0, "{U}": k.u.len() > 0, "{V}": k.v.len() > 0, "{O2}": k.topic != "science"}
		for _, tmpl := range slices.Concat(k.headlines, k.leads, k.seconds, k.thirds) {
			for _, s := range slot.FindAllString(tmpl, -1) {
				if !has[s] {
					t.Errorf("kind %d: %s in %q has no values", i, s, tmpl)
				}
			}
			if strings.Count(tmpl, "[") != strings.Count(tmpl, "]") || strings.Contains(tmpl, "||") || strings.Contains(tmpl, "[]") {
				t.Errorf("kind %d: malformed group in %q", i, tmpl)
			}
		}
		if owner[k.topic] == nil {
			owner[k.topic] = map[string]int{}
		}
		for _, pool := range []facts{k.t, k.u, k.v} {
			for j := range pool.len() {
				for _, w := range words(pool.at(j)) {
					if stop[w] {
						continue
					}
					if o, ok := owner[k.topic][w]; ok && o != i {
						t.Errorf("%s kinds %d and %d share %q", k.topic, o, i, w)
					}
					owner[k.topic][w] = i
				}
			}
		}
	}
	if len(owner) != 8 {
		t.Errorf("%d topics, want 8", len(owner))
	}
}

func TestTidy(t *testing.T) {
	testutil.CheckFunc(t, "tidy", tidy, map[string]string{
		"a afrobeat record":   "an afrobeat record",
		"A experiment":        "An experiment",
		"a 18% rise":          "an 18% rise",
		"a 8% rise":           "an 8% rise",
		"a 180m deal":         "a 180m deal",
		"a union":             "a union",
		"Thornings's name":    "Thornings' name",
		"a dam near Orrin's":  "a dam near Orrin's",
		"an already fine one": "an already fine one",
	})
}
