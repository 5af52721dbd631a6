package text

import (
	"unicode"
	"unicode/utf8"
)

// Options say how tokens are normalized beyond the segmentation and
// lower-casing every token gets. The zero value folds nothing, keeps
// tokens of any length and drops none.
type Options struct {
	// FoldAccents removes the accents of Latin letters ("É" → "e", "ß" →
	// "ss", a combining acute after "e" dropped).
	FoldAccents bool
	// FoldPlurals folds English plural endings ("companies" → "company",
	// "taxes" → "tax"), after the stop-word check.
	FoldPlurals bool
	// JoinApostrophes drops an apostrophe between a word and a letter,
	// joining them ("don't" → "dont", "BBC's" → "bbcs", which plural folding
	// makes "bbc"), instead of separating words there.
	JoinApostrophes bool
	// MaxBytes drops tokens longer than this many bytes (before plural
	// folding); 0 or less keeps every token.
	MaxBytes int
	// Stop lists tokens to drop, as they are before plural folding. The
	// zero value drops none.
	Stop StopWords
}

// Tokenize returns the tokens of s, normalized as opts say. A Tokenizer
// gives the same tokens without allocating.
func Tokenize(s string, opts Options) []string {
	var toks []string
	t := NewTokenizer(opts)
	t.Reset(s)
	for t.Next() {
		toks = append(toks, string(t.Token()))
	}
	return toks
}

// Tokenizer yields the tokens of a string one at a time, in a buffer it
// reuses, so that once the buffer has grown to the longest token it does
// not allocate. It is not safe for concurrent use; the zero value
// tokenizes with the zero Options.
//
//	t := text.NewTokenizer(opts)
//	t.Reset(s)
//	for t.Next() {
//		use(t.Token())
//	}
type Tokenizer struct {
	opts   Options
	filter bool // opts drop or fold tokens
	s      string
	i      int
	buf    []byte
	tok    []byte
}

// NewTokenizer returns a Tokenizer that normalizes tokens as opts say.
func NewTokenizer(opts Options) Tokenizer {
	filter := opts.MaxBytes > 0 || opts.Stop.m != nil || opts.FoldPlurals
	return Tokenizer{opts: opts, filter: filter}
}

// Reset starts tokenizing s.
func (t *Tokenizer) Reset(s string) {
	t.s, t.i, t.tok = s, 0, nil
}

// Token returns the current token. It is valid until the next call to Next
// or Reset; copy it to keep it.
func (t *Tokenizer) Token() []byte { return t.tok }

// runeClass says how the tokenizer treats a non-ASCII rune.
type runeClass uint8

const (
	sepRune        runeClass = iota // separates tokens
	wordRune                        // a letter or digit: part of a word
	markRune                        // a combining mark: part of the word it is in
	ideoRune                        // a token by itself (Han, Hiragana, Katakana)
	apostropheRune                  // ’: see Options.JoinApostrophes
)

// asciiFold maps an ASCII letter or digit to itself lower-cased, the
// apostrophe to itself, and every other ASCII rune, a separator, to 0.
var asciiFold = func() (t [utf8.RuneSelf]byte) {
	for c := range byte(utf8.RuneSelf) {
		switch {
		case 'a' <= c && c <= 'z' || '0' <= c && c <= '9':
			t[c] = c
		case 'A' <= c && c <= 'Z':
			t[c] = c + 'a' - 'A'
		case c == '\'':
			t[c] = c
		}
	}
	return t
}()

// firstIdeo is the first rune of the Han, Hiragana and Katakana scripts (CJK
// Radicals Supplement), below which classOf need not look them up.
const firstIdeo = 0x2E80

// classOf classifies a rune outside ASCII.
func classOf(r rune) runeClass {
	switch {
	case r >= firstIdeo && unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana):
		return ideoRune
	case unicode.IsLetter(r) || unicode.IsDigit(r):
		return wordRune
	case unicode.IsMark(r):
		return markRune
	case r == '\u2019':
		return apostropheRune
	}
	return sepRune
}

