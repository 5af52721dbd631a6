package text

import (
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// folded are the options of the topic classifier: everything folded,
// apostrophes joining, tokens up to 64 bytes.
var folded = Options{FoldAccents: true, FoldPlurals: true, JoinApostrophes: true, MaxBytes: 64}

func TestTokenizeSegmentation(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"  ,;!  ", nil},
		{"Hello, World!", []string{"hello", "world"}},
		{"Fed raises rates 0.25%", []string{"fed", "raises", "rates", "0", "25"}},
		{"U.S.-China talks", []string{"u", "s", "china", "talks"}},
		{"E-mail and WI-FI", []string{"e", "mail", "and", "wi", "fi"}},
		{"ÉCOLE Straße ΑΘΗΝΑ", []string{"école", "straße", "αθηνα"}},
		{"cafe\u0301 au lait", []string{"cafe\u0301", "au", "lait"}}, // combining accent stays
		{"हिन्दी समाचार", []string{"हिन्दी", "समाचार"}},              // vowel signs are marks
		{"東京の天気", []string{"東", "京", "の", "天", "気"}},
		{"abc東京def", []string{"abc", "東", "京", "def"}},
		{"東\u0301", []string{"東", "\u0301"}},
		{"bad\xffutf8", []string{"bad", "utf8"}},
		{"a\xffb\xc3", []string{"a", "b"}},
		{"tab\tnew\nline", []string{"tab", "new", "line"}},
		{"٣ أخبار", []string{"٣", "أخبار"}}, // Arabic-Indic digit
		{"\u212b\u212a \u0130", []string{"åk", "i"}},
		{strings.Repeat("x", 65), []string{strings.Repeat("x", 65)}},
		// apostrophes separate words, as other punctuation does
		{"Don't stop", []string{"don", "t", "stop"}},
		{"The BBC's new show", []string{"the", "bbc", "s", "new", "show"}},
		{"Apple’s iPhone; 'quoted'", []string{"apple", "s", "iphone", "quoted"}},
	} {
		if got := Tokenize(tc.in, Options{}); !slices.Equal(got, tc.want) {
			t.Errorf("Tokenize(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestTokenizeFolded(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"Hello, World!", []string{"hello", "world"}},
		{"U.S. stocks", []string{"u", "s", "stock"}},
		{"Don't stop", []string{"dont", "stop"}},
		{"The BBC's new show", []string{"the", "bbc", "new", "show"}},
		{"Apple’s iPhone", []string{"apple", "iphone"}},
		{"players' union", []string{"player", "union"}},
		{"'quoted' words", []string{"quoted", "word"}},
		{"O'Brien rock'n'roll 1990's x'1 x'", []string{"obrien", "rocknroll", "1990", "x", "1", "x"}},
		{"Pokémon CAFÉ Škoda Łódź Straße Ærø", []string{"pokemon", "cafe", "skoda", "lodz", "strasse", "aero"}},
		{"Café with a combining accent", []string{"cafe", "with", "a", "combining", "accent"}},
		{"\u0301x \u0301", []string{"x"}},
		{"Москва Μόσχα 東京", []string{"москва", "μόσχα", "東", "京"}},
		{"हिन्दी समाचार", []string{"हिन्दी", "समाचार"}},
		{"5G 4K covid-19 1990s £5bn", []string{"5g", "4k", "covid", "19", "1990", "5bn"}},
		{"\u212b\u212a \u0130", []string{"ak", "i"}}, // Angstrom and Kelvin signs, dotted İ
		{strings.Repeat("x", 65) + " ok", []string{"ok"}},
		{strings.Repeat("y", 64), []string{strings.Repeat("y", 64)}},
		// plural folding
		{"companies economies movies cookies ties", []string{"company", "economy", "movie", "cookie", "tie"}},
		{"taxes boxes classes businesses losses", []string{"tax", "box", "class", "business", "loss"}},
		{"matches crashes headaches niches", []string{"match", "crash", "headache", "niche"}},
		{"reaches coaches beaches approaches caches aches", []string{"reach", "coach", "beach", "approach", "cache", "ache"}},
		{"rates games cases houses responses prizes", []string{"rate", "game", "case", "house", "response", "prize"}},
		{"news series species physics politics", []string{"news", "series", "species", "physics", "politics"}},
		{"virus bonus crisis tennis glass", []string{"virus", "bonus", "crisis", "tennis", "glass"}},
		{"its gas has bus", []string{"its", "gas", "has", "bus"}},
	} {
		if got := Tokenize(tc.in, folded); !slices.Equal(got, tc.want) {
			t.Errorf("Tokenize(%q, folded) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestStopWords(t *testing.T) {
	stop := NewStopWords("the a of does other\nit")
	if !stop.Has("the") || stop.Has("The") || stop.Has("news") || (StopWords{}).Has("the") {
		t.Error("Has")
	}
	// Stop words are checked before plural folding: "does" is dropped, not
	// folded to "doe"; "others" is kept, folded to "other".
	opts := Options{FoldPlurals: true, Stop: stop}
	got := Tokenize("The rise of it’s others, does it?", opts)
	if want := []string{"rise", "s", "other"}; !slices.Equal(got, want) {
		t.Errorf("Tokenize with stop words = %q, want %q", got, want)
	}
}

// TestTokenizerReuse: a Tokenizer gives the same tokens as Tokenize when
// reused, Reset restarts it, and once warmed up it does not allocate.
func TestTokenizerReuse(t *testing.T) {
	texts := []string{
		"Ukraine crisis: LNG stocks in focus as Europe's leaders weigh gas supplies",
		"東京の天気 Pokémon", "", strings.Repeat("long", 30) + " short",
	}
	for _, opts := range []Options{{}, folded, {Stop: NewStopWords("as in"), FoldPlurals: true}} {
		tz := NewTokenizer(opts)
		for _, s := range texts {
			var got []string
			tz.Reset(s)
			for tz.Next() {
				got = append(got, string(tz.Token()))
			}
			if want := Tokenize(s, opts); !slices.Equal(got, want) {
				t.Errorf("reused Tokenizer on %q: %q, Tokenize %q", s, got, want)
			}
			if tz.Next() || tz.Token() != nil {
				t.Error("Next after the end")
			}
		}
		allocs := testing.AllocsPerRun(100, func() {
			for _, s := range texts {
				tz.Reset(s)
				for tz.Next() {
				}
			}
		})
		if allocs != 0 {
			t.Errorf("Tokenizer allocates %v times, want 0", allocs)
		}
	}
	var zero Tokenizer
	zero.Reset("Zero value")
	if !zero.Next() || string(zero.Token()) != "zero" {
		t.Error("zero Tokenizer")
	}
}

// TestFirstIdeo checks the shortcut in classOf against the Unicode tables
// of this Go release.
func TestFirstIdeo(t *testing.T) {
	for r := range rune(firstIdeo) {
		if unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana) {
			t.Fatalf("%U is Han, Hiragana or Katakana, below firstIdeo %U", r, firstIdeo)
		}
	}
}

// FuzzTokenize checks the tokens of arbitrary bytes, valid UTF-8 or not,
// under each consumer's options: non-empty, valid UTF-8, within the
// length limit, and tokenizing the tokens again gives them back (so they
// are lower case and folded).
func FuzzTokenize(f *testing.F) {
	for _, s := range []string{
		"", "Interest rate rise", "Manchester United's striker", "a\xffb", "\xc3", "İstanbul",
		"don't", "'", "a'", "'b", "a's", "a'sb", "ǅemal", "\u0301x", "x\u0301", "ß", strings.Repeat("é", 40),
		"Ⅻ ⅻ", "ﬁnance", "K", "Σίσυφος", "e\u0308s", "classes'", "ies", "sses", "東京で地震",
		"cafe\u0301 İSTANBUL ǅemal", "\u0301\u0301 東\u0301", "ﬁ ß ẞ Σσς",
	} {
		f.Add(s)
	}
	optss := []Options{{}, folded, {FoldPlurals: true}, {FoldAccents: true, JoinApostrophes: true, MaxBytes: 8}}
	f.Fuzz(func(t *testing.T, s string) {
		for _, opts := range optss {
			toks := Tokenize(s, opts)
			for _, tok := range toks {
				if tok == "" || opts.MaxBytes > 0 && len(tok) > opts.MaxBytes || !utf8.ValidString(tok) {
					t.Fatalf("bad token %q in %q (%+v)", tok, toks, opts)
				}
			}
			if again := Tokenize(strings.Join(toks, " "), opts); !slices.Equal(again, toks) {
				t.Fatalf("Tokenize not idempotent (%+v): %q → %q", opts, toks, again)
			}
		}
	})
}

// BenchmarkTokenizer: the tokens of a headline and summary, with the zero
// Options (the near-duplicate detector's) and with everything folded (the
// classifier's).
func BenchmarkTokenizer(b *testing.B) {
	s := "Ukraine crisis: LNG stocks in focus as Europe weighs gas supplies. " +
		"Shares of liquefied natural gas exporters rose on Monday as Europe's " +
		"leaders discussed ways to cut their dependence on Russian gas, analysts said."
	for _, c := range []struct {
		name string
		opts Options
	}{{"plain", Options{}}, {"folded", folded}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(s)))
			tz := NewTokenizer(c.opts)
			for b.Loop() {
				tz.Reset(s)
				for tz.Next() {
				}
			}
		})
	}
}

