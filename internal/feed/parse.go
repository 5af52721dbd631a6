package feed

import (
	"bytes"
	stdjson "encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/mmcdole/gofeed"
	"github.com/mmcdole/gofeed/atom"
	jsonfeed "github.com/mmcdole/gofeed/json"
	"github.com/mmcdole/gofeed/rss"
	"github.com/newsflow/newsflow/internal/canon"
	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/internal/text"
)

// Limits on the fields of an item, in bytes of UTF-8.
const (
	MaxTitleBytes   = 512
	MaxSummaryBytes = 2000
	MaxContentBytes = 100 << 10
	MaxAuthorBytes  = 256
	MaxGUIDBytes    = 1024
	// MaxURLBytes bounds canonical URLs; items with longer ones are skipped.
	MaxURLBytes = 4096
	// DerivedTitleRunes is about how long a title taken from a summary is.
	DerivedTitleRunes = 80
	// MaxFutureSkew is how far after the fetch time a publish time may be
	// before it is replaced by the fetch time.
	MaxFutureSkew = 24 * time.Hour
)

// Errors that Parse returns, matched with errors.Is. The messages say more.
var (
	// ErrNotAFeed: the body is not a feed (an HTML page, an OPML list, an
	// empty body, another XML or JSON document). The crawler should try
	// Discover on HTML pages, or stop the source.
	ErrNotAFeed = errors.New("not a feed")
	// ErrMalformed: the body claims to be a feed but cannot be parsed
	// (invalid XML or JSON, bad gzip data).
	ErrMalformed = errors.New("malformed feed")
)

// parseError carries a message and matches its kind with errors.Is.
type parseError struct {
	kind error // ErrNotAFeed or ErrMalformed
	msg  string
	err  error
}

func (e *parseError) Error() string {
	if e.err != nil {
		return e.msg + ": " + e.err.Error()
	}
	return e.msg
}

func (e *parseError) Is(target error) bool { return target == e.kind }
func (e *parseError) Unwrap() error        { return e.err }

func notAFeed(format string, args ...any) error {
	return &parseError{kind: ErrNotAFeed, msg: fmt.Sprintf(format, args...)}
}

func malformed(msg string, err error) error {
	return &parseError{kind: ErrMalformed, msg: msg, err: err}
}

// Format names a feed format.
type Format string

// Formats Parse recognizes.
const (
	FormatRSS  Format = "rss"
	FormatAtom Format = "atom"
	FormatJSON Format = "json"
)

// SkipReason says why an item was not turned into an article.
type SkipReason string

// Reasons for skipping an item.
const (
	// SkipNoLink: the item has no link, and its GUID is not a URL.
	SkipNoLink SkipReason = "no_link"
	// SkipBadURL: the item's links do not canonicalize (another scheme, a
	// relative link with no feed URL, a bad host, too long).
	SkipBadURL SkipReason = "bad_url"
	// SkipNoTitle: the item has neither a title nor a summary.
	SkipNoTitle SkipReason = "no_title"
	// SkipDuplicate: an earlier item of the feed has the same canonical URL.
	SkipDuplicate SkipReason = "duplicate"
)

// Feed is a parsed feed.
type Feed struct {
	Format Format
	// Title is the feed title as plain text.
	Title string
	// Link is the canonical URL of the site the feed belongs to, or "".
	Link string
	// TTL is the RSS <ttl> (how long the feed may be cached), or 0.
	TTL time.Duration
	// Items are the articles in document order.
	Items []Item
	// Skipped counts items left out, by reason; nil when none were.
	Skipped map[SkipReason]int
	// Repaired is set when the document was truncated or broken and was
	// cut after its last complete item.
	Repaired bool
}

// Item is one article of a feed: the fields of schema.RawArticle and its id.
type Item struct {
	// ArticleID is canon.ArticleID(URL).
	ArticleID string
	// URL is canonical (canon.Canonical), absolute http or https.
	URL string
	// GUID is the item's id in the feed (RSS guid, Atom id, JSON id), or "".
	GUID string
	// Title is plain text, never empty.
	Title string
	// Summary is plain text, at most MaxSummaryBytes.
	Summary string
	// Content is HTML (or JSON Feed content_text), at most MaxContentBytes.
	Content string
	// Author is plain text, or "".
	Author string
	// ImageURL is the item's lead image (see leadImage), an absolute http
	// or https URL, or "".
	ImageURL    string
	PublishedAt time.Time
	// UpdatedAt is zero when the feed gives no update time.
	UpdatedAt time.Time
	FetchedAt time.Time
}

