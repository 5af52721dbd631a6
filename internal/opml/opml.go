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
	"os"
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

// ErrNoFeeds is what the *Error for a well-formed document without any
// feed wraps.
var ErrNoFeeds = errors.New("opml: no outline with an xmlUrl")

// Error is a document that cannot be read as a subscription list: it says
// what is wrong and, where known, where.
type Error struct {
	// File names the document (ParseFile sets it); empty for Parse.
	File string
	// Line is the line of the problem, 0 when the decoder gives none.
	Line int
	// Msg says what is wrong, e.g. "empty file" or "not an OPML document:
	// the root element is <html>, want <opml>".
	Msg string
	// Err is the underlying error, if any.
	Err error
}

// Error implements error: "feeds.opml:3: msg" when the file and line are
// known, "opml: line 3: msg" for a document without a name.
func (e *Error) Error() string {
	switch {
	case e.File != "" && e.Line > 0:
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	case e.File != "":
		return e.File + ": " + e.Msg
	case e.Line > 0:
		return fmt.Sprintf("opml: line %d: %s", e.Line, e.Msg)
	}
	return "opml: " + e.Msg
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// ParseFile is Parse of the named file; its errors name the file.
func ParseFile(name string) ([]Entry, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	es, err := Parse(f)
	if pe := (*Error)(nil); errors.As(err, &pe) {
		pe.File = name
	}
	return es, err
}

// Parse reads a subscription list. Outlines without xmlUrl are folders.
// Duplicate feed URLs keep their first entry. A document that is empty,
// not XML, truncated or not OPML is an *Error saying so (with its line
// where the XML decoder gives one).
func Parse(r io.Reader) ([]Entry, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxBytes+1))
	if err != nil {
		return nil, &Error{Msg: "read: " + err.Error(), Err: err}
	}
	if len(b) > MaxBytes {
		return nil, &Error{Msg: fmt.Sprintf("document larger than %d bytes", MaxBytes)}
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, &Error{Msg: "empty file"}
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
		return nil, decodeError(dec, b, err)
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
					return &Error{Msg: fmt.Sprintf("feed %s: authority %q is not a number from 0 to 1", e.FeedURL, o.Authority)}
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
		return nil, &Error{Msg: "no outline with an xmlUrl: the document lists no feed", Err: ErrNoFeeds}
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

// decodeError explains why dec could not decode the document b.
func decodeError(dec *xml.Decoder, b []byte, err error) error {
	var se *xml.SyntaxError
	var ue xml.UnmarshalError
	line, _ := dec.InputPos()
	switch {
	case errors.As(err, &se) && se.Msg == "unexpected EOF":
		return &Error{Line: se.Line, Msg: "XML syntax error: unexpected end of file (is the file truncated?)", Err: err}
	case errors.As(err, &se):
		return &Error{Line: se.Line, Msg: "XML syntax error: " + se.Msg, Err: err}
	case errors.Is(err, io.EOF):
		// No element at all: text, JSON, a lone XML declaration.
		const show = 40
		begin := strings.TrimSpace(strings.ToValidUTF8(string(b[:min(len(b), show)]), "?"))
		if len(b) > show {
			begin += "..."
		}
		return &Error{Msg: fmt.Sprintf("not an OPML document: no XML element (the file begins %q)", begin), Err: err}
	case errors.As(err, &ue) && strings.HasPrefix(string(ue), "expected element type <opml>"):
		root := strings.TrimPrefix(string(ue), "expected element type <opml> but have ")
		return &Error{Line: line, Msg: fmt.Sprintf("not an OPML document: the root element is %s, want <opml>", root), Err: err}
	}
	return &Error{Line: line, Msg: err.Error(), Err: err}
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
