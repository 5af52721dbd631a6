package story

import (
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
// capitalised run, given as its index term; words that begin a sentence or
// a headline segment count too (a headline often begins with its place),
// except in a title-cased headline, whose capitals say nothing. Weekdays,
// months, generic words and the common parts of names ("Party", "Bank",
// "North") are no names alone. The rule is stateless: the same text always
// has the same names.

// nameParts are words that are capitalised as part of many names and
// name nothing alone, and words capitalised for other reasons.
var nameParts = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`monday tuesday wednesday thursday friday saturday sunday
january february march april may june july august september october november december
party coalition union council ministry minister government parliament assembly congress senate court
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
// sorted and distinct.
func nameTokens(title, body string) []string {
	var out []string
	add := func(w string) {
		for _, tok := range text.Tokenize(w, tokenOptions) {
			if !nameParts[tok] && !generic(tok) && utf8.RuneCountInString(tok) > 1 {
				out = append(out, tok)
			}
		}
	}
	for i, s := range []string{title, body} {
		for _, seg := range segments(s, i == 0) {
			words := strings.FieldsFunc(seg, func(r rune) bool { return !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '\'' || r == '’') })
			titled := i == 0 && titleCased(words)
			for j, w := range words {
				r, _ := utf8.DecodeRuneInString(w)
				switch {
				case acronym(w):
					add(w)
				case !unicode.IsUpper(r) || titled:
				case j > 0 || !stopWords.Has(strings.ToLower(w)):
					add(w)
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

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
