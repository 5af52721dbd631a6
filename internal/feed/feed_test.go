package feed

import (
	"bytes"
	"compress/gzip"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/newsflow/newsflow/internal/canon"
	"github.com/newsflow/newsflow/internal/testutil"
	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/unicode"
)

var (
	testFetched = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	testFeedURL = mustURL("https://news.example.com/feeds/world.xml")
)

func mustURL(s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(err)
	}
	return u
}

// parseOK parses body and fails the test on error; it also checks the
// invariants every parse must keep.
func parseOK(t *testing.T, body, contentType string) *Feed {
	t.Helper()
	f, err := Parse([]byte(body), contentType, testFeedURL, testFetched)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	checkFeed(t, f)
	return f
}

// checkFeed asserts the guarantees Parse makes about every feed it returns.
//
// It is one scenario checked step by step (cyclomatic 26): the steps
// depend on each other's state, so they stay in order in one function.
func checkFeed(t testing.TB, f *Feed) {
	t.Helper()
	if !utf8.ValidString(f.Title) || !utf8.ValidString(f.Link) {
		t.Fatalf("feed title or link not UTF-8: %q %q", f.Title, f.Link)
	}
	seen := map[string]bool{}
	for i, it := range f.Items {
		switch {
		case it.URL == "":
			t.Fatalf("item %d: empty URL", i)
		case !strings.HasPrefix(it.URL, "http://") && !strings.HasPrefix(it.URL, "https://"):
			t.Fatalf("item %d: URL %q is not http(s)", i, it.URL)
		case len(it.URL) > MaxURLBytes:
			t.Fatalf("item %d: URL of %d bytes", i, len(it.URL))
		case seen[it.URL]:
			t.Fatalf("item %d: duplicate URL %q", i, it.URL)
		case it.ArticleID != canon.ArticleID(it.URL):
			t.Fatalf("item %d: ArticleID %q does not match URL %q", i, it.ArticleID, it.URL)
		case strings.TrimSpace(it.Title) == "":
			t.Fatalf("item %d: empty title", i)
		case len(it.Title) > MaxTitleBytes:
			t.Fatalf("item %d: title of %d bytes", i, len(it.Title))
		case len(it.Summary) > MaxSummaryBytes:
			t.Fatalf("item %d: summary of %d bytes", i, len(it.Summary))
		case len(it.Content) > MaxContentBytes:
			t.Fatalf("item %d: content of %d bytes", i, len(it.Content))
		case len(it.Author) > MaxAuthorBytes:
			t.Fatalf("item %d: author of %d bytes", i, len(it.Author))
		case len(it.GUID) > MaxGUIDBytes:
			t.Fatalf("item %d: GUID of %d bytes", i, len(it.GUID))
		case it.ImageURL != "" && !strings.HasPrefix(it.ImageURL, "http://") && !strings.HasPrefix(it.ImageURL, "https://"):
			t.Fatalf("item %d: image %q is not http(s)", i, it.ImageURL)
		case len(it.ImageURL) > MaxURLBytes || !utf8.ValidString(it.ImageURL):
			t.Fatalf("item %d: image URL of %d bytes", i, len(it.ImageURL))
		case it.PublishedAt.Location() != time.UTC:
			t.Fatalf("item %d: PublishedAt not UTC", i)
		}
		seen[it.URL] = true
		if c, err := canon.Canonical(it.URL, nil); err != nil || c != it.URL {
			t.Fatalf("item %d: URL %q is not canonical (%q, %v)", i, it.URL, c, err)
		}
		for _, s := range []string{it.GUID, it.Title, it.Summary, it.Content, it.Author} {
			if !utf8.ValidString(s) {
				t.Fatalf("item %d: invalid UTF-8 in %q", i, s)
			}
		}
	}
}

