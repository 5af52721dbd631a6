package classify

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestTokenize checks the normalization the package documentation states
// (the tokenizer itself is tested in internal/text).
func TestTokenize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"Pokémon Straße", []string{"pokemon", "strasse"}},
		{"Don't stop the BBC's e-mail, U.S.", []string{"dont", "stop", "the", "bbc", "e", "mail", "u", "s"}},
		{"companies taxes matches rates", []string{"company", "tax", "match", "rate"}},
		{"news series physics virus", []string{"news", "series", "physics", "virus"}},
		{"東京 " + strings.Repeat("x", 65) + " " + strings.Repeat("y", 64), []string{"東", "京", strings.Repeat("y", 64)}},
	} {
		if got := tokenize(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("tokenize(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// FuzzClassify feeds arbitrary bytes, valid UTF-8 or not, to the tokenizer,
// the rules and a model, and checks the invariants of their output.
func FuzzClassify(f *testing.F) {
	for _, s := range []string{
		"", "Interest rate rise", "Manchester United's striker", "a\xffb", "\xc3", "İstanbul",
		"don't", "'", "a'", "'b", "ǅemal", "\u0301x", "x\u0301", "ß", strings.Repeat("é", 40),
		"Ⅻ ⅻ", "ﬁnance", "K", "Σίσυφος", "e\u0308s", "classes'", "ies", "sses",
	} {
		f.Add(s, s)
	}
	rules, err := LoadRules(rulesFile)
	if err != nil {
		f.Fatal(err)
	}
	model, err := Train(fixtureExamples(), TrainOptions{Bigrams: true, MinCount: 1})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, title, content string) {
		toks := tokenize(title)
		for _, tok := range toks {
			if tok == "" || len(tok) > maxTokenBytes || !utf8.ValidString(tok) {
				t.Fatalf("bad token %q in %q", tok, toks)
			}
		}
		// Tokenizing the tokens again changes nothing (so they are lower
		// case and folded).
		if again := tokenize(strings.Join(toks, " ")); !slices.Equal(again, toks) {
			t.Fatalf("tokenize not idempotent: %q → %q", toks, again)
		}
		d := Document{Title: title, Summary: content, Content: title + content}
		checkLabels(t, rules.Classify(d), rules.Topics(), rules.limits)
		checkLabels(t, model.Classify(d), model.Topics(), model.limits)
	})
}

func checkLabels(t *testing.T, labels []Label, topics []string, l limits) {
	t.Helper()
	if len(labels) > l.maxLabels {
		t.Fatalf("%d labels, max %d: %v", len(labels), l.maxLabels, labels)
	}
	for i, lb := range labels {
		if !slices.Contains(topics, lb.Topic) {
			t.Fatalf("unknown topic %q", lb.Topic)
		}
		if !(lb.Confidence > 0 && lb.Confidence <= 1) || lb.Confidence < l.minConfidence {
			t.Fatalf("confidence %v out of range: %v", lb.Confidence, labels)
		}
		if i > 0 && (labels[i-1].Confidence < lb.Confidence || labels[i-1].Topic == lb.Topic) {
			t.Fatalf("labels not sorted or repeated: %v", labels)
		}
	}
}
