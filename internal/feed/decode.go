package feed

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"mime"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/html/charset"
	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/unicode"
	"golang.org/x/text/encoding/unicode/utf32"
)

// MaxDecompressedBytes bounds a body that arrives gzip-compressed without a
// Content-Encoding header (a ".xml.gz" served as is).
const MaxDecompressedBytes = 32 << 20

// utf8Decl replaces the XML declaration of a converted document, so that
// encoding/xml does not convert it a second time.
const utf8Decl = `<?xml version="1.0" encoding="UTF-8"?>`

// toUTF8 returns body as clean UTF-8: decompressed if it is gzip data,
// converted from its character encoding, without a byte order mark or
// leading whitespace, without characters that XML forbids, and with any XML
// declaration rewritten to say UTF-8.
//
// The encoding is chosen as follows (see the package documentation).
//  1. A byte order mark, or the UTF-16/UTF-32 byte patterns of a document
//     that starts with '<' or '{' (XML 1.0 appendix F).
//  2. A body that is valid UTF-8 is UTF-8, whatever the labels say: legacy
//     text with non-ASCII characters is almost never valid UTF-8, while
//     mislabelled UTF-8 is common.
//  3. Otherwise the first usable label among the XML declaration's
//     encoding and the Content-Type charset.
//  4. Otherwise, a body with some valid multi-byte sequences is UTF-8 with
//     damage (bad bytes become U+FFFD), and any other is windows-1252.
func toUTF8(body []byte, contentType string) ([]byte, error) {
	if len(body) >= 2 && body[0] == 0x1f && body[1] == 0x8b {
		var err error
		if body, err = gunzip(body); err != nil {
			return nil, err
		}
	}
	out := decodeCharset(body, contentType)
	out = bytes.TrimLeft(out, "\ufeff \t\r\n")
	out = stripIllegal(out)
	if len(out) > 0 && out[0] == '<' {
		out = stripIllegalRefs(out)
	}
	return rewriteDecl(out), nil
}

func gunzip(body []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%w: bad gzip data: %v", ErrMalformed, err)
	}
	out, err := io.ReadAll(io.LimitReader(zr, MaxDecompressedBytes+1))
	if len(out) > MaxDecompressedBytes {
		return nil, fmt.Errorf("%w: gzip body over %d bytes", ErrMalformed, MaxDecompressedBytes)
	}
	if err != nil && len(out) == 0 {
		return nil, fmt.Errorf("%w: bad gzip data: %v", ErrMalformed, err)
	}
	// A truncated gzip stream still yields what it decoded; the parser's
	// truncation repair may save its items.
	return out, nil
}

// decodeCharset converts body to UTF-8 (which may still contain characters
// XML forbids).
func decodeCharset(body []byte, contentType string) []byte {
	if bytes.HasPrefix(body, []byte{0xEF, 0xBB, 0xBF}) {
		// A UTF-8 byte order mark is authoritative.
		return bytes.ToValidUTF8(body[3:], []byte("\uFFFD"))
	}
	if enc, n := sniffUnicode(body); enc != nil {
		out, err := enc.NewDecoder().Bytes(body[n:])
		if err != nil {
			return bytes.ToValidUTF8(body[n:], []byte("\uFFFD"))
		}
		return bytes.ToValidUTF8(out, []byte("\uFFFD"))
	}
	if utf8.Valid(body) {
		return body
	}
	for _, label := range []string{xmlDeclEncoding(body), contentTypeCharset(contentType)} {
		enc := lookupLegacy(label)
		if enc == nil {
			continue
		}
		if out, err := enc.NewDecoder().Bytes(body); err == nil {
			return bytes.ToValidUTF8(out, []byte("\uFFFD"))
		}
	}
	if hasMultibyteUTF8(body) {
		return bytes.ToValidUTF8(body, []byte("\uFFFD"))
	}
	enc, _ := charset.Lookup("windows-1252")
	out, err := enc.NewDecoder().Bytes(body)
	if err != nil {
		return bytes.ToValidUTF8(body, []byte("\uFFFD"))
	}
	return out
}