func TestRSSHTMLAndEntities(t *testing.T) {
	const body = `<?xml version="1.0" encoding="UTF-8"?>
<rss version="2.0" xmlns:content="http://purl.org/rss/1.0/modules/content/" xmlns:dc="http://purl.org/dc/elements/1.1/">
<channel>
  <title>World &amp; Nation</title>
  <link>https://news.example.com/</link>
  <ttl>30</ttl>
  <item>
    <title>Tom &amp; Jerry&#8217;s   &lt;3
      reunion</title>
    <link>https://news.example.com/2024/05/tom-jerry/?utm_source=rss&amp;utm_medium=feed&amp;id=7#comments</link>
    <guid isPermaLink="false">tag:news.example.com,2024:1</guid>
    <description><![CDATA[<p>Hello &amp; <b>welcome</b>&nbsp;to&nbsp;the <a href="/x">show</a>.</p><script>alert("x")</script><style>p{color:red}</style><p>Second&#160;paragraph</p>]]></description>
    <content:encoded><![CDATA[<p>Full <em>story</em> here.</p>]]></content:encoded>
    <dc:creator>Jane Doe</dc:creator>
    <pubDate>Tue, 30 Apr 2024 09:15:00 +0200</pubDate>
  </item>
  <item>
    <title>AT&amp;amp;T buys &lt;b&gt;bold&lt;/b&gt; startup</title>
    <link>https://news.example.com/att</link>
    <description>Plain text &amp;amp; more</description>
  </item>
</channel>
</rss>`
	f := parseOK(t, body, "application/rss+xml")
	if f.Format != FormatRSS || f.Title != "World & Nation" || f.Link != "https://news.example.com/" {
		t.Fatalf("feed = %q %q %q", f.Format, f.Title, f.Link)
	}
	if f.TTL != 30*time.Minute {
		t.Fatalf("TTL = %v, want 30m", f.TTL)
	}
	if len(f.Items) != 2 {
		t.Fatalf("got %d items, want 2", len(f.Items))
	}
	it := f.Items[0]
	want := Item{
		URL:         "https://news.example.com/2024/05/tom-jerry?id=7",
		GUID:        "tag:news.example.com,2024:1",
		Title:       "Tom & Jerry’s <3 reunion",
		Summary:     "Hello & welcome to the show. Second paragraph",
		Content:     "<p>Full <em>story</em> here.</p>",
		Author:      "Jane Doe",
		PublishedAt: time.Date(2024, 4, 30, 7, 15, 0, 0, time.UTC),
		FetchedAt:   testFetched,
	}
	want.ArticleID = canon.ArticleID(want.URL)
	if it != want {
		t.Fatalf("item\n got %+v\nwant %+v", it, want)
	}
	// Double-escaped markup in a title is decoded and dropped, as readers do.
	if got := f.Items[1].Title; got != "AT&T buys bold startup" {
		t.Fatalf("title = %q", got)
	}
	if got := f.Items[1].Summary; got != "Plain text & more" {
		t.Fatalf("summary = %q", got)
	}
	if !f.Items[1].PublishedAt.Equal(testFetched) {
		t.Fatalf("undated item: PublishedAt = %v, want the fetch time", f.Items[1].PublishedAt)
	}
}

func TestAtomRelativeLinksAndXMLBase(t *testing.T) {
	const body = `<?xml version="1.0" encoding="utf-8"?>
<feed xmlns="http://www.w3.org/2005/Atom" xml:base="https://blog.example.org/base/">
  <title type="html">Ex &lt;em&gt;Blog&lt;/em&gt;</title>
  <link rel="alternate" href="/"/>
  <link rel="self" href="https://blog.example.org/feed.atom"/>
  <author><name>Feed Author</name></author>
  <updated>2024-04-30T10:00:00Z</updated>
  <entry>
    <title>Relative to xml:base</title>
    <link rel="alternate" href="posts/one/"/>
    <id>urn:uuid:1</id>
    <published>2024-04-29T08:00:00+01:00</published>
    <updated>2024-04-30T08:00:00Z</updated>
    <summary type="html">&lt;p&gt;One &amp;amp; only&lt;/p&gt;</summary>
    <content type="xhtml"><div xmlns="http://www.w3.org/1999/xhtml"><p>Body <b>one</b></p></div></content>
  </entry>
  <entry xml:base="https://other.example.org/section/">
    <title>Entry-level xml:base</title>
    <link href="two.html"/>
    <id>urn:uuid:2</id>
    <updated>2024-04-30T09:00:00Z</updated>
    <author><name>Entry Author</name></author>
    <author><name>Second Author</name></author>
  </entry>
</feed>`
	f := parseOK(t, body, "application/atom+xml")
	if f.Format != FormatAtom || f.Title != "Ex Blog" || f.Link != "https://blog.example.org/" {
		t.Fatalf("feed = %q %q %q", f.Format, f.Title, f.Link)
	}
	if len(f.Items) != 2 {
		t.Fatalf("got %d items, want 2: %+v", len(f.Items), f.Skipped)
	}
	a, b := f.Items[0], f.Items[1]
	if a.URL != "https://blog.example.org/base/posts/one" {
		t.Errorf("xml:base link = %q", a.URL)
	}
	if a.Summary != "One & only" || !strings.Contains(a.Content, "<b>one</b>") {
		t.Errorf("summary %q content %q", a.Summary, a.Content)
	}
	if a.Author != "Feed Author" {
		t.Errorf("inherited author = %q", a.Author)
	}
	if !a.PublishedAt.Equal(time.Date(2024, 4, 29, 7, 0, 0, 0, time.UTC)) || !a.UpdatedAt.Equal(time.Date(2024, 4, 30, 8, 0, 0, 0, time.UTC)) {
		t.Errorf("times %v %v", a.PublishedAt, a.UpdatedAt)
	}
	if b.URL != "https://other.example.org/section/two.html" {
		t.Errorf("entry xml:base link = %q", b.URL)
	}
	if b.Author != "Entry Author, Second Author" {
		t.Errorf("author = %q", b.Author)
	}
	if !b.PublishedAt.Equal(time.Date(2024, 4, 30, 9, 0, 0, 0, time.UTC)) {
		t.Errorf("published falls back to updated: %v", b.PublishedAt)
	}
	if b.Summary != "" || b.Content != "" {
		t.Errorf("empty entry has summary %q content %q", b.Summary, b.Content)
	}
}

