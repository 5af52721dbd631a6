package canon

import (
	"errors"
	"math/rand/v2"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"
)

func mustParse(t testing.TB, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestCanonical(t *testing.T) {
	base := mustParse(t, "https://news.example.com/feeds/world/rss.xml?x=1")
	tests := []struct {
		name string
		raw  string
		base *url.URL
		want string
	}{
		// Scheme and host case.
		{"lower scheme and host", "HTTPS://News.Example.COM/Path/To", nil, "https://news.example.com/Path/To"},
		{"path case kept", "https://example.com/ABC?Q=V", nil, "https://example.com/ABC?Q=V"},
		{"www kept", "https://www.example.com/a", nil, "https://www.example.com/a"},
		{"trailing dot host", "https://example.com./a", nil, "https://example.com/a"},
		{"trailing dots host", "https://example.com../a", nil, "https://example.com/a"},
		{"userinfo dropped", "https://user:pw@example.com/a", nil, "https://example.com/a"},

		// Default ports.
		{"http :80 dropped", "http://example.com:80/a", nil, "http://example.com/a"},
		{"https :443 dropped", "https://example.com:443/a", nil, "https://example.com/a"},
		{"http :443 kept", "http://example.com:443/a", nil, "http://example.com:443/a"},
		{"https :80 kept", "https://example.com:80/a", nil, "https://example.com:80/a"},
		{"other port kept", "https://example.com:8443/a", nil, "https://example.com:8443/a"},
		{"port leading zeros", "https://example.com:0443/a", nil, "https://example.com/a"},
		{"empty port", "https://example.com:/a", nil, "https://example.com/a"},

		// IDNA.
		{"idna to punycode", "https://Bücher.example/x", nil, "https://xn--bcher-kva.example/x"},
		{"punycode kept", "https://XN--BCHER-KVA.example/x", nil, "https://xn--bcher-kva.example/x"},
		{"idna escaped host", "https://%E4%B8%AD%E5%9B%BD.cn/", nil, "https://xn--fiqs8s.cn/"},
		{"fullwidth host mapped", "https://ｅｘａｍｐｌｅ.com/", nil, "https://example.com/"},

		// IP literals.
		{"ipv4", "http://192.168.0.1:80/a", nil, "http://192.168.0.1/a"},
		{"ipv6", "http://[2001:DB8:0:0::1]:8080/a", nil, "http://[2001:db8::1]:8080/a"},

		// Fragments.
		{"fragment removed", "https://example.com/a#section-2", nil, "https://example.com/a"},
		{"empty fragment removed", "https://example.com/a#", nil, "https://example.com/a"},

		// Tracking parameters.
		{"utm removed", "https://example.com/a?utm_source=rss&utm_medium=feed&id=7", nil, "https://example.com/a?id=7"},
		{"utm any case", "https://example.com/a?UTM_Source=x&Utm_campaign=y", nil, "https://example.com/a"},
		{"utm escaped", "https://example.com/a?utm%5Fsource=x&b=1", nil, "https://example.com/a?b=1"},
		{"click ids removed", "https://example.com/a?fbclid=1&gclid=2&dclid=3&msclkid=4&yclid=5&igshid=6&b=2", nil, "https://example.com/a?b=2"},
		{"mailchimp removed", "https://example.com/a?mc_cid=1&mc_eid=2", nil, "https://example.com/a"},
		{"ga removed", "https://example.com/a?_ga=1&_gl=2&ref_src=twsrc", nil, "https://example.com/a"},
		{"tracking key case", "https://example.com/a?FBCLID=1", nil, "https://example.com/a"},
		{"ref kept", "https://example.com/a?ref=home", nil, "https://example.com/a?ref=home"},
		{"cmpid kept", "https://example.com/a?cmpid=rss", nil, "https://example.com/a?cmpid=rss"},
		{"utm value not key", "https://example.com/a?q=utm_source", nil, "https://example.com/a?q=utm_source"},

		// Query order, empties.
		{"query sorted", "https://example.com/a?z=1&a=2&m=3", nil, "https://example.com/a?a=2&m=3&z=1"},
		{"equal keys stable", "https://example.com/a?b=2&a=x&b=1&a=y", nil, "https://example.com/a?a=x&a=y&b=2&b=1"},
		{"empty pairs dropped", "https://example.com/a?&&a=1&&", nil, "https://example.com/a?a=1"},
		{"empty query dropped", "https://example.com/a?", nil, "https://example.com/a"},
		{"key without value", "https://example.com/a?b&a=", nil, "https://example.com/a?a=&b"},
		{"plus kept", "https://example.com/s?q=a+b", nil, "https://example.com/s?q=a+b"},
		{"semicolon not split", "https://example.com/s?a=1;b=2", nil, "https://example.com/s?a=1;b=2"},
		{"escaped amp kept", "https://example.com/s?q=a%26b", nil, "https://example.com/s?q=a%26b"},
		{"space in query", "https://example.com/s?q=a b", nil, "https://example.com/s?q=a%20b"},

		// Trailing slash and paths.
		{"trailing slash removed", "https://example.com/news/", nil, "https://example.com/news"},
		{"trailing slashes removed", "https://example.com/news//", nil, "https://example.com/news"},
		{"root kept", "https://example.com/", nil, "https://example.com/"},
		{"empty path root", "https://example.com", nil, "https://example.com/"},
		{"empty path with query", "https://example.com?a=1", nil, "https://example.com/?a=1"},
		{"index.html kept", "https://example.com/news/index.html", nil, "https://example.com/news/index.html"},
		{"dot segments", "https://example.com/a/./b/../c", nil, "https://example.com/a/c"},
		{"dot segments above root", "https://example.com/../../a", nil, "https://example.com/a"},
		{"inner double slash kept", "https://example.com/a//b", nil, "https://example.com/a//b"},

		// Percent-encoding.
		{"unreserved decoded", "https://example.com/%7Euser/%61b%2D%2e%5F", nil, "https://example.com/~user/ab-._"},
		{"hex upper-cased", "https://example.com/a%2fb%c3%a9", nil, "https://example.com/a%2Fb%C3%A9"},
		{"reserved kept escaped", "https://example.com/a%2Fb%3F", nil, "https://example.com/a%2Fb%3F"},
		{"non-ascii path escaped", "https://example.com/café", nil, "https://example.com/caf%C3%A9"},
		{"space escaped", "https://example.com/a b", nil, "https://example.com/a%20b"},
		{"stray percent", "https://example.com/100%-free?d=5%", nil, "https://example.com/100%25-free?d=5%25"},
		{"sub-delims literal", "https://example.com/a!b(c)*'", nil, "https://example.com/a!b(c)*'"},
		{"sub-delims literal with space", "https://example.com/a!b c", nil, "https://example.com/a!b%20c"},
		{"escaped dots are dot segments", "https://example.com/a/%2E%2E/b", nil, "https://example.com/b"},
		{"brackets in path", "https://example.com/a[1]", nil, "https://example.com/a%5B1%5D"},
		{"backslash escaped", `https://example.com/a\b`, nil, "https://example.com/a%5Cb"},

		// Whitespace.
		{"surrounding space", "  https://example.com/a \n", nil, "https://example.com/a"},
		{"embedded newline", "https://example.com/very-long-\n  slug", nil, "https://example.com/very-long-%20%20slug"},
		{"embedded tab", "https://exa\tmple.com/a", nil, "https://example.com/a"},

		// Resolution.
		{"relative path", "../europe/story-1", base, "https://news.example.com/feeds/europe/story-1"},
		{"absolute path", "/2024/05/story/", base, "https://news.example.com/2024/05/story"},
		{"scheme relative", "//cdn.example.net/x", base, "https://cdn.example.net/x"},
		{"query only", "?id=9", base, "https://news.example.com/feeds/world/rss.xml?id=9"},
		{"absolute ignores base", "http://other.example/a", base, "http://other.example/a"},
		{"fragment only", "#top", base, "https://news.example.com/feeds/world/rss.xml?x=1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Canonical(tt.raw, tt.base)
			if err != nil {
				t.Fatalf("Canonical(%q): %v", tt.raw, err)
			}
			if got != tt.want {
				t.Fatalf("Canonical(%q)\n got %q\nwant %q", tt.raw, got, tt.want)
			}
			again, err := Canonical(got, nil)
			if err != nil || again != got {
				t.Fatalf("not idempotent: Canonical(%q) = %q, %v", got, again, err)
			}
		})
	}
}

