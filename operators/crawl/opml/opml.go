// Package opml reads and writes OPML 2.0 subscription lists, the format
// every feed reader imports and exports.
//
// Sources are outlines with an xmlUrl. A source's category is its own
// category attribute, else the text of the outline that contains it. The
// newsflow-specific attribute authority (0-1) round-trips; readers that do
// not know it ignore it.
package opml

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// Entry is one feed of a subscription list.
type Entry struct {
	Title     string
	FeedURL   string
	Homepage  string
	Category  string
	Authority float64 // 0 when absent
}

type document struct {
	XMLName xml.Name `xml:"opml"`
	Version string   `xml:"version,attr"`
	Head    struct {
		Title string `xml:"title,omitempty"`
	} `xml:"head"`
	Body struct {
		Outlines []outline `xml:"outline"`
	} `xml:"body"`
}

type outline struct {
	Text      string    `xml:"text,attr"`
	Title     string    `xml:"title,attr,omitempty"`
	Type      string    `xml:"type,attr,omitempty"`
	XMLURL    string    `xml:"xmlUrl,attr,omitempty"`
	HTMLURL   string    `xml:"htmlUrl,attr,omitempty"`
	Category  string    `xml:"category,attr,omitempty"`
	Authority string    `xml:"authority,attr,omitempty"`
	Outlines  []outline `xml:"outline"`
}

// MaxBytes bounds an OPML document.
const MaxBytes = 16 << 20

// ErrNoFeeds is returned for a well-formed document without any feed.
var ErrNoFeeds = errors.New("opml: no outline with an xmlUrl")

// Parse reads a subscription list. Outlines without xmlUrl are folders.
// Duplicate feed URLs keep their first entry.
func Parse(r io.Reader) ([]Entry, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("opml: read: %w", err)
	}
	if len(b) > MaxBytes {
		return nil, fmt.Errorf("opml: document larger than %d bytes", MaxBytes)
	}
	var doc document
	dec := xml.NewDecoder(bytes.NewReader(b))
	dec.Strict = false
	dec.CharsetReader = func(label string, in io.Reader) (io.Reader, error) {
		if strings.EqualFold(label, "utf-8") || strings.EqualFold(label, "us-ascii") {
			return in, nil
		}
		return nil, fmt.Errorf("unsupported charset %q", label)
	}
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("opml: %w", err)
	}
	var out []Entry
	seen := map[string]bool{}
	var walk func(os []outline, folder string) error
	walk = func(os []outline, folder string) error {
		for _, o := range os {
			if o.XMLURL == "" {
				name := strings.TrimSpace(firstNonEmpty(o.Text, o.Title))
				if err := walk(o.Outlines, firstNonEmpty(name, folder)); err != nil {
					return err
				}
				continue
			}
			e := Entry{
				Title:    strings.TrimSpace(firstNonEmpty(o.Title, o.Text)),
				FeedURL:  strings.TrimSpace(o.XMLURL),
				Homepage: strings.TrimSpace(o.HTMLURL),
				Category: strings.ToLower(strings.TrimSpace(firstNonEmpty(o.Category, folder))),
			}
			if o.Authority != "" {
				a, err := strconv.ParseFloat(o.Authority, 64)
				if err != nil || a < 0 || a > 1 {
					return fmt.Errorf("opml: feed %s: authority %q is not a number from 0 to 1", e.FeedURL, o.Authority)
				}
				e.Authority = a
			}
			if !seen[e.FeedURL] {
				seen[e.FeedURL] = true
				out = append(out, e)
			}
			if err := walk(o.Outlines, folder); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(doc.Body.Outlines, ""); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, ErrNoFeeds
	}
	return out, nil
}

// Write writes entries as OPML 2.0, grouped in one folder per category
// (sorted), feeds in the order given.
func Write(w io.Writer, title string, entries []Entry) error {
	var doc document
	doc.Version = "2.0"
	doc.Head.Title = title
	folders := map[string]*outline{}
	var order []string
	var loose []outline
	for _, e := range entries {
		o := outline{Text: e.Title, Title: e.Title, Type: "rss", XMLURL: e.FeedURL, HTMLURL: e.Homepage}
		if e.Authority > 0 {
			o.Authority = strconv.FormatFloat(e.Authority, 'f', -1, 64)
		}
		if e.Category == "" {
			loose = append(loose, o)
			continue
		}
		f := folders[e.Category]
		if f == nil {
			f = &outline{Text: e.Category, Title: e.Category}
			folders[e.Category] = f
			order = append(order, e.Category)
		}
		f.Outlines = append(f.Outlines, o)
	}
	sort.Strings(order)
	for _, c := range order {
		doc.Body.Outlines = append(doc.Body.Outlines, *folders[c])
	}
	doc.Body.Outlines = append(doc.Body.Outlines, loose...)
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("opml: write: %w", err)
	}
	_, err := io.WriteString(w, "\n")
	return err
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
