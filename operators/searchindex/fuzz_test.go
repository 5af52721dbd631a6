package searchindex

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
)

func TestCursorRoundTrip(t *testing.T) {
	for _, c := range []*Cursor{
		{order: OrderRelevance, score: 0.1 + 0.2, id: "a01"},
		{order: OrderRelevance, score: math.SmallestNonzeroFloat64, id: "x"},
		{order: OrderRelevance, score: math.MaxFloat64, id: strings.Repeat("f", maxIDBytes)},
		{order: OrderRelevance, score: 0, id: "é"},
		{order: OrderNewest, published: at(3).UnixNano(), id: "a03"},
		{order: OrderNewest, published: math.MinInt64, id: "a"},
		{order: OrderNewest, published: -1, id: "b"},
	} {
		s := c.Encode()
		d, err := DecodeCursor(s)
		if err != nil {
			t.Fatalf("decode %+v: %v", c, err)
		}
		if *d != *c {
			t.Errorf("round trip %+v → %q → %+v", c, s, d)
		}
		b, err := c.MarshalText()
		if err != nil || string(b) != s {
			t.Errorf("marshal %+v: %q, %v", c, b, err)
		}
		var u Cursor
		if err := u.UnmarshalText(b); err != nil || u != *c {
			t.Errorf("unmarshal %q: %+v, %v", b, u, err)
		}
		// The Bleve SearchAfter values parse back to the same key.
		after := c.searchAfter()
		if c.order == OrderNewest {
			if ns, ok := parsePublishedKey(after[0]); !ok || ns != c.published {
				t.Errorf("search after %q for %d", after[0], c.published)
			}
		}
	}
}

func TestDecodeCursorGarbage(t *testing.T) {
	valid := (&Cursor{order: OrderNewest, published: 5, id: "abc"}).Encode()
	raw := func(b ...byte) string { return cursorEncoding.EncodeToString(b) }
	header := func(version, order byte, key uint64) []byte {
		b := []byte{version, order, 0, 0, 0, 0, 0, 0, 0, 0}
		for i := range 8 {
			b[9-i] = byte(key >> (8 * i))
		}
		return b
	}
	for name, s := range map[string]string{
		"empty":          "",
		"not base64":     "!!!!",
		"padding":        valid + "=",
		"std alphabet":   strings.ReplaceAll(valid, "_", "/") + "+",
		"non canonical":  valid[:len(valid)-1] + "B",
		"too short":      raw(1, 2, 3),
		"header only":    raw(header(1, 2, 5)...),
		"bad version":    raw(append(header(9, 2, 5), 'a')...),
		"bad order":      raw(append(header(1, 7, 5), 'a')...),
		"zero order":     raw(append(header(1, 0, 5), 'a')...),
		"nan score":      raw(append(header(1, 1, math.Float64bits(math.NaN())), 'a')...),
		"inf score":      raw(append(header(1, 1, math.Float64bits(math.Inf(-1))), 'a')...),
		"bad utf8 id":    raw(append(header(1, 2, 5), 0xff)...),
		"too long":       strings.Repeat("A", maxCursorString+1),
		"too long id":    raw(append(header(1, 2, 5), []byte(strings.Repeat("a", maxIDBytes+1))...)...),
		"whitespace":     " " + valid,
		"trailing bytes": valid + "\n",
	} {
		if c, err := DecodeCursor(s); !errors.Is(err, ErrBadRequest) {
			t.Errorf("%s: DecodeCursor(%q) = %+v, %v; want ErrBadRequest", name, s, c, err)
		}
	}
	if _, err := DecodeCursor(valid); err != nil {
		t.Errorf("valid cursor: %v", err)
	}
}

func FuzzDecodeCursor(f *testing.F) {
	f.Add((&Cursor{order: OrderNewest, published: at(1).UnixNano(), id: "a01"}).Encode())
	f.Add((&Cursor{order: OrderRelevance, score: 1.25, id: "0123456789abcdef"}).Encode())
	f.Add("")
	f.Add("AQ")
	f.Add("////")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := DecodeCursor(s)
		if err != nil {
			if !errors.Is(err, ErrBadRequest) {
				t.Fatalf("error %v does not wrap ErrBadRequest", err)
			}
			return
		}
		// Decoding is strict, so a decoded cursor encodes to its input.
		if e := c.Encode(); e != s {
			t.Fatalf("decode(%q).Encode() = %q", s, e)
		}
		_ = c.searchAfter()
	})
}

func FuzzSearch(f *testing.F) {
	ix, _ := newTestIndex(f, fixture)
	for _, d := range fixture {
		f.Add(d.Title, "", 5, false)
	}
	for _, q := range []string{"", "the", "\"quoted phrase\"", "+must -not", "title:bank", "a*", "~fuzzy", "<mark>", "\xff", "inflation inflation inflation", strings.Repeat("word ", 120)} {
		f.Add(q, "economy", 3, true)
	}
	f.Fuzz(func(t *testing.T, q, topic string, limit int, page bool) {
		r := Request{Query: q, Topic: topic, Limit: limit % 200}
		res, err := ix.Search(context.Background(), r)
		if err != nil {
			if !errors.Is(err, ErrBadRequest) {
				t.Fatalf("query %q: error %v is not ErrBadRequest", q, err)
			}
			return
		}
		if len(res.Hits) > effectiveLimit(r.Limit) || uint64(len(res.Hits)) > res.Total {
			t.Fatalf("query %q: %d hits, total %d, limit %d", q, len(res.Hits), res.Total, r.Limit)
		}
		checkOrder(t, res.Order, res.Hits)
		for _, h := range res.Hits {
			for _, frags := range h.Highlights {
				for _, fr := range frags {
					// Only <mark> tags are markup; everything else is escaped.
					if s := strings.NewReplacer("<mark>", "", "</mark>", "").Replace(fr); strings.ContainsAny(s, "<>\"") {
						t.Fatalf("query %q: unescaped highlight %q", q, fr)
					}
				}
			}
		}
		if page && res.Next != nil {
			r.After = res.Next
			next, err := ix.Search(context.Background(), r)
			if err != nil {
				t.Fatalf("next page of %q: %v", q, err)
			}
			if len(next.Hits) > 0 && compareHits(res.Order, &res.Hits[len(res.Hits)-1], &next.Hits[0]) >= 0 {
				t.Fatalf("next page of %q does not continue after the first", q)
			}
		}
	})
}