func TestAtomRelativeToFeedURL(t *testing.T) {
	const body = `<feed xmlns="http://www.w3.org/2005/Atom"><title>t</title>
<entry><title>a</title><link href="../2024/a"/><id>1</id></entry>
<entry><title>b</title><link href="//cdn.example.net/b"/><id>2</id></entry>
</feed>`
	f := parseOK(t, body, "")
	got := []string{f.Items[0].URL, f.Items[1].URL}
	want := []string{"https://news.example.com/2024/a", "https://cdn.example.net/b"}
	if got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("URLs = %q, want %q", got, want)
	}
	// Without a feed URL relative links cannot be resolved.
	f2, err := Parse([]byte(body), "", nil, testFetched)
	if err != nil {
		t.Fatal(err)
	}
	if len(f2.Items) != 0 || f2.Skipped[SkipBadURL] != 2 {
		t.Fatalf("nil feed URL: items %d skipped %v", len(f2.Items), f2.Skipped)
	}
}

func TestAtomEntryDocument(t *testing.T) {
	const body = `<?xml version="1.0"?><entry xmlns="http://www.w3.org/2005/Atom">
<title>Lonely entry</title><link href="https://example.com/lonely"/><id>x</id></entry>`
	f := parseOK(t, body, "application/atom+xml;type=entry")
	if len(f.Items) != 1 || f.Items[0].Title != "Lonely entry" {
		t.Fatalf("items = %+v", f.Items)
	}
}

func TestJSONFeed(t *testing.T) {
	const body = `{
  "version": "https://jsonfeed.org/version/1.1",
  "title": "JSON News",
  "home_page_url": "https://json.example.com/",
  "authors": [{"name": "Desk"}],
  "items": [
    {"id": "1", "url": "https://json.example.com/a?fbclid=zz", "title": "First",
     "content_html": "<p>Hi <i>there</i></p>", "summary": "Short summary",
     "date_published": "2024-04-30T10:00:00Z", "date_modified": "2024-04-30T11:00:00Z",
     "authors": [{"name": "Ann"}]},
    {"id": "https://json.example.com/b", "content_text": "No title here but a text that is long enough to become one after cutting at a word boundary somewhere."},
    {"id": "3", "external_url": "https://elsewhere.example.net/c", "title": "External only"},
    {"id": 4, "title": "No URL at all"}
  ]
}`
	f := parseOK(t, body, "application/feed+json")
	if f.Format != FormatJSON || f.Title != "JSON News" || f.Link != "https://json.example.com/" {
		t.Fatalf("feed = %q %q %q", f.Format, f.Title, f.Link)
	}
	if len(f.Items) != 3 || f.Skipped[SkipNoLink] != 1 {
		t.Fatalf("items %d skipped %v", len(f.Items), f.Skipped)
	}
	a := f.Items[0]
	if a.URL != "https://json.example.com/a" || a.Title != "First" || a.Summary != "Short summary" ||
		a.Content != "<p>Hi <i>there</i></p>" || a.Author != "Ann" ||
		!a.PublishedAt.Equal(time.Date(2024, 4, 30, 10, 0, 0, 0, time.UTC)) ||
		!a.UpdatedAt.Equal(time.Date(2024, 4, 30, 11, 0, 0, 0, time.UTC)) {
		t.Errorf("first = %+v", a)
	}
	b := f.Items[1]
	if b.URL != "https://json.example.com/b" || b.Summary == "" {
		t.Errorf("second = %+v", b)
	}
	if !strings.HasPrefix(b.Title, "No title here but a text") || !strings.HasSuffix(b.Title, "…") ||
		utf8.RuneCountInString(b.Title) > DerivedTitleRunes+1 {
		t.Errorf("derived title = %q", b.Title)
	}
	if f.Items[2].URL != "https://elsewhere.example.net/c" {
		t.Errorf("external_url item = %q", f.Items[2].URL)
	}
}

