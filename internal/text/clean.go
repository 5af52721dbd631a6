package text

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
	"golang.org/x/text/encoding/charmap"
)

// Clean returns the visible text of an HTML fragment (or of plain text) as
// valid UTF-8 of at most max bytes: the content of script, style and
// similar elements is dropped, entities are decoded, block elements
// separate words, runs of whitespace become one space, control and
// zero-width characters are removed, and double-encoded UTF-8 and
// windows-1252 punctuation stored as C1 controls are repaired. Text longer
// than max is cut at a word boundary where one is near, else at a rune
// boundary, and ends in "…". Plain text passes through unchanged apart
// from the whitespace, except that a '<' directly followed by a letter
// starts a tag, as in HTML.
//
// The feed parser cleans titles, summaries and authors with it, and the
// articles operator every article, whichever way it entered.
func Clean(s string, max int) string { return ValidUTF8(htmlToText(s, max)) }

// Collapse is Clean for text that is not markup: '<' and '&' are kept as
// they are.
func Collapse(s string, max int) string { return ValidUTF8(collapse(s, max)) }

const ellipsis = "…"

// htmlToText returns the visible text of an HTML fragment, at most max bytes
// long: the content of script, style and similar elements is dropped,
// entities are decoded, block elements separate words, runs of whitespace
// become one space, and control and zero-width characters are removed. Text
// longer than max is cut at a word boundary where one is near, else at a
// rune boundary, and ends in "…". Plain text passes through unchanged apart
// from the whitespace, except that a '<' directly followed by a letter
// starts a tag, as in HTML.
func htmlToText(s string, max int) string {
	if s == "" {
		return ""
	}
	if strings.IndexByte(s, '<') < 0 && strings.IndexByte(s, '&') < 0 {
		return collapse(s, max)
	}
	if out, ok := simpleHTMLToText(s, max); ok {
		return out
	}
	return tokenizeHTMLToText(s, max)
}

// tokenizeHTMLToText is htmlToText with the HTML tokenizer, for any input.
func tokenizeHTMLToText(s string, max int) string {
	z := html.NewTokenizer(strings.NewReader(s))
	w := textWriter{max: max}
	skip := 0
	for !w.full {
		tt := z.Next()
		switch tt {
		case html.ErrorToken:
			return w.result()
		case html.TextToken:
			if skip == 0 {
				w.write(fixMojibake(string(z.Text())))
			}
		case html.StartTagToken, html.SelfClosingTagToken, html.EndTagToken:
			name, _ := z.TagName()
			a := atom.Lookup(name)
			if skipElements[a] {
				if tt == html.StartTagToken {
					skip++
				} else if tt == html.EndTagToken && skip > 0 {
					skip--
				}
				continue
			}
			if blockElements[a] {
				w.space()
			}
		}
	}
	return w.result()
}

// simpleHTMLToText handles, without the tokenizer's allocations, the markup
// feed descriptions nearly always hold: text, entities, and plain tags
// (letters and digits for a name, attribute values quoted right after '='
// or unquoted). For anything else (comments, doctypes, CDATA, elements whose
// content is not markup or not shown, NUL, a '<' that starts no tag, an
// unclosed tag, stray quotes) it reports false and the tokenizer takes over,
// so both give the same text (tested against each other).
func simpleHTMLToText(s string, max int) (string, bool) {
	w := textWriter{max: max}
	i := 0
	for i < len(s) && !w.full {
		text := s[i:]
		if j := strings.IndexByte(text, '<'); j >= 0 {
			text = text[:j]
		}
		i += len(text)
		if text != "" {
			if strings.IndexByte(text, 0) >= 0 || strings.IndexByte(text, '\r') >= 0 {
				return "", false
			}
			if strings.IndexByte(text, '&') >= 0 {
				text = html.UnescapeString(text)
			}
			w.write(fixMojibake(text))
		}
		if i >= len(s) || w.full {
			break
		}
		end, ok := simpleTagEnd(s, i)
		if !ok {
			return "", false
		}
		name := s[i+1 : end]
		if name[0] == '/' {
			name = name[1:]
		}
		if n := strings.IndexAny(name, " \t\n\f/>"); n >= 0 {
			name = name[:n]
		}
		a := atom.Lookup([]byte(strings.ToLower(name)))
		if skipElements[a] || textElements[a] {
			return "", false
		}
		if blockElements[a] {
			w.space()
		}
		i = end + 1
	}
	return w.result(), true
}

