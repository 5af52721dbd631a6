package searchindex

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Order is the total order of a result's hits.
type Order uint8

const (
	// OrderRelevance, for requests with query text: score descending, then
	// ID ascending.
	OrderRelevance Order = 1
	// OrderNewest, for requests without query text: published time
	// descending, then ID ascending.
	OrderNewest Order = 2
)

func (o Order) String() string {
	switch o {
	case OrderRelevance:
		return "relevance"
	case OrderNewest:
		return "newest"
	}
	return "order(" + strconv.Itoa(int(o)) + ")"
}

// MarshalText encodes o as "relevance" or "newest".
func (o Order) MarshalText() ([]byte, error) {
	if o != OrderRelevance && o != OrderNewest {
		return nil, fmt.Errorf("unknown order %d", uint8(o))
	}
	return []byte(o.String()), nil
}

// UnmarshalText decodes the text MarshalText writes.
func (o *Order) UnmarshalText(b []byte) error {
	switch string(b) {
	case "relevance":
		*o = OrderRelevance
	case "newest":
		*o = OrderNewest
	default:
		return fmt.Errorf("unknown order %q", b)
	}
	return nil
}

// Cursor is the position after one hit in a result's total order. Search
// continues strictly after it. It is opaque: clients get it as Encode's
// string and send it back; the same cursor can be sent to every partition
// of a fan-out (see Merge). A cursor is only meaningful with the request
// that produced it; a cursor of the other order is a bad request.
type Cursor struct {
	order     Order
	score     float64 // OrderRelevance
	published int64   // OrderNewest, Unix nanoseconds
	id        string
}

// Cursor encoding: base64url (no padding) of
//
//	version (1 byte) | order (1 byte) | key (8 bytes, big endian) | id
//
// where key is the IEEE-754 bits of the score or the published time in Unix
// nanoseconds. Scores round-trip bit for bit.
const (
	cursorVersion   = 1
	cursorHeader    = 10
	maxCursorString = (cursorHeader + maxIDBytes + 2) / 3 * 4
)

var cursorEncoding = base64.RawURLEncoding.Strict()

// Order returns the order the cursor belongs to.
func (c *Cursor) Order() Order { return c.order }

// Encode returns the cursor as a URL-safe string.
func (c *Cursor) Encode() string {
	b := make([]byte, cursorHeader, cursorHeader+len(c.id))
	b[0] = cursorVersion
	b[1] = byte(c.order)
	key := uint64(c.published)
	if c.order == OrderRelevance {
		key = math.Float64bits(c.score)
	}
	binary.BigEndian.PutUint64(b[2:], key)
	b = append(b, c.id...)
	return cursorEncoding.EncodeToString(b)
}

// String returns Encode().
func (c *Cursor) String() string { return c.Encode() }

// DecodeCursor parses a string from Encode. Any other input returns an error
// wrapping ErrBadRequest.
func DecodeCursor(s string) (*Cursor, error) {
	bad := func(why string) (*Cursor, error) {
		return nil, fmt.Errorf("cursor: %s: %w", why, ErrBadRequest)
	}
	if s == "" {
		return bad("empty")
	}
	if len(s) > maxCursorString {
		return bad("too long")
	}
	// The decoder skips \r and \n; refuse them (and anything else outside
	// the alphabet) so that a cursor has exactly one spelling.
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return bad("not base64url")
		}
	}
	b, err := cursorEncoding.DecodeString(s)
	if err != nil {
		return bad("not base64url")
	}
	if len(b) <= cursorHeader {
		return bad("too short")
	}
	if b[0] != cursorVersion {
		return bad("unknown version " + strconv.Itoa(int(b[0])))
	}
	c := &Cursor{order: Order(b[1]), id: string(b[cursorHeader:])}
	key := binary.BigEndian.Uint64(b[2:])
	switch c.order {
	case OrderRelevance:
		c.score = math.Float64frombits(key)
		if math.IsNaN(c.score) || math.IsInf(c.score, 0) {
			return bad("score is not finite")
		}
	case OrderNewest:
		c.published = int64(key)
	default:
		return bad("unknown order " + strconv.Itoa(int(b[1])))
	}
	if err := checkID(c.id); err != nil {
		return bad("bad id")
	}
	return c, nil
}

// MarshalText encodes c like Encode, so a Result travels as JSON.
func (c *Cursor) MarshalText() ([]byte, error) { return []byte(c.Encode()), nil }

// UnmarshalText decodes like DecodeCursor.
func (c *Cursor) UnmarshalText(b []byte) error {
	d, err := DecodeCursor(string(b))
	if err != nil {
		return err
	}
	*c = *d
	return nil
}

// searchAfter is the cursor as Bleve's SearchAfter values for the newest
// order, (published key, ID), both compared as strings. (Relevance searches
// apply the cursor themselves, comparing the score's exact float64; see
// relevanceTop.)
func (c *Cursor) searchAfter() []string {
	return []string{publishedKey(c.published), c.id}
}

// cursorAt is the cursor just after h in order o.
func cursorAt(o Order, h *Hit) *Cursor {
	c := &Cursor{order: o, id: h.ID}
	if o == OrderRelevance {
		c.score = h.Score
	} else {
		c.published = h.PublishedAt.UnixNano()
	}
	return c
}

// CursorAfter is the cursor just after h in order o: a search with it
// continues with the hit that follows h.
func CursorAfter(o Order, h *Hit) *Cursor { return cursorAt(o, h) }

// compareHits orders a and b in order o: negative if a comes first.
func compareHits(o Order, a, b *Hit) int {
	if o == OrderRelevance {
		if a.Score != b.Score {
			if a.Score > b.Score {
				return -1
			}
			return 1
		}
	} else {
		if pa, pb := a.PublishedAt.UnixNano(), b.PublishedAt.UnixNano(); pa != pb {
			if pa > pb {
				return -1
			}
			return 1
		}
	}
	return strings.Compare(a.ID, b.ID)
}

// Merge merges the results of one Request sent to several partitions (with
// the same After cursor) into the page a single index holding all their
// documents would return: the first limit hits in the same total order,
// Total summed, and Next set when more hits follow. limit is the request's
// Limit (zero means DefaultLimit; above MaxLimit means MaxLimit). Results
// must come from disjoint partitions; nil results are skipped. Scores are
// compared as they are: each partition scores with its own term statistics.
func Merge(limit int, results ...*Result) *Result {
	limit = effectiveLimit(limit)
	out := &Result{Order: OrderRelevance}
	var all []Hit
	more := false
	first := true
	for _, r := range results {
		if r == nil {
			continue
		}
		if first {
			out.Order = r.Order
			first = false
		}
		out.Total += r.Total
		all = append(all, r.Hits...)
		// A partition with more hits has them after its last hit, so after
		// any page that includes that hit.
		more = more || r.Next != nil
	}
	slices.SortFunc(all, func(a, b Hit) int { return compareHits(out.Order, &a, &b) })
	if len(all) > limit {
		all, more = all[:limit], true
	}
	out.Hits = all
	if more && len(all) > 0 {
		out.Next = cursorAt(out.Order, &all[len(all)-1])
	}
	return out
}

// effectiveLimit maps a request's Limit to the page size.
func effectiveLimit(n int) int {
	switch {
	case n <= 0:
		return DefaultLimit
	case n > MaxLimit:
		return MaxLimit
	}
	return n
}