// sniffUnicode detects a byte order mark, or the byte pattern of UTF-16 or
// UTF-32 text starting with an ASCII character. It returns the decoder and
// the length of the mark to skip, or nil.
func sniffUnicode(b []byte) (encoding.Encoding, int) {
	switch {
	case bytes.HasPrefix(b, []byte{0x00, 0x00, 0xFE, 0xFF}):
		return utf32.UTF32(utf32.BigEndian, utf32.IgnoreBOM), 4
	case bytes.HasPrefix(b, []byte{0xFF, 0xFE, 0x00, 0x00}):
		return utf32.UTF32(utf32.LittleEndian, utf32.IgnoreBOM), 4
	case bytes.HasPrefix(b, []byte{0xFE, 0xFF}):
		return unicode.UTF16(unicode.BigEndian, unicode.IgnoreBOM), 2
	case bytes.HasPrefix(b, []byte{0xFF, 0xFE}):
		return unicode.UTF16(unicode.LittleEndian, unicode.IgnoreBOM), 2
	}
	if len(b) < 4 {
		return nil, 0
	}
	ascii := func(c byte) bool { return c != 0 && c < utf8.RuneSelf }
	switch {
	case b[0] == 0 && b[1] == 0 && b[2] == 0 && ascii(b[3]):
		return utf32.UTF32(utf32.BigEndian, utf32.IgnoreBOM), 0
	case ascii(b[0]) && b[1] == 0 && b[2] == 0 && b[3] == 0:
		return utf32.UTF32(utf32.LittleEndian, utf32.IgnoreBOM), 0
	case b[0] == 0 && ascii(b[1]) && b[2] == 0 && ascii(b[3]):
		return unicode.UTF16(unicode.BigEndian, unicode.IgnoreBOM), 0
	case ascii(b[0]) && b[1] == 0 && ascii(b[2]) && b[3] == 0:
		return unicode.UTF16(unicode.LittleEndian, unicode.IgnoreBOM), 0
	}
	return nil, 0
}

// lookupLegacy returns the encoding for a label if it names a usable
// encoding other than UTF-8, UTF-16 (detected by sniffUnicode, or wrong) and
// the WHATWG "replacement" encoding (which decodes to a single U+FFFD).
func lookupLegacy(label string) encoding.Encoding {
	if label == "" {
		return nil
	}
	enc, name := charset.Lookup(label)
	switch {
	case enc == nil, name == "utf-8", name == "replacement",
		strings.HasPrefix(name, "utf-16"), name == "x-user-defined":
		return nil
	}
	return enc
}