// simpleTagEnd returns the index of the '>' closing the tag that starts at
// s[i] == '<', if the tag is plain (see simpleHTMLToText): a plain name
// (see tagNameEnd), then no '<', NUL, CR or quote but those around a
// value.
func simpleTagEnd(s string, i int) (int, bool) {
	k, ok := tagNameEnd(s, i)
	if !ok {
		return 0, false
	}
	for ; k < len(s); k++ {
		switch c := s[k]; c {
		case '>':
			return k, true
		case '<', 0, '\r':
			return 0, false
		case '"', '\'':
			return 0, false // a quote not opening a value
		case '=':
			if k, ok = attrValueEnd(s, k); !ok {
				return 0, false
			}
		}
	}
	return 0, false
}

// tagNameEnd returns the index of the byte after the name of the tag that
// starts at s[i] == '<' (after its '/' if it closes), if the name is plain:
// ASCII letters and digits, starting with a letter, and followed by a
// space, '/' or '>'.
func tagNameEnd(s string, i int) (int, bool) {
	k := i + 1
	if k < len(s) && s[k] == '/' {
		k++
	}
	start := k
	for k < len(s) && isASCIIAlnum(s[k]) {
		k++
	}
	if k == start || !isASCIILetter(s[start]) || k >= len(s) {
		return 0, false
	}
	switch s[k] {
	case ' ', '\t', '\n', '\f', '/', '>':
		return k, true
	}
	return 0, false // e.g. <p-x>: a name the tokenizer reads whole
}

// attrValueEnd returns, for the '=' at s[k] in a tag, the index of the
// quote closing the quoted value after it (spaces before the value
// skipped), or k if the value is not quoted: its bytes are then read as
// the tag's others. It reports false if the tag is not plain.
func attrValueEnd(s string, k int) (int, bool) {
	// '=' separates a value only after an attribute name; where a name
	// would start, HTML reads it as part of the name.
	if !isAttrNameByte(s[k-1]) {
		return 0, false
	}
	v := k + 1
	for v < len(s) && (s[v] == ' ' || s[v] == '\t' || s[v] == '\n' || s[v] == '\f') {
		v++
	}
	if v >= len(s) || s[v] != '"' && s[v] != '\'' {
		return k, true
	}
	e := strings.IndexByte(s[v+1:], s[v])
	if e < 0 || strings.ContainsAny(s[v+1:v+1+e], "\x00\r") {
		return 0, false
	}
	return v + 1 + e, true
}

func isASCIILetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }
func isASCIIAlnum(c byte) bool  { return isASCIILetter(c) || c >= '0' && c <= '9' }

// isAttrNameByte reports whether c may end an attribute name.
func isAttrNameByte(c byte) bool {
	return isASCIIAlnum(c) || c == '-' || c == '_' || c == ':' || c == '.'
}

// textElements hold text that is not markup (RCDATA and RAWTEXT in the
// HTML tokenizer): the simple path does not handle them.
var textElements = map[atom.Atom]bool{
	atom.Title: true, atom.Textarea: true, atom.Xmp: true, atom.Noembed: true,
	atom.Noframes: true, atom.Plaintext: true, atom.Script: true, atom.Style: true, atom.Iframe: true,
}

// skipElements hold no visible text.
var skipElements = map[atom.Atom]bool{
	atom.Script: true, atom.Style: true, atom.Noscript: true, atom.Template: true,
	atom.Iframe: true, atom.Object: true, atom.Svg: true, atom.Math: true,
	atom.Head: true, atom.Select: true, atom.Textarea: true,
}

// blockElements separate the words before and after them.
var blockElements = map[atom.Atom]bool{
	atom.Br: true, atom.P: true, atom.Div: true, atom.Li: true, atom.Ul: true, atom.Ol: true,
	atom.H1: true, atom.H2: true, atom.H3: true, atom.H4: true, atom.H5: true, atom.H6: true,
	atom.Tr: true, atom.Td: true, atom.Th: true, atom.Table: true, atom.Blockquote: true,
	atom.Pre: true, atom.Hr: true, atom.Section: true, atom.Article: true, atom.Header: true,
	atom.Footer: true, atom.Figure: true, atom.Figcaption: true, atom.Dd: true, atom.Dt: true,
	atom.Dl: true, atom.Img: true, atom.Aside: true, atom.Nav: true, atom.Main: true,
	atom.Caption: true, atom.Address: true, atom.Details: true, atom.Summary: true,
}

