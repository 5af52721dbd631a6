package feed

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"strings"
)

// repairXML cuts a broken XML document after its last complete item
// element (named itemName in any namespace), closes the elements still open
// there, and reports whether it found such an item. Only complete items are
// kept, so a truncated item cannot yield a truncated link or title.
func repairXML(b []byte, itemName string) ([]byte, bool) {
	d := newXMLDecoder(b)
	var stack []string // qualified names as written, e.g. "rdf:RDF"
	cut := -1
	var open []string
	for {
		tok, err := d.RawToken()
		if err != nil {
			break
		}
		switch t := tok.(type) {
		case xml.StartElement:
			stack = append(stack, qualified(t.Name))
		case xml.EndElement:
			name := qualified(t.Name)
			for i := len(stack) - 1; i >= 0; i-- {
				if stack[i] == name {
					stack = stack[:i]
					break
				}
			}
			if strings.EqualFold(t.Name.Local, itemName) {
				cut = int(d.InputOffset())
				open = append(open[:0], stack...)
			}
		}
	}
	if cut < 0 || cut > len(b) {
		return nil, false
	}
	var out bytes.Buffer
	out.Grow(cut + 64)
	out.Write(b[:cut])
	for i := len(open) - 1; i >= 0; i-- {
		fmt.Fprintf(&out, "</%s>", open[i])
	}
	return out.Bytes(), true
}

func qualified(n xml.Name) string {
	if n.Space == "" {
		return n.Local
	}
	return n.Space + ":" + n.Local
}

// JSON Feed field types, for sanitizeJSONFeed.
const (
	jString = iota
	jObject
	jArray
	jAny
)

var (
	jsonFeedFields = map[string]int{
		"version": jString, "title": jString, "home_page_url": jString, "feed_url": jString,
		"description": jString, "user_comment": jString, "next_url": jString, "icon": jString,
		"favicon": jString, "author": jObject, "authors": jArray, "language": jString,
		"expired": jAny, "hubs": jArray, "items": jArray,
	}
	jsonItemFields = map[string]int{
		"id": jAny, "url": jString, "external_url": jString, "title": jString,
		"content_html": jString, "content_text": jString, "summary": jString, "image": jString,
		"banner_image": jString, "date_published": jString, "date_modified": jString,
		"author": jObject, "authors": jArray, "tags": jArray, "language": jString,
		"attachments": jArray,
	}
	jsonAuthorFields = map[string]int{"name": jString, "url": jString, "avatar": jString}
)

// sanitizeJSONFeed rewrites a JSON Feed whose fields have the wrong types so
// that gofeed can decode it: numbers and booleans in string fields become
// strings, a single tag or item becomes a list of one, and fields that
// cannot be fixed are dropped. It fails if b is not a JSON object.
func sanitizeJSONFeed(b []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	feed, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("not a JSON object")
	}
	fixFields(feed, jsonFeedFields)
	fixAuthors(feed)
	if items, ok := feed["items"].([]any); ok {
		kept := items[:0]
		for _, it := range items {
			m, ok := it.(map[string]any)
			if !ok {
				continue
			}
			fixFields(m, jsonItemFields)
			fixAuthors(m)
			if tags, ok := m["tags"].([]any); ok {
				strs := make([]any, 0, len(tags))
				for _, t := range tags {
					if s, ok := scalarString(t); ok {
						strs = append(strs, s)
					}
				}
				m["tags"] = strs
			}
			if atts, ok := m["attachments"].([]any); ok {
				m["attachments"] = objectsOnly(atts)
			}
			kept = append(kept, m)
		}
		feed["items"] = kept
	}
	if hubs, ok := feed["hubs"].([]any); ok {
		feed["hubs"] = objectsOnly(hubs)
	}
	return json.Marshal(feed)
}

func fixFields(m map[string]any, types map[string]int) {
	for k, want := range types {
		v, ok := m[k]
		if !ok || v == nil {
			delete(m, k)
			continue
		}
		switch want {
		case jString:
			if s, ok := scalarString(v); ok {
				m[k] = s
			} else {
				delete(m, k)
			}
		case jObject:
			if _, ok := v.(map[string]any); !ok {
				delete(m, k)
			}
		case jArray:
			switch x := v.(type) {
			case []any:
			case map[string]any, string:
				m[k] = []any{x}
			default:
				delete(m, k)
			}
		case jAny:
			switch v.(type) {
			case map[string]any, []any:
				delete(m, k)
			}
		}
	}
}

func fixAuthors(m map[string]any) {
	if a, ok := m["author"].(map[string]any); ok {
		fixFields(a, jsonAuthorFields)
	}
	if as, ok := m["authors"].([]any); ok {
		as = objectsOnly(as)
		for _, a := range as {
			fixFields(a.(map[string]any), jsonAuthorFields)
		}
		m["authors"] = as
	}
}

func objectsOnly(xs []any) []any {
	out := xs[:0]
	for _, x := range xs {
		if _, ok := x.(map[string]any); ok {
			out = append(out, x)
		}
	}
	return out
}

func scalarString(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case json.Number:
		return x.String(), true
	case bool:
		if x {
			return "true", true
		}
		return "false", true
	}
	return "", false
}
