package feed

import (
	"encoding/json"

	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/internal/canon"
	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/internal/testutil"
)

// fuzzSeeds are small feeds of each kind, plus hostile bits.
var fuzzSeeds = []string{
	`<?xml version="1.0" encoding="UTF-8"?><rss version="2.0"><channel><title>T</title><ttl>5</ttl>` +
		`<item><title>A &amp; B</title><link>/a?utm_source=x</link><description>&lt;p&gt;Hi&lt;/p&gt;</description>` +
		`<pubDate>Tue, 30 Apr 2024 09:15:00 +0200</pubDate></item><item><guid>https://e.example/g</guid><description>d</description></item></channel></rss>`,
	`<feed xmlns="http://www.w3.org/2005/Atom" xml:base="https://e.example/b/"><title type="html">&lt;b&gt;x&lt;/b&gt;</title>` +
		`<entry><title>e</title><link href="p/1"/><id>1</id><updated>2024-01-01T00:00:00Z</updated><content type="html">&lt;p&gt;c&lt;/p&gt;</content></entry></feed>`,
	`{"version":"https://jsonfeed.org/version/1.1","title":"J","items":[{"id":"1","url":"https://e.example/j","title":"j","content_html":"<p>x</p>","tags":"t"}]}`,
	`<?xml version="1.0" encoding="windows-1251"?><rss><channel><title>` + "\xcd\xee\xe2\xee\xf1\xf2\xe8" + `</title><item><title>x</title><link>https://e.example/r</link></item></channel></rss>`,
	"\xef\xbb\xbf  <rss><channel><title>\x01bad\x0b</title><item><title>&#0;</title><link>https://e.example/c</link></item></channel></rss>",
	`<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns="http://purl.org/rss/1.0/"><channel><title>R</title></channel><item><title>r</title><link>https://e.example/rdf</link></item></rdf:RDF>`,
	`<entry xmlns="http://www.w3.org/2005/Atom"><title>solo</title><link href="https://e.example/s"/></entry>`,
	`<rss><channel><title>cut</title><item><title>1</title><link>https://e.example/1</link></item><item><title>2</ti`,
	"<!DOCTYPE html><html><head><title>x</title></head></html>",
	"",
}

// fuzzCorpusFiles are small shared files added as seeds when present.
var fuzzCorpusFiles = []string{
	"feeds/golden/feed_rs_fixtures/rss2/rss_2.0_example_1.xml",
	"feeds/golden/feed_rs_fixtures/atom/atom_xml_base.xml",
	"feeds/golden/feed_rs_fixtures/jsonfeed/jsonfeed_spec_1.json",
	"feeds/golden/feed_rs_fixtures/rss1/rss_1.0_iso8859.xml",
	"feeds/hostile/python_feedparser_tests/encoding/utf-16le-bom.xml",
	"feeds/hostile/python_feedparser_tests/encoding/demoronize-1.xml",
	"feeds/hostile/python_feedparser_tests/illformed/rss_incomplete_cdata.xml",
}

func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s), "")
		f.Add([]byte(s), "application/rss+xml; charset=windows-1251")
	}
	for _, p := range fuzzCorpusFiles {
		if b, err := os.ReadFile(filepath.Join(sharedData, p)); err == nil {
			f.Add(b, "")
		}
	}
	fetched := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, body []byte, contentType string) {
		feed, err := Parse(body, contentType, testFeedURL, fetched)
		if err != nil {
			if !errors.Is(err, ErrNotAFeed) && !errors.Is(err, ErrMalformed) {
				t.Fatalf("unclassified error: %v", err)
			}
			return
		}
		checkFeed(t, feed)
		for _, it := range feed.Items {
			if it.PublishedAt.After(fetched.Add(MaxFutureSkew)) || it.UpdatedAt.After(fetched.Add(MaxFutureSkew)) {
				t.Fatalf("future time not clamped: %v %v", it.PublishedAt, it.UpdatedAt)
			}
			// The item → raw article path the crawler writes to the log:
			// it encodes, decodes to the same event, and keeps its id.
			raw := it.RawArticle("src-fuzz")
			b, err := json.Marshal(raw)
			if err != nil {
				t.Fatalf("encode raw article: %v", err)
			}
			var back schema.RawArticle
			if err := json.Unmarshal(b, &back); err != nil || back != raw {
				t.Fatalf("raw article does not round-trip: %v\n%+v\n%+v", err, raw, back)
			}
			if canon.ArticleID(back.URL) != it.ArticleID || back.Title == "" || back.SourceID != "src-fuzz" {
				t.Fatalf("raw article %+v does not match item %s", back, it.ArticleID)
			}
			if _, err := time.Parse(time.RFC3339Nano, string(back.PublishedAt)); err != nil {
				t.Fatalf("published_at %q: %v", back.PublishedAt, err)
			}
		}
	})
}

