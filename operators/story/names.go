package story

import (
	"maps"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/newsflow/newsflow/internal/text"
)

// Names: the people, places, parties and firms a text names tell one
// event from another of the same kind (two coalition deals in two
// countries share "coalition", "pact" and "vote", and no name). A name is
// a capitalised word, an acronym, or a word with a digit inside a
// capitalised run, given as its index term: a strong name. A word that
// begins a headline segment is a weak one (a headline often begins with
// its place, and as often with a common noun) unless the text also writes
// it in lower case; in a title-cased headline, whose capitals say nothing,
// only acronyms count, and a word that begins a sentence of the body
// counts not at all ("Diplomats said", "Rescuers reached"). A word that
// another capitalised word follows ("Reform" of "Reform Platform",
// "Florian" of "Florian Halcroft") is a part: it may be a common word; the
// run's last word is its head, a strong name. A strong name is shared with another text that holds
// the word at all, a part only with one that names it too, a weak one only
// with one that names it as a strong name or a part (namesApart). Weekdays,
// months, generic words and the common parts of names ("Party", "Bank",
// "North") are no names alone. The rule is stateless: the same text always
// has the same names.

// nameParts are words that are capitalised as part of many names and
// name nothing alone, and words capitalised for other reasons.
var nameParts = func() map[string]bool {
	m := map[string]bool{}
	maps.Copy(m, weekdaysMonths)
	for _, w := range strings.Fields(`party coalition union council ministry minister government parliament assembly congress senate court
platform alliance front movement league federation association associated society institute agency authority
foreign interior defence defense finance justice
group company bank fund inc corp ltd plc university college school hospital city county state province
river lake mount island north south east west northern southern eastern western central new old great
united national federal republic democratic people royal international global world day night
mr mrs ms dr sir president prime chief king queen prince princess pope saint st
breaking update live watch video photo opinion analysis exclusive report`) {
		m[w] = true
	}
	return m
}()

// nameTokens returns the index terms of the names in a title and a body,
// sorted and distinct, by kind: strong ones (a capitalised word inside a
// sentence that ends its run of capitals, or an acronym: "Halcroft" of
// "Florian Halcroft"), parts (a capitalised word another follows: "Reform"
// of "Reform Platform", which may be a common word), and weak ones (the word that begins a headline segment, which may
// be a common word: "Geologist Ann Bell finds …"); a word is of the
// strongest kind it has.
func nameTokens(title, body string) (strong, parts, weak []string) {
	add := func(out *[]string, w string) {
		for _, tok := range text.Tokenize(w, tokenOptions) {
			if !nameParts[tok] && !generic(tok) && utf8.RuneCountInString(tok) > 1 {
				*out = append(*out, tok)
			}
		}
	}
	capital := func(w string) bool { r, _ := utf8.DecodeRuneInString(w); return unicode.IsUpper(r) }
	for i, s := range []string{title, body} {
		for _, seg := range segments(s, i == 0) {
			words := strings.FieldsFunc(seg, func(r rune) bool { return !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '\'' || r == '’') })
			titled := i == 0 && titleCased(words)
			for j, w := range words {
				r, _ := utf8.DecodeRuneInString(w)
				switch {
				case acronym(w):
					add(&strong, w)
				case !unicode.IsUpper(r) || titled:
				case j > 0 && j+1 < len(words) && capital(words[j+1]) && !nameWordsOnly(words[j+1]):
					add(&parts, w) // not the run's last word: "Reform" of "Reform Platform", "Janet" of "Janet Yellen"
				case j > 0:
					add(&strong, w)
				// A headline that begins with a word the text also writes in
				// lower case ("Cold showers …" over "… took cold showers")
				// does not begin with a name.
				case i == 0 && !stopWords.Has(strings.ToLower(w)) && !writesWord(title, body, strings.ToLower(w)):
					add(&weak, w)
				}
			}
		}
	}
	has := func(list []string) func(string) bool {
		return func(w string) bool { _, found := slices.BinarySearch(list, w); return found }
	}
	slices.Sort(strong)
	strong = slices.Compact(strong)
	slices.Sort(parts)
	parts = slices.DeleteFunc(slices.Compact(parts), has(strong))
	slices.Sort(weak)
	weak = slices.DeleteFunc(slices.DeleteFunc(slices.Compact(weak), has(strong)), has(parts))
	return strong, parts, weak
}

// writesWord reports whether title or body holds w as a whole word, as
// written (words are runs of letters and apostrophes).
func writesWord(title, body, w string) bool {
	for _, s := range []string{title, body} {
		for i := 0; ; {
			j := strings.Index(s[i:], w)
			if j < 0 {
				break
			}
			start, end := i+j, i+j+len(w)
			before, _ := utf8.DecodeLastRuneInString(s[:start])
			after, _ := utf8.DecodeRuneInString(s[end:])
			if (start == 0 || !wordRune(before)) && (end == len(s) || !wordRune(after)) {
				return true
			}
			i = start + 1
		}
	}
	return false
}

func wordRune(r rune) bool { return unicode.IsLetter(r) || r == '\'' || r == '’' }

// nameWordsOnly reports whether w is no word of a name's head: a weekday
// or month after a name ("Halcroft Monday") does not make it a part.
func nameWordsOnly(w string) bool {
	l := strings.ToLower(w)
	return stopWords.Has(l) || weekdaysMonths[l]
}

var weekdaysMonths = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`monday tuesday wednesday thursday friday saturday sunday january february march april may june july
august september october november december`) {
		m[w] = true
	}
	return m
}()

// segments splits a text into its sentences, and a headline also at the
// marks that begin a new segment (a colon, a bar, a spaced dash).
func segments(s string, headline bool) []string {
	seps := []string{". ", "! ", "? "}
	if headline {
		seps = append(seps, ": ", " | ", " - ", " – ", " — ")
	}
	parts := []string{s}
	for _, sep := range seps {
		var next []string
		for _, p := range parts {
			next = append(next, strings.Split(p, sep)...)
		}
		parts = next
	}
	return parts
}

// titleCased reports whether most of a segment's longer words are
// capitalised ("Euro Anxieties Wane as Bunds Top Treasuries").
func titleCased(words []string) bool {
	long, capped := 0, 0
	for _, w := range words {
		if utf8.RuneCountInString(w) < 4 || stopWords.Has(strings.ToLower(w)) {
			continue
		}
		long++
		if r, _ := utf8.DecodeRuneInString(w); unicode.IsUpper(r) {
			capped++
		}
	}
	return long >= 3 && capped*3 >= long*2
}

// acronym reports whether w has two or more capitals and no lowercase
// letter ("ECB", "G7", "COVID").
func acronym(w string) bool {
	upper := 0
	for _, r := range w {
		switch {
		case unicode.IsLower(r):
			return false
		case unicode.IsUpper(r):
			upper++
		}
	}
	return upper >= 2
}