// RawArticle returns the item as the event the crawler writes to
// schema.TopicArticlesRaw, keyed by ArticleID.
func (it *Item) RawArticle(sourceID string) schema.RawArticle {
	return schema.RawArticle{
		URL:         it.URL,
		SourceID:    sourceID,
		GUID:        it.GUID,
		Title:       it.Title,
		Summary:     it.Summary,
		Content:     it.Content,
		Author:      it.Author,
		ImageURL:    it.ImageURL,
		PublishedAt: schema.Time(it.PublishedAt.UTC().Format(time.RFC3339Nano)),
		FetchedAt:   schema.Time(it.FetchedAt.UTC().Format(time.RFC3339Nano)),
	}
}

// Parse parses a fetched feed body. contentType is the response's
// Content-Type header (may be empty); feedURL is the URL the body was
// fetched from, against which relative links are resolved (may be nil, in
// which case items with relative links are skipped); fetchedAt is the fetch
// time, used for items without dates and to clamp future dates. Parse is
// safe for concurrent use.
func Parse(body []byte, contentType string, feedURL *url.URL, fetchedAt time.Time) (*Feed, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, notAFeed("empty body")
	}
	b, err := toUTF8(body, contentType)
	if err != nil {
		return nil, err
	}
	if len(b) == 0 {
		return nil, notAFeed("empty body")
	}
	doc, err := parseDocument(b)
	if err != nil {
		return nil, err
	}
	return doc.build(feedURL, fetchedAt), nil
}

// document is a feed as gofeed parsed it.
type document struct {
	format   Format
	feed     *gofeed.Feed
	ttl      string
	repaired bool
}

func parseDocument(b []byte) (*document, error) {
	switch b[0] {
	case '{':
		return parseJSON(b)
	case '[':
		return nil, notAFeed("a JSON array, not a JSON Feed")
	case '<':
	default:
		if looksLikeHTML(b) {
			return nil, errHTML()
		}
		return nil, notAFeed("unrecognized content starting with %q", truncateBytes(string(b), 24))
	}
	root, err := xmlRoot(b)
	if err != nil {
		if looksLikeHTML(b) {
			return nil, errHTML()
		}
		return nil, malformed("invalid XML", err)
	}
	switch strings.ToLower(root.Local) {
	case "rss", "rdf":
		return parseXML(b, FormatRSS, "item")
	case "feed":
		return parseXML(b, FormatAtom, "entry")
	case "entry":
		return parseXML(wrapAtomEntry(b), FormatAtom, "entry")
	case "html", "head", "body", "div", "p", "table", "span", "a", "meta", "title", "script", "link":
		return nil, errHTML()
	case "opml":
		return nil, notAFeed("an OPML subscription list, not a feed")
	default:
		return nil, notAFeed("an XML document with root element <%s>, not a feed", truncateBytes(root.Local, 64))
	}
}

func errHTML() error { return notAFeed("looks like an HTML page, not a feed") }

// looksLikeHTML reports whether the start of b has the marks of an HTML page.
func looksLikeHTML(b []byte) bool {
	head := bytes.ToLower(b[:min(len(b), 1024)])
	for _, m := range []string{"<!doctype html", "<html", "<head", "<body"} {
		if bytes.Contains(head, []byte(m)) {
			return true
		}
	}
	return false
}

// newXMLDecoder returns a lenient decoder for UTF-8 input.
func newXMLDecoder(b []byte) *xml.Decoder {
	d := xml.NewDecoder(bytes.NewReader(b))
	d.Strict = false
	d.CharsetReader = func(_ string, r io.Reader) (io.Reader, error) { return r, nil }
	return d
}

// xmlRoot returns the name of the first element, with its prefix (not its
// namespace) in Space.
func xmlRoot(b []byte) (xml.Name, error) {
	d := newXMLDecoder(b)
	for {
		tok, err := d.RawToken()
		if err != nil {
			if err == io.EOF {
				err = errors.New("no root element")
			}
			return xml.Name{}, err
		}
		if se, ok := tok.(xml.StartElement); ok {
			return se.Name, nil
		}
	}
}

// wrapAtomEntry puts an Atom entry document inside a feed element.
func wrapAtomEntry(b []byte) []byte {
	if end, ok := xmlDeclEnd(b); ok {
		b = b[end:]
	}
	const open = `<feed xmlns="http://www.w3.org/2005/Atom">`
	const closing = `</feed>`
	out := make([]byte, 0, len(open)+len(b)+len(closing))
	out = append(out, open...)
	out = append(out, b...)
	return append(out, closing...)
}

