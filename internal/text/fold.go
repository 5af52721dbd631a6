package text

import (
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// appendFolded appends r lower-cased, with Latin accents removed.
func appendFolded(b []byte, r rune) []byte {
	if r < utf8.RuneSelf {
		if 'A' <= r && r <= 'Z' {
			r += 'a' - 'A'
		}
		return append(b, byte(r))
	}
	// Lower-case first: some letters outside Latin-1 lower-case into it
	// (the Angstrom sign into "å"), and some into ASCII (the Kelvin sign).
	r = unicode.ToLower(r)
	if r < utf8.RuneSelf {
		return append(b, byte(r))
	}
	if r >= latinFoldStart && r < latinFoldStart+rune(len(latinFold)) {
		if f := latinFold[r-latinFoldStart]; f != "" {
			return append(b, f...)
		}
	}
	return utf8.AppendRune(b, r)
}

// latinFold maps Latin-1 Supplement and Latin Extended-A letters to lower-case
// ASCII ("É" → "e", "ß" → "ss"); "" keeps the rune (lower-cased).
var latinFold = buildLatinFold()

const latinFoldStart = 0xc0

func buildLatinFold() [0x180 - latinFoldStart]string {
	var t [0x180 - latinFoldStart]string
	special := map[rune]string{
		'ß': "ss", 'æ': "ae", 'Æ': "ae", 'œ': "oe", 'Œ': "oe", 'ø': "o", 'Ø': "o",
		'đ': "d", 'Đ': "d", 'ł': "l", 'Ł': "l", 'ħ': "h", 'Ħ': "h", 'ı': "i",
		'ð': "d", 'Ð': "d", 'þ': "th", 'Þ': "th", 'ŀ': "l", 'Ŀ': "l",
	}
	for r := rune(latinFoldStart); r < 0x180; r++ {
		if s, ok := special[r]; ok {
			t[r-latinFoldStart] = s
			continue
		}
		if !unicode.IsLetter(r) {
			continue
		}
		d := norm.NFD.String(string(r))
		if b := d[0]; b < utf8.RuneSelf && ('a' <= b && b <= 'z' || 'A' <= b && b <= 'Z') {
			t[r-latinFoldStart] = string(rune(unicode.ToLower(rune(b))))
		}
	}
	return t
}

// ieWords are nouns whose plural in "-ies" comes from "-ie", not "-y".
var ieWords = map[string]bool{
	"movie": true, "cookie": true, "zombie": true, "selfie": true, "rookie": true,
	"genie": true, "hippie": true, "newbie": true, "goalie": true, "brownie": true,
	"calorie": true, "smoothie": true, "sortie": true, "indie": true, "techie": true,
	"foodie": true, "roadie": true, "junkie": true, "auntie": true, "pie": true,
	"tie": true, "lie": true, "die": true, "veggie": true, "prairie": true,
	"talkie": true, "walkie": true, "yuppie": true, "groupie": true, "bookie": true,
}

// cheWords are nouns whose plural in "-ches" comes from "-che", not "-ch".
var cheWords = map[string]bool{
	"ache": true, "headache": true, "toothache": true, "backache": true, "earache": true,
	"heartache": true, "bellyache": true, "stomachache": true, "cache": true, "niche": true,
	"moustache": true, "mustache": true, "avalanche": true, "psyche": true, "quiche": true,
	"cliche": true, "creche": true, "microfiche": true,
}

// noFold are words ending in "s" that are not plurals and whose folded form
// would be a different common word.
var noFold = map[string]bool{
	"news": true, "aids": true, "series": true, "species": true, "means": true,
	"lens": true, "chaos": true, "bias": true, "atlas": true, "canvas": true,
	"pros": true, "cons": true, "commons": true, "yes": true, "physics": true, "economics": true,
	"politics": true, "mathematics": true,
	"mumps": true, "measles": true, "diabetes": true, "herpes": true, "rabies": true,
	"jeans": true, "texas": true, "paris": true, "wales": true, "james": true,
	"brussels": true, "athens": true, "lagos": true, "honduras": true, "dallas": true,
	"vegas": true, "los": true, "kansas": true, "arkansas": true, "orleans": true,
	"christmas": true, "mars": true, "venus": true, "always": true, "sometimes": true,
	"perhaps": true, "whereas": true, "thanks": true, "ios": true, "macos": true,
	"windows": true, "analytics": true, "genetics": true, "graphics": true,
	"robotics": true, "electronics": true, "logistics": true, "ethics": true,
	"lyrics": true, "statistics": true,
}

// foldPlural folds the English plural ending of the lower-case word b in
// place: "companies" → "company", "taxes" → "tax", "rates" → "rate",
// "players" → "player". Words of three letters or fewer, words ending in
// "ss", "us" or "is", and a few listed words are kept. It is deliberately
// light and dictionary-free: headline words are short, and over-stemming
// merges unrelated names.
func foldPlural(b []byte) []byte {
	n := len(b)
	if n <= 3 || b[n-1] != 's' {
		return b
	}
	if noFold[string(b)] {
		return b
	}
	switch b[n-2] {
	case 's', 'u', 'i':
		return b
	}
	if n >= 5 && b[n-3] == 'i' && b[n-2] == 'e' {
		// "-ies": "companies" → "company", but "movies" → "movie".
		if ieWords[string(b[:n-1])] {
			return b[:n-1]
		}
		if c := b[n-4]; c != 'a' && c != 'e' && c != 'o' {
			b[n-3] = 'y'
			return b[:n-2]
		}
		return b[:n-1]
	}
	if n >= 5 && b[n-2] == 'e' {
		switch c, p := b[n-3], b[n-4]; {
		case c == 'x', c == 's' && p == 's':
			// "taxes" → "tax", "classes" → "class".
			return b[:n-2]
		case c == 'h' && (p == 'c' || p == 's'):
			// "matches" → "match", "crashes" → "crash", "reaches" →
			// "reach", but "headaches" → "headache", "niches" → "niche".
			if cheWords[string(b[:n-1])] {
				return b[:n-1]
			}
			return b[:n-2]
		}
	}
	return b[:n-1]
}
