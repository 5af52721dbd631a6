package feedfarm

import (
	"html"
	"image/png"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/internal/feed"
	"github.com/newsflow/newsflow/internal/opml"
)

// fetchFeed gets outlet n's feed from the farm at base and parses it as the
// crawler does; the feed must answer 200 with items.
func fetchFeed(t *testing.T, c *http.Client, base string, n int, now time.Time) *feed.Feed {
	t.Helper()
	link := base + "/news/" + strconv.Itoa(n) + ".xml"
	resp, body := get(t, c, link, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("outlet %d feed: %d", n, resp.StatusCode)
	}
	u, _ := url.Parse(link)
	fd, err := feed.Parse([]byte(body), resp.Header.Get("Content-Type"), u, now)
	if err != nil || len(fd.Items) == 0 {
		t.Fatalf("outlet %d feed: %d items, %v", n, len(fd.Items), err)
	}
	return fd
}

// With ArticlePages, every link of every news feed answers 200 with a page
// that carries the article's title, outlet, date and text; the outlets'
// homepages list their articles; links the world did not publish are 404.
func TestArticlePages(t *testing.T) {
	f, now, advance := newsFarm(Options{ArticlePages: true, Items: 20})
	srv := httptest.NewServer(f)
	defer srv.Close()
	c := srv.Client()
	advance(3)
	g := f.Generation()
	pages := 0
	for n := range f.opts.Outlets {
		fd := fetchFeed(t, c, srv.URL, n, now())
		out := f.Outlet(n)
		if home := srv.URL + "/article/" + out.Domain; strings.TrimSuffix(fd.Link, "/") != home { // canonical: no slash
			t.Errorf("outlet %d: channel link %q, want %q", n, fd.Link, home)
		}
		want := f.Articles(n, g, 20)
		for i, it := range fd.Items {
			if !strings.HasPrefix(it.URL, srv.URL+"/article/"+out.Domain+"/") {
				t.Fatalf("outlet %d: link %s is not on the farm", n, it.URL)
			}
			resp, page := get(t, c, it.URL, nil)
			if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
				t.Fatalf("%s: %d %s", it.URL, resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			for _, s := range []string{"<h1>" + html.EscapeString(it.Title) + "</h1>", "<title>" + html.EscapeString(it.Title),
				html.EscapeString(out.Name), html.EscapeString(want[i].Summary), want[i].Published.UTC().Format("2 January 2006")} {
				if !strings.Contains(page, s) {
					t.Fatalf("%s: page lacks %q:\n%s", it.URL, s, page)
				}
			}
			pages++
		}
		resp, page := get(t, c, fd.Link, nil)
		if resp.StatusCode != http.StatusOK || !strings.Contains(page, html.EscapeString(fd.Items[0].Title)) {
			t.Fatalf("outlet %d homepage: %d\n%s", n, resp.StatusCode, page)
		}
	}

	// The sources list points at the farm's outlet pages too.
	_, body := get(t, c, srv.URL+"/news/sources.opml", nil)
	entries, err := opml.Parse(strings.NewReader(body))
	if err != nil || len(entries) != f.opts.Outlets || !strings.HasPrefix(entries[0].Homepage, srv.URL+"/article/") {
		t.Fatalf("opml: %+v %v", entries, err)
	}

	// Unpublished, mangled or foreign links are not found.
	a := f.Articles(0, g, 1)[0]
	path := strings.TrimPrefix(a.Link, "https://")
	next := f.Events(g) // the next event, not published yet
	for _, p := range []string{
		"/article/nowhere.example/" + path[strings.IndexByte(path, '/')+1:],
		"/article/" + path + "0",
		"/article/" + strings.Replace(path, a.Topic, "x", 1),
		"/article/" + path[:strings.LastIndexByte(path, '-')+1] + strconv.Itoa(next),
		"/article/" + path[:strings.LastIndexByte(path, '-')],
		"/article/",
	} {
		if resp, _ := get(t, c, srv.URL+p, nil); resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", p, resp.StatusCode)
		}
	}
	// Without the option the feeds link to the outlets' own sites, as
	// before, and the farm serves no pages.
	plain, _, _ := newsFarm(Options{Items: 20})
	psrv := httptest.NewServer(plain)
	defer psrv.Close()
	_, body = get(t, c, psrv.URL+"/news/0.xml", nil)
	if !strings.Contains(body, "<link>https://"+plain.Outlet(0).Domain+"/") || strings.Contains(body, "/article/") {
		t.Errorf("feed without ArticlePages links elsewhere:\n%.600s", body)
	}
	if resp, _ := get(t, c, psrv.URL+"/article/"+path, nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("article page without ArticlePages: %d", resp.StatusCode)
	}
	t.Logf("%d article pages served", pages)
}

// With ArticlePages every news item has a lead image on the farm, which
// the crawler's parser finds and which answers a PNG of the stated size;
// images of events not published yet are not found.
func TestLeadImages(t *testing.T) {
	f, now, advance := newsFarm(Options{ArticlePages: true, Items: 10})
	srv := httptest.NewServer(f)
	defer srv.Close()
	c := srv.Client()
	advance(2)
	seen := map[string]bool{}
	for n := range f.opts.Outlets {
		fd := fetchFeed(t, c, srv.URL, n, now())
		for _, it := range fd.Items {
			if !strings.HasPrefix(it.ImageURL, srv.URL+"/image/") {
				t.Fatalf("outlet %d item %q: image %q, want one on the farm", n, it.Title, it.ImageURL)
			}
			if seen[it.ImageURL] {
				t.Fatalf("image %s shared by two items", it.ImageURL)
			}
			seen[it.ImageURL] = true
			resp, b := get(t, c, it.ImageURL, nil)
			img, err := png.Decode(strings.NewReader(b))
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "image/png" || err != nil ||
				img.Bounds().Dx() != imageW || img.Bounds().Dy() != imageH {
				t.Fatalf("%s: %d %s %v", it.ImageURL, resp.StatusCode, resp.Header.Get("Content-Type"), err)
			}
		}
	}
	g := f.Generation()
	for _, p := range []string{"/image/" + strconv.Itoa(f.Events(g)) + "-0.png", "/image/0-99.png", "/image/x-1.png", "/image/1-1.gif"} {
		if resp, _ := get(t, c, srv.URL+p, nil); resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", p, resp.StatusCode)
		}
	}
}