func TestJSONFeedWrongTypes(t *testing.T) {
	const body = `{"version": "https://jsonfeed.org/version/1", "title": 42,
 "author": "not an object",
 "items": [{"id": 1, "url": "https://j.example.com/1", "title": "One", "tags": "single",
   "author": {"name": 7}, "attachments": [1, {"url": "https://j.example.com/a.mp3"}]}]}`
	f := parseOK(t, body, "")
	if len(f.Items) != 1 || f.Items[0].Title != "One" || f.Title != "42" || f.Items[0].Author != "7" {
		t.Fatalf("feed %q items %+v", f.Title, f.Items)
	}
}

func TestWindows1251FromContentType(t *testing.T) {
	const text = `<rss version="2.0"><channel><title>Новости дня</title>
<item><title>Пожар в Москве</title><link>https://ru.example.com/1</link>
<description>Подробности &amp; фото</description></item></channel></rss>`
	enc, err := charmap.Windows1251.NewEncoder().String(text)
	if err != nil {
		t.Fatal(err)
	}
	if utf8.ValidString(enc) {
		t.Fatal("test input should not be valid UTF-8")
	}
	f := parseOK(t, enc, "application/rss+xml; charset=windows-1251")
	if f.Title != "Новости дня" || f.Items[0].Title != "Пожар в Москве" || f.Items[0].Summary != "Подробности & фото" {
		t.Fatalf("feed %q item %q %q", f.Title, f.Items[0].Title, f.Items[0].Summary)
	}
	// Quoted and upper-case charset parameters work too.
	f = parseOK(t, enc, `text/xml;charset="WINDOWS-1251"`)
	if f.Title != "Новости дня" {
		t.Fatalf("quoted charset: title %q", f.Title)
	}
}

func TestContentTypeCharset(t *testing.T) {
	testutil.CheckFunc(t, "contentTypeCharset", contentTypeCharset, map[string]string{
		"":                                    "",
		"text/xml":                            "",
		"text/xml; charset=KOI8-R":            "KOI8-R",
		`application/rss+xml;charset="utf-8"`: "utf-8",
		"text/xml;charset = us-ascii":         "us-ascii", // rejected by mime, found by hand
		"text/xml; CHARSET=cp1251; q=1; x":    "cp1251",
		"\xf1ChArset=":                        "",
		"\xf1\xf1 charset=big5 x":             "big5",
	})
}

func TestISO88591Declaration(t *testing.T) {
	const text = `<?xml version="1.0" encoding="ISO-8859-1"?>
<rss version="2.0"><channel><title>Café crème</title>
<item><title>Über naïve façades – 50€</title><link>https://fr.example.com/cafe</link></item></channel></rss>`
	// windows-1252 is the superset browsers use for ISO-8859-1 labels; it
	// also has the euro sign and the en dash.
	enc, err := charmap.Windows1252.NewEncoder().String(text)
	if err != nil {
		t.Fatal(err)
	}
	// The declaration wins over a wrong header default.
	for _, ct := range []string{"", "text/xml; charset=utf-8", "text/xml; charset=iso-8859-1"} {
		f := parseOK(t, enc, ct)
		if f.Title != "Café crème" || f.Items[0].Title != "Über naïve façades – 50€" {
			t.Fatalf("content type %q: feed %q item %q", ct, f.Title, f.Items[0].Title)
		}
	}
}