// collapse returns s with runs of whitespace replaced by one space, control
// and zero-width characters removed, trimmed, and cut to max bytes like
// htmlToText. It does not interpret markup.
func collapse(s string, max int) string {
	w := textWriter{max: max}
	w.write(fixMojibake(s))
	return w.result()
}

// fixMojibake repairs two common accidents in feed text:
//   - UTF-8 decoded as windows-1252 or ISO-8859-1 and encoded again ("â€¦"
//     for "…", "Ã©" for "é"): when every character of s has a windows-1252
//     or ISO-8859-1 byte and those bytes form valid UTF-8, that UTF-8 is the
//     text. Real Latin text almost never passes this test, since an accented
//     letter followed by an ASCII one is invalid UTF-8.
//   - windows-1252 punctuation stored as C1 control characters
//     ("don\u0092t"): each is replaced by its windows-1252 character.
func fixMojibake(s string) string {
	i := 0
	for i < len(s) && s[i] < utf8.RuneSelf {
		i++
	}
	if i == len(s) {
		return s
	}
	buf := make([]byte, i, len(s))
	copy(buf, s[:i])
	for _, r := range s[i:] {
		switch b, ok := charmap.Windows1252.EncodeRune(r); {
		case r < utf8.RuneSelf:
			buf = append(buf, byte(r))
		case ok:
			buf = append(buf, b)
		case r <= 0xFF:
			buf = append(buf, byte(r))
		default:
			return mapC1(s)
		}
	}
	if utf8.Valid(buf) {
		return string(buf)
	}
	return mapC1(s)
}

// mapC1 replaces C1 control characters with their windows-1252 meaning.
func mapC1(s string) string {
	if !hasC1(s) {
		return s
	}
	return strings.Map(func(r rune) rune {
		if r >= 0x80 && r <= 0x9F {
			return charmap.Windows1252.DecodeByte(byte(r))
		}
		return r
	}, s)
}

// hasC1 reports whether s contains a character in U+0080–U+009F (encoded
// as C2 80 to C2 9F).
func hasC1(s string) bool {
	for i := 0; i+1 < len(s); i++ {
		if s[i] == 0xC2 && s[i+1] >= 0x80 && s[i+1] <= 0x9F {
			return true
		}
	}
	return false
}

// textWriter accumulates collapsed text up to a byte limit.
type textWriter struct {
	b       strings.Builder
	max     int
	pending bool // a space is owed before the next visible rune
	full    bool // more than max bytes were offered
}

func (w *textWriter) space() {
	if w.b.Len() > 0 {
		w.pending = true
	}
}

func (w *textWriter) write(s string) {
	for _, r := range s {
		if w.full {
			return
		}
		if r < utf8.RuneSelf {
			switch {
			case r == ' ' || (r >= '\t' && r <= '\r'):
				w.space()
				continue
			case r < ' ' || r == 0x7f:
				continue
			}
		}
		switch {
		case unicode.IsSpace(r):
			w.space()
			continue
		case unicode.IsControl(r), r == '\u200b', r == '\ufeff', r == '\u00ad':
			continue
		}
		n := utf8.RuneLen(r)
		if n < 0 {
			r, n = utf8.RuneError, 3
		}
		extra := 0
		if w.pending {
			extra = 1
		}
		if w.b.Len()+extra+n > w.max {
			w.full = true
			return
		}
		if w.pending {
			w.b.WriteByte(' ')
			w.pending = false
		}
		w.b.WriteRune(r)
	}
}

func (w *textWriter) result() string {
	s := w.b.String()
	if !w.full {
		return s
	}
	return cutWithEllipsis(s, w.max)
}

// cutWithEllipsis shortens s so that s+"…" fits in max bytes, preferring to
// cut at a space in the last quarter.
func cutWithEllipsis(s string, max int) string {
	limit := max - len(ellipsis)
	if limit <= 0 {
		return ""
	}
	if len(s) > limit {
		s = s[:RuneStart(s, limit)]
	}
	if i := strings.LastIndexByte(s, ' '); i > 0 && i >= len(s)*3/4 {
		s = s[:i]
	}
	s = strings.TrimRight(s, " ")
	if s == "" {
		return ""
	}
	return s + ellipsis
}

// RuneStart returns the largest i <= n at which a rune starts in s.
func RuneStart(s string, n int) int {
	if n >= len(s) {
		return len(s)
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return n
}

// ValidUTF8 returns s with invalid sequences replaced by U+FFFD.
func ValidUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
