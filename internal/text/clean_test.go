package text

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mmcdole/gofeed"
	"github.com/newsflow/newsflow/internal/testutil"
)

// sharedData is the shared data folder seen from this package's directory.
const sharedData = "../../../shared/data"

// maxSummaryBytes is the feed parser's limit on summaries.
const maxSummaryBytes = 2000

func TestClean(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"plain   text\n\twith  space", "plain text with space"},
		{"a &amp; b &lt; c &#x2014; d&nbsp;e", "a & b < c — d e"},
		{"<p>one</p><p>two</p>three<br>four<li>five", "one two three four five"},
		{"in<b>line</b> <i>tags</i>", "inline tags"},
		{"<script>var x = '<p>';</script>ok<style>b{}</style><noscript>no</noscript>", "ok"},
		{"<svg><text>drawn</text></svg>kept", "kept"},
		{"1 < 2 and 3 > 2", "1 < 2 and 3 > 2"},
		{"zero\u200bwidth\u00adsoft", "zerowidthsoft"},
		{"<![CDATA[x]]>y<!-- comment -->z", "yz"},
		{"unclosed <a href='x", "unclosed"},
		// Mojibake repair, and legitimate text left alone.
		{"CafÃ© Ã\u00a0 la carte", "Café à la carte"},
		{"itâ€™s", "it’s"},
		{"don\u0092t", "don’t"},
		{"naïve Ångström «CAFÉ» 50 € Grüße — 日本語 ×÷", "naïve Ångström «CAFÉ» 50 € Grüße — 日本語 ×÷"},
		{"bad\xffutf8", "bad\ufffdutf8"},
	}
	for _, tt := range tests {
		if got := Clean(tt.in, 1000); got != tt.want {
			t.Errorf("Clean(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	// Cutting: at a word near the end, with an ellipsis, within the limit.
	got := Clean("alpha beta gamma delta epsilon", 20)
	if got != "alpha beta gamma…" {
		t.Errorf("cut = %q", got)
	}
	got = Clean(strings.Repeat("語", 100), 20)
	if len(got) > 20 || !utf8.ValidString(got) || !strings.HasSuffix(got, "…") {
		t.Errorf("cut runes = %q (%d bytes)", got, len(got))
	}
}

func TestCollapse(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"  a &amp; <b>b</b>\n\tc  ", "a &amp; <b>b</b> c"},
		{"CafÃ©", "Café"},
		{"zero\u200bwidth", "zerowidth"},
	} {
		if got := Collapse(tt.in, 1000); got != tt.want {
			t.Errorf("Collapse(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// corpusFragments returns the titles, descriptions and contents of every
// item gofeed reads from the shared feed corpora.
func corpusFragments(t testing.TB) []string {
	if _, err := os.Stat(sharedData); err != nil {
		testutil.NoSharedData(t, "shared feed data not found at %s: %v", sharedData, err)
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
		for _, max := range []int{maxSummaryBytes, 40} {
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

// FuzzSimpleHTML checks the simple path against the tokenizer, and that
// Clean gives valid UTF-8 within the limit.
func FuzzSimpleHTML(f *testing.F) {
	for _, s := range textCases {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got := Clean(s, 64); len(got) > 64 || !utf8.ValidString(got) {
			t.Fatalf("Clean(%q, 64) = %q", s, got)
		}
		for _, max := range []int{maxSummaryBytes, 16} {
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
			htmlToText(s, maxSummaryBytes)
		}
	})
	b.Run("tokenizer", func(b *testing.B) {
		for b.Loop() {
			tokenizeHTMLToText(s, maxSummaryBytes)
		}
	})
}
