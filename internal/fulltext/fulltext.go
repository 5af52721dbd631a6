// Package fulltext extracts the main text of an article page, for feeds
// whose items carry only a headline and a line of summary. It wraps
// go-readability (a port of Mozilla's Readability.js, the reader view of
// Firefox) and decodes the page's charset first.
package fulltext

import (
	"bytes"
	"errors"
	"fmt"
	"mime"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	readability "codeberg.org/readeck/go-readability/v2"
	"golang.org/x/net/html/charset"
)

// ErrNotHTML is returned for a page that is not an HTML document.
var ErrNotHTML = errors.New("fulltext: not an HTML page")

// ErrNoText is returned when a page holds no readable article text: what
// readability finds is fewer than minWords words (a login wall, a video
// page, a list of links), which would add nothing to the feed's line.
var ErrNoText = errors.New("fulltext: no article text found")

const minWords = 20

// Extract returns the main text of an HTML page as plain text: paragraphs
// separated by blank lines, whitespace collapsed, cut at a word boundary to
// at most maxBytes (no limit when maxBytes ≤ 0). contentType is the
// response's Content-Type header (may be empty); page is the page's URL.
func Extract(body []byte, contentType string, page *url.URL, maxBytes int) (string, error) {
	if contentType != "" {
		mt, _, err := mime.ParseMediaType(contentType)
		if err == nil && mt != "text/html" && mt != "application/xhtml+xml" {
			return "", fmt.Errorf("%w (%s)", ErrNotHTML, mt)
		}
	}
	r, err := charset.NewReader(bytes.NewReader(body), contentType)
	if err != nil {
		return "", fmt.Errorf("fulltext: decode: %w", err)
	}
	p := readability.NewParser()
	art, err := p.Parse(r, page)
	if err != nil {
		return "", fmt.Errorf("fulltext: %w", err)
	}
	if art.Node == nil {
		return "", ErrNoText
	}
	var b strings.Builder
	if err := art.RenderText(&b); err != nil {
		return "", fmt.Errorf("fulltext: render: %w", err)
	}
	text := tidy(b.String())
	if len(strings.Fields(text)) < minWords {
		return "", ErrNoText
	}
	return truncate(text, maxBytes), nil
}

// tidy collapses runs of spaces within lines and of blank lines between
// paragraphs, and trims the result.
func tidy(s string) string {
	var out []string
	blank := false
	for _, line := range strings.Split(s, "\n") {
		line = strings.Join(strings.Fields(line), " ")
		if line == "" {
			blank = len(out) > 0
			continue
		}
		if blank {
			out = append(out, "")
			blank = false
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

// truncate cuts s to at most n bytes, at the last space before the limit
// when there is one, never inside a UTF-8 sequence.
func truncate(s string, n int) string {
	if n <= 0 || len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	if i := strings.LastIndexFunc(s[:cut], unicode.IsSpace); i > n/2 {
		cut = i
	}
	return strings.TrimRightFunc(s[:cut], unicode.IsSpace)
}

// OnlyALine reports whether a feed item carries too little text for its
// story and topics to be found reliably: no content and a summary of fewer
// than minWords words.
func OnlyALine(summary, content string, minWords int) bool {
	if strings.TrimSpace(content) != "" {
		return false
	}
	return len(strings.Fields(summary)) < minWords
}
