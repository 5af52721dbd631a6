package story

import (
	"bytes"
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/operators/internal/features"
)

// jsonInput is how the stories task read article records before features:
// encoding/json into the fields it needs. inputDecoder must read records
// as it did.
type jsonInput struct {
	ID          string         `json:"id"`
	URL         string         `json:"url"`
	SourceID    string         `json:"source_id"`
	Source      string         `json:"source"`
	Authority   float64        `json:"authority"`
	Title       string         `json:"title"`
	Summary     string         `json:"summary"`
	ImageURL    string         `json:"image_url"`
	Topics      []schema.Label `json:"topics"`
	PublishedAt int64          `json:"published_at"`
	Version     int            `json:"version"`
}

// decodeJSON decodes a record with encoding/json and reports whether it
// is valid for the stories task.
func decodeJSON(data []byte) (Article, bool) {
	var in jsonInput
	if err := json.Unmarshal(data, &in); err != nil || in.ID == "" || in.Title == "" {
		return Article{}, false
	}
	return Article{ID: in.ID, URL: in.URL, SourceID: in.SourceID, Source: in.Source, Authority: in.Authority,
		Title: in.Title, Summary: in.Summary, ImageURL: in.ImageURL, Topics: in.Topics, Published: in.PublishedAt, Version: in.Version}, true
}

// loneSurrogate matches a \u escape of a UTF-16 surrogate, which
// encoding/json decodes to U+FFFD when it is not paired and fastjson keeps
// as it is. No JSON encoder writes one: TestDecodeInput skips them.
var loneSurrogate = regexp.MustCompile(`(?i)\\u d[89a-f]`)

func checkDecode(t *testing.T, d *inputDecoder, data []byte) {
	t.Helper()
	if !json.Valid(data) || loneSurrogate.Match([]byte(strings.ReplaceAll(string(data), `\u`, `\u `))) {
		return
	}
	want, ok := decodeJSON(data)
	got, err := d.decode(data)
	switch {
	case ok != (err == nil):
		t.Errorf("%s: encoding/json valid %v, decode error %v", data, ok, err)
	case ok && !reflect.DeepEqual(got.Article, want):
		t.Errorf("%s:\ndecoded %+v\nwant    %+v", data, got.Article, want)
	}
}

var decodeCases = []string{
	`{"id":"a","title":"T","summary":"S","url":"u","source_id":"s","source":"S","authority":0.75,"image_url":"i","topics":[{"topic":"x","confidence":0.5}],"published_at":123,"version":2,"content":"skipped","author":"me","fetched_at":5}`,
	`{"id":"a","title":"T","topics":null,"summary":null,"published_at":null}`,
	`{"id":"a","title":"T","topics":[]}`,
	`{"id":"a","title":"T","topics":[null,{"topic":null,"confidence":1,"extra":[1,{}]},{"TOPIC":"y"}]}`,
	`{"ID":"a","Title":"T","SOURCE_ID":"s","Published_At":7}`,
	`{"id":"a","title":"first","title":"second"}`,
	`{"id":"a","title":"T","title":null}`,
	`{"id":"a","title":"caf\u00e9 \"q\" \\ \/ \ud83d\ude00 \u003c\u0026","summary":"\n\t"}`,
	"{\"id\":\"a\",\"title\":\"bad \xff\xfe utf8 \xe2\x82\"}",
	`{"id":"a","title":"T","authority":"high"}`,
	`{"id":"a","title":"T","published_at":1.5}`,
	`{"id":"a","title":"T","published_at":1e3}`,
	`{"id":"a","title":"T","version":99999999999999999999}`,
	`{"id":"a","title":"T","topics":{"topic":"x"}}`,
	`{"id":"a","title":"T","topics":[1]}`,
	`{"id":"a","title":"T","topics":[{"confidence":"high"}]}`,
	`{"id":5,"title":"T"}`,
	`{"id":"a"}`,
	`{"title":"T"}`,
	`{"id":"","title":"T"}`,
	`null`,
	`[1]`,
	`"a"`,
	`{}`,
	`{"id":"a","title":"T","features":{"v":1,"simhash":"x"},"unknown":[{"deep":[null]}]}`,
	`{"id":"a","title":"T","features":"not an object"}`,
}

// TestDecodeInput holds the stories task's decoder to encoding/json.
func TestDecodeInput(t *testing.T) {
	var d inputDecoder
	for _, c := range decodeCases {
		checkDecode(t, &d, []byte(c))
	}
	for _, c := range []string{`{"id":"a",`, `not json`, ``} {
		if _, err := d.decode([]byte(c)); err == nil || !strings.Contains(err.Error(), "malformed JSON") {
			t.Errorf("%q: error %v, want malformed JSON", c, err)
		}
	}
	if _, err := d.decode([]byte(`{"id":"a"}`)); err == nil || err.Error() != "missing id or title" {
		t.Errorf("error %v, want missing id or title", err)
	}
}