func TestMislabelledUTF8(t *testing.T) {
	// Declared ISO-8859-1, served as windows-1251, but really UTF-8.
	const body = `<?xml version="1.0" encoding="ISO-8859-1"?>
<rss version="2.0"><channel><title>Grüße — 日本</title>
<item><title>ok</title><link>https://e.example.com/1</link></item></channel></rss>`
	f := parseOK(t, body, "text/xml; charset=windows-1251")
	if f.Title != "Grüße — 日本" {
		t.Fatalf("title %q", f.Title)
	}
}

func TestUndeclaredLegacyAndDamagedUTF8(t *testing.T) {
	// No label at all and not UTF-8: windows-1252.
	f := parseOK(t, "<rss><channel><title>Caf\xe9</title><item><title>x</title><link>https://e.example.com/</link></item></channel></rss>", "")
	if f.Title != "Café" {
		t.Fatalf("legacy title %q", f.Title)
	}
	// Mostly UTF-8 with one stray byte: UTF-8 with a replacement character.
	f = parseOK(t, "<rss><channel><title>Café \xff ok</title><item><title>x</title><link>https://e.example.com/</link></item></channel></rss>", "")
	if f.Title != "Café \uFFFD ok" {
		t.Fatalf("damaged title %q", f.Title)
	}
}

func TestUTF16(t *testing.T) {
	const text = `<?xml version="1.0" encoding="UTF-16"?><rss version="2.0"><channel><title>Wide ☃</title>
<item><title>x</title><link>https://w.example.com/</link></item></channel></rss>`
	for name, enc := range map[string]*encoding.Encoder{
		"le-bom": unicode.UTF16(unicode.LittleEndian, unicode.UseBOM).NewEncoder(),
		"be-bom": unicode.UTF16(unicode.BigEndian, unicode.UseBOM).NewEncoder(),
		"le":     unicode.UTF16(unicode.LittleEndian, unicode.IgnoreBOM).NewEncoder(),
		"be":     unicode.UTF16(unicode.BigEndian, unicode.IgnoreBOM).NewEncoder(),
	} {
		b, err := enc.String(text)
		if err != nil {
			t.Fatal(err)
		}
		f := parseOK(t, b, "")
		if f.Title != "Wide ☃" || len(f.Items) != 1 {
			t.Errorf("%s: title %q items %d", name, f.Title, len(f.Items))
		}
	}
}

func TestBOMAndLeadingWhitespace(t *testing.T) {
	body := "\xef\xbb\xbf \r\n\t <?xml version=\"1.0\"?>\n<rss><channel><title>B</title><item><title>x</title><link>https://b.example.com/</link></item></channel></rss>"
	f := parseOK(t, body, "")
	if f.Title != "B" || len(f.Items) != 1 {
		t.Fatalf("title %q items %d", f.Title, len(f.Items))
	}
	// A UTF-8 BOM wins over a declaration, even with a bad byte.
	body = "\xef\xbb\xbf<?xml version=\"1.0\" encoding=\"iso-8859-1\"?><rss><channel><title>Gr\xc3\xbc\xdfe</title></channel></rss>"
	if f := parseOK(t, body, ""); f.Title != "Grü\uFFFDe" {
		t.Fatalf("BOM title %q", f.Title)
	}
}

func TestIllegalControlCharacters(t *testing.T) {
	body := "<rss><channel><title>Ti\x01t\x08le\x0b\x0c\uFFFE\uFFFF&#0;&#x1F;&#xFFFE;</title>" +
		"<item><title>A\x00B\x1fC&#65;</title><link>https://c.example.com/\x02a</link>" +
		"<description>x\x1by\ty</description></item></channel></rss>"
	f := parseOK(t, body, "")
	if f.Title != "Title" {
		t.Fatalf("title %q", f.Title)
	}
	it := f.Items[0]
	if it.Title != "ABCA" || it.URL != "https://c.example.com/a" || it.Summary != "xy y" {
		t.Fatalf("item %+v", it)
	}
}