// Next advances to the next token and reports whether there is one.
func (t *Tokenizer) Next() bool {
	i := t.i
	for i < len(t.s) {
		var b []byte
		b, i = t.scan(t.buf[:0], i)
		t.buf = b
		if len(b) == 0 {
			continue
		}
		if t.filter {
			if t.opts.MaxBytes > 0 && len(b) > t.opts.MaxBytes {
				continue
			}
			if t.opts.Stop.m != nil {
				if _, stop := t.opts.Stop.m[string(b)]; stop {
					continue
				}
			}
			if t.opts.FoldPlurals {
				b = foldPlural(b)
			}
		}
		t.i, t.tok = i, b
		return true
	}
	t.i, t.tok = i, nil
	return false
}

// scan appends to b the word of t.s at or after byte i, normalized, and
// returns b and the index where scanning resumes: after the separator that
// ended the word, or at the ideographic rune that did. b stays empty if
// the word has only marks that folding drops, or if no word is left.
func (t *Tokenizer) scan(b []byte, i int) ([]byte, int) {
	s := t.s
	inWord := false // a word rune or mark was read
	for i < len(s) {
		if c := s[i]; c < utf8.RuneSelf {
			if asciiFold[c] >= '0' {
				// A run of ASCII letters and digits, copied at once and
				// lower-cased after if it has upper case.
				j, upper := asciiWordEnd(s, i)
				n := len(b)
				b = append(b, s[i:j]...)
				if upper {
					lowerASCII(b[n:])
				}
				i, inWord = j, true
				continue
			}
			i++ // a separator or an apostrophe
			if inWord && (c != '\'' || !t.joinsAt(i)) {
				return b, i
			}
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		class := classOf(r)
		if class == ideoRune {
			// A token by itself: it ends the word before it, if any.
			if inWord {
				return b, i
			}
			return utf8.AppendRune(b, r), i + size
		}
		i += size
		switch class {
		case wordRune:
			b, inWord = t.appendLetter(b, r), true
		case markRune:
			b, inWord = t.appendMark(b, r), true
		case apostropheRune:
			if inWord && !t.joinsAt(i) {
				return b, i
			}
		default:
			if inWord {
				return b, i
			}
		}
	}
	return b, i
}

// asciiWordEnd returns the end of the run of ASCII letters and digits of
// s that starts at byte i, and whether the run has upper case.
func asciiWordEnd(s string, i int) (int, bool) {
	j, upper := i+1, s[i]^asciiFold[s[i]]
	for j < len(s) && s[j] < utf8.RuneSelf && asciiFold[s[j]] >= '0' {
		upper |= s[j] ^ asciiFold[s[j]]
		j++
	}
	return j, upper != 0
}

// lowerASCII lower-cases b, ASCII letters and digits.
func lowerASCII(b []byte) {
	for k := range b {
		b[k] = asciiFold[b[k]&0x7f]
	}
}

// appendLetter appends a letter or digit outside ASCII to b, lower-cased,
// or folded if the options fold accents.
func (t *Tokenizer) appendLetter(b []byte, r rune) []byte {
	if t.opts.FoldAccents {
		return appendFolded(b, r)
	}
	return utf8.AppendRune(b, unicode.ToLower(r))
}

// appendMark appends a combining mark to b: marks belong to the word they
// are in (Indic vowel signs, decomposed accents); folding drops those of
// Latin letters.
func (t *Tokenizer) appendMark(b []byte, r rune) []byte {
	if !t.opts.FoldAccents || r < 0x300 || r > 0x36f {
		return utf8.AppendRune(b, r)
	}
	return b
}

// joinsAt reports whether an apostrophe that ends at byte i, after a
// word, joins the word to what follows (see Options.JoinApostrophes).
func (t *Tokenizer) joinsAt(i int) bool {
	return t.opts.JoinApostrophes && i < len(t.s) && startsLetter(t.s[i:])
}

// startsLetter reports whether s starts with a letter.
func startsLetter(s string) bool {
	if c := s[0]; c < utf8.RuneSelf {
		return 'a' <= c|0x20 && c|0x20 <= 'z'
	}
	r, _ := utf8.DecodeRuneInString(s)
	return unicode.IsLetter(r)
}
