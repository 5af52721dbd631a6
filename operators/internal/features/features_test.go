package features

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/newsflow/newsflow/internal/testutil"
	"github.com/newsflow/newsflow/internal/text"
	"github.com/newsflow/newsflow/operators/internal/neardup"
)

// texts are titles and summaries: headlines, repeats, accents, plurals,
// stop words only, scripts without spaces, nothing.
var texts = []struct{ title, summary string }{
	{"Central bank raises interest rates for third time this year",
		"The central bank raised its benchmark rate by a quarter of a percentage point on Thursday, citing persistent inflation; rates rise again."},
	{"Live updates: Chile earthquake – what we know", "Chile's earthquake: live updates, latest news and videos. Chile, Chile, Chile."},
	{"Pokémon Straße CAFÉ cafés", "Companies' taxes and matches: the companies pay taxes"},
	{"東京で地震 速報", "東京 地震 東京"},
	{"The and of", ""},
	{"", ""},
	{"Obama, Obama's; OBAMA!", "obama"},
}

// TestTermsCountTokens: Terms are the tokens of TermOptions, each once in
// order of first occurrence, with the number of times it occurs in the
// title and in the summary.
func TestTermsCountTokens(t *testing.T) {
	var tc TermCounter
	check := func(title, summary string) {
		t.Helper()
		var want []Term
		idx := map[string]int{}
		for i, s := range []string{title, summary} {
			for _, w := range text.Tokenize(s, TermOptions) {
				k, ok := idx[w]
				if !ok {
					k = len(want)
					idx[w] = k
					want = append(want, Term{Word: []byte(w)})
				}
				if i == 0 {
					want[k].Title++
				} else {
					want[k].Summary++
				}
			}
		}
		got := tc.Terms(title, summary)
		if len(got) != len(want) || (len(got) > 0 && !reflect.DeepEqual(slices.Clone(got), want)) {
			t.Fatalf("%q, %q: terms\n%v, want\n%v", title, summary, got, want)
		}
		// The encoding reads back as it was.
		enc := AppendTerms(nil, got)
		back, err := ParseTerms(nil, enc, len(title), len(summary))
		if err != nil || len(back) != len(got) || (len(got) > 0 && !reflect.DeepEqual(back, want)) {
			t.Fatalf("%q: parsed as %v (%v), want %v", enc, back, err, want)
		}
	}
	for _, x := range texts {
		check(x.title, x.summary)
	}
	n := 0
	readItems(t, func(title, summary string) {
		check(text.Clean(title, 512), text.Clean(summary, 2000))
		n++
	})
	t.Logf("%d orx365 items", n)
}

