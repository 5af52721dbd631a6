package fetch

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/newsflow/newsflow/internal/testutil"
)

// benchFeed returns an RSS document of n items of about 1.2 KB each, shaped
// like a real news feed.
func benchFeed(n int) []byte {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n" +
		`<rss version="2.0" xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:content="http://purl.org/rss/1.0/modules/content/">` +
		"\n<channel>\n<title>Example News</title>\n<link>https://news.example.com/</link>\n" +
		"<description>Latest stories</description>\n<language>en</language>\n")
	rnd := rand.New(rand.NewPCG(1, 2))
	words := strings.Fields("government market election storm team season report court city " +
		"company growth policy energy health science climate vote talks league record " +
		"minister budget prices inflation border police officials river bridge hospital school " +
		"university researchers study museum festival film music airline airport strike union")
	for i := range n {
		fmt.Fprintf(&b, "<item>\n<title>Story %d: %s %s %s</title>\n", i, words[i%len(words)], words[(i*7)%len(words)], words[(i*3)%len(words)])
		fmt.Fprintf(&b, "<link>https://news.example.com/2026/03/01/story-%d?utm_source=rss</link>\n", i)
		fmt.Fprintf(&b, "<guid isPermaLink=\"false\">urn:news:%08x</guid>\n<dc:creator>Reporter %d</dc:creator>\n", i*2654435761, i%9)
		fmt.Fprintf(&b, "<pubDate>Sun, 01 Mar 2026 %02d:%02d:00 GMT</pubDate>\n<category>%s</category>\n", i%24, i%60, words[i%len(words)])
		b.WriteString("<description><![CDATA[<p>")
		for range 110 {
			w := words[rnd.IntN(len(words))]
			if rnd.IntN(4) == 0 {
				w = fmt.Sprintf("%s%d", w[:1+rnd.IntN(len(w))], rnd.IntN(10000))
			}
			b.WriteString(w)
			b.WriteByte(' ')
		}
		b.WriteString("</p>]]></description>\n</item>\n")
	}
	b.WriteString("</channel>\n</rss>\n")
	return []byte(b.String())
}

func BenchmarkFetch(b *testing.B) {
	feed := benchFeed(50)
	gz := testutil.Gzip(b, feed)
	b.Logf("feed %d bytes, %d gzipped", len(feed), len(gz))
	srv := newServer(b, serveEncoded("gzip", gz))
	f := newFetcher(b, nil)
	req := Request{URL: srv.URL + "/feed.xml"}
	b.SetBytes(int64(len(feed)))
	b.ReportAllocs()
	for b.Loop() {
		resp, err := f.Fetch(b.Context(), req)
		if err != nil {
			b.Fatal(err)
		}
		if len(resp.Body) != len(feed) {
			b.Fatalf("body %d bytes, want %d", len(resp.Body), len(feed))
		}
	}
}