// FuzzDecodeInput compares the decoder with encoding/json on valid JSON.
func FuzzDecodeInput(f *testing.F) {
	for _, c := range decodeCases {
		f.Add([]byte(c))
	}
	var d inputDecoder
	f.Fuzz(func(t *testing.T, data []byte) { checkDecode(t, &d, data) })
}

// TestDecodeFeatures: a record's features are used when they are of this
// version and well formed, and skipped (the builder computes them)
// otherwise, without making the record invalid.
func TestDecodeFeatures(t *testing.T) {
	a := Article{ID: "a", Title: "Central bank raises interest rates", Summary: "The central bank raised rates again, citing inflation.", Published: t0, Version: 1}
	ext := features.NewExtractor()
	good := ext.Compute(a.Title, a.Summary)
	doc := ext.Doc(a.Title, a.Summary)
	var d inputDecoder
	decode := func(f *schema.Features) *features.Doc {
		t.Helper()
		v, err := json.Marshal(schema.ProcessedArticle{Article: schema.Article{ID: a.ID, Title: a.Title, Summary: a.Summary, PublishedAt: a.Published, Version: 1}, Features: f})
		if err != nil {
			t.Fatal(err)
		}
		in, err := d.decode(v)
		if err != nil {
			t.Fatal(err)
		}
		return in.features
	}
	f := decode(good)
	if f == nil || f.Near.FP != doc.FP || !reflect.DeepEqual(f.Near.Sig, doc.Sig) {
		t.Fatalf("features %+v, want %+v", f, doc)
	}
	var words []string
	for _, tm := range f.Terms {
		words = append(words, string(tm.Word))
	}
	if w := strings.Join(words, " "); w != "central bank raise interest rate raised citing inflation" {
		t.Errorf("terms %q", w)
	}
	for name, change := range map[string]func(f *schema.Features){
		"other version":      func(f *schema.Features) { f.Version = features.Version + 1 },
		"no version":         func(f *schema.Features) { f.Version = 0 },
		"short simhash":      func(f *schema.Features) { f.SimHash = f.SimHash[1:] },
		"upper-case hex":     func(f *schema.Features) { f.SimHash = strings.ToUpper(f.SimHash) },
		"short minhash":      func(f *schema.Features) { f.MinHash = f.MinHash[4:] },
		"no minhash":         func(f *schema.Features) { f.MinHash = nil },
		"term without count": func(f *schema.Features) { f.Terms += " word" },
		"zero counts":        func(f *schema.Features) { f.Terms += " word:0:0" },
		"too many":           func(f *schema.Features) { f.Terms += " word:1000:0" },
		"bad count":          func(f *schema.Features) { f.Terms += " word:1:x" },
		"double space":       func(f *schema.Features) { f.Terms = strings.Replace(f.Terms, " ", "  ", 1) },
	} {
		bad := *good
		change(&bad)
		if f := decode(&bad); f != nil {
			t.Errorf("%s: features used", name)
		}
	}
	if f := decode(nil); f != nil {
		t.Error("features of a record without them")
	}
}

// TestWithoutFeatures: the record passed on to articles.indexed is the
// article without its features, as a record without features is, unless
// they are not where and as the articles operator writes them.
func TestWithoutFeatures(t *testing.T) {
	a := Article{ID: "a", Title: `Title with "quotes", {braces} and ,"features":{ in it`, Summary: "s", Published: t0, Version: 1,
		Topics: []Label{{Topic: "x", Confidence: 1}}}
	with, without := record(t, a, features.NewExtractor()), record(t, a, nil)
	if got := withoutFeatures(with); !bytes.Equal(got, without) {
		t.Errorf("got\n%s\nwant\n%s", got, without)
	}
	var d inputDecoder
	in, err := d.decode(with)
	if err != nil || !bytes.Equal(in.forward, without) {
		t.Errorf("forwarded %s (%v)", in.forward, err)
	}
	if in, err = d.decode(without); err != nil || !bytes.Equal(in.forward, without) {
		t.Errorf("forwarded %s (%v)", in.forward, err)
	}
	for _, keep := range []string{
		`{"id":"a","title":"t","features":{"v":1},"x":1}`,
		`{"id":"a","title":"t","features":{"v":1,"o":{"p":1}}}`,
		`{"id":"a","title":"t","features":{"v":"}"}}`,
		`{"id":"a","title":"t","topics":[{"topic":"x","features":{}}]}`,
		`{"id":"a","o":{"title":"t","features":{"v":1}}}`,
		`{"features":{"v":1}}`,
	} {
		if got := withoutFeatures([]byte(keep)); string(got) != keep {
			t.Errorf("%s changed to %s", keep, got)
		}
	}
	for in, want := range map[string]string{
		`{"id":"a","features":{}}`:                  `{"id":"a"}`,
		`{"id":"a","features":{"v":2,"t":"a:1:1"}}`: `{"id":"a"}`,
	} {
		if got := withoutFeatures([]byte(in)); string(got) != want || !json.Valid(got) {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
}
