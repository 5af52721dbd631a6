package dedup

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/newsflow/newsflow/state"
)

// model is the brute-force reference: every remembered id with its bucket.
type model struct {
	width, n int64
	started  bool
	hi       int64
	ids      map[string]int64
}

func newModel(s *Set) *model { return &model{width: s.width, n: s.n, ids: map[string]int64{}} }

func (m *model) add(id string, ts int64) bool {
	b := ts / m.width
	if !m.started || b > m.hi {
		m.started, m.hi = true, b
		for k, kb := range m.ids {
			if kb < m.hi-m.n+1 {
				delete(m.ids, k)
			}
		}
	}
	if b < m.hi-m.n+1 {
		return false
	}
	if _, ok := m.ids[id]; ok {
		return false
	}
	m.ids[id] = b
	return true
}

// stream yields event ids with timestamps: mostly forward in time, with
// out-of-order events, repeats of recent and old ids, and rare jumps.
type stream struct {
	rng  *rand.Rand
	now  int64
	next int
	past []pastEvent
}

type pastEvent struct {
	id string
	ts int64
}

func (s *stream) event() (string, int64) {
	s.now += s.rng.Int64N(2000)
	if s.rng.IntN(500) == 0 {
		s.now += s.rng.Int64N(3 * 3600_000) // a jump past some buckets
	}
	ts := s.now - s.rng.Int64N(40*60_000) // up to 40 min out of order
	if s.rng.IntN(200) == 0 {
		ts -= 2 * 3600_000 // far out of order
	}
	if len(s.past) > 0 && s.rng.IntN(4) == 0 {
		e := s.past[s.rng.IntN(len(s.past))] // a repeat, resent as it was
		if s.rng.IntN(4) == 0 {
			e.ts = ts // or stamped anew
		}
		return e.id, e.ts
	}
	s.next++
	id := fmt.Sprintf("ev-%d", s.next)
	s.past = append(s.past, pastEvent{id, ts})
	if len(s.past) > 5000 {
		s.past = s.past[1000:]
	}
	return id, ts
}

func TestMatchesModel(t *testing.T) {
	for _, buckets := range []int{2, 7, 64} {
		t.Run(fmt.Sprintf("buckets=%d", buckets), func(t *testing.T) {
			s := New(Options{Horizon: time.Hour, Buckets: buckets, Prefix: 'e'})
			m := newModel(s)
			st := &stream{rng: rand.New(rand.NewPCG(uint64(buckets), 1)), now: 1_700_000_000_000}
			added, dups, old := 0, 0, 0
			for i := range 60_000 {
				id, ts := st.event()
				f := FingerprintOf(id)
				wasOld, had := s.TooOld(ts), s.Contains(f)
				got, want := s.Add(f, ts), m.add(id, ts)
				if got != want {
					t.Fatalf("step %d: Add(%s, %d) = %v, model %v (contained %v, too old %v)", i, id, ts, got, want, had, wasOld)
				}
				switch {
				case got:
					added++
				case wasOld:
					old++
				default:
					dups++
				}
				if s.Len() != len(m.ids) {
					t.Fatalf("step %d: %d ids remembered, model %d", i, s.Len(), len(m.ids))
				}
				if i%997 == 0 {
					for id := range m.ids {
						if !s.Contains(FingerprintOf(id)) {
							t.Fatalf("step %d: %s forgotten", i, id)
						}
					}
				}
			}
			if added == 0 || dups == 0 || old == 0 {
				t.Fatalf("stream exercised too little: %d added, %d repeats, %d too old", added, dups, old)
			}
			t.Logf("%d added, %d repeats, %d too old, %d remembered, table %d slots", added, dups, old, s.Len(), len(s.fps))
		})
	}
}

// The horizon is a lower bound: an id is remembered for at least Horizon
// of event time after its timestamp, and at most one bucket longer.
func TestHorizonBounds(t *testing.T) {
	const hz = 24 * time.Hour
	s := New(Options{Horizon: hz, Prefix: 'e'})
	const t0 = 1_700_000_000_000
	f := FingerprintOf("a")
	if !s.Add(f, t0) || s.Add(f, t0) || s.Add(f, t0+1000) {
		t.Fatal("a repeat was added")
	}
	s.Add(FingerprintOf("b"), t0+hz.Milliseconds())
	if !s.Contains(f) || s.TooOld(t0) {
		t.Fatal("forgotten within the horizon")
	}
	s.Add(FingerprintOf("c"), t0+hz.Milliseconds()+2*s.width)
	if s.Contains(f) || !s.TooOld(t0) {
		t.Fatal("remembered more than a bucket past the horizon")
	}
	if s.Add(f, t0) {
		t.Fatal("an event older than the horizon was added")
	}
}

