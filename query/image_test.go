package query_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/newsflow/newsflow/internal/fetch"
	"github.com/newsflow/newsflow/operators/story"
	"github.com/newsflow/newsflow/query"
	"github.com/newsflow/newsflow/query/images"
	"github.com/valyala/fasthttp"
)

// imageOrigin is an outlet's image server: it counts the requests of each
// path.
type imageOrigin struct {
	srv *httptest.Server
	mu  sync.Mutex
	n   map[string]int
}

// pngBytes is a body that sniffs as PNG: the signature, then size bytes of
// fill.
func pngBytes(size int, fill byte) []byte {
	return append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{fill}, size)...)
}

func newImageOrigin(t *testing.T) *imageOrigin {
	o := &imageOrigin{n: map[string]int{}}
	o.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		o.n[r.URL.Path]++
		o.mu.Unlock()
		send := func(ctype string, body []byte) {
			w.Header().Set("Content-Type", ctype)
			_, _ = w.Write(body)
		}
		switch p := r.URL.Path; {
		case strings.HasPrefix(p, "/photo/"): // 2,000 bytes of PNG, one per name
			send("image/png", pngBytes(2000, p[len(p)-5]))
		case p == "/untyped.jpg": // a JPEG served without a type
			_, _ = w.Write(append([]byte("\xff\xd8\xff\xe0"), bytes.Repeat([]byte{1}, 100)...))
		case p == "/page.html":
			send("text/html; charset=utf-8", []byte("<!doctype html><html><body>not an image</body></html>"))
		case p == "/liar.jpg": // says JPEG, sends HTML
			send("image/jpeg", []byte("<!doctype html><html><script>alert(1)</script></html>"))
		case p == "/vector.svg":
			send("image/svg+xml", []byte(`<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>`))
		case p == "/huge.png":
			send("image/png", pngBytes(100<<10, 'h'))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(o.srv.Close)
	return o
}

func (o *imageOrigin) url(path string) string { return o.srv.URL + path }

func (o *imageOrigin) hits(path string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n[path]
}

// imageArticles ingests one article per image URL (unrelated titles) and
// waits until the story stage has applied them.
func imageArticles(t *testing.T, n *testNode, images ...string) {
	t.Helper()
	var lines []string
	titles := []string{"Harbour cranes idle as dock workers strike", "Volcano erupts near Reykjavik, flights grounded",
		"Parliament passes budget after late vote", "Orchestra premieres lost symphony", "Glacier retreat measured by satellites",
		"Vineyard harvest begins early in heatwave", "Marathon record falls in Berlin", "Bridge closed for repairs until spring",
		"Museum returns looted bronzes", "Comet visible to the naked eye this week"}
	for i, img := range images {
		b, _ := json.Marshal(map[string]string{
			"url":          fmt.Sprintf("https://outlet%d.example/news/%d", i, i),
			"source_id":    fmt.Sprintf("outlet%d", i),
			"title":        titles[i%len(titles)],
			"image_url":    img,
			"published_at": baseTime.Add(time.Duration(i) * time.Minute).Format(time.RFC3339),
		})
		lines = append(lines, string(b))
	}
	r := n.post(t, "/api/v1/articles", strings.Join(lines, "\n")+"\n", "Content-Type", "application/x-ndjson")
	if r.status != fasthttp.StatusAccepted {
		t.Fatalf("ingest: %s", r)
	}
	waitArticles(t, n, len(images))
}

// loopback lets a test node's proxy dial the httptest origin, as the
// crawler's allow list would.
var loopback = fetch.Options{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}

// TestImageProxy: an ingested article's image is served through the
// proxy with caching headers, fetched from its origin once (also after a
// restart, from the disk cache), evicted when the cache is full; non-images,
// SVG, oversize bodies, failing origins, ids no article has and malformed
// ids are refused with JSON errors.
//
// It is one scenario checked step by step (cyclomatic 27): the steps
// depend on each other's state, so they stay in order in one function.
func TestImageProxy(t *testing.T) {
	o := newImageOrigin(t)
	dir := t.TempDir()
	// Room for two 2,000-byte images.
	opts := query.Options{Images: images.Options{Fetch: loopback, MaxBytes: 64 << 10, CacheBytes: 4500}}
	n := newTestNode(t, withArticles(), withDir(dir), withQuery(opts))
	paths := []string{"/photo/a.png", "/photo/b.png", "/photo/c.png", "/untyped.jpg", "/page.html", "/liar.jpg", "/vector.svg", "/huge.png", "/missing.png"}
	var urls []string
	for _, p := range paths {
		urls = append(urls, o.url(p))
	}
	imageArticles(t, n, urls...)
	proxy := func(p string) string { return story.ImagePath(o.url(p)) }

	r := n.get(t, proxy("/photo/a.png"))
	if r.status != fasthttp.StatusOK || !bytes.Equal(r.body, pngBytes(2000, 'a')) {
		t.Fatalf("image: %d, %d bytes", r.status, len(r.body))
	}
	etag := r.header["Etag"]
	switch {
	case r.header["Content-Type"] != "image/png":
		t.Errorf("Content-Type %q", r.header["Content-Type"])
	case !strings.HasPrefix(r.header["Cache-Control"], "public, max-age="):
		t.Errorf("Cache-Control %q", r.header["Cache-Control"])
	case !strings.HasPrefix(etag, `"`):
		t.Errorf("ETag %q", etag)
	case !strings.Contains(r.header["Content-Security-Policy"], "sandbox") || r.header["X-Content-Type-Options"] != "nosniff":
		t.Errorf("CSP %q, X-Content-Type-Options %q", r.header["Content-Security-Policy"], r.header["X-Content-Type-Options"])
	}
	// Cached: the origin is not asked again.
	if r := n.get(t, proxy("/photo/a.png")); r.status != fasthttp.StatusOK || !bytes.Equal(r.body, pngBytes(2000, 'a')) {
		t.Fatalf("second request: %s", r)
	}
	if h := o.hits("/photo/a.png"); h != 1 {
		t.Errorf("origin asked %d times, want 1", h)
	}
	if r := n.do(t, fasthttp.MethodGet, proxy("/photo/a.png"), nil, "If-None-Match", etag); r.status != fasthttp.StatusNotModified || len(r.body) != 0 {
		t.Errorf("If-None-Match: %d, %d bytes", r.status, len(r.body))
	}
	// Served by what the bytes are, whatever the origin says.
	if r := n.get(t, proxy("/untyped.jpg")); r.status != fasthttp.StatusOK || r.header["Content-Type"] != "image/jpeg" {
		t.Errorf("untyped JPEG: %d %q", r.status, r.header["Content-Type"])
	}

	wantError(t, n.get(t, proxy("/page.html")), fasthttp.StatusBadGateway, "text/html", "not an image")
	wantError(t, n.get(t, proxy("/liar.jpg")), fasthttp.StatusBadGateway, "not a JPEG")
	wantError(t, n.get(t, proxy("/vector.svg")), fasthttp.StatusBadGateway, "SVG")
	wantError(t, n.get(t, proxy("/huge.png")), fasthttp.StatusBadGateway, "larger than 65536 bytes")
	wantError(t, n.get(t, proxy("/missing.png")), fasthttp.StatusBadGateway, "answered 404")
	// A failure is remembered: the origin is not asked again at once.
	wantError(t, n.get(t, proxy("/missing.png")), fasthttp.StatusBadGateway, "answered 404")
	if h := o.hits("/missing.png"); h != 1 {
		t.Errorf("failing origin asked %d times, want 1", h)
	}
	// Not an open proxy: a URL no article has, and ids that are not ids.
	wantError(t, n.get(t, story.ImagePath(o.url("/photo/z.png"))), fasthttp.StatusNotFound, "no article has image")
	if o.hits("/photo/z.png") != 0 {
		t.Error("the proxy fetched a URL no article has")
	}
	for _, bad := range []string{"abc", strings.Repeat("A", 32), strings.Repeat("g", 32), strings.Repeat("a", 33)} {
		wantError(t, n.get(t, story.ImagePathPrefix+bad), fasthttp.StatusBadRequest, "image id")
	}

	// The cache holds two images: after b and c, a is fetched again.
	for _, p := range []string{"/photo/b.png", "/photo/c.png", "/photo/a.png"} {
		if r := n.get(t, proxy(p)); r.status != fasthttp.StatusOK {
			t.Fatalf("%s: %s", p, r)
		}
	}
	if h := o.hits("/photo/a.png"); h != 2 {
		t.Errorf("evicted image: origin asked %d times, want 2", h)
	}

	// The cache is on disk: a restarted node serves c and a without their
	// origin.
	n.stop()
	n2 := newTestNode(t, withArticles(), withDir(dir), withQuery(opts))
	for _, p := range []string{"/photo/c.png", "/photo/a.png"} {
		if r := n2.get(t, proxy(p)); r.status != fasthttp.StatusOK || !bytes.Equal(r.body, pngBytes(2000, p[len(p)-5])) {
			t.Fatalf("after restart %s: %d, %d bytes", p, r.status, len(r.body))
		}
	}
	if a, c := o.hits("/photo/a.png"), o.hits("/photo/c.png"); a != 2 || c != 1 {
		t.Errorf("after restart the origin was asked again: a %d, c %d times", a, c)
	}
}

// TestImageProxyPrivateAddress: without the crawler's permission the proxy
// does not dial private addresses, even for an image an article has.
func TestImageProxyPrivateAddress(t *testing.T) {
	o := newImageOrigin(t)
	n := newTestNode(t, withArticles())
	imageArticles(t, n, o.url("/photo/a.png"))
	wantError(t, n.get(t, story.ImagePath(o.url("/photo/a.png"))), fasthttp.StatusForbidden, "address")
	if h := o.hits("/photo/a.png"); h != 0 {
		t.Errorf("origin on a private address asked %d times", h)
	}
}

// TestStoryImage: end to end, an article ingested with image_url founds a
// story whose image (in the story list, the story and the feed) answers
// 200 with the image's bytes; a story without images has no image field;
// an invalid image_url is refused at ingestion.
func TestStoryImage(t *testing.T) {
	o := newImageOrigin(t)
	n := newTestNode(t, withArticles(), withQuery(query.Options{Images: images.Options{Fetch: loopback}}))
	r := n.post(t, "/api/v1/articles", `{"url":"https://x.example/a","title":"A title","image_url":"javascript:alert(1)"}`)
	wantError(t, r, fasthttp.StatusBadRequest, "image_url")

	imageArticles(t, n, o.url("/photo/s.png"), "")
	type card struct {
		ID    string  `json:"id"`
		Title string  `json:"title"`
		Image *string `json:"image"`
	}
	var page struct {
		Stories []card `json:"stories"`
	}
	if err := json.Unmarshal(n.get(t, "/api/v1/stories").body, &page); err != nil || len(page.Stories) != 2 {
		t.Fatalf("stories: %v, %d", err, len(page.Stories))
	}
	var with, without card
	for _, c := range page.Stories {
		if c.Image != nil {
			with = c
		} else {
			without = c
		}
	}
	want := story.ImagePath(o.url("/photo/s.png"))
	if with.Image == nil || *with.Image != want || without.ID == "" {
		t.Fatalf("stories %+v: want one with image %s and one without", page.Stories, want)
	}
	var detail card
	if err := json.Unmarshal(n.get(t, "/api/v1/stories/"+with.ID).body, &detail); err != nil || detail.Image == nil || *detail.Image != want {
		t.Errorf("story detail image: %v %v", detail.Image, err)
	}
	var feed struct {
		Stories []card `json:"stories"`
	}
	if err := json.Unmarshal(n.get(t, "/api/v1/feed").body, &feed); err != nil {
		t.Fatal(err)
	}
	for _, c := range feed.Stories {
		if c.ID == with.ID && (c.Image == nil || *c.Image != want) {
			t.Errorf("feed item image %v, want %s", c.Image, want)
		}
	}
	r = n.get(t, *with.Image)
	if r.status != fasthttp.StatusOK || !bytes.Equal(r.body, pngBytes(2000, 's')) || r.header["Content-Type"] != "image/png" {
		t.Fatalf("story image: %d %q, %d bytes", r.status, r.header["Content-Type"], len(r.body))
	}
}

// TestClusterImageProxy: a node that does not own the story partition
// looks the image up at the owner, then fetches and caches it itself; a
// client cannot ask for the lookup (resolve=1 is for peers).
func TestClusterImageProxy(t *testing.T) {
	o := newImageOrigin(t)
	c := newClusterNet(t, map[string][]int32{"a": {0, 2}, "b": {1, 3}},
		withQuery(query.Options{PeerTimeout: 2 * time.Second, Images: images.Options{Fetch: loopback}}))
	a, b := c.node("a"), c.node("b")
	imageArticles(t, a, o.url("/photo/k.png"))
	path := story.ImagePath(o.url("/photo/k.png"))
	for i, n := range []*testNode{b, b, a} {
		r := n.get(t, path)
		if r.status != fasthttp.StatusOK || !bytes.Equal(r.body, pngBytes(2000, 'k')) {
			t.Fatalf("request %d: %d, %d bytes", i, r.status, len(r.body))
		}
	}
	// b fetched once and then answered from its cache; a fetched once.
	if h := o.hits("/photo/k.png"); h != 2 {
		t.Errorf("origin asked %d times, want 2 (once per node)", h)
	}
	if r := b.get(t, path+"?resolve=1"); r.status != fasthttp.StatusOK || r.header["Content-Type"] != "image/png" {
		t.Errorf("a client's resolve=1: %d %q %s", r.status, r.header["Content-Type"], r.body)
	}
	wantError(t, b.get(t, story.ImagePath(o.url("/photo/never.png"))), fasthttp.StatusNotFound, "no article has image")
}
