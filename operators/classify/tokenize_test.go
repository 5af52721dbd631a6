package classify

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTokenize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"  ,.;  ", nil},
		{"Hello, World!", []string{"hello", "world"}},
		{"E-mail and WI-FI", []string{"e", "mail", "and", "wi", "fi"}},
		{"U.S. stocks", []string{"u", "s", "stock"}},
		{"Don't stop", []string{"dont", "stop"}},
		{"The BBC's new show", []string{"the", "bbc", "new", "show"}},
		{"Apple’s iPhone", []string{"apple", "iphone"}},
		{"players' union", []string{"player", "union"}},
		{"'quoted' words", []string{"quoted", "word"}},
		{"Pokémon CAFÉ Škoda Łódź Straße Ærø", []string{"pokemon", "cafe", "skoda", "lodz", "strasse", "aero"}},
		{"Café with a combining accent", []string{"cafe", "with", "a", "combining", "accent"}},
		{"Москва Μόσχα 東京", []string{"москва", "μόσχα", "東京"}},
		{"हिन्दी समाचार", []string{"हिन्दी", "समाचार"}},
		{"5G 4K covid-19 1990s £5bn", []string{"5g", "4k", "covid", "19", "1990", "5bn"}},
		{"a\xffb\xc3", []string{"a", "b"}},
		{"\u212b\u212a \u0130", []string{"ak", "i"}}, // Angstrom and Kelvin signs, dotted İ
		{strings.Repeat("x", 65) + " ok", []string{"ok"}},
		{strings.Repeat("y", 64), []string{strings.Repeat("y", 64)}},
		// plural folding
		{"companies economies movies cookies ties", []string{"company", "economy", "movie", "cookie", "tie"}},
		{"taxes boxes classes businesses losses", []string{"tax", "box", "class", "business", "loss"}},
		{"matches crashes headaches niches", []string{"match", "crash", "headache", "nich"}},
		{"rates games cases houses responses prizes", []string{"rate", "game", "case", "house", "response", "prize"}},
		{"news series species physics politics", []string{"news", "series", "species", "physics", "politics"}},
		{"virus bonus crisis tennis glass", []string{"virus", "bonus", "crisis", "tennis", "glass"}},
		{"its gas has bus", []string{"its", "gas", "has", "bus"}},
	} {
		if got := Tokenize(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("Tokenize(%q) = %q, want %q", tc.in, got, tc.want)
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
		toks := Tokenize(title)
		for _, tok := range toks {
			if tok == "" || len(tok) > maxTokenBytes || !utf8.ValidString(tok) {
				t.Fatalf("bad token %q in %q", tok, toks)
			}
		}
		// Tokenizing the tokens again changes nothing (so they are lower
		// case and folded).
		if again := Tokenize(strings.Join(toks, " ")); !slices.Equal(again, toks) {
			t.Fatalf("Tokenize not idempotent: %q → %q", toks, again)
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
