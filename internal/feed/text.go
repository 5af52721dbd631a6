package feed

import (
	"strings"
	"unicode/utf8"

	"github.com/newsflow/newsflow/internal/text"
)

const ellipsis = "…"

// htmlToText is the parser's cleaning of titles, summaries and authors:
// text.Clean, the same as of articles that enter through other paths.
func htmlToText(s string, max int) string { return text.Clean(s, max) }

// firstWords returns s shortened to about n runes at a word boundary, with
// "…" when it was shortened.
func firstWords(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i, count := 0, 0
	for i < len(s) && count < n {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
		count++
	}
	cut := s[:i]
	if j := strings.LastIndexByte(cut, ' '); j > len(cut)/2 {
		cut = cut[:j]
	}
	return strings.TrimRight(cut, " ,;:-") + ellipsis
}

// truncateBytes cuts s to at most max bytes at a rune boundary.
func truncateBytes(s string, max int) string {
	if len(s) <= max {
		return s
	}
	return s[:text.RuneStart(s, max)]
}

// truncateHTML cuts HTML to at most max bytes at a rune boundary, and not
// inside a tag.
func truncateHTML(s string, max int) string {
	if len(s) <= max {
		return s
	}
	s = s[:text.RuneStart(s, max)]
	if lt := strings.LastIndexByte(s, '<'); lt >= 0 && lt > strings.LastIndexByte(s, '>') {
		s = s[:lt]
	}
	return s
}

// Text returns the visible text of an HTML fragment (or plain text) as
// valid UTF-8 of at most max bytes, as the parser cleans titles and
// summaries; it is text.Clean.
func Text(s string, max int) string { return text.Clean(s, max) }