// readItems passes the title and description of each orx365 item to fn.
func readItems(t *testing.T, fn func(title, summary string)) {
	t.Helper()
	f, err := os.Open("../../../../shared/data/streams/orx365_items.jsonl")
	if err != nil {
		testutil.NoSharedData(t, "shared data not available (%v); skipping", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		var it struct{ Title, Description string }
		if err := json.Unmarshal(sc.Bytes(), &it); err != nil {
			t.Fatal(err)
		}
		fn(it.Title, it.Description)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}

// TestComputeIsDetectorDoc: the features' fingerprint and signature are
// those of a default neardup Detector, and decode back to them.
func TestComputeIsDetectorDoc(t *testing.T) {
	det, err := neardup.NewDetector(neardup.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := NewExtractor()
	var d Decoder
	for _, x := range texts {
		f := e.Compute(x.title, x.summary)
		want := det.Doc(x.title, x.summary)
		doc, ok := d.Decode(f.Version, []byte(f.SimHash), []byte(b64(f.MinHash)), []byte(f.Terms), x.title, x.summary)
		if !ok || doc.Near.FP != want.FP || !slices.Equal(doc.Near.Sig, want.Sig) {
			t.Errorf("%q: decoded %v %x, want %x", x.title, ok, doc.Near.FP, want.FP)
		}
		if len(doc.Terms) != len(e.Terms(x.title, x.summary)) {
			t.Errorf("%q: %d terms decoded", x.title, len(doc.Terms))
		}
	}
}

func b64(b []byte) string {
	v, _ := json.Marshal(b) // as the record holds it
	var s string
	_ = json.Unmarshal(v, &s)
	return s
}

// TestGoldenFeatures pins the features of a few texts. When it fails, the
// features changed: increase Version (see the package documentation) and
// update the values here.
func TestGoldenFeatures(t *testing.T) {
	if Version != 1 {
		t.Fatalf("version %d: update the golden values", Version)
	}
	// The SimHash, the first 8 bytes of the SHA-256 of the MinHash
	// signature's bytes, and the terms.
	golden := []struct{ simhash, minhash, terms string }{
		{"f75b6c3548df4a4c", "45f5e99d5f287f72", "central:1:1 bank:1:1 raise:1:0 interest:1:0 rate:1:2 third:1:0 time:1:0 year:1:0 raised:0:1 benchmark:0:1 quarter:0:1 percentage:0:1 point:0:1 thursday:0:1 citing:0:1 persistent:0:1 inflation:0:1 rise:0:1"},
		{"b4e9f1ad168a85a1", "5d484a4e935dfc0c", "live:1:1 update:1:1 chile:1:4 earthquake:1:1 know:1:0 latest:0:1 video:0:1"},
		{"df20b539fbc87b72", "de2e725f04c8da8b", "pokemon:1:0 strasse:1:0 cafe:2:0 company:0:2 tax:0:2 match:0:1 pay:0:1"},
		{"edbc9c065cc0f55c", "a239cd03d3cbaa7b", "東:1:2 京:1:2 で:1:0 地:1:1 震:1:1 速:1:0 報:1:0"},
	}
	e := NewExtractor()
	for i, x := range texts[:len(golden)] {
		f := e.Compute(x.title, x.summary)
		sum := sha256.Sum256(f.MinHash)
		got := [3]string{f.SimHash, hex.EncodeToString(sum[:8]), f.Terms}
		want := golden[i]
		if got != [3]string{want.simhash, want.minhash, want.terms} {
			t.Errorf("text %d: features\n%q, want\n%q", i, got, want)
		}
	}
}

func TestParseTermsRejects(t *testing.T) {
	for _, s := range []string{"word", "word:1", ":1:1", "word:1:1 ", " word:1:1", "a:1:1  b:1:1", "word:01:1", "word:1:-1",
		"word:0:0", "word:1:1000000", "word:x:1", "word:1:1\tb:1:1", "a:b:1:2", "a:1:1:1", "a:1:1 :1:1", "a::1", "a:1:"} {
		if terms, err := ParseTerms(nil, []byte(s), 100, 100); err == nil {
			t.Errorf("%q parsed as %v", s, terms)
		}
	}
	if _, err := ParseTerms(nil, []byte("a:3:0 b:1:0"), 3, 100); err == nil {
		t.Error("4 title tokens in a title of 3 bytes accepted")
	}
	if terms, err := ParseTerms(nil, nil, 0, 0); err != nil || len(terms) != 0 {
		t.Errorf("no terms: %v %v", terms, err)
	}
	terms, err := ParseTerms(nil, []byte("a:2:0 été:0:1 東京:1:10"), 3, 11)
	if got := string(AppendTerms(nil, terms)); err != nil || len(terms) != 3 || got != "a:2:0 été:0:1 東京:1:10" || terms[2].Summary != 10 {
		t.Errorf("parsed as %v %v", terms, err)
	}
}

func TestSimHashHex(t *testing.T) {
	for _, fp := range []uint64{0, 1, 0xdeadbeef, 1<<64 - 1, 0x0123456789abcdef} {
		s := FormatSimHash(fp)
		back, err := ParseSimHash([]byte(s))
		if len(s) != 16 || err != nil || back != fp || strings.ToLower(s) != s {
			t.Errorf("%x: %q, back %x %v", fp, s, back, err)
		}
	}
	for _, s := range []string{"", "123", "0123456789abcdeg", "0123456789ABCDEF", "00000000000000000"} {
		if _, err := ParseSimHash([]byte(s)); err == nil {
			t.Errorf("%q parsed", s)
		}
	}
}
