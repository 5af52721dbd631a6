package feed

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mmcdole/gofeed"
)

// corpusFragments returns the titles, descriptions and contents of every
// item gofeed reads from the shared feed corpora.
func corpusFragments(t testing.TB) []string {
	if _, err := os.Stat(sharedData); err != nil {
		t.Skipf("shared feed data not found at %s: %v", sharedData, err)
	}
	var out []string
	p := gofeed.NewParser()
	filepath.WalkDir(filepath.Join(sharedData, "feeds"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return nil
		}
		defer f.Close()
		feed, err := p.Parse(f)
		if err != nil {
			return nil
		}
		for _, it := range feed.Items {
			out = append(out, it.Title, it.Description, it.Content)
		}
		return nil
	})
	return out
}

var textCases = []string{
	`<p>Hello <b>world</b> &amp; friends</p><p>Second</p>`,
	`<img src="a.jpg" alt="x > y" width=300 /><p>Caption</p>`,
	`<a href='http://x/?a=1&amp;b=2'>link</a> text`,
	`<script>var x = "<p>";</script>visible`,
	`<!-- comment --> text`,
	`a < b and c > d`,
	`<p-x>custom</p-x> tag`,
	`<div title="unterminated>text`,
	`<br>line<br/>line<BR>line`,
	`&nbsp;&eacute;&#8217;&#x2014;&notanentity; &amp`,
	"tab\tand\nnewlines\r\nhere",
	`<title>inside</title> after`,
	`<a b"c=d>x</a>`,
}

// The simple path, where it applies, gives exactly the tokenizer's text.
func TestSimpleHTMLMatchesTokenizer(t *testing.T) {
	frags := append(corpusFragments(t), textCases...)
	simple := 0
	for _, s := range frags {
		if s == "" {
			continue
		}
		for _, max := range []int{MaxSummaryBytes, 40} {
			got, ok := simpleHTMLToText(s, max)
			if !ok {
				continue
			}
			simple++
			if want := tokenizeHTMLToText(s, max); got != want {
				t.Fatalf("simple and tokenizer differ (max %d) on %.200q:\nsimple    %q\ntokenizer %q", max, s, got, want)
			}
		}
	}
	if simple < len(frags) {
		t.Logf("note: only %d of %d fragment×limit cases took the simple path", simple, 2*len(frags))
	}
	t.Logf("%d fragments; %d fragment×limit cases on the simple path, all equal to the tokenizer", len(frags), simple)
}

func FuzzSimpleHTML(f *testing.F) {
	for _, s := range textCases {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, max := range []int{MaxSummaryBytes, 16} {
			if got, ok := simpleHTMLToText(s, max); ok {
				if want := tokenizeHTMLToText(s, max); got != want {
					t.Fatalf("simple %q != tokenizer %q for %q", got, want, s)
				}
			}
		}
	})
}

func BenchmarkHTMLToText(b *testing.B) {
	s := strings.Repeat(`<p>Officials said on <b>Tuesday</b> that the talks, which began in Geneva last week, had made &ldquo;significant progress&rdquo;.</p>`, 6)
	b.Run("simple", func(b *testing.B) {
		for b.Loop() {
			htmlToText(s, MaxSummaryBytes)
		}
	})
	b.Run("tokenizer", func(b *testing.B) {
		for b.Loop() {
			tokenizeHTMLToText(s, MaxSummaryBytes)
		}
	})
}
