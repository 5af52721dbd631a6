package opml

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const sample = `<?xml version="1.0" encoding="UTF-8"?>
<opml version="1.0">
  <head><title>My feeds</title></head>
  <body>
    <outline text="Tech">
      <outline text="Ars" title="Ars Technica" type="rss" xmlUrl="https://feeds.arstechnica.com/arstechnica/index" htmlUrl="https://arstechnica.com"/>
      <outline text="Nested">
        <outline text="HN" xmlUrl="https://hnrss.org/frontpage"/>
      </outline>
    </outline>
    <outline text="Loose" xmlUrl="https://example.com/feed.xml" category="World" authority="0.8"/>
    <outline text="Dup" xmlUrl="https://hnrss.org/frontpage"/>
  </body>
</opml>`

func TestParse(t *testing.T) {
	got, err := Parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{
		{Title: "Ars Technica", FeedURL: "https://feeds.arstechnica.com/arstechnica/index", Homepage: "https://arstechnica.com", Category: "tech"},
		{Title: "HN", FeedURL: "https://hnrss.org/frontpage", Category: "nested"},
		{Title: "Loose", FeedURL: "https://example.com/feed.xml", Category: "world", Authority: 0.8},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
}

func TestRoundTrip(t *testing.T) {
	in := []Entry{
		{Title: "B & Co <news>", FeedURL: "https://b.example/rss?a=1&b=2", Homepage: "https://b.example", Category: "business", Authority: 0.75},
		{Title: "A", FeedURL: "https://a.example/atom", Category: "world"},
		{Title: "C", FeedURL: "https://c.example/feed.json", Category: "business"},
		{Title: "Uncategorised", FeedURL: "https://u.example/rss"},
	}
	var buf bytes.Buffer
	if err := Write(&buf, "newsflow sources", in); err != nil {
		t.Fatal(err)
	}
	out, err := Parse(&buf)
	if err != nil {
		t.Fatalf("parse own output: %v\n%s", err, buf.String())
	}
	// Write groups by category (sorted); compare as sets keyed by URL.
	byURL := map[string]Entry{}
	for _, e := range out {
		byURL[e.FeedURL] = e
	}
	if len(byURL) != len(in) {
		t.Fatalf("round trip kept %d of %d entries", len(byURL), len(in))
	}
	for _, e := range in {
		if byURL[e.FeedURL] != e {
			t.Fatalf("round trip changed %+v into %+v", e, byURL[e.FeedURL])
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`<opml><body><outline text="x"/></body></opml>`, "no outline with an xmlUrl"},
		{`<opml><body><outline xmlUrl="https://x" authority="high"/></body></opml>`, "authority"},
		{`not xml at all`, "opml:"},
		{`<?xml version="1.0" encoding="koi8-r"?><opml><body/></opml>`, "unsupported charset"},
	} {
		_, err := Parse(strings.NewReader(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%q) = %v, want error containing %q", c.in, err, c.want)
		}
	}
	if _, err := Parse(strings.NewReader(`<opml><body></body></opml>`)); !errors.Is(err, ErrNoFeeds) {
		t.Errorf("empty body: %v", err)
	}
}

// A broken file says what is wrong with it and where: its name, and the
// line where the XML decoder gives one (never a bare "EOF").
func TestParseFileErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ name, in, want string }{
		{"empty.opml", "", "empty.opml: empty file"},
		{"blank.opml", " \n\t\n", "blank.opml: empty file"},
		{"text.opml", "not xml at all", `text.opml: not an OPML document: no XML element (the file begins "not xml at all")`},
		{"json.opml", `{"feeds":["https://x.example/rss"]}`, `json.opml: not an OPML document: no XML element (the file begins "{\"feeds\":[\"https://x.example/rss\"]}")`},
		{"page.opml", "<!doctype html>\n<html><body>hi</body></html>", "page.opml:2: not an OPML document: the root element is <html>, want <opml>"},
		{"feed.opml", "<?xml version=\"1.0\"?>\n<rss version=\"2.0\"><channel/></rss>", "feed.opml:2: not an OPML document: the root element is <rss>, want <opml>"},
		{"cut.opml", "<opml version=\"2.0\">\n<body>\n<outline text=\"A\" xmlUrl=\"https://a.exa", "cut.opml:3: XML syntax error: unexpected end of file (is the file truncated?)"},
		{"cut2.opml", "<opml version=\"2.0\">\n<body>\n<outline text=\"A\" xmlUrl=\"https://a.example/rss\"/>\n", "cut2.opml:4: XML syntax error: unexpected end of file (is the file truncated?)"},
		{"bad.opml", "<opml><body>\n<outline xmlUrl=\"https://x\" authority=\"high\"/></body></opml>", `bad.opml: feed https://x: authority "high" is not a number from 0 to 1`},
		{"none.opml", "<opml><body><outline text=\"x\"/></body></opml>", "none.opml: no outline with an xmlUrl"},
	} {
		path := filepath.Join(dir, c.name)
		if err := os.WriteFile(path, []byte(c.in), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := ParseFile(path)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseFile(%s) = %v, want an error containing %q", c.name, err, c.want)
		}
		if err != nil && strings.HasSuffix(err.Error(), ": EOF") {
			t.Errorf("ParseFile(%s) = %v: a bare EOF", c.name, err)
		}
	}
	// Without a file name the error still says what and where.
	_, err := Parse(strings.NewReader("<opml>\n<body>\n<outline xmlUrl=\"https://x"))
	if err == nil || !strings.HasPrefix(err.Error(), "opml: line 3: XML syntax error") {
		t.Errorf("Parse of a truncated document: %v", err)
	}
	if _, err := ParseFile(filepath.Join(dir, "missing.opml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ParseFile of a missing file: %v", err)
	}
}

// The shipped default list parses, has about 50 feeds over the main
// sections, and has no duplicates.
func TestDefaultSources(t *testing.T) {
	f, err := os.Open("../../configs/sources.opml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	es, err := Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) < 45 {
		t.Fatalf("%d default sources, want about 50", len(es))
	}
	cats := map[string]int{}
	for _, e := range es {
		if !strings.HasPrefix(e.FeedURL, "https://") || e.Title == "" || e.Authority <= 0 {
			t.Errorf("incomplete default source %+v", e)
		}
		cats[e.Category]++
	}
	for _, c := range []string{"world", "business", "technology", "science", "sports", "entertainment"} {
		if cats[c] < 4 {
			t.Errorf("category %s has %d feeds", c, cats[c])
		}
	}
}