// hasMultibyteUTF8 reports whether b contains a valid UTF-8 sequence of two
// or more bytes.
func hasMultibyteUTF8(b []byte) bool {
	for i := 0; i < len(b); {
		if b[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		if r != utf8.RuneError || n > 1 {
			return true
		}
		i += n
	}
	return false
}

// xmlDeclEncoding returns the encoding pseudo-attribute of an XML
// declaration at the start of b, or "".
func xmlDeclEncoding(b []byte) string {
	b = bytes.TrimLeft(b, "\ufeff \t\r\n")
	end, ok := xmlDeclEnd(b)
	if !ok {
		return ""
	}
	decl := string(b[5 : end-2])
	i := strings.Index(decl, "encoding")
	if i < 0 {
		return ""
	}
	v := strings.TrimLeft(decl[i+len("encoding"):], " \t\r\n")
	if !strings.HasPrefix(v, "=") {
		return ""
	}
	v = strings.TrimLeft(v[1:], " \t\r\n")
	if v == "" || (v[0] != '"' && v[0] != '\'') {
		return ""
	}
	j := strings.IndexByte(v[1:], v[0])
	if j < 0 {
		return ""
	}
	return strings.TrimSpace(v[1 : j+1])
}

// xmlDeclEnd returns the offset just past an XML declaration at the start of
// b, looking no further than 512 bytes.
func xmlDeclEnd(b []byte) (int, bool) {
	if len(b) < 6 || !bytes.EqualFold(b[:5], []byte("<?xml")) {
		return 0, false
	}
	if c := b[5]; c != ' ' && c != '\t' && c != '\r' && c != '\n' && c != '?' {
		return 0, false // a processing instruction such as <?xml-stylesheet
	}
	head := b[5:min(len(b), 512)]
	i := bytes.Index(head, []byte("?>"))
	if i < 0 {
		return 0, false
	}
	return 5 + i + 2, true
}

// contentTypeCharset returns the charset parameter of a Content-Type value,
// tolerating values that mime.ParseMediaType rejects.
func contentTypeCharset(ct string) string {
	if ct == "" {
		return ""
	}
	if _, params, err := mime.ParseMediaType(ct); err == nil {
		return params["charset"]
	}
	// Search without lower-casing: ToLower may change the length of
	// invalid UTF-8, and the index must be valid in ct.
	i := -1
	for j := 0; j+len("charset=") <= len(ct); j++ {
		if strings.EqualFold(ct[j:j+len("charset=")], "charset=") {
			i = j
			break
		}
	}
	if i < 0 {
		return ""
	}
	v := ct[i+len("charset="):]
	if j := strings.IndexAny(v, "; \t"); j >= 0 {
		v = v[:j]
	}
	return strings.Trim(v, `"'`)
}

// stripIllegal removes the characters that XML 1.0 forbids: C0 controls
// other than tab, LF and CR, and U+FFFE and U+FFFF. b must be valid UTF-8.
func stripIllegal(b []byte) []byte {
	i := 0
	for i < len(b) {
		c := b[i]
		if c < 0x20 && c != '\t' && c != '\n' && c != '\r' {
			break
		}
		if c == 0xEF && i+2 < len(b) && b[i+1] == 0xBF && (b[i+2] == 0xBE || b[i+2] == 0xBF) {
			break
		}
		i++
	}
	if i == len(b) {
		return b
	}
	out := make([]byte, i, len(b))
	copy(out, b[:i])
	for ; i < len(b); i++ {
		c := b[i]
		if c < 0x20 && c != '\t' && c != '\n' && c != '\r' {
			continue
		}
		if c == 0xEF && i+2 < len(b) && b[i+1] == 0xBF && (b[i+2] == 0xBE || b[i+2] == 0xBF) {
			i += 2
			continue
		}
		out = append(out, c)
	}
	return out
}

// stripIllegalRefs removes character references to characters XML forbids
// ("&#0;", "&#x1B;"), which would make encoding/xml reject the document.
func stripIllegalRefs(b []byte) []byte {
	i := bytes.Index(b, []byte("&#"))
	if i < 0 {
		return b
	}
	var out []byte
	last := 0
	for i >= 0 {
		end, r, ok := parseCharRef(b[i:])
		if ok && !legalXMLChar(r) {
			if out == nil {
				out = make([]byte, 0, len(b))
			}
			out = append(out, b[last:i]...)
			last = i + end
			i += end
		} else {
			i += 2
		}
		j := bytes.Index(b[i:], []byte("&#"))
		if j < 0 {
			break
		}
		i += j
	}
	if out == nil {
		return b
	}
	return append(out, b[last:]...)
}

// parseCharRef parses "&#NNN;" or "&#xHHH;" at the start of b, returning its
// length and code point.
func parseCharRef(b []byte) (n int, r rune, ok bool) {
	i, base := 2, 10
	if i < len(b) && (b[i] == 'x' || b[i] == 'X') {
		i, base = 3, 16
	}
	start := i
	var v int64
	for ; i < len(b) && i-start <= 8; i++ {
		c := b[i]
		var d int64
		switch {
		case c >= '0' && c <= '9':
			d = int64(c - '0')
		case base == 16 && c|0x20 >= 'a' && c|0x20 <= 'f':
			d = int64(c|0x20-'a') + 10
		case c == ';' && i > start:
			return i + 1, rune(min(v, 0x7FFFFFFF)), true
		default:
			return 0, 0, false
		}
		v = v*int64(base) + d
	}
	return 0, 0, false
}

// legalXMLChar reports whether r is allowed by the XML 1.0 Char production.
func legalXMLChar(r rune) bool {
	return r == 0x09 || r == 0x0A || r == 0x0D ||
		(r >= 0x20 && r <= 0xD7FF) || (r >= 0xE000 && r <= 0xFFFD) || (r >= 0x10000 && r <= 0x10FFFF)
}

// rewriteDecl replaces an XML declaration at the start of b (which is
// UTF-8 now) with one that says so.
func rewriteDecl(b []byte) []byte {
	end, ok := xmlDeclEnd(b)
	if !ok {
		return b
	}
	if bytes.Equal(b[:end], []byte(utf8Decl)) {
		return b
	}
	out := make([]byte, 0, len(b)-end+len(utf8Decl))
	out = append(out, utf8Decl...)
	return append(out, b[end:]...)
}
