package sketch

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// memStore is an in-memory state.Reader and state.Writer. It records
// every write in log, so tests can compare what two Flushes wrote.
type memStore struct {
	kv  map[string][]byte
	log []string
	n   int // bytes of keys and values written
}

func newMemStore() *memStore { return &memStore{kv: map[string][]byte{}} }

func (m *memStore) Set(k, v []byte) error {
	m.kv[string(k)] = bytes.Clone(v)
	m.log = append(m.log, fmt.Sprintf("set %x %x", k, v))
	m.n += len(k) + len(v)
	return nil
}

func (m *memStore) Delete(k []byte) error {
	delete(m.kv, string(k))
	m.log = append(m.log, fmt.Sprintf("del %x", k))
	m.n += len(k)
	return nil
}

func (m *memStore) DeleteRange(start, end []byte) error {
	for k := range m.kv {
		if k >= string(start) && k < string(end) {
			delete(m.kv, k)
		}
	}
	m.log = append(m.log, fmt.Sprintf("delrange %x %x", start, end))
	m.n += len(start) + len(end)
	return nil
}

func (m *memStore) Get(k []byte) ([]byte, bool, error) {
	v, ok := m.kv[string(k)]
	return bytes.Clone(v), ok, nil
}

func (m *memStore) Scan(lower, upper []byte, fn func(k, v []byte) error) error {
	keys := make([]string, 0, len(m.kv))
	for k := range m.kv {
		if k >= string(lower) && (upper == nil || k < string(upper)) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		if err := fn([]byte(k), m.kv[k]); err != nil {
			return err
		}
	}
	return nil
}

// reset forgets the write log (not the contents).
func (m *memStore) reset() { m.log, m.n = m.log[:0], 0 }

func flushTo(t testing.TB, c *Counts, m *memStore) {
	t.Helper()
	if err := c.Flush(m); err != nil {
		t.Fatal(err)
	}
}

// share is one Add (or AddToCategory, if only) call.
type share struct {
	id, cat string
	ts      int64
	only    bool
}

func apply(c *Counts, s share) bool {
	if s.only {
		return c.AddToCategory(s.id, s.cat, s.ts)
	}
	return c.Add(s.id, s.cat, s.ts)
}

// exact is the reference model: exact counts under the package's window
// rules. A share counts in a window at watermark W iff its bucket is
// covered at W: the buckets covered only move forward, so that is the
// same as "covered when it arrived and not expired since".
type exact struct {
	opts   Options
	shares []share
	wm     int64
}

func (e *exact) add(s share) {
	e.shares = append(e.shares, s)
	e.wm = max(e.wm, s.ts)
}

func (e *exact) count(w int, cat, id string) uint64 {
	spec := e.opts.withDefaults().Windows[w]
	width := spec.Width().Milliseconds()
	lo := e.wm/width - int64(spec.Buckets) + 1
	var n uint64
	for _, s := range e.shares {
		if s.id != id || s.ts/width < lo {
			continue
		}
		if (cat == "" && !s.only) || (cat != "" && s.cat == cat) {
			n++
		}
	}
	return n
}

// articleID returns the id of the article of rank i, shaped like a real
// one (16 hex digits of a hash).
func articleID(i int) string {
	x := uint64(i)*0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019
	x ^= x >> 31
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 29
	return fmt.Sprintf("%016x", x)
}

// day0 is a bucket-aligned event time for tests.
var day0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()

func ms(d time.Duration) int64 { return d.Milliseconds() }

func entriesString(es []Entry) string {
	var b strings.Builder
	for _, e := range es {
		fmt.Fprintf(&b, "%s=%d±%d ", e.ArticleID, e.Count, e.Bound)
	}
	return b.String()
}

// nonzero returns the number of nonzero counters of p.
func nonzero(p *[PageSize]uint32) int {
	n := 0
	for _, v := range p {
		if v != 0 {
			n++
		}
	}
	return n
}

// encodePage returns the encoding of a page holding p.
func encodePage(p *[PageSize]uint32) []byte {
	pg := &page{c: *p}
	pg.mark()
	return appendPage(nil, pg)
}