// reference tokenizes rune by rune, as the package documentation says,
// without the fast paths of Tokenizer.
func reference(s string, o Options) []string {
	var toks []string
	var w []rune
	flush := func() {
		var b []byte
		for _, r := range w {
			switch {
			case o.FoldAccents && r >= 0x300 && r <= 0x36f:
			case o.FoldAccents:
				b = appendFolded(b, r)
			default:
				b = utf8.AppendRune(b, unicode.ToLower(r))
			}
		}
		w = w[:0]
		if len(b) == 0 || o.MaxBytes > 0 && len(b) > o.MaxBytes || o.Stop.Has(string(b)) {
			return
		}
		if o.FoldPlurals {
			b = foldPlural(b)
		}
		toks = append(toks, string(b))
	}
	for i, r := range s {
		size := utf8.RuneLen(r)
		if r == utf8.RuneError {
			_, size = utf8.DecodeRuneInString(s[i:])
		}
		switch {
		case r == utf8.RuneError:
			flush()
		case unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana):
			flush()
			w = append(w, r)
			flush()
		case unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			w = append(w, r)
		case (r == '\'' || r == '’') && o.JoinApostrophes && len(w) > 0:
			if n, _ := utf8.DecodeRuneInString(s[i+size:]); !unicode.IsLetter(n) {
				flush()
			}
		default:
			flush()
		}
	}
	flush()
	return toks
}

// FuzzReference checks Tokenize against reference under each option.
func FuzzReference(f *testing.F) {
	for _, s := range []string{
		"", "Hello, World! It's O'Brien's don't", "ÉCOLE Straße cafe\u0301 \u0301x", "東京の天気abc東",
		"a\xffb\xc3", "'x' x'' x'\xff", "Ⅻ ⅻ ﬁnance K", "ABC's Q&A", "مرحبا ١٢٣", "हिन्दी",
	} {
		f.Add(s)
	}
	stop := NewStopWords("the a of s t")
	var optss []Options
	for bits := range 32 {
		optss = append(optss, Options{FoldAccents: bits&1 != 0, FoldPlurals: bits&2 != 0,
			JoinApostrophes: bits&4 != 0, MaxBytes: 8 * (bits >> 3 & 1), Stop: [2]StopWords{{}, stop}[bits>>4]})
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, o := range optss {
			if got, want := Tokenize(s, o), reference(s, o); !slices.Equal(got, want) {
				t.Fatalf("Tokenize(%q, %+v) = %q, reference %q", s, o, got, want)
			}
		}
	})
}
