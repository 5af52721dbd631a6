package classify

import (
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// maxTokenBytes bounds a token: longer runs of letters (unsegmented scripts,
// base64, URLs without separators) are dropped rather than matched.
const maxTokenBytes = 64

// Tokenize returns the normalized tokens of s, the units that rules and
// models match on. See the package documentation for the normalization.
func Tokenize(s string) []string {
	var toks []string
	var t tokenizer
	t.reset(s)
	for {
		tok, ok := t.next()
		if !ok {
			return toks
		}
		toks = append(toks, string(tok))
	}
}

// tokenizer yields the normalized tokens of a string. The slice next returns
// is valid until the following call. The zero value is ready after reset.
type tokenizer struct {
	s   string
	i   int
	buf []byte
}

func (t *tokenizer) reset(s string) {
	t.s, t.i = s, 0
}

// next returns the next token, or false at the end of the input.
func (t *tokenizer) next() ([]byte, bool) {
	for t.i < len(t.s) {
		t.buf = t.buf[:0]
		runes := 0
		for t.i < len(t.s) {
			r, size := rune(t.s[t.i]), 1
			if r >= utf8.RuneSelf {
				r, size = utf8.DecodeRuneInString(t.s[t.i:])
			}
			if isWordRune(r) {
				t.i += size
				t.buf = appendFolded(t.buf, r)
				runes++
				continue
			}
			// An apostrophe between letters joins them: "don't" → "dont",
			// "BBC's" → "bbcs" (→ "bbc" after plural folding).
			if runes > 0 && (r == '\'' || r == '\u2019') && t.i+size < len(t.s) {
				n, _ := utf8.DecodeRuneInString(t.s[t.i+size:])
				if unicode.IsLetter(n) {
					t.i += size
					continue
				}
			}
			if runes > 0 && unicode.Is(unicode.M, r) {
				// Combining marks belong to the word they follow (Indic
				// vowel signs); accents on Latin letters are dropped.
				t.i += size
				if r < 0x300 || r > 0x36f {
					t.buf = utf8.AppendRune(t.buf, r)
				}
				continue
			}
			t.i += size
			if runes > 0 {
				break
			}
		}
		if runes == 0 || len(t.buf) > maxTokenBytes {
			continue
		}
		return foldPlural(t.buf), true
	}
	return nil, false
}

func isWordRune(r rune) bool {
	if r < utf8.RuneSelf {
		return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9'
	}
	return unicode.IsLetter(r) || unicode.IsDigit(r)
}

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

// foldPlural folds English plural and possessive endings of b in place:
// "companies" → "company", "taxes" → "tax", "rates" → "rate", "bbcs" →
// "bbc". Words of three letters or fewer, words ending in "ss", "us" or "is",
// and a few listed words are kept.
func foldPlural(b []byte) []byte {
	n := len(b)
	if n <= 3 || b[n-1] != 's' {
		return b
	}
	if noFold[string(b)] {
		return b
	}
	switch b[n-2] {
	case 's', 'u', 'i', '\'':
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
			// "matches" → "match", "crashes" → "crash", but "headaches" →
			// "headache".
			if string(b[n-5:n-1]) == "ache" {
				return b[:n-1]
			}
			return b[:n-2]
		}
	}
	return b[:n-1]
}