func TestMissingTitles(t *testing.T) {
	long := strings.Repeat("lorem ipsum ", 30)
	body := `<rss><channel><title>T</title>
<item><link>https://t.example.com/1</link><description>&lt;p&gt;Short &lt;b&gt;note&lt;/b&gt;&lt;/p&gt;</description></item>
<item><link>https://t.example.com/2</link><description>` + long + `</description></item>
<item><link>https://t.example.com/3</link></item>
<item><title>   </title><link>https://t.example.com/4</link><description> </description></item>
<item><title>&lt;img src="x.png"&gt;</title><link>https://t.example.com/5</link><description>From summary</description></item>
</channel></rss>`
	f := parseOK(t, body, "")
	if len(f.Items) != 3 || f.Skipped[SkipNoTitle] != 2 {
		t.Fatalf("items %d skipped %v", len(f.Items), f.Skipped)
	}
	if f.Items[0].Title != "Short note" {
		t.Errorf("title 1 = %q", f.Items[0].Title)
	}
	if got := f.Items[1].Title; !strings.HasSuffix(got, "…") || utf8.RuneCountInString(got) > DerivedTitleRunes+1 || strings.HasSuffix(got, " …") {
		t.Errorf("title 2 = %q", got)
	}
	if f.Items[2].Title != "From summary" {
		t.Errorf("title 5 = %q", f.Items[2].Title)
	}
}

func TestLinksFromGUID(t *testing.T) {
	const body = `<rss version="2.0"><channel><title>G</title>
<item><title>guid permalink</title><guid>https://g.example.com/a/?utm_campaign=x</guid></item>
<item><title>guid not permalink but URL</title><guid isPermaLink="false">http://G.example.com:80/b#frag</guid></item>
<item><title>guid not a URL</title><guid>urn:uuid:0d5d9a3e-1c8f-4a58-bb3c-9f7d0a1e2b3c</guid></item>
<item><title>relative guid is not used</title><guid>/c</guid></item>
<item><title>mailto link only</title><link>mailto:desk@g.example.com</link></item>
<item><title>bad link, URL guid</title><link>javascript:void(0)</link><guid>https://g.example.com/d</guid></item>
</channel></rss>`
	f := parseOK(t, body, "")
	var urls []string
	for _, it := range f.Items {
		urls = append(urls, it.URL)
	}
	want := []string{"https://g.example.com/a", "http://g.example.com/b", "https://g.example.com/d"}
	if strings.Join(urls, " ") != strings.Join(want, " ") {
		t.Fatalf("URLs = %q, want %q", urls, want)
	}
	if f.Skipped[SkipNoLink] != 2 || f.Skipped[SkipBadURL] != 1 {
		t.Fatalf("skipped = %v", f.Skipped)
	}
	if f.Items[0].GUID != "https://g.example.com/a/?utm_campaign=x" {
		t.Fatalf("GUID kept as given: %q", f.Items[0].GUID)
	}
}

func TestDuplicatesAndTrackingParams(t *testing.T) {
	const body = `<rss version="2.0"><channel><title>D</title>
<item><title>first</title><link>https://d.example.com/story?id=1&amp;utm_source=rss</link></item>
<item><title>same with fragment</title><link>https://D.example.com/story?id=1#top</link></item>
<item><title>same with other tracking</title><link>https://d.example.com/story/?fbclid=abc&amp;id=1&amp;gclid=q</link></item>
<item><title>different id</title><link>https://d.example.com/story?id=2&amp;mc_cid=1&amp;mc_eid=2</link></item>
</channel></rss>`
	f := parseOK(t, body, "")
	if len(f.Items) != 2 || f.Skipped[SkipDuplicate] != 2 {
		t.Fatalf("items %d skipped %v", len(f.Items), f.Skipped)
	}
	if f.Items[0].Title != "first" || f.Items[0].URL != "https://d.example.com/story?id=1" {
		t.Fatalf("first wins: %+v", f.Items[0])
	}
	if f.Items[1].URL != "https://d.example.com/story?id=2" {
		t.Fatalf("second = %q", f.Items[1].URL)
	}
}