// parseXML parses an RSS or Atom document, repairing it once if it is
// broken after its first complete item.
func parseXML(b []byte, format Format, itemName string) (*document, error) {
	doc, err := parseXMLOnce(b, format)
	if err == nil {
		return doc, nil
	}
	if fixed, ok := repairXML(b, itemName); ok {
		if doc, err2 := parseXMLOnce(fixed, format); err2 == nil {
			doc.repaired = true
			return doc, nil
		}
	}
	return nil, malformed("invalid XML in "+string(format)+" feed", err)
}

func parseXMLOnce(b []byte, format Format) (*document, error) {
	doc := &document{format: format}
	var err error
	switch format {
	case FormatRSS:
		var rf *rss.Feed
		if rf, err = (&rss.Parser{}).Parse(bytes.NewReader(b)); err != nil {
			return nil, err
		}
		doc.ttl = rf.TTL
		// gofeed's image scan takes any first <img>; leadImage scans the
		// HTML itself, passing over pixels and icons.
		doc.feed, err = (&gofeed.DefaultRSSTranslator{DisableContentImageScan: true}).Translate(rf)
	case FormatAtom:
		var af *atom.Feed
		if af, err = (&atom.Parser{}).Parse(bytes.NewReader(b)); err != nil {
			return nil, err
		}
		doc.feed, err = (&gofeed.DefaultAtomTranslator{}).Translate(af)
	}
	if err != nil {
		return nil, err
	}
	return doc, nil
}

func parseJSON(b []byte) (*document, error) {
	jf, err := (&jsonfeed.Parser{}).Parse(bytes.NewReader(b))
	if err != nil {
		if !stdjson.Valid(b) {
			return nil, malformed("invalid JSON", err)
		}
		fixed, ferr := sanitizeJSONFeed(b)
		if ferr != nil {
			return nil, notAFeed("a JSON document that is not a JSON Feed")
		}
		if jf, err = (&jsonfeed.Parser{}).Parse(bytes.NewReader(fixed)); err != nil {
			return nil, malformed("invalid JSON Feed", err)
		}
	}
	if !strings.Contains(strings.ToLower(jf.Version), "jsonfeed") && len(jf.Items) == 0 {
		return nil, notAFeed("a JSON document that is not a JSON Feed")
	}
	gf, err := (&gofeed.DefaultJSONTranslator{}).Translate(jf)
	if err != nil {
		return nil, malformed("invalid JSON Feed", err)
	}
	return &document{format: FormatJSON, feed: gf}, nil
}

// build maps the parsed document to a Feed.
func (d *document) build(feedURL *url.URL, fetchedAt time.Time) *Feed {
	gf := d.feed
	f := &Feed{
		Format:   d.format,
		Title:    text.ValidUTF8(htmlToText(gf.Title, MaxTitleBytes)),
		TTL:      parseTTL(d.ttl),
		Repaired: d.repaired,
	}
	if gf.Link != "" {
		if c, err := canon.Canonical(gf.Link, feedURL); err == nil && len(c) <= MaxURLBytes {
			f.Link = c
		}
	}
	var feedAuthors []*gofeed.Person
	if d.format == FormatAtom {
		feedAuthors = gf.Authors
	}
	seen := make(map[string]struct{}, len(gf.Items))
	f.Items = make([]Item, 0, len(gf.Items))
	for _, gi := range gf.Items {
		if gi == nil {
			continue
		}
		it, reason := buildItem(gi, feedAuthors, feedURL, fetchedAt)
		if reason == "" {
			if _, dup := seen[it.URL]; dup {
				reason = SkipDuplicate
			}
		}
		if reason != "" {
			if f.Skipped == nil {
				f.Skipped = make(map[SkipReason]int)
			}
			f.Skipped[reason]++
			continue
		}
		seen[it.URL] = struct{}{}
		f.Items = append(f.Items, it)
	}
	return f
}

