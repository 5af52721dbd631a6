package feed

import (
	"strings"
	"testing"

	"golang.org/x/text/encoding/charmap"
)

func TestDiscover(t *testing.T) {
	page := mustURL("https://www.example.com/blog/post.html")
	const body = `<!DOCTYPE html><html><head>
<title>Blog</title>
<link rel="stylesheet" type="text/css" href="/style.css">
<link rel="alternate" type="application/rss+xml" title="RSS" href="/feed.xml">
<link rel="alternate" type="application/atom+xml" href="atom.xml#top">
<link rel="Alternate" type="Application/Feed+JSON" href="https://www.example.com/feed.json">
<link rel="alternate" type="application/json" href="//api.example.com/feed">
<link rel="alternate" type="application/rss+xml" href="/feed.xml">
<link rel="alternate" hreflang="de" type="text/html" href="/de/">
<link rel="alternate stylesheet" type="application/rss+xml" href="/alt-style-but-feed.xml">
<link rel="alternate" type="application/rss+xml; charset=utf-8" href="/with-params.xml">
<link rel="alternate" type="application/rss+xml" href="javascript:alert(1)">
<link rel="alternate" type="application/rss+xml" href="">
<link rel="alternate" type="application/rss+xml">
<link rel="feed" type="application/rss+xml" href="/not-alternate.xml">
<script>document.write('<link rel="alternate" type="application/rss+xml" href="/in-script.xml">')</script>
</head><body>
<link rel="alternate" type="application/atom+xml" href="/body.atom"/>
</body></html>`
	got := Discover([]byte(body), page)
	want := []string{
		"https://www.example.com/feed.xml",
		"https://www.example.com/blog/atom.xml",
		"https://www.example.com/feed.json",
		"https://api.example.com/feed",
		"https://www.example.com/alt-style-but-feed.xml",
		"https://www.example.com/with-params.xml",
		"https://www.example.com/body.atom",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("Discover:\n got %q\nwant %q", got, want)
	}
}

func TestDiscoverBaseAndEncoding(t *testing.T) {
	body := `<html><head><meta charset="windows-1252"><base href="https://cdn.example.org/site/">` +
		`<base href="https://ignored.example/">` +
		`<link rel="alternate" type="application/atom+xml" title="Caf` + "\xe9" + `" href="caf` + "\xe9" + `.atom">` +
		`</head></html>`
	got := Discover([]byte(body), mustURL("https://www.example.com/"))
	if len(got) != 1 || got[0] != "https://cdn.example.org/site/caf%C3%A9.atom" {
		t.Fatalf("got %q", got)
	}
	// Nothing to find.
	if got := Discover([]byte("<html><body>no feeds</body></html>"), nil); len(got) != 0 {
		t.Fatalf("got %q", got)
	}
	// Without a page URL only absolute hrefs are kept.
	enc, _ := charmap.Windows1252.NewEncoder().String(`<link rel=alternate type=application/rss+xml href=/rel.xml><link rel=alternate type=application/rss+xml href=http://abs.example/f>`)
	if got := Discover([]byte(enc), nil); len(got) != 1 || got[0] != "http://abs.example/f" {
		t.Fatalf("got %q", got)
	}
}

func TestDiscoverSharedPages(t *testing.T) {
	dir := sharedDir(t, "feeds/real/rsparser_resources")
	for _, name := range []string{"DaringFireball.html", "sixcolors.html", "furbo.html", "coco.html", "inessential.html", "YouTubeTheVolvoRocks.html"} {
		body, err := readShared(dir, name)
		if err != nil {
			t.Logf("%s: %v", name, err)
			continue
		}
		got := Discover(body, mustURL("https://"+strings.TrimSuffix(strings.ToLower(name), ".html")+".example/"))
		t.Logf("%s: %q", name, got)
		for _, u := range got {
			if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
				t.Errorf("%s: %q is not http(s)", name, u)
			}
		}
		if name == "DaringFireball.html" && len(got) == 0 {
			t.Errorf("%s: no feeds found", name)
		}
	}
}