func TestCanonicalErrors(t *testing.T) {
	base := mustParse(t, "https://example.com/feed")
	tests := []struct {
		raw  string
		base *url.URL
		want error
	}{
		{"", nil, ErrEmpty},
		{" \t\n", base, ErrEmpty},
		{"/relative/path", nil, ErrNotAbsolute},
		{"story.html", nil, ErrNotAbsolute},
		{"www.example.com/a", nil, ErrNotAbsolute},
		{"ftp://example.com/a", nil, ErrUnsupportedScheme},
		{"mailto:editor@example.com", base, ErrUnsupportedScheme},
		{"javascript:alert(1)", base, ErrUnsupportedScheme},
		{"data:text/html,hi", nil, ErrUnsupportedScheme},
		{"tag:example.com,2024:1", base, ErrUnsupportedScheme},
		{"urn:uuid:1225c695-cfb8-4ebb-aaaa-80da344efa6a", base, ErrUnsupportedScheme},
		{"http:opaque", nil, ErrInvalidHost},
		{"http:///path", nil, ErrInvalidHost},
		{"https://exa$mple.com/", nil, ErrInvalidHost},
		{"https://example.com:99999/", nil, ErrInvalidHost},
		{"http://[fe80::1%25en0]/", nil, ErrInvalidHost},
	}
	for _, tt := range tests {
		got, err := Canonical(tt.raw, tt.base)
		if !errors.Is(err, tt.want) {
			t.Errorf("Canonical(%q) = %q, %v; want error %v", tt.raw, got, err, tt.want)
		}
	}
	// Errors that come from url.Parse are reported too.
	if _, err := Canonical("https://exa mple.com/", nil); err == nil {
		t.Error("space in host: want error")
	}
}