func buildItem(gi *gofeed.Item, feedAuthors []*gofeed.Person, feedURL *url.URL, fetchedAt time.Time) (Item, SkipReason) {
	u, reason := itemURL(gi, feedURL)
	if reason != "" {
		return Item{}, reason
	}
	it := Item{
		ArticleID: canon.ArticleID(u),
		URL:       u,
		GUID:      text.ValidUTF8(truncateBytes(strings.TrimSpace(gi.GUID), MaxGUIDBytes)),
		Title:     text.ValidUTF8(htmlToText(gi.Title, MaxTitleBytes)),
		Content:   text.ValidUTF8(truncateHTML(strings.TrimSpace(gi.Content), MaxContentBytes)),
		FetchedAt: fetchedAt.UTC(),
	}
	src := gi.Description
	if strings.TrimSpace(src) == "" {
		src = gi.Content
	}
	it.Summary = text.ValidUTF8(htmlToText(src, MaxSummaryBytes))
	if it.Title == "" {
		it.Title = firstWords(it.Summary, DerivedTitleRunes)
		if it.Title == "" {
			return Item{}, SkipNoTitle
		}
	}
	authors := gi.Authors
	if len(authors) == 0 && gi.Author != nil {
		authors = []*gofeed.Person{gi.Author}
	}
	if len(authors) == 0 {
		authors = feedAuthors
	}
	it.Author = text.ValidUTF8(authorText(authors))
	it.ImageURL = leadImage(gi, itemBase(gi, feedURL, u))

	published := validTime(gi.PublishedParsed)
	updated := validTime(gi.UpdatedParsed)
	if published.IsZero() {
		published = updated
	}
	if published.IsZero() {
		published = fetchedAt
	}
	it.PublishedAt = clampFuture(published, fetchedAt).UTC()
	if !updated.IsZero() {
		it.UpdatedAt = clampFuture(updated, fetchedAt).UTC()
	}
	return it, ""
}

// itemURL picks and canonicalizes the item's link.
func itemURL(gi *gofeed.Item, feedURL *url.URL) (string, SkipReason) {
	tried := false
	try := func(raw string, base *url.URL) string {
		if strings.TrimSpace(raw) == "" {
			return ""
		}
		tried = true
		c, err := canon.Canonical(raw, base)
		if err != nil || len(c) > MaxURLBytes {
			return ""
		}
		return c
	}
	if c := try(gi.Link, feedURL); c != "" {
		return c, ""
	}
	for _, l := range gi.Links {
		if c := try(l, feedURL); c != "" {
			return c, ""
		}
	}
	if isAbsHTTP(gi.GUID) {
		if c := try(gi.GUID, nil); c != "" {
			return c, ""
		}
	}
	if tried {
		return "", SkipBadURL
	}
	return "", SkipNoLink
}

// itemBase returns the URL relative image URLs of an item resolve against:
// its link as written (canonical URLs may lose a trailing slash), resolved
// against the feed URL, else its canonical URL.
func itemBase(gi *gofeed.Item, feedURL *url.URL, canonical string) *url.URL {
	if l, err := url.Parse(strings.TrimSpace(gi.Link)); err == nil && gi.Link != "" {
		if feedURL != nil {
			l = feedURL.ResolveReference(l)
		}
		if l.IsAbs() && (l.Scheme == "http" || l.Scheme == "https") && l.Host != "" {
			return l
		}
	}
	u, _ := url.Parse(canonical)
	return u
}

// isAbsHTTP reports whether s is an absolute http or https URL.
func isAbsHTTP(s string) bool {
	s = strings.TrimSpace(s)
	if len(s) < 8 {
		return false
	}
	lower := strings.ToLower(s[:8])
	return strings.HasPrefix(lower, "http://") || strings.HasPrefix(lower, "https://")
}

func authorText(ps []*gofeed.Person) string {
	var names []string
	for _, p := range ps {
		if p == nil {
			continue
		}
		n := strings.TrimSpace(p.Name)
		if n == "" {
			n = strings.TrimSpace(p.Email)
		}
		if n == "" {
			continue
		}
		dup := false
		for _, m := range names {
			if m == n {
				dup = true
				break
			}
		}
		if !dup {
			names = append(names, n)
		}
	}
	return htmlToText(strings.Join(names, ", "), MaxAuthorBytes)
}

// validTime returns *t, or zero for nil and for times before 1970 or after
// year 9999 (which RFC 3339 cannot write).
func validTime(t *time.Time) time.Time {
	if t == nil || t.Year() < 1970 || t.Year() > 9999 {
		return time.Time{}
	}
	return *t
}

func clampFuture(t, fetchedAt time.Time) time.Time {
	if !fetchedAt.IsZero() && t.After(fetchedAt.Add(MaxFutureSkew)) {
		return fetchedAt
	}
	return t
}

// parseTTL reads an RSS <ttl> in minutes; anything but a positive number up
// to a year is ignored.
func parseTTL(s string) time.Duration {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n <= 0 || n > 365*24*60 {
		return 0
	}
	return time.Duration(n) * time.Minute
}
