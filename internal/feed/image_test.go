package feed

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/newsflow/newsflow/internal/testutil"
)

// TestLeadImage parses the fixtures in testdata/images and checks the lead
// image of every item: each source kind, relative URLs, pixels, icons and
// other non-pictures passed over, items without an image.
func TestLeadImage(t *testing.T) {
	want := map[string]map[string]string{
		"rss.xml": {
			"https://news.example.com/world/media-content":       "https://cdn.example.com/large.jpg",
			"https://news.example.com/world/relative/story.html": "https://news.example.com/world/pictures/lead.png",
			"https://news.example.com/world/untyped":             "https://cdn.example.com/untyped.webp?w=800",
			"https://news.example.com/video/one":                 "https://cdn.example.com/v-poster.jpg",
			"https://news.example.com/world/thumbnail":           "https://cdn.example.com/thumb.jpg",
			"https://news.example.com/world/group":               "https://cdn.example.com/group-b.jpg",
			"https://news.example.com/world/enclosure":           "https://cdn.example.com/enclosure.jpg",
			"https://news.example.com/podcast/episode-1":         "https://cdn.example.com/episode.jpg",
			"https://news.example.com/world/content-img":         "https://news.example.com/uploads/2024/05/harbour.jpg",
			"https://news.example.com/world/description-img":     "https://news.example.com/world/images/silicon-valley.jpg",
			"https://news.example.com/world/pixel-only":          "",
			"https://news.example.com/world/no-image":            "",
			"https://news.example.com/world/not-http":            "",
		},
		"atom.xml": {
			"https://blog.example.org/2024/05/thumb":     "https://blog.example.org/img/thumb-640.jpg",
			"https://blog.example.org/2024/05/enclosure": "https://blog.example.org/img/enclosure.jpg",
			"https://blog.example.org/2024/05/relative":  "https://blog.example.org/2024/05/relative/figure-1.jpg",
		},
		"feed.json": {
			"https://json.example.net/one":   "https://json.example.net/img/one.jpg",
			"https://json.example.net/two":   "https://json.example.net/img/banner.png",
			"https://json.example.net/three": "https://json.example.net/img/attached.jpg",
			"https://json.example.net/four":  "",
		},
	}
	for file, items := range want {
		t.Run(file, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata", "images", file))
			if err != nil {
				t.Fatal(err)
			}
			f, err := Parse(b, "", testFeedURL, testFetched)
			if err != nil {
				t.Fatal(err)
			}
			checkFeed(t, f)
			got := map[string]string{}
			for _, it := range f.Items {
				got[it.URL] = it.ImageURL
				if it.RawArticle("s").ImageURL != it.ImageURL {
					t.Errorf("%s: the raw article lost the image", it.URL)
				}
			}
			for link, img := range items {
				g, ok := got[link]
				switch {
				case !ok:
					t.Errorf("no item %s (items: %v)", link, keys(got))
				case g != img:
					t.Errorf("%s: image %q, want %q", link, g, img)
				}
			}
			if len(got) != len(items) {
				t.Errorf("%d items, the table lists %d", len(got), len(items))
			}
		})
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestImageURL(t *testing.T) {
	base := mustURL("https://news.example.com/a/b/page.html?x=1")
	for _, c := range []struct{ raw, want string }{
		{"https://cdn.example.com/a.jpg", "https://cdn.example.com/a.jpg"},
		{"  HTTP://CDN.Example.COM/A.jpg?Sig=AbC#frag ", "http://cdn.example.com/A.jpg?Sig=AbC"},
		{"//cdn.example.com/a.jpg", "https://cdn.example.com/a.jpg"},
		{"/img/a.jpg", "https://news.example.com/img/a.jpg"},
		{"../img/a.jpg", "https://news.example.com/a/img/a.jpg"},
		{"a b.jpg", "https://news.example.com/a/b/a%20b.jpg"},
		{"https://user:pw@cdn.example.com/a.jpg", "https://cdn.example.com/a.jpg"},
		{"javascript:alert(1)", ""},
		{"data:image/png;base64,AAAA", ""},
		{"ftp://cdn.example.com/a.jpg", ""},
		{"https:///a.jpg", ""},
		{"", ""},
		{"https://cdn.example.com/" + strings.Repeat("a", MaxURLBytes), ""},
	} {
		got, err := ImageURL(c.raw, base)
		if got != c.want || (err == nil) != (c.want != "") {
			t.Errorf("ImageURL(%.40q) = %q, %v; want %q", c.raw, got, err, c.want)
		}
	}
	if _, err := ImageURL("/img/a.jpg", nil); err == nil {
		t.Error("relative URL without a base accepted")
	}
	if got, err := ImageURL("https://cdn.example.com/a.jpg", nil); err != nil || got != "https://cdn.example.com/a.jpg" {
		t.Errorf("absolute URL without a base: %q %v", got, err)
	}
}

func TestNotALeadImage(t *testing.T) {
	for raw, skip := range map[string]bool{
		"https://cdn.example.com/2024/silicon-valley.jpg":   false,
		"https://cdn.example.com/2024/market-share.jpg":     false,
		"https://cdn.example.com/2024/lead.gif":             false,
		"https://cdn.example.com/favicon.png":               true,
		"https://cdn.example.com/static/icons/rss.png":      true,
		"https://cdn.example.com/img/site-logo.png":         true,
		"https://cdn.example.com/wp-includes/smilies/a.png": true,
		"https://cdn.example.com/blank.gif":                 true,
		"https://cdn.example.com/a/chart.svg":               true,
		"https://secure.gravatar.com/avatar/abc.jpg":        true,
		"https://pixel.example.com/a.jpg":                   true,
		"https://feeds.feedburner.com/~ff/x?d=1":            true,
		"https://cdn.example.com/img/1x1.gif":               true,
		"http://images.pheedo.com/images/mm/facebook.gif":   true,
		"https://cdn.example.com/share/twitter.png":         true,
		"https://cdn.example.com/skins/filetype/jpg.gif":    true,
		"https://cdn.example.com/2024/facebook-results.jpg": false,
	} {
		if got := notALeadImage(mustURL(raw)); got != skip {
			t.Errorf("notALeadImage(%s) = %v, want %v", raw, got, skip)
		}
	}
	testutil.CheckFunc(t, "dimension", dimension, map[string]int{"640": 640, " 640px ": 640, "100%": -1, "": -1, "-3": -1, "1": 1})
}

// FuzzImageURL: what ImageURL accepts is an absolute http(s) URL within
// the size limit that it accepts again unchanged (the articles operator
// validates the crawler's image URLs with it).
func FuzzImageURL(f *testing.F) {
	for _, s := range []string{"https://cdn.example.com/a.jpg", "//cdn.example.com/a b.jpg?x=%41#f", "../img/ä.png", "javascript:x", "http://[::1]:80/a.gif", "HTTP://User@Host/%zz"} {
		f.Add(s)
	}
	base := mustURL("https://news.example.com/a/b/page.html")
	f.Fuzz(func(t *testing.T, raw string) {
		out, err := ImageURL(raw, base)
		if err != nil {
			return
		}
		if !strings.HasPrefix(out, "http://") && !strings.HasPrefix(out, "https://") || len(out) > MaxURLBytes {
			t.Fatalf("ImageURL(%q) = %q", raw, out)
		}
		again, err := ImageURL(out, nil)
		if err != nil || again != out {
			t.Fatalf("ImageURL(%q) = %q, then %q, %v", raw, out, again, err)
		}
	})
}
