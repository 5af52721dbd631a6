package dedup

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/newsflow/newsflow/state"
	"github.com/newsflow/newsflow/state/statetest"
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

// mustAdd and mustContain fail the test on a store error.
func mustAdd(t testing.TB, s *Set, f Fingerprint, ts int64) bool {
	t.Helper()
	ok, err := s.Add(f, ts)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

func mustContain(t testing.TB, s *Set, f Fingerprint) bool {
	t.Helper()
	ok, err := s.Contains(f)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// newLoaded returns a set loaded from ns.
func newLoaded(t testing.TB, opts Options, ns state.Namespace) *Set {
	t.Helper()
	s := New(opts)
	if err := s.Load(ns); err != nil {
		t.Fatal(err)
	}
	return s
}

// The set answers like the brute-force model whether its ids are pending
// or flushed (every flushEvery adds; 0 never), through filter growth,
// expiry and shrinking.
func TestMatchesModel(t *testing.T) {
	for _, buckets := range []int{2, 7, 64} {
		for _, flushEvery := range []int{0, 1, 97} {
			t.Run(fmt.Sprintf("buckets=%d/flush=%d", buckets, flushEvery), func(t *testing.T) {
				ns := openNS(t)
				s := newLoaded(t, Options{Horizon: time.Hour, Buckets: buckets, Prefix: 'e'}, ns)
				m := newModel(s)
				st := &stream{rng: rand.New(rand.NewPCG(uint64(buckets), 1)), now: 1_700_000_000_000}
				added, dups, old := 0, 0, 0
				steps := 60_000
				if flushEvery == 1 {
					steps = 10_000 // a commit per event
				}
				for i := range steps {
					id, ts := st.event()
					f := FingerprintOf(id)
					wasOld, had := s.TooOld(ts), mustContain(t, s, f)
					got, want := mustAdd(t, s, f, ts), m.add(id, ts)
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
					if flushEvery > 0 && i%flushEvery == 0 {
						commit(t, s, ns)
					}
					if i%997 == 0 {
						for id := range m.ids {
							if !mustContain(t, s, FingerprintOf(id)) {
								t.Fatalf("step %d: %s forgotten", i, id)
							}
						}
					}
				}
				if added == 0 || dups == 0 || old == 0 {
					t.Fatalf("stream exercised too little: %d added, %d repeats, %d too old", added, dups, old)
				}
				t.Logf("%d added, %d repeats, %d too old, %d remembered, filter %d slots", added, dups, old, s.Len(), s.filter.capacity())
			})
		}
	}
}

// A filter match on an id that was never added (same 16-bit tag, same
// groups) is resolved by reading the flushed bucket: the id is new.
func TestFilterFalseMatch(t *testing.T) {
	ns := openNS(t)
	opts := Options{Horizon: time.Hour, Prefix: 'e'}
	s := newLoaded(t, opts, ns)
	const t0 = 1_700_000_000_000
	f := FingerprintOf("a")
	twin := f ^ 0x8 // differs only in bits the filter does not keep
	if s.filter.lookup(twin, nil) != nil {
		t.Fatal("twin matched an empty filter")
	}
	if !mustAdd(t, s, f, t0) {
		t.Fatal("a new id was not added")
	}
	if len(s.filter.lookup(twin, nil)) != 1 {
		t.Fatal("the twin does not match the filter: the test no longer tests a false match")
	}
	if mustContain(t, s, twin) {
		t.Fatal("pending: the twin was taken for the id")
	}
	commit(t, s, ns)
	for _, set := range []*Set{s, newLoaded(t, opts, ns)} {
		if mustContain(t, set, twin) || !mustContain(t, set, f) {
			t.Fatal("flushed: the twin was taken for the id, or the id was forgotten")
		}
	}
	if !mustAdd(t, s, twin, t0+1) || mustAdd(t, s, twin, t0+2) || mustAdd(t, s, f, t0+3) {
		t.Fatal("the twin and the id are not two ids")
	}
}

// countReader counts the scans a set makes.
type countReader struct {
	state.Reader
	scans int
}

func (r *countReader) Scan(lo, hi []byte, fn func(k, v []byte) error) error {
	r.scans++
	return r.Reader.Scan(lo, hi, fn)
}

// A burst of repeats of flushed ids reads each bucket once, not once per
// repeat.
func TestRepeatsReadBucketOnce(t *testing.T) {
	ns := openNS(t)
	r := &countReader{Reader: ns}
	s := New(Options{Horizon: time.Hour, Buckets: 8, Prefix: 'e'})
	if err := s.Load(r); err != nil {
		t.Fatal(err)
	}
	const t0 = 1_700_000_000_000
	const n = 20_000
	for i := range n {
		mustAdd(t, s, FingerprintOf(fmt.Sprint(i)), t0+int64(i)*100) // 2000 s: 4 buckets
		if i%1000 == 0 {
			commit(t, s, ns)
		}
	}
	commit(t, s, ns)
	r.scans = 0
	buckets := map[int64]bool{}
	for i := range n {
		buckets[s.bucket(t0+int64(i)*100)] = true
		if mustAdd(t, s, FingerprintOf(fmt.Sprint(i)), t0+int64(i)*100) {
			t.Fatalf("repeat %d added", i)
		}
	}
	if r.scans > 2*len(buckets) { // one scan finds the repeat, one reads the bucket
		t.Fatalf("%d repeats in %d buckets read the store %d times", n, len(buckets), r.scans)
	}
}

// The horizon is a lower bound: an id is remembered for at least Horizon
// of event time after its timestamp, and at most one bucket longer.
func TestHorizonBounds(t *testing.T) {
	const hz = 24 * time.Hour
	s := New(Options{Horizon: hz, Prefix: 'e'})
	const t0 = 1_700_000_000_000
	f := FingerprintOf("a")
	if !mustAdd(t, s, f, t0) || mustAdd(t, s, f, t0) || mustAdd(t, s, f, t0+1000) {
		t.Fatal("a repeat was added")
	}
	mustAdd(t, s, FingerprintOf("b"), t0+hz.Milliseconds())
	if !mustContain(t, s, f) || s.TooOld(t0) {
		t.Fatal("forgotten within the horizon")
	}
	mustAdd(t, s, FingerprintOf("c"), t0+hz.Milliseconds()+2*s.width)
	if mustContain(t, s, f) || !s.TooOld(t0) {
		t.Fatal("remembered more than a bucket past the horizon")
	}
	if mustAdd(t, s, f, t0) {
		t.Fatal("an event older than the horizon was added")
	}
}

func openNS(t *testing.T) state.Namespace { return statetest.Open(t).Namespace("t") }

func commit(t *testing.T, s *Set, ns state.Namespace) {
	t.Helper()
	statetest.Commit(t, s, ns)
}

// A set flushed and loaded at random points answers exactly like one that
// never was, and expired buckets leave the store.
func TestFlushLoadRoundTrip(t *testing.T) {
	opts := Options{Horizon: 30 * time.Minute, Buckets: 8, Prefix: 'e'}
	ns := openNS(t)
	s, ref := newLoaded(t, opts, ns), New(opts)
	st := &stream{rng: rand.New(rand.NewPCG(5, 6)), now: 1_700_000_000_000}
	rng := rand.New(rand.NewPCG(7, 8))
	for i := range 40_000 {
		id, ts := st.event()
		f := FingerprintOf(id)
		if got, want := mustAdd(t, s, f, ts), mustAdd(t, ref, f, ts); got != want {
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
				mustAdd(t, lost, FingerprintOf(id), ts)
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
	ns := openNS(t)
	s := newLoaded(t, Options{Horizon: time.Hour, Prefix: 'e'}, ns)
	const t0 = 1_700_000_000_000
	for i := range 200_000 {
		mustAdd(t, s, FingerprintOf(fmt.Sprint(i)), t0+int64(i))
		if i%10_000 == 0 {
			commit(t, s, ns)
		}
	}
	commit(t, s, ns)
	big := s.MemoryBytes()
	if s.Len() != 200_000 || big > 200_000*8 {
		t.Fatalf("%d ids in %d bytes", s.Len(), big)
	}
	t.Logf("%.1f bytes per id", float64(big)/200_000)
	for i := range 1000 {
		mustAdd(t, s, FingerprintOf(fmt.Sprint("late", i)), t0+2*3600_000+int64(i))
	}
	commit(t, s, ns)
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

// BenchmarkAdd measures Add in a steady state: a set that holds 10 million
// ids over 24h, flushed to a store, where each call either adds a new id
// (as many expire as are added) or repeats one added 10,000 calls before.
// It reports the memory per remembered id and the bytes written per id by
// Flush; BenchmarkFill measures a set growing from empty.
func BenchmarkAdd(b *testing.B) {
	const n = 10_000_000
	s, ns, w := newBenchSet(b)
	step := int64(24*time.Hour/time.Millisecond) / n
	id := func(i int) Fingerprint { return FingerprintOf(fmt.Sprintf("%016x", i)) }
	flush := func() { benchFlush(b, s, ns, w) }
	for i := range n {
		mustAdd(b, s, id(i), benchT0+int64(i)*step)
		if i%100_000 == 0 {
			flush()
		}
	}
	flush()
	mem, disk, held := float64(s.MemoryBytes()), float64(w.bytes), float64(s.Len())
	next := n
	i := 0
	for b.Loop() {
		j := next
		if i&1 == 1 {
			j = next - 5_000 // a repeat
		} else {
			next++
		}
		if _, err := s.Add(id(j), benchT0+int64(j)*step); err != nil {
			b.Fatal(err)
		}
		if i++; i%10_000 == 0 {
			flush()
		}
	}
	b.ReportMetric(mem/held, "mem-B/id")
	b.ReportMetric(disk/held, "disk-B/id")
	b.ReportMetric(mem/(1<<20), "MiB@10M")
}

// BenchmarkFill measures Add into a set growing from empty: new ids in
// time order, a Flush every 10,000.
func BenchmarkFill(b *testing.B) {
	s, ns, w := newBenchSet(b)
	i := 0
	for b.Loop() {
		if _, err := s.Add(FingerprintOf(fmt.Sprintf("%016x", i)), benchT0+int64(i)); err != nil {
			b.Fatal(err)
		}
		if i++; i%10_000 == 0 {
			benchFlush(b, s, ns, w)
		}
	}
	b.ReportMetric(float64(s.MemoryBytes())/float64(s.Len()), "mem-B/id")
}

const benchT0 = 1_700_000_000_000

func newBenchSet(b *testing.B) (*Set, state.Namespace, *countWriter) {
	db, err := state.Open(b.TempDir(), state.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	ns := db.Namespace("t")
	return newLoaded(b, Options{Horizon: 24 * time.Hour, Prefix: 'e'}, ns), ns, &countWriter{}
}

func benchFlush(b *testing.B, s *Set, ns state.Namespace, w *countWriter) {
	batch := ns.NewBatch()
	if err := s.Flush(&teeWriter{batch, w}); err != nil {
		b.Fatal(err)
	}
	if err := batch.Commit(); err != nil {
		b.Fatal(err)
	}
}

// teeWriter stages into a batch and counts the bytes.
type teeWriter struct {
	state.Writer
	count *countWriter
}

func (w *teeWriter) Set(k, v []byte) error {
	w.count.Set(k, v)
	return w.Writer.Set(k, v)
}

type countWriter struct{ bytes int }

func (w *countWriter) Set(k, v []byte) error         { w.bytes += len(k) + len(v); return nil }
func (w *countWriter) Delete(k []byte) error         { return nil }
func (w *countWriter) DeleteRange(s, e []byte) error { return nil }