func TestNotAFeed(t *testing.T) {
	tests := []struct {
		name, body, ct, msg string
	}{
		{"html", "<!DOCTYPE html>\n<html><head><title>Home</title>" +
			`<link rel="alternate" type="application/rss+xml" href="/feed"></head><body><p>Hi</body></html>`,
			"text/html; charset=utf-8", "looks like an HTML page, not a feed"},
		{"html no doctype", "<html lang=en><body>x<br></body></html>", "", "looks like an HTML page"},
		{"html after text", "  hello <body>oops</body>", "", "looks like an HTML page"},
		{"xhtml", `<?xml version="1.0"?><html xmlns="http://www.w3.org/1999/xhtml"><head/><body/></html>`, "", "looks like an HTML page"},
		{"opml", `<?xml version="1.0"?><opml version="2.0"><body><outline text="x"/></body></opml>`, "", "OPML"},
		{"other xml", `<catalog><book/></catalog>`, "", "root element <catalog>"},
		{"json", `{"name": "not a feed"}`, "application/json", "not a JSON Feed"},
		{"json array", `[1, 2]`, "application/json", "JSON array"},
		{"text", "just some text", "text/plain", "unrecognized content"},
		{"empty", "", "", "empty body"},
		{"whitespace", " \n\t ", "", "empty body"},
		{"bom only", "\xef\xbb\xbf", "", "empty body"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse([]byte(tt.body), tt.ct, testFeedURL, testFetched)
			if !errors.Is(err, ErrNotAFeed) || errors.Is(err, ErrMalformed) {
				t.Fatalf("Parse = %v, %v; want ErrNotAFeed", f, err)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("error %q does not say %q", err, tt.msg)
			}
		})
	}
}

func TestMalformed(t *testing.T) {
	tests := []struct{ name, body, msg string }{
		{"broken rss", `<rss><channel><title>x</title><item><title>a</titl`, "invalid XML"},
		{"bad tag before items", `<rss><channel><title>x</title><item <<</item></channel></rss>`, "invalid XML"},
		{"bad json", `{"version": "https://jsonfeed.org/version/1", "items": [`, "invalid JSON"},
		{"bad gzip", "\x1f\x8b\x08\x00garbage", "gzip"},
		{"no root", `<?xml version="1.0"?><!-- nothing -->`, "invalid XML"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.body), "", testFeedURL, testFetched)
			if !errors.Is(err, ErrMalformed) || errors.Is(err, ErrNotAFeed) {
				t.Fatalf("Parse error %v; want ErrMalformed", err)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("error %q does not say %q", err, tt.msg)
			}
		})
	}
}

func TestTruncatedRepaired(t *testing.T) {
	const full = `<?xml version="1.0"?><rss version="2.0"><channel><title>R</title>
<item><title>one</title><link>https://r.example.com/1</link></item>
<item><title>two</title><link>https://r.example.com/2</link></item>
<item><title>three</title><link>https://r.example.com/3</link></item>
</channel></rss>`
	cut := strings.Index(full, "<item><title>three") + len("<item><title>three</title><link>https://r.exa")
	f := parseOK(t, full[:cut], "")
	if !f.Repaired || len(f.Items) != 2 || f.Items[1].URL != "https://r.example.com/2" {
		t.Fatalf("repaired %v items %+v", f.Repaired, f.Items)
	}
	f = parseOK(t, full, "")
	if f.Repaired || len(f.Items) != 3 {
		t.Fatalf("intact feed: repaired %v items %d", f.Repaired, len(f.Items))
	}
	const atomFeed = `<feed xmlns="http://www.w3.org/2005/Atom"><title>A</title>
<entry><title>one</title><link href="https://r.example.com/1"/><id>1</id></entry>
<entry><title>two</title><link href="https://r.exa`
	f = parseOK(t, atomFeed, "")
	if !f.Repaired || len(f.Items) != 1 {
		t.Fatalf("atom: repaired %v items %d", f.Repaired, len(f.Items))
	}
}

func TestGzipBody(t *testing.T) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write([]byte(`<rss><channel><title>Z</title><item><title>z</title><link>https://z.example.com/</link></item></channel></rss>`))
	zw.Close()
	f := parseOK(t, buf.String(), "application/x-gzip")
	if f.Title != "Z" || len(f.Items) != 1 {
		t.Fatalf("title %q items %d", f.Title, len(f.Items))
	}
}

