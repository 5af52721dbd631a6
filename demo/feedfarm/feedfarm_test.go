package feedfarm

import (
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func get(t *testing.T, c *http.Client, url string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp, string(b)
}

func TestFarm(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.xml"), []byte("<rss/>"), 0o644)
	f := New(Options{Dir: dir, Faults: true, Items: 3})
	srv := httptest.NewServer(f)
	defer srv.Close()
	c := &http.Client{Transport: &http.Transport{DisableCompression: true}, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	resp, body := get(t, c, srv.URL+"/files/a.xml", nil)
	if resp.StatusCode != 200 || body != "<rss/>" {
		t.Fatalf("file: %d %q", resp.StatusCode, body)
	}
	resp, _ = get(t, c, srv.URL+"/files/a.xml", map[string]string{"If-None-Match": resp.Header.Get("ETag")})
	if resp.StatusCode != 304 {
		t.Fatalf("conditional GET: %d", resp.StatusCode)
	}
	if resp, _ := get(t, c, srv.URL+"/files/../../etc/passwd", nil); resp.StatusCode != 404 {
		t.Fatalf("path escape: %d", resp.StatusCode)
	}

	_, g0 := get(t, c, srv.URL+"/gen/7.xml", nil)
	if strings.Count(g0, "<item>") != 3 || !strings.Contains(g0, "gen-7-0") {
		t.Fatalf("generated feed: %s", g0)
	}
	f.Advance()
	_, g1 := get(t, c, srv.URL+"/gen/7.xml", nil)
	if !strings.Contains(g1, "gen-7-1<") || strings.Contains(g1, "gen-7--2<") {
		t.Fatalf("advance did not add an item: %s", g1)
	}

	for kind, want := range map[string]int{"410": 410, "429": 429, "302": 302, "301-chain": 301, "redirect-loop": 302, "html": 200, "invalid-xml": 200} {
		resp, _ := get(t, c, srv.URL+"/fault/"+kind, nil)
		if resp.StatusCode != want {
			t.Errorf("fault %s: %d, want %d", kind, resp.StatusCode, want)
		}
	}
	if resp, _ := get(t, c, srv.URL+"/fault/429", nil); resp.Header.Get("Retry-After") != "120" {
		t.Error("429 without Retry-After")
	}
	codes := ""
	for i := 0; i < 4; i++ {
		resp, _ := get(t, c, srv.URL+"/fault/500-burst", nil)
		codes += resp.Status[:3] + " "
	}
	if strings.Count(codes, "500") != 3 {
		t.Errorf("500-burst: %s", codes)
	}
	// The bomb decompresses to far more than it weighs.
	resp, err := c.Get(srv.URL + "/fault/gzip-bomb")
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := io.Copy(io.Discard, io.LimitReader(zr, 64<<20))
	resp.Body.Close()
	if n != 64<<20 {
		t.Fatalf("bomb decompressed to only %d bytes", n)
	}
	// Faults are off unless enabled.
	srv2 := httptest.NewServer(New(Options{}))
	defer srv2.Close()
	if resp, _ := get(t, c, srv2.URL+"/fault/410", nil); resp.StatusCode != 404 {
		t.Fatalf("fault served while disabled: %d", resp.StatusCode)
	}
}

func TestFarmOneLineFeedsLinkTheirPages(t *testing.T) {
	f := New(Options{Items: 2, OneLine: true})
	srv := httptest.NewServer(f)
	defer srv.Close()
	c := &http.Client{}
	_, feed := get(t, c, srv.URL+"/gen/3.xml", nil)
	link := srv.URL + "/page/3/0"
	if !strings.Contains(feed, "<link>"+link+"</link>") || !strings.Contains(feed, "<description>Officials announced 0 new measures.</description>") {
		t.Fatalf("one-line feed: %s", feed)
	}
	resp, page := get(t, c, link, nil)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
		strings.Count(page, "<p>Paragraph") != 8 || !strings.Contains(page, "development 0") {
		t.Fatalf("page: %d %s", resp.StatusCode, page)
	}
	if resp, _ := get(t, c, srv.URL+"/page/x", nil); resp.StatusCode != 404 {
		t.Errorf("bad page name: %d", resp.StatusCode)
	}
	if plain := string(New(Options{Items: 2}).Generated(3, 0)); strings.Contains(plain, "/page/") || !strings.Contains(plain, "Analysts expect") {
		t.Errorf("a farm without OneLine serves: %s", plain)
	}
}
