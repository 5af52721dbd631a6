package articles

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/newsflow/newsflow/internal/canon"
	"github.com/newsflow/newsflow/internal/classify"
)

type noTopics struct{}

func (noTopics) Classify(classify.Document) []classify.Label { return nil }
func (noTopics) Topics() []string                            { return nil }

func newOp(t testing.TB, opts Options) *Operator {
	t.Helper()
	o, err := New(opts, noTopics{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func TestClean(t *testing.T) {
	o := newOp(t, Options{MaxContentBytes: 100})
	raw, _ := json.Marshal(map[string]string{
		"url":          "HTTPS://News.Example:443/a/?utm_source=x&id=3#frag",
		"source_id":    "src",
		"title":        "  Big <b>news</b> \xff today ",
		"summary":      "<p>One &amp; two</p><script>x()</script>",
		"content":      strings.Repeat("word ", 1000),
		"published_at": "2026-03-01T10:00:00Z",
	})
	const recordTime = 1772445600000 // 2026-03-02T10:00:00Z
	a, err := o.Clean(raw, recordTime)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := canon.Canonical("https://news.example/a?id=3", nil)
	switch {
	case a.URL != want || a.ID != canon.ArticleID(want):
		t.Errorf("url %s id %s, want %s", a.URL, a.ID, want)
	case a.Title != "Big news \uFFFD today" || a.Summary != "One & two":
		t.Errorf("title %q summary %q", a.Title, a.Summary)
	case len(a.Content) > 100 || a.Content == "":
		t.Errorf("content of %d bytes, want 1..100", len(a.Content))
	case a.PublishedAt != 1772359200000 || a.FetchedAt != recordTime || a.Authority != DefaultAuthority:
		t.Errorf("times %d %d authority %v", a.PublishedAt, a.FetchedAt, a.Authority)
	}
	// Missing publish time falls back to the fetch time, then the record's.
	a, _ = o.Clean([]byte(`{"url":"https://x.example/b","title":"t","fetched_at":"2026-03-01T10:00:00Z"}`), recordTime)
	if a.PublishedAt != 1772359200000 {
		t.Errorf("published_at fallback %d", a.PublishedAt)
	}
	a, _ = o.Clean([]byte(`{"url":"https://x.example/b","title":"t"}`), recordTime)
	if a.PublishedAt != recordTime {
		t.Errorf("published_at fallback %d", a.PublishedAt)
	}
	// Times more than a day after the record's are taken as a day after
	// it: a year 2099 would move every stage's watermark past the rest.
	a, _ = o.Clean([]byte(`{"url":"https://x.example/b","title":"t","published_at":"2099-01-01T00:00:00Z","fetched_at":"2026-03-05T00:00:00Z"}`), recordTime)
	if day := int64(24 * 60 * 60 * 1000); a.PublishedAt != recordTime+day || a.FetchedAt != recordTime+day {
		t.Errorf("future times: published %d fetched %d, want both %d", a.PublishedAt, a.FetchedAt, recordTime+day)
	}
	a, _ = o.Clean([]byte(`{"url":"https://x.example/b","title":"t","published_at":"2026-03-02T20:00:00Z"}`), recordTime)
	if a.PublishedAt != 1772481600000 {
		t.Errorf("published_at 10h after the record's changed to %d", a.PublishedAt)
	}
	for in, want := range map[string]string{
		`{"title":"t"}`:                                                 "missing url",
		`{"url":"mailto:a@b","title":"t"}`:                              "url",
		`{"url":"https://x.example/","title":"<p></p>  "}`:              "missing title",
		`{"url":"https://x.example/","title":"t","published_at":"now"}`: "published_at",
		`[1,2]`: "malformed JSON",
	} {
		if _, err := o.Clean([]byte(in), 0); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", in, err, want)
		}
	}
	big := newOp(t, Options{MaxRecordBytes: 10})
	if _, err := big.Clean([]byte(`{"url":"https://x.example/","title":"t"}`), 0); err == nil {
		t.Error("record over the size limit accepted")
	}
}

// TestCleanImage: image_url is optional, kept as an absolute http(s) URL,
// and refused with the reason otherwise.
func TestCleanImage(t *testing.T) {
	o := newOp(t, Options{})
	a, err := o.Clean([]byte(`{"url":"https://x.example/a","title":"t","image_url":" HTTPS://CDN.Example/i/a.jpg?w=600#top "}`), 1)
	if err != nil {
		t.Fatal(err)
	}
	if a.ImageURL != "https://cdn.example/i/a.jpg?w=600" {
		t.Errorf("image_url %q", a.ImageURL)
	}
	if a, err = o.Clean([]byte(`{"url":"https://x.example/a","title":"t"}`), 1); err != nil || a.ImageURL != "" {
		t.Errorf("no image: %q, %v", a.ImageURL, err)
	}
	for _, bad := range []string{"javascript:alert(1)", "/relative.jpg", "data:image/png;base64,AAAA", "ftp://x.example/a.jpg", "https://", "https://x.example/" + strings.Repeat("a", 5000)} {
		in, _ := json.Marshal(map[string]string{"url": "https://x.example/a", "title": "t", "image_url": bad})
		if _, err := o.Clean(in, 1); err == nil || !strings.Contains(err.Error(), "image_url") {
			t.Errorf("image_url %.40q: error %v", bad, err)
		}
	}
}

func FuzzClean(f *testing.F) {
	f.Add([]byte(`{"url":"https://x.example/a","title":"<b>t</b>","summary":"s","published_at":"2026-03-01T10:00:00Z"}`))
	f.Add([]byte(`{"url":"http://[::1]:80/x?utm_source=1","title":"\xff"}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"url":"https://x.example/a","title":"t","image_url":"//cdn.example/a.jpg"}`))
	o := newOp(f, Options{MaxTitleBytes: 64, MaxSummaryBytes: 64, MaxContentBytes: 64})
	f.Fuzz(func(t *testing.T, in []byte) {
		a, err := o.Clean(in, 1)
		if err != nil {
			return
		}
		if a.ImageURL != "" && !strings.HasPrefix(a.ImageURL, "http://") && !strings.HasPrefix(a.ImageURL, "https://") {
			t.Fatalf("image_url %q", a.ImageURL)
		}
		if a.Title == "" || a.ID != canon.ArticleID(a.URL) {
			t.Fatalf("accepted %+v", a)
		}
		for _, s := range []string{a.Title, a.Summary, a.Content, a.SourceID} {
			if !utf8.ValidString(s) {
				t.Fatalf("invalid UTF-8 in %q", s)
			}
		}
		if len(a.Title) > 64 || len(a.Summary) > 64 || len(a.Content) > 64 {
			t.Fatalf("limits exceeded: %d %d %d", len(a.Title), len(a.Summary), len(a.Content))
		}
	})
}
