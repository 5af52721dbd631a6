package feed

import (
	"bytes"
	"io"
	"mime"
	"net/url"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
	"golang.org/x/net/html/charset"
)

// feedTypes are the <link type> values that announce a feed.
var feedTypes = map[string]bool{
	"application/rss+xml":   true,
	"application/atom+xml":  true,
	"application/feed+json": true,
	"application/json":      true,
}

// Discover returns the feeds an HTML page announces with
// <link rel="alternate" type="application/rss+xml|atom+xml|feed+json|json"
// href="...">, resolved against pageURL (or the page's <base href>),
// without fragments, limited to http and https, deduplicated, in document
// order. The URLs are not canonicalized: they are to be fetched, and
// canonical form may drop parts a server needs. pageURL may be nil, in
// which case only absolute hrefs are returned.
func Discover(htmlBody []byte, pageURL *url.URL) []string {
	var r io.Reader = bytes.NewReader(htmlBody)
	if !utf8.Valid(htmlBody) {
		if cr, err := charset.NewReader(r, "text/html"); err == nil {
			r = cr
		}
	}
	base := pageURL
	baseSet := false
	var out []string
	seen := map[string]bool{}
	z := html.NewTokenizer(r)
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			return out
		}
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken {
			continue
		}
		name, hasAttr := z.TagName()
		a := atom.Lookup(name)
		if (a != atom.Link && a != atom.Base) || !hasAttr {
			continue
		}
		attrs := map[string]string{}
		for {
			k, v, more := z.TagAttr()
			key := string(k)
			if _, dup := attrs[key]; !dup {
				attrs[key] = string(v)
			}
			if !more {
				break
			}
		}
		href := strings.TrimSpace(attrs["href"])
		if href == "" {
			continue
		}
		if a == atom.Base {
			// Only the first <base href> counts.
			if !baseSet {
				baseSet = true
				if u := resolve(pageURL, href); u != nil {
					base = u
				}
			}
			continue
		}
		if !hasToken(attrs["rel"], "alternate") || !feedTypes[mediaType(attrs["type"])] {
			continue
		}
		u := resolve(base, href)
		if u == nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			continue
		}
		u.Fragment, u.RawFragment = "", ""
		s := u.String()
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
}

// resolve parses ref and resolves it against base; nil if ref is bad or
// stays relative.
func resolve(base *url.URL, ref string) *url.URL {
	u, err := url.Parse(ref)
	if err != nil {
		return nil
	}
	if base != nil {
		u = base.ResolveReference(u)
	}
	if !u.IsAbs() {
		return nil
	}
	return u
}

// hasToken reports whether the space-separated list has tok, ignoring case.
func hasToken(list, tok string) bool {
	for _, f := range strings.Fields(list) {
		if strings.EqualFold(f, tok) {
			return true
		}
	}
	return false
}

func mediaType(t string) string {
	if mt, _, err := mime.ParseMediaType(t); err == nil {
		return mt
	}
	return strings.ToLower(strings.TrimSpace(t))
}