func TestIsTrackingParam(t *testing.T) {
	for _, k := range []string{"utm_source", "UTM_MEDIUM", "utm_", "fbclid", "GCLID", "dclid", "msclkid",
		"mc_cid", "mc_eid", "igshid", "yclid", "_ga", "_gl", "ref_src"} {
		if !IsTrackingParam(k) {
			t.Errorf("IsTrackingParam(%q) = false", k)
		}
	}
	for _, k := range []string{"id", "ref", "utm", "source", "cmpid", "page", "q", "p", "_gac"} {
		if IsTrackingParam(k) {
			t.Errorf("IsTrackingParam(%q) = true", k)
		}
	}
}

func TestArticleID(t *testing.T) {
	a := ArticleID("https://example.com/a")
	if len(a) != 32 || strings.Trim(a, "0123456789abcdef") != "" {
		t.Fatalf("ArticleID = %q, want 32 lower-case hex characters", a)
	}
	// Fixed value: ids are stored in the log and must never change.
	// printf %s https://example.com/a | sha256sum | cut -c1-32
	const want = "2dce0a4c50441bfccfa9caf4b58c3cba"
	if a != want {
		t.Fatalf("ArticleID = %q, want %q", a, want)
	}
	if a == ArticleID("https://example.com/b") {
		t.Fatal("different URLs, same id")
	}
	x, _ := Canonical("HTTPS://Example.com:443/a/?utm_source=x#f", nil)
	if ArticleID(x) != a {
		t.Fatalf("equivalent URLs got different ids: %q vs %q", x, "https://example.com/a")
	}
}

