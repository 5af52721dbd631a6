package story

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/internal/text"
)

// assignTitles clusters headlines a minute apart and returns each one's
// story number, merges followed.
func assignTitles(t *testing.T, opts ClusterOptions, titles ...string) []uint64 {
	t.Helper()
	c, err := NewClusterer(opts)
	if err != nil {
		t.Fatal(err)
	}
	r := newRun()
	for i, title := range titles {
		r.assign(c, labelled{ID: strconv.Itoa(i), Title: title, Time: int64(i) * time.Minute.Milliseconds()})
	}
	out := make([]uint64, len(titles))
	for i := range out {
		out[i] = follow(r.redirect, r.story[strconv.Itoa(i)])
	}
	return out
}

// Headline boilerplate is not enough to join a story, and two headlines
// that share only one name do not found a story together; headlines about
// the same event still do.
func TestBoilerplateAndOneNameDoNotJoin(t *testing.T) {
	for _, c := range []struct {
		a, b string
		same bool
	}{
		{"Live updates: earthquake in Chile", "Live updates: pension vote in France", false},
		{"What we know about the Chile earthquake", "What we know about the pension vote", false},
		{"Explainer: why the Fed held rates", "Explainer: why the ferry sank", false},
		{"Opinion | Sprint earnings", "Opinion | Sprint outage", false},
		{"Sprint earnings beat forecasts", "Sprint outage hits millions", false},
		{"Dick Cheney dies", "Dick's profits rise", false},
		{"Earthquake of magnitude 7 hits Chile", "Chile earthquake: magnitude 7 quake kills 12", true},
		{"Sprint outage hits millions", "Millions hit by Sprint network outage", true},
	} {
		got := assignTitles(t, ClusterOptions{}, c.a, c.b)
		if same := got[0] == got[1]; same != c.same {
			t.Errorf("%q and %q: same story %v, want %v", c.a, c.b, same, c.same)
		}
	}
}

func TestSharedWordsSkipsGenericWords(t *testing.T) {
	c, _ := NewClusterer(ClusterOptions{})
	a := c.Vectorize(Text{Title: "Live updates: Chile earthquake what we know"})
	b := c.Vectorize(Text{Title: "Live updates: Chile pension vote what we know"})
	if n := c.sharedWords(a, b); n != 1 {
		t.Errorf("shared words %d, want 1 (chile; live, updates, what and know are generic)", n)
	}
	if n := c.sharedWords(a, a); n != 2 {
		t.Errorf("shared words with itself %d, want 2 (chile, earthquake)", n)
	}
}

// Generic words are looked up by index term, so each must be one: its
// own folded form (plurals and accents are folded before the lookup). A
// stop word may be one ("update", the index term of "updates").
func TestGenericWordsAreIndexTerms(t *testing.T) {
	fold := tokenOptions
	fold.Stop = text.StopWords{}
	for w := range genericWords {
		if got := text.Tokenize(w, fold); !slices.Equal(got, []string{w}) {
			t.Errorf("generic word %q is not folded (%q); it would never match", w, got)
		}
	}
	for _, c := range []struct{ text, want string }{
		{"Live updates", "live update"}, {"Explainer", "explainer"}, {"Things to know", "thing know"},
	} {
		toks := text.Tokenize(c.text, tokenOptions)
		if strings.Join(toks, " ") != c.want {
			t.Errorf("index terms of %q = %v, want %q", c.text, toks, c.want)
		}
		for _, tk := range toks {
			if !generic(tk) {
				t.Errorf("%q in %q is not generic", tk, c.text)
			}
		}
	}
}