func openNS(t *testing.T) state.Namespace {
	t.Helper()
	db, err := state.Open(t.TempDir(), state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db.Namespace("t")
}

func commit(t *testing.T, s *Set, ns state.Namespace) {
	t.Helper()
	b := ns.NewBatch()
	if err := s.Flush(b); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
}

// A set flushed and loaded at random points answers exactly like one that
// never was, and expired buckets leave the store.
func TestFlushLoadRoundTrip(t *testing.T) {
	opts := Options{Horizon: 30 * time.Minute, Buckets: 8, Prefix: 'e'}
	ns := openNS(t)
	s, ref := New(opts), New(opts)
	st := &stream{rng: rand.New(rand.NewPCG(5, 6)), now: 1_700_000_000_000}
	rng := rand.New(rand.NewPCG(7, 8))
	for i := range 40_000 {
		id, ts := st.event()
		f := FingerprintOf(id)
		if got, want := s.Add(f, ts), ref.Add(f, ts); got != want {
			t.Fatalf("step %d: Add after reloads = %v, without = %v", i, got, want)
		}
		switch rng.IntN(800) {
		case 0: // commit and restart
			commit(t, s, ns)
			s = New(opts)
			if err := s.Load(ns); err != nil {
				t.Fatal(err)
			}
			if s.Len() != ref.Len() || s.lo != ref.lo || s.hi != ref.hi {
				t.Fatalf("step %d: loaded %d ids [%d,%d], want %d [%d,%d]", i, s.Len(), s.lo, s.hi, ref.Len(), ref.lo, ref.hi)
			}
		case 1: // a crash: the uncommitted changes are lost, and come again
			commit(t, s, ns)
			lost := New(opts)
			if err := lost.Load(ns); err != nil {
				t.Fatal(err)
			}
			for range 50 {
				id, ts := st.event()
				lost.Add(FingerprintOf(id), ts)
			}
			if err := s.Load(ns); err != nil { // lost is discarded
				t.Fatal(err)
			}
		}
	}
	commit(t, s, ns)
	// Only live buckets are stored.
	stored := 0
	if err := ns.Scan([]byte{'e'}, []byte{'f'}, func(k, v []byte) error {
		stored += len(v) / 8
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if stored != s.Len() {
		t.Fatalf("%d fingerprints stored, %d remembered", stored, s.Len())
	}
}

// Keys outside the prefix are not the set's, and a malformed chunk is an
// error, not a silent loss.
func TestLoadRejectsMalformed(t *testing.T) {
	ns := openNS(t)
	b := ns.NewBatch()
	b.Set([]byte("other"), []byte("x"))
	b.Set([]byte{'e', 1, 2}, []byte("12345678"))
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := New(Options{Horizon: time.Hour, Prefix: 'e'}).Load(ns); err == nil {
		t.Fatal("malformed chunk loaded")
	}
	if err := New(Options{Horizon: time.Hour, Prefix: 'd'}).Load(ns); err != nil {
		t.Fatal(err)
	}
}

// Memory follows the horizon: once the watermark moves on, the table
// shrinks back.
func TestMemoryBounded(t *testing.T) {
	s := New(Options{Horizon: time.Hour, Prefix: 'e'})
	const t0 = 1_700_000_000_000
	for i := range 200_000 {
		s.Add(FingerprintOf(fmt.Sprint(i)), t0+int64(i))
	}
	if err := s.Flush(&countWriter{}); err != nil {
		t.Fatal(err)
	}
	big := s.MemoryBytes()
	if s.Len() != 200_000 || big > 200_000*32 {
		t.Fatalf("%d ids in %d bytes", s.Len(), big)
	}
	for i := range 1000 {
		s.Add(FingerprintOf(fmt.Sprint("late", i)), t0+2*3600_000+int64(i))
	}
	if s.Len() != 1000 || s.MemoryBytes() > big/20 {
		t.Fatalf("after the horizon: %d ids in %d bytes (was %d)", s.Len(), s.MemoryBytes(), big)
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, o := range []Options{{}, {Horizon: time.Hour, Buckets: 1}, {Horizon: time.Hour, Buckets: MaxBuckets + 1}, {Horizon: -1}} {
		if o.Validate() == nil {
			t.Errorf("%+v accepted", o)
		}
	}
	if err := (Options{Horizon: time.Hour}).Validate(); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkAdd measures Add on a set that holds 10 million ids (half the
// calls add a new id, half repeat one), and reports the memory per
// remembered id and the bytes written per id by Flush.
func BenchmarkAdd(b *testing.B) {
	const n = 10_000_000
	const t0 = 1_700_000_000_000
	s := New(Options{Horizon: 25 * time.Hour, Prefix: 'e'})
	step := int64(24*time.Hour/time.Millisecond) / n
	for i := range n {
		s.Add(FingerprintOf(fmt.Sprintf("%016x", i)), t0+int64(i)*step)
	}
	var w countWriter
	if err := s.Flush(&w); err != nil {
		b.Fatal(err)
	}
	mem, disk, held := float64(s.MemoryBytes()), float64(w.bytes), float64(s.Len())
	ids := make([]string, 1<<20)
	for i := range ids {
		ids[i] = fmt.Sprintf("new-%016x", i)
	}
	ts := t0 + int64(n)*step
	i := 0
	for b.Loop() {
		s.Add(FingerprintOf(ids[i&(len(ids)-1)]), ts) // as the operators do: a repeat is reported, not added
		i++
	}
	b.ReportMetric(mem/held, "mem-B/id")
	b.ReportMetric(disk/held, "disk-B/id")
	b.ReportMetric(mem/(1<<20), "MiB@10M")
}

type countWriter struct{ bytes int }

func (w *countWriter) Set(k, v []byte) error         { w.bytes += len(k) + len(v); return nil }
func (w *countWriter) Delete(k []byte) error         { return nil }
func (w *countWriter) DeleteRange(s, e []byte) error { return nil }