// TestCanonicalIdempotent is a property test: on random URLs assembled from
// awkward parts, Canonical either fails or returns a fixed point.
func TestCanonicalIdempotent(t *testing.T) {
	schemes := []string{"http", "HTTPS", "https", "ftp", ""}
	hosts := []string{"example.com", "EXAMPLE.com.", "bücher.de", "xn--bcher-kva.de", "[::1]", "1.2.3.4", "a_b.example", "user@h.example", "h.example:80", "h.example:0443", "h.example:"}
	segs := []string{"a", "A", ".", "..", "", "%2e", "%2F", "%7e", "%c3%a9", "é", "a b", "!$'()*+,;=", "%", "%zz", "[x]", "index.html", "\t", "%25", "~"}
	qparts := []string{"a=1", "B=2", "utm_source=x", "UTM_x", "fbclid=9", "", "k", "k=", "=v", "q=a+b", "q=%2b", "q=%41", "x=%", "é=ü", "a=1;b=2", "z=?/:@"}
	frags := []string{"", "#", "#x", "#a b"}
	r := rand.New(rand.NewPCG(1, 2))
	pick := func(xs []string) string { return xs[r.IntN(len(xs))] }
	base := mustParse(t, "https://base.example/dir/feed.xml?q=1")
	n, ok := 0, 0
	for range 20000 {
		var b strings.Builder
		if s := pick(schemes); s != "" {
			b.WriteString(s + "://" + pick(hosts))
		} else if r.IntN(2) == 0 {
			b.WriteString("//" + pick(hosts))
		}
		for range r.IntN(5) {
			b.WriteString("/" + pick(segs))
		}
		if r.IntN(3) > 0 {
			b.WriteString("?")
			for i := range r.IntN(5) {
				if i > 0 {
					b.WriteString("&")
				}
				b.WriteString(pick(qparts))
			}
		}
		b.WriteString(pick(frags))
		raw := b.String()
		var bu *url.URL
		if r.IntN(2) == 0 {
			bu = base
		}
		n++
		c, err := Canonical(raw, bu)
		if err != nil {
			continue
		}
		ok++
		checkCanonical(t, raw, c)
	}
	t.Logf("%d random URLs, %d canonicalized", n, ok)
	if ok < n/4 {
		t.Fatalf("only %d of %d canonicalized; generator is broken", ok, n)
	}
}

func checkCanonical(t *testing.T, raw, c string) {
	t.Helper()
	again, err := Canonical(c, nil)
	if err != nil {
		t.Fatalf("Canonical(%q) = %q, which fails: %v", raw, c, err)
	}
	if again != c {
		t.Fatalf("not idempotent:\n raw %q\n  1x %q\n  2x %q", raw, c, again)
	}
	if !strings.HasPrefix(c, "http://") && !strings.HasPrefix(c, "https://") {
		t.Fatalf("Canonical(%q) = %q: not http(s)", raw, c)
	}
	for i := 0; i < len(c); i++ {
		if c[i] <= ' ' || c[i] >= utf8.RuneSelf || c[i] == '#' {
			t.Fatalf("Canonical(%q) = %q: byte %q at %d", raw, c, c[i], i)
		}
	}
	if _, err := url.Parse(c); err != nil {
		t.Fatalf("Canonical(%q) = %q: url.Parse: %v", raw, c, err)
	}
}

func FuzzCanonical(f *testing.F) {
	for _, s := range []string{
		"https://example.com/a?utm_source=x&b=2#f",
		"HTTP://Example.COM:80/a/./b/../c/",
		"https://bücher.de/%7euser/caf%c3%a9?q=a+b&&a=1",
		"../rel/path?x=%",
		"//cdn.example.net/x",
		"http://[2001:db8::1]:8080/",
		"https://user:pw@h.example./a b\n",
		"mailto:x@example.com",
		"http://%E4%B8%AD.cn/",
	} {
		f.Add(s, true)
		f.Add(s, false)
	}
	base := mustParse(f, "https://base.example/dir/feed.xml?q=1")
	f.Fuzz(func(t *testing.T, raw string, withBase bool) {
		var bu *url.URL
		if withBase {
			bu = base
		}
		c, err := Canonical(raw, bu)
		if err != nil {
			return
		}
		checkCanonical(t, raw, c)
	})
}

func BenchmarkCanonical(b *testing.B) {
	base := mustParse(b, "https://news.example.com/feeds/rss.xml")
	inputs := []string{
		"https://news.example.com/2024/05/01/some-long-article-slug-here/?utm_source=rss&utm_medium=feed&utm_campaign=x",
		"/world/europe/story-123456",
		"https://www.example.org/news/article.html?id=42&page=2",
	}
	for b.Loop() {
		for _, s := range inputs {
			if _, err := Canonical(s, base); err != nil {
				b.Fatal(err)
			}
		}
	}
}