// realisticRSS returns an RSS 2.0 feed of n items shaped like a news
// site's: HTML descriptions, content:encoded bodies of a few KB, Dublin
// Core authors, tracking parameters on links.
func realisticRSS(n int) []byte {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>
<rss version="2.0" xmlns:content="http://purl.org/rss/1.0/modules/content/" xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:atom="http://www.w3.org/2005/Atom">
<channel><title>Example News – World</title><link>https://news.example.com/world/</link>
<atom:link href="https://news.example.com/world/rss.xml" rel="self" type="application/rss+xml"/>
<description>The latest world news</description><language>en-gb</language><ttl>15</ttl>
`)
	para := `<p>Officials said on Tuesday that the talks, which began in Geneva last week, had made &ldquo;significant progress&rdquo; on the key issues, though several points of disagreement remained &amp; further meetings were planned.</p>`
	for i := range n {
		fmt.Fprintf(&b, `<item>
<title>Talks in Geneva make &#8216;progress&#8217; as deadline nears – update %d</title>
<link>https://news.example.com/world/2024/05/01/geneva-talks-progress-%d/?utm_source=rss&amp;utm_medium=feed&amp;utm_campaign=world</link>
<guid isPermaLink="false">https://news.example.com/?p=%d</guid>
<dc:creator><![CDATA[Jane Reporter]]></dc:creator>
<pubDate>Wed, 01 May 2024 %02d:%02d:00 +0000</pubDate>
<category><![CDATA[World]]></category>
<description><![CDATA[<img src="https://cdn.example.com/img/%d.jpg" alt="Delegates" width="300" /><p>Negotiators from both sides met again on Tuesday&hellip;</p>%s]]></description>
<content:encoded><![CDATA[%s<figure><img src="https://cdn.example.com/img/%d-large.jpg"/><figcaption>Delegates in Geneva</figcaption></figure>%s<script>track(%d)</script>]]></content:encoded>
</item>
`, i, i, 100000+i, i%24, i%60, i, para, strings.Repeat(para, 12), i, strings.Repeat(para, 12), i)
	}
	b.WriteString("</channel></rss>\n")
	return []byte(b.String())
}

func BenchmarkParse(b *testing.B) {
	fetched := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	run := func(b *testing.B, body []byte, ct string) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		items := 0
		for b.Loop() {
			f, err := Parse(body, ct, testFeedURL, fetched)
			if err != nil {
				b.Fatal(err)
			}
			items = len(f.Items)
		}
		b.ReportMetric(float64(items), "items/op")
	}
	b.Run("rss50-generated", func(b *testing.B) { run(b, realisticRSS(50), "application/rss+xml") })
	for _, p := range []string{
		"feeds/real/feedjira_sample_feeds/TechCrunch.xml",
		"feeds/real/miniflux_parser_testdata/large_atom.xml",
		"feeds/real/rsparser_resources/DaringFireball.json",
		"feeds/real/miniflux_parser_testdata/encoding_WINDOWS-1251.xml",
	} {
		b.Run(filepath.Base(p), func(b *testing.B) {
			body, err := os.ReadFile(filepath.Join(sharedData, p))
			if err != nil {
				testutil.NoSharedData(b, "shared data not available: %v", err)
			}
			run(b, body, "")
		})
	}
}