func TestTTL(t *testing.T) {
	for ttl, want := range map[string]time.Duration{
		"60": time.Hour, " 15 ": 15 * time.Minute, "0": 0, "-5": 0, "soon": 0, "": 0, "99999999": 0,
	} {
		body := `<rss version="2.0"><channel><title>x</title><ttl>` + ttl + `</ttl></channel></rss>`
		if f := parseOK(t, body, ""); f.TTL != want {
			t.Errorf("ttl %q: got %v, want %v", ttl, f.TTL, want)
		}
	}
	// Atom has no TTL.
	if f := parseOK(t, `<feed xmlns="http://www.w3.org/2005/Atom"><title>x</title></feed>`, ""); f.TTL != 0 {
		t.Errorf("atom TTL = %v", f.TTL)
	}
}

func TestDates(t *testing.T) {
	const body = `<rss version="2.0" xmlns:dc="http://purl.org/dc/elements/1.1/"><channel><title>x</title>
<item><title>future</title><link>https://t.example.com/1</link><pubDate>Fri, 03 May 2024 12:00:00 GMT</pubDate></item>
<item><title>slightly ahead</title><link>https://t.example.com/2</link><pubDate>Wed, 01 May 2024 20:00:00 GMT</pubDate></item>
<item><title>dc date</title><link>https://t.example.com/3</link><dc:date>2024-04-01T00:00:00Z</dc:date></item>
<item><title>garbage date</title><link>https://t.example.com/4</link><pubDate>yesterday-ish</pubDate></item>
<item><title>ancient</title><link>https://t.example.com/5</link><pubDate>Mon, 01 Jan 0001 00:00:00 GMT</pubDate></item>
</channel></rss>`
	f := parseOK(t, body, "")
	want := []time.Time{
		testFetched,
		time.Date(2024, 5, 1, 20, 0, 0, 0, time.UTC),
		time.Date(2024, 4, 1, 0, 0, 0, 0, time.UTC),
		testFetched,
		testFetched,
	}
	for i, it := range f.Items {
		if !it.PublishedAt.Equal(want[i]) {
			t.Errorf("%s: PublishedAt %v, want %v", it.Title, it.PublishedAt, want[i])
		}
	}
}

func TestCaps(t *testing.T) {
	// Multi-byte text so that the caps fall inside runes.
	desc := strings.Repeat("<p>Größere Überschrift — 日本語のテキスト</p>", 400)
	content := strings.Repeat("<p class=\"long\">Größe 日本</p>", 20000)
	body := `<rss xmlns:content="http://purl.org/rss/1.0/modules/content/"><channel><title>` +
		strings.Repeat("Title ", 500) + `</title><item><title>` + strings.Repeat("長い", 1000) +
		`</title><link>https://c.example.com/</link><description><![CDATA[` + desc +
		`]]></description><content:encoded><![CDATA[` + content + `]]></content:encoded></item></channel></rss>`
	f := parseOK(t, body, "")
	it := f.Items[0]
	if len(it.Summary) > MaxSummaryBytes || len(it.Summary) < MaxSummaryBytes-100 || !strings.HasSuffix(it.Summary, "…") {
		t.Errorf("summary of %d bytes ends %q", len(it.Summary), it.Summary[len(it.Summary)-20:])
	}
	if len(it.Content) > MaxContentBytes || len(it.Content) < MaxContentBytes-100 {
		t.Errorf("content of %d bytes", len(it.Content))
	}
	if lt, gt := strings.LastIndexByte(it.Content, '<'), strings.LastIndexByte(it.Content, '>'); lt > gt {
		t.Errorf("content cut inside a tag: ...%q", it.Content[len(it.Content)-30:])
	}
	if len(f.Title) > MaxTitleBytes || len(it.Title) > MaxTitleBytes {
		t.Errorf("titles of %d and %d bytes", len(f.Title), len(it.Title))
	}
}

func TestRawArticle(t *testing.T) {
	f := parseOK(t, `<rss><channel><title>x</title><item><title>T</title><link>https://r.example.com/a</link>
<guid>g1</guid><author>ed@r.example.com (Ed Itor)</author><pubDate>Tue, 30 Apr 2024 09:15:00 +0200</pubDate></item></channel></rss>`, "")
	ra := f.Items[0].RawArticle("src-1")
	if ra.URL != "https://r.example.com/a" || ra.SourceID != "src-1" || ra.GUID != "g1" || ra.Title != "T" ||
		ra.Author != "Ed Itor" || ra.PublishedAt != "2024-04-30T07:15:00Z" || ra.FetchedAt != "2024-05-01T12:00:00Z" {
		t.Fatalf("RawArticle = %+v", ra)
	}
}
