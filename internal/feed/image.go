package feed

import (
	"errors"
	"net/url"
	"path"
	"strconv"
	"strings"

	"github.com/mmcdole/gofeed"
	ext "github.com/mmcdole/gofeed/extensions"
	"golang.org/x/net/html"
)

// MinImageSide is the smallest width or height, in pixels, of an image
// that can be an article's lead image when the feed states its size;
// smaller ones are tracking pixels, spacers and icons.
const MinImageSide = 32

// Errors of ImageURL.
var (
	errImageEmpty    = errors.New("empty")
	errImageRelative = errors.New("relative URL with no base")
	errImageScheme   = errors.New("not an http or https URL")
	errImageHost     = errors.New("no host")
	errImageLong     = errors.New("longer than 4096 bytes")
)

// ImageURL returns raw as an absolute http or https URL, resolved against
// base (which may be nil), without its fragment, with scheme and host in
// lower case. The path and query are kept as given: image CDNs sign them.
// Anything else (another scheme, no host, longer than MaxURLBytes) is an
// error saying why.
func ImageURL(raw string, base *url.URL) (string, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return "", errImageEmpty
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", errors.New("not a URL")
	}
	if !u.IsAbs() && u.Host == "" {
		if base == nil {
			return "", errImageRelative
		}
	}
	if base != nil {
		u = base.ResolveReference(u)
	}
	u.Scheme = strings.ToLower(u.Scheme)
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", errImageScheme
	}
	if u.Hostname() == "" || u.Opaque != "" {
		return "", errImageHost
	}
	u.Host = strings.ToLower(u.Host)
	u.User = nil
	u.Fragment, u.RawFragment = "", ""
	s := u.String()
	if len(s) > MaxURLBytes {
		return "", errImageLong
	}
	if _, err := url.Parse(s); err != nil {
		return "", errors.New("not a URL") // a host or port that does not parse back
	}
	return s, nil
}

// leadImage returns the item's lead image as an absolute URL, or "". The
// sources, in order: media:content of an image medium or type (the widest
// when several give a width), media:thumbnail (the widest), image
// enclosures, gofeed's item image (iTunes image, JSON Feed image or banner),
// and the first <img> of the content, then of the description. Relative URLs
// resolve against base (the item's link); only http(s) URLs count, and
// images stated to be smaller than MinImageSide or whose URL looks like an
// icon, an avatar, a tracking pixel or an SVG are passed over.
func leadImage(gi *gofeed.Item, base *url.URL) string {
	media := gi.Extensions["media"]
	var contents, thumbs []ext.Extension
	contents = append(contents, media["content"]...)
	thumbs = append(thumbs, media["thumbnail"]...)
	for _, g := range media["group"] {
		contents = append(contents, g.Children["content"]...)
		thumbs = append(thumbs, g.Children["thumbnail"]...)
	}
	var images []ext.Extension
	for _, c := range contents {
		medium, typ := strings.ToLower(c.Attrs["medium"]), strings.ToLower(c.Attrs["type"])
		switch {
		case medium == "image" || strings.HasPrefix(typ, "image/"):
			images = append(images, c)
		case medium == "" && typ == "" && hasImageExt(c.Attrs["url"]):
			images = append(images, c)
		}
		// A video or audio item's picture.
		thumbs = append(thumbs, c.Children["thumbnail"]...)
	}
	if u := widest(images, base); u != "" {
		return u
	}
	if u := widest(thumbs, base); u != "" {
		return u
	}
	for _, e := range gi.Enclosures {
		if e == nil {
			continue
		}
		typ := strings.ToLower(e.Type)
		if strings.HasPrefix(typ, "image/") || typ == "" && hasImageExt(e.URL) {
			if u := acceptImage(e.URL, "", "", base); u != "" {
				return u
			}
		}
	}
	if gi.Image != nil {
		if u := acceptImage(gi.Image.URL, "", "", base); u != "" {
			return u
		}
	}
	if u := firstHTMLImage(gi.Content, base); u != "" {
		return u
	}
	return firstHTMLImage(gi.Description, base)
}

// widest returns the acceptable media element with the largest stated
// width (the first when none states one), as a URL, or "".
func widest(es []ext.Extension, base *url.URL) string {
	best, bestW := "", -2
	for _, e := range es {
		u := acceptImage(e.Attrs["url"], e.Attrs["width"], e.Attrs["height"], base)
		if u == "" {
			continue
		}
		if w := dimension(e.Attrs["width"]); w > bestW {
			best, bestW = u, w
		}
	}
	return best
}

// acceptImage resolves raw and returns it unless it is not an http(s) URL,
// its stated width or height is below MinImageSide, or it looks like an
// icon, avatar, tracking pixel or SVG.
func acceptImage(raw, width, height string, base *url.URL) string {
	if w := dimension(width); w >= 0 && w < MinImageSide {
		return ""
	}
	if h := dimension(height); h >= 0 && h < MinImageSide {
		return ""
	}
	s, err := ImageURL(raw, base)
	if err != nil {
		return ""
	}
	u, err := url.Parse(s)
	if err != nil || notALeadImage(u) {
		return ""
	}
	return s
}

// dimension parses a width or height attribute ("640", "640px"); -1 when
// absent or not a number of pixels ("100%").
func dimension(s string) int {
	s = strings.TrimSuffix(strings.TrimSpace(strings.ToLower(s)), "px")
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// imageExts are file extensions of raster images.
var imageExts = map[string]bool{".jpg": true, ".jpeg": true, ".png": true, ".gif": true, ".webp": true, ".avif": true, ".bmp": true}

// hasImageExt reports whether a URL's path ends in a raster image
// extension.
func hasImageExt(raw string) bool {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return false
	}
	return imageExts[strings.ToLower(path.Ext(u.Path))]
}

// What marks an image URL as something other than an article's picture:
// counters, share buttons, avatars, emoji, logos, feed-service badges.
// Words are matched whole, so that "silicon-valley.jpg" is not an icon.
var (
	// notLeadHosts match the host or, ending in a dot, its first label.
	notLeadHosts = []string{"feeds.feedburner.com", "feedproxy.google.com", "feeds.wordpress.com", "stats.wordpress.com",
		"pixel.wp.com", "gravatar.com", "doubleclick.net", "feedsportal.com", "pheedo.com", "pixel.", "tracking.", "stats.",
		"analytics.", "ads."}
	// notLeadDirs are whole path segments (folders).
	notLeadDirs = map[string]bool{"icon": true, "icons": true, "emoji": true, "emojis": true, "smilies": true, "avatar": true,
		"avatars": true, "buttons": true, "badges": true, "share": true, "sharing": true, "logo": true, "logos": true,
		"tracking": true, "pixel": true, "beacon": true, "favicons": true}
	// notLeadWords are words of the file name.
	notLeadWords = map[string]bool{"favicon": true, "icon": true, "emoji": true, "smiley": true, "spacer": true, "pixel": true,
		"1x1": true, "beacon": true, "avatar": true, "logo": true, "gravatar": true, "tracker": true}
	// notLeadFiles are whole file names.
	notLeadFiles = map[string]bool{"blank.gif": true, "transparent.gif": true, "clear.gif": true, "t.gif": true, "b.gif": true,
		"transparent.png": true, "blank.png": true}
	// notLeadStems are whole file names without their extension: share
	// buttons and file-type icons ("jpg.gif").
	notLeadStems = map[string]bool{"facebook": true, "twitter": true, "linkedin": true, "pinterest": true, "whatsapp": true,
		"email": true, "mail": true, "share": true, "print": true, "rss": true, "feed": true, "digg": true, "delicious": true,
		"jpg": true, "jpeg": true, "png": true, "gif": true, "pdf": true, "doc": true, "zip": true, "mp3": true}
)

// notALeadImage reports whether an image URL looks like an icon, a badge,
// an avatar, a logo, a counter or an SVG rather than an article picture.
func notALeadImage(u *url.URL) bool {
	host := strings.ToLower(u.Hostname())
	for _, h := range notLeadHosts {
		if strings.HasSuffix(h, ".") {
			if strings.HasPrefix(host, h) {
				return true
			}
		} else if host == h || strings.HasSuffix(host, "."+h) {
			return true
		}
	}
	p := strings.ToLower(u.Path)
	switch path.Ext(p) {
	case ".svg", ".svgz", ".ico":
		return true
	}
	segs := strings.Split(strings.Trim(p, "/"), "/")
	file := segs[len(segs)-1]
	for _, d := range segs[:len(segs)-1] {
		if notLeadDirs[d] {
			return true
		}
	}
	if notLeadFiles[file] {
		return true
	}
	stem := strings.TrimSuffix(file, path.Ext(file))
	if notLeadStems[stem] {
		return true
	}
	words := strings.FieldsFunc(stem, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9')
	})
	for _, w := range words {
		if notLeadWords[w] {
			return true
		}
	}
	return false
}

// hasImgTag reports whether s contains "<img" in any case.
func hasImgTag(s string) bool {
	for i := strings.IndexByte(s, '<'); i >= 0 && i+4 <= len(s); {
		if strings.EqualFold(s[i+1:i+4], "img") {
			return true
		}
		j := strings.IndexByte(s[i+1:], '<')
		if j < 0 {
			return false
		}
		i += 1 + j
	}
	return false
}

// firstHTMLImage returns the first acceptable <img> of an HTML fragment
// (its src, or data-src when src is a data: placeholder of a lazy-loading
// page), or "".
func firstHTMLImage(s string, base *url.URL) string {
	if !hasImgTag(s) {
		return ""
	}
	z := html.NewTokenizer(strings.NewReader(s))
	for {
		switch z.Next() {
		case html.ErrorToken:
			return ""
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			if string(name) != "img" || !hasAttr {
				continue
			}
			var src, lazy, width, height string
			for {
				k, v, more := z.TagAttr()
				switch string(k) {
				case "src":
					src = string(v)
				case "data-src", "data-lazy-src", "data-original":
					if lazy == "" {
						lazy = string(v)
					}
				case "width":
					width = string(v)
				case "height":
					height = string(v)
				}
				if !more {
					break
				}
			}
			if (src == "" || strings.HasPrefix(strings.ToLower(strings.TrimSpace(src)), "data:")) && lazy != "" {
				src = lazy
			}
			if u := acceptImage(src, width, height, base); u != "" {
				return u
			}
		}
	}
}
