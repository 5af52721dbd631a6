package trending

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/state"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/valyala/fastjson"
)

// repeatT0 starts a day: every window's buckets begin at it.
const repeatT0 = int64(1_780_000_000_000) / 86_400_000 * 86_400_000

func userShare(id, user, article, category string, ts int64) *eventlog.Record {
	m := map[string]any{"event_id": id, "article_id": article, "user_id": user, "timestamp": ts}
	if category != "" {
		m["category"] = category
	}
	v, _ := json.Marshal(m)
	return &eventlog.Record{Topic: schema.TopicShares, Key: []byte(article), Value: v, Timestamp: ts}
}

// counts returns an article's global count in every window ("1m", "1h",
// "24h" order).
func (h *joinHarness) counts(article string) [3]uint64 {
	h.t.Helper()
	sh, err := h.o.Shares(article)
	if err != nil {
		h.t.Fatal(err)
	}
	return [3]uint64{sh.Counts["1m"], sh.Counts["1h"], sh.Counts["24h"]}
}

var bothCounters = []string{CounterExact, CounterCMS}

// TestRepeatSharesOnce: one user's shares of one article count once in
// each window, other users' and other articles' count apart, and with
// every all of them count; a share after the counted one left a window
// counts in it again.
func TestRepeatSharesOnce(t *testing.T) {
	for _, counter := range bothCounters {
		t.Run(counter, func(t *testing.T) {
			once := newJoinHarness(t, OperatorOptions{Counter: counter})
			every := newJoinHarness(t, OperatorOptions{Counter: counter, RepeatShares: RepeatEvery})
			n := 0
			share := func(user, article string, at time.Duration) {
				n++
				rec := userShare(fmt.Sprint("e", n), user, article, "tech", repeatT0+at.Milliseconds())
				once.deliver(rec)
				every.deliver(rec)
			}
			for i := range 10 {
				share("u1", "A", time.Duration(i)*time.Second)
			}
			share("u2", "A", 5*time.Second)
			share("u2", "A", 6*time.Second)
			share("u1", "B", 2*time.Second)
			if got, want := once.counts("A"), [3]uint64{2, 2, 2}; got != want {
				t.Errorf("once: A counts %v, want %v", got, want)
			}
			if got, want := once.counts("B"), [3]uint64{1, 1, 1}; got != want {
				t.Errorf("once: B counts %v, want %v", got, want)
			}
			if got, want := every.counts("A"), [3]uint64{12, 12, 12}; got != want {
				t.Errorf("every: A counts %v, want %v", got, want)
			}
			if got := once.categoryCount("1h", "tech", "A"); got != 2 {
				t.Errorf("once: A in tech over 1h: %d, want 2", got)
			}
			// 60 s on, u1's counted share (bucket 0 of 1m) has left 1m:
			// the share counts there again, not in 1h or 24h; u2's share
			// at 5 s is still in 1m.
			share("u1", "A", 60*time.Second)
			if got, want := once.counts("A"), [3]uint64{2, 2, 2}; got != want {
				t.Errorf("once after 60s: A counts %v, want %v", got, want)
			}
			if got, want := every.counts("A"), [3]uint64{12, 13, 13}; got != want {
				t.Errorf("every after 60s: A counts %v, want %v", got, want)
			}
			if len(once.deadLetters)+len(every.deadLetters) != 0 {
				t.Errorf("dead letters: %v %v", once.deadLetters, every.deadLetters)
			}
		})
	}
}

// TestRepeatSharesWindowEdges: a repeat in the last millisecond of the
// span that holds the counted share does not count; one in the first
// millisecond after it left the window does, in that window only.
func TestRepeatSharesWindowEdges(t *testing.T) {
	for _, counter := range bothCounters {
		t.Run(counter, func(t *testing.T) {
			h := newJoinHarness(t, OperatorOptions{Counter: counter})
			steps := []struct {
				at   time.Duration
				want [3]uint64
			}{
				{0, [3]uint64{1, 1, 1}},
				{time.Minute - time.Millisecond, [3]uint64{1, 1, 1}}, // 1m bucket 59: one span with bucket 0
				{time.Minute, [3]uint64{1, 1, 1}},                    // bucket 0 left 1m: counts there, alone
				{time.Minute + time.Second, [3]uint64{1, 1, 1}},      // the 60 s share is in 1m
				{time.Hour - time.Millisecond, [3]uint64{1, 1, 1}},   // 1m again; 1h bucket 59 holds a repeat
				{time.Hour, [3]uint64{1, 1, 1}},                      // 1h bucket 0 left: counts in 1h again
				{24*time.Hour - time.Millisecond, [3]uint64{1, 1, 1}},
				{24 * time.Hour, [3]uint64{1, 1, 1}},
			}
			for i, s := range steps {
				h.deliver(userShare(fmt.Sprint("e", i), "u1", "A", "", repeatT0+s.at.Milliseconds()))
				if got := h.counts("A"); got != s.want {
					t.Errorf("after the share at +%v: counts %v, want %v", s.at, got, s.want)
				}
			}
			// Counted: in 1m the shares at 0, 60s, 1h-1ms and 24h-1ms; in
			// 1h at 0, 1h and 24h-1ms; in 24h at 0 and 24h. The others are
			// repeats there.
			repeats := map[string]float64{}
			for i, w := range h.o.opts.Counts.Windows {
				repeats[w.Name] = counterValue(t, h.o.repeats[i])
			}
			if want := map[string]float64{"1m": 4, "1h": 5, "24h": 6}; !reflect.DeepEqual(repeats, want) {
				t.Errorf("repeats by window %v, want %v", repeats, want)
			}
		})
	}
}

// TestRepeatSharesOutOfOrder: a late share of a pair that counts already
// in a window does not count there, whichever arrives first, and random
// shares in random time order give the counts of a reference model of
// the rule, at most one per user and article in any window.
func TestRepeatSharesOutOfOrder(t *testing.T) {
	for _, counter := range bothCounters {
		t.Run(counter, func(t *testing.T) {
			h := newJoinHarness(t, OperatorOptions{Counter: counter})
			h.deliver(userShare("e1", "u1", "A", "", repeatT0+30_000))
			h.deliver(userShare("e2", "u1", "A", "", repeatT0+10_000)) // late, same 1m span
			h.deliver(userShare("e3", "u1", "A", "", repeatT0+45_000))
			if got, want := h.counts("A"), [3]uint64{1, 1, 1}; got != want {
				t.Errorf("counts %v, want %v", got, want)
			}

			for seed := range uint64(3) {
				recs, ref := repeatStream(t, 4000, seed)
				h := newJoinHarness(t, OperatorOptions{Counter: counter})
				for _, r := range recs {
					h.deliver(r)
				}
				for _, art := range ref.articles() {
					got := h.counts(art)
					want := ref.counts(art)
					if got != want {
						t.Errorf("seed %d: %s counts %v, want %v", seed, art, got, want)
					}
					if users := ref.users(art); got[0] > users[0] || got[1] > users[1] || got[2] > users[2] {
						t.Errorf("seed %d: %s counts %v, more than its users in the windows %v", seed, art, got, users)
					}
				}
				if len(h.deadLetters) != ref.rejected {
					t.Errorf("seed %d: %d dead letters, want %d", seed, len(h.deadLetters), ref.rejected)
				}
			}
		})
	}
}

// repeatModel is the rule of repeat.go, written plainly: a share counts in
// window w if w covers its bucket at the watermark (with the share) and
// none of the pair's shares counted in w is in a bucket w covers.
type repeatModel struct {
	ws      []WindowSpec
	wm      int64
	started bool
	ids     map[string]bool
	counted map[[2]string][][]int64 // per pair, per window: counted buckets
	shared  map[[2]string][]int64   // per pair: every share's time
	byArt   map[string][][]int64    // per article, per window: counted buckets
	// rejected counts shares older than every window.
	rejected int
}

func newRepeatModel() *repeatModel {
	return &repeatModel{ws: DefaultWindows(), ids: map[string]bool{}, counted: map[[2]string][][]int64{},
		shared: map[[2]string][]int64{}, byArt: map[string][][]int64{}}
}

func (m *repeatModel) span(w int, wm int64) (lo, hi int64) {
	width := m.ws[w].Width().Milliseconds()
	hi = wm / width
	return hi - int64(m.ws[w].Buckets) + 1, hi
}

func (m *repeatModel) apply(id, user, art string, ts int64) {
	wm := ts
	if m.started {
		wm = max(m.wm, ts)
		old := true
		for w := range m.ws {
			if lo, _ := m.span(w, m.wm); ts/m.ws[w].Width().Milliseconds() >= lo {
				old = false
			}
		}
		if old {
			m.rejected++
			return
		}
	}
	if m.ids[id] {
		return
	}
	m.ids[id] = true
	m.started, m.wm = true, wm
	p := [2]string{user, art}
	if m.counted[p] == nil {
		m.counted[p] = make([][]int64, len(m.ws))
	}
	if m.byArt[art] == nil {
		m.byArt[art] = make([][]int64, len(m.ws))
	}
	m.shared[p] = append(m.shared[p], ts)
	for w := range m.ws {
		lo, hi := m.span(w, wm)
		b := ts / m.ws[w].Width().Milliseconds()
		if b < lo || slices.ContainsFunc(m.counted[p][w], func(c int64) bool { return c >= lo && c <= hi }) {
			continue
		}
		m.counted[p][w] = append(m.counted[p][w], b)
		m.byArt[art][w] = append(m.byArt[art][w], b)
	}
}

func (m *repeatModel) articles() []string {
	var out []string
	for a := range m.byArt {
		out = append(out, a)
	}
	slices.Sort(out)
	return out
}

func (m *repeatModel) counts(art string) (c [3]uint64) {
	for w := range m.ws {
		lo, hi := m.span(w, m.wm)
		for _, b := range m.byArt[art][w] {
			if b >= lo && b <= hi {
				c[w]++
			}
		}
	}
	return c
}

// users is, per window, how many users shared art in the window's span.
func (m *repeatModel) users(art string) (c [3]uint64) {
	for w := range m.ws {
		lo, hi := m.span(w, m.wm)
		width := m.ws[w].Width().Milliseconds()
		for p, tss := range m.shared {
			if p[1] == art && slices.ContainsFunc(tss, func(ts int64) bool { return ts/width >= lo && ts/width <= hi }) {
				c[w]++
			}
		}
	}
	return c
}

// repeatStream returns n shares of 6 users × 5 articles over 3 hours in
// random time order (a tenth of them up to 2 minutes late, some older than
// every window, some event ids twice), and the model's counts of them.
func repeatStream(t *testing.T, n int, seed uint64) ([]*eventlog.Record, *repeatModel) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 77))
	ref := newRepeatModel()
	var recs []*eventlog.Record
	var wm int64
	for i := range n {
		id := fmt.Sprint("e", i)
		if i > 0 && rng.IntN(20) == 0 {
			id = fmt.Sprint("e", rng.IntN(i)) // delivered again
		}
		ts := repeatT0 + int64(i)*(3*time.Hour).Milliseconds()/int64(n)
		switch rng.IntN(10) {
		case 0:
			ts -= rng.Int64N(2 * time.Minute.Milliseconds())
		case 1:
			ts -= rng.Int64N(25 * time.Hour.Milliseconds()) // some too old
		}
		wm = max(wm, ts)
		user, art := fmt.Sprint("u", rng.IntN(6)), fmt.Sprint("a", rng.IntN(5))
		cat := []string{"tech", "world"}[rng.IntN(2)]
		recs = append(recs, userShare(id, user, art, cat, max(ts, repeatT0-24*time.Hour.Milliseconds())))
	}
	var p fastjson.Parser
	for _, r := range recs {
		s, err := schema.DecodeShare(&p, r.Value)
		if err != nil {
			t.Fatal(err)
		}
		ref.apply(s.EventID, s.UserID, s.ArticleID, s.Timestamp)
	}
	return recs, ref
}

// TestRepeatSharesRestore: the same input with commits and crashes, and
// restored on another store from the changelog of its commits halfway,
// gives the answers of one uninterrupted run, and the changelog rebuilds
// the task's state byte for byte.
func TestRepeatSharesRestore(t *testing.T) {
	for _, counter := range bothCounters {
		t.Run(counter, func(t *testing.T) {
			opts := OperatorOptions{Counter: counter}
			recs, ref := repeatStream(t, 6000, 9)
			arts := ref.articles()
			cats := []string{"tech", "world"}

			plain := newOpHarness(t, opts, 1)
			plain.run(recs, len(recs), 0, 1)
			want := answersOf(t, plain.o, cats, arts)

			crashed := newOpHarness(t, opts, 1)
			crashed.run(recs, 97, 40, 2)
			if crashed.restarts == 0 {
				t.Fatal("no crash")
			}
			if got := answersOf(t, crashed.o, cats, arts); !reflect.DeepEqual(got, want) {
				t.Errorf("with %d crashes: answers differ\n got %+v\nwant %+v", crashed.restarts, got, want)
			}

			// The changelog: every commit's changes, as the engine records
			// them; applied to an empty store they are the task's state.
			o, err := New(opts, 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			db, ns := openNS(t)
			tk := newRestoredTask(t, o, ns)
			var log []eventlog.Change
			var pc engine.ProcessContext
			half := len(recs) / 2
			for i, r := range recs[:half] {
				if err := tk.Process(&pc, r); err != nil {
					if _, ok := engine.IsInvalid(err); !ok {
						t.Fatal(err)
					}
				}
				if i%250 == 249 || i == half-1 {
					log = commitCapture(t, tk, ns, log)
				}
			}
			tk.Close()
			other := db.Namespace("other")
			b := other.NewBatch()
			for _, ch := range log {
				if ch.Delete {
					err = b.Delete(ch.Key)
				} else {
					err = b.Set(ch.Key, ch.Value)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if err := b.Commit(); err != nil {
				t.Fatal(err)
			}
			if a, b := dump(t, ns), dump(t, other); !reflect.DeepEqual(a, b) {
				t.Fatalf("the changelog rebuilds %d keys, the task's state has %d", len(b), len(a))
			}
			tk = newRestoredTask(t, o, other)
			defer tk.Close()
			for _, r := range recs[half:] {
				if err := tk.Process(&pc, r); err != nil {
					if _, ok := engine.IsInvalid(err); !ok {
						t.Fatal(err)
					}
				}
			}
			if got := answersOf(t, o, cats, arts); !reflect.DeepEqual(got, want) {
				t.Errorf("restored from the changelog: answers differ\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

func newRestoredTask(t *testing.T, o *Operator, ns state.Namespace) engine.Task {
	t.Helper()
	tk, err := o.NewTask(engine.TaskContext{Partition: 0, Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := tk.Restore(ns); err != nil {
		t.Fatal(err)
	}
	return tk
}

// commitCapture flushes tk into a batch of ns, commits it and appends its
// changes to log as the engine's changelog records them (a DeleteRange as
// one delete per key it removes).
func commitCapture(t *testing.T, tk engine.Task, ns state.Namespace, log []eventlog.Change) []eventlog.Change {
	t.Helper()
	w := &captureBatch{b: ns.NewBatch(), ns: ns}
	if err := tk.Flush(w); err != nil {
		t.Fatal(err)
	}
	if err := w.b.Commit(); err != nil {
		t.Fatal(err)
	}
	return append(log, w.changes...)
}

type captureBatch struct {
	b       *state.Batch
	ns      state.Namespace
	changes []eventlog.Change
}

func (w *captureBatch) Set(k, v []byte) error {
	w.changes = append(w.changes, eventlog.Change{Key: bytes.Clone(k), Value: append([]byte{}, v...)})
	return w.b.Set(k, v)
}

func (w *captureBatch) Delete(k []byte) error {
	w.changes = append(w.changes, eventlog.Change{Key: bytes.Clone(k), Delete: true})
	return w.b.Delete(k)
}

func (w *captureBatch) DeleteRange(start, end []byte) error {
	var del [][]byte
	if err := w.ns.Scan(start, end, func(k, _ []byte) error {
		del = append(del, bytes.Clone(k))
		return nil
	}); err != nil {
		return err
	}
	for _, ch := range w.changes {
		if !ch.Delete && bytes.Compare(ch.Key, start) >= 0 && bytes.Compare(ch.Key, end) < 0 {
			del = append(del, ch.Key)
		}
	}
	for _, k := range del {
		w.changes = append(w.changes, eventlog.Change{Key: k, Delete: true})
	}
	return w.b.DeleteRange(start, end)
}

func dump(t *testing.T, r state.Reader) map[string]string {
	t.Helper()
	out := map[string]string{}
	if err := r.Scan([]byte{0}, []byte{0xff}, func(k, v []byte) error {
		out[string(k)] = string(v)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRepeatSharesSettingChanged: state counted with one setting is
// refused under the other until replayed; state from before the setting
// existed is taken.
func TestRepeatSharesSettingChanged(t *testing.T) {
	for _, from := range []string{RepeatOnce, RepeatEvery} {
		to := map[string]string{RepeatOnce: RepeatEvery, RepeatEvery: RepeatOnce}[from]
		h := newJoinHarness(t, OperatorOptions{RepeatShares: from})
		h.deliver(userShare("e1", "u1", "A", "tech", repeatT0))
		h.commit()
		h.task.Close()
		o, err := New(OperatorOptions{RepeatShares: to}, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		tk, err := o.NewTask(engine.TaskContext{Partition: 0, Partitions: 1})
		if err != nil {
			t.Fatal(err)
		}
		if err := tk.Restore(h.ns); !errors.Is(err, ErrRepeatSharesChanged) {
			t.Errorf("%s state restored with %s: %v, want ErrRepeatSharesChanged", from, to, err)
		}
		tk.Close()
		h.start() // the old setting still restores
	}

	// Before the setting existed: counts, and no setting stored.
	h := newJoinHarness(t, OperatorOptions{RepeatShares: RepeatEvery})
	h.deliver(userShare("e1", "u1", "A", "tech", repeatT0))
	h.deliver(userShare("e2", "u1", "A", "tech", repeatT0+1))
	h.commit()
	h.task.Close()
	b := h.ns.NewBatch()
	if err := b.Delete(pairsMetaKey); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	h.o, _ = New(OperatorOptions{}, 1, nil)
	h.start()
	h.deliver(userShare("e3", "u1", "A", "tech", repeatT0+2))
	h.deliver(userShare("e4", "u1", "A", "tech", repeatT0+3))
	if got, want := h.counts("A"), [3]uint64{3, 3, 3}; got != want {
		t.Errorf("earlier state continued with once: counts %v, want %v", got, want)
	}
}

// TestRepeatSharesParked: a share waiting for its article's topics counts
// under them in the windows it counted in globally, across a restart.
func TestRepeatSharesParked(t *testing.T) {
	h := newJoinHarness(t, OperatorOptions{})
	h.deliver(userShare("e1", "u1", "A", "", repeatT0))
	h.deliver(userShare("e2", "u1", "A", "", repeatT0+90_000)) // 1m only: the first left 1m
	h.commit()
	h.task.Close()
	h.start()
	h.deliver(articleRec("A", repeatT0-time.Hour.Milliseconds(), "science"))
	for w, want := range map[string]uint64{"1m": 1, "1h": 1, "24h": 1} {
		if got := h.categoryCount(w, "science", "A"); got != want {
			t.Errorf("%s science: %d, want %d", w, got, want)
		}
		if got := h.categoryCount(w, "", "A"); got != want {
			t.Errorf("%s global: %d, want %d", w, got, want)
		}
	}
}

// TestRepeatTableSpill: a fixed table holds its capacity of pairs without
// spilling; twice as many spill, which can only take a new pair for a
// repeat, never count a repeat again.
func TestRepeatTableSpill(t *testing.T) {
	const capacity = 1 << 14
	tab := newRepeatPairs(DefaultWindows(), true, capacity)
	ts := repeatT0
	fp := func(i int) uint64 { f, _ := pairFingerprint(nil, fmt.Sprint("u", i), "A"); return f }
	for i := range capacity {
		if mask, _ := tab.Decide(fp(i), ts, ts); mask != 0b111 {
			t.Fatalf("pair %d of %d: mask %b, want every window", i, capacity, mask)
		}
	}
	t.Logf("at capacity: %d spills", tab.spills)
	if tab.spills > capacity/1000 {
		t.Errorf("%d spills at capacity", tab.spills)
	}
	missed := 0
	for i := capacity; i < 2*capacity; i++ {
		if mask, _ := tab.Decide(fp(i), ts, ts); mask == 0 {
			missed++
		}
	}
	if tab.spills == 0 {
		t.Error("no spill at twice the capacity")
	}
	t.Logf("twice the capacity: %d spills, %d of %d new pairs taken for repeats", tab.spills, missed, capacity)
	if missed > capacity/16 {
		t.Errorf("%d of %d new pairs taken for repeats", missed, capacity)
	}
	for i := range 2 * capacity {
		if mask, _ := tab.Decide(fp(i), ts+1, ts); mask != 0 {
			t.Fatalf("pair %d's repeat counts in %b", i, mask)
		}
	}
	// Past the 1m span every pair counts in 1m again, once.
	later := ts + time.Minute.Milliseconds()
	counted := 0
	for i := range 2 * capacity {
		if mask, _ := tab.Decide(fp(i), later, later); mask == 1 {
			counted++
		} else if mask != 0 {
			t.Fatalf("pair %d a minute on: mask %b", i, mask)
		}
		if mask, _ := tab.Decide(fp(i), later+1, later); mask != 0 {
			t.Fatalf("pair %d's repeat a minute on counts in %b", i, mask)
		}
	}
	if counted < capacity {
		t.Errorf("a minute on %d of %d pairs count in 1m", counted, 2*capacity)
	}

	// Exact: the table grows and never misses.
	ex := newRepeatPairs(DefaultWindows(), false, 0)
	for i := range 4 * capacity {
		if mask, _ := ex.Decide(fp(i), ts, ts); mask != 0b111 {
			t.Fatalf("exact: pair %d: mask %b", i, mask)
		}
	}
	for i := range 4 * capacity {
		if mask, _ := ex.Decide(fp(i), ts+1, ts); mask != 0 {
			t.Fatalf("exact: pair %d's repeat counts in %b", i, mask)
		}
	}
	if ex.Len() != 4*capacity {
		t.Errorf("exact: %d pairs, want %d", ex.Len(), 4*capacity)
	}
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestRepeatTableFlushLoad: a table flushed and loaded again (grown, fixed
// and spilling, and after its origin moved) holds what it held and decides
// as it would have.
func TestRepeatTableFlushLoad(t *testing.T) {
	fp := func(i int) uint64 { f, _ := pairFingerprint(nil, fmt.Sprint("u", i), fmt.Sprint("a", i%7)); return f }
	for _, fixed := range []bool{false, true} {
		t.Run(fmt.Sprint("fixed=", fixed), func(t *testing.T) {
			_, ns := openNS(t)
			tab := newRepeatPairs(DefaultWindows(), fixed, 4096)
			load := func() *repeatPairs {
				t.Helper()
				flush(t, tab, ns)
				_, meta, err := storedRepeat(ns)
				if err != nil {
					t.Fatal(err)
				}
				got := newRepeatPairs(DefaultWindows(), fixed, 4096)
				if err := got.Load(ns, meta); err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got.fps, tab.fps) || !slices.Equal(got.vals, tab.vals) || !slices.Equal(got.spill, tab.spill) ||
					!slices.Equal(got.origin, tab.origin) {
					t.Fatalf("loaded table differs: %d/%d pairs", got.Len(), tab.Len())
				}
				return got
			}
			ts := repeatT0
			for i := range 12_000 { // the fixed table spills, the other grows
				tab.Decide(fp(i), ts+int64(i), ts+int64(i))
				if i%3000 == 2999 {
					tab = load()
				}
			}
			spilled := slices.ContainsFunc(tab.spill, func(v uint32) bool { return v != 0 })
			if fixed && !spilled || !fixed && tab.groups <= 1024 {
				t.Fatalf("spilled %v, groups %d", spilled, tab.groups)
			}
			// 70 years on every window has left every record, and the
			// origins move.
			far := ts + 70*365*24*time.Hour.Milliseconds()
			wm := ts + 12_000
			if mask, _ := tab.Decide(fp(1), far, wm); mask != 0b111 {
				t.Fatalf("70 years on: mask %b", mask)
			}
			tab = load()
			if mask, _ := tab.Decide(fp(1), far+1, far); mask != 0 {
				t.Fatalf("70 years on, a repeat after a restore: mask %b", mask)
			}
			if mask, _ := tab.Decide(fp(2), far+2, far+1); mask != 0b111 {
				t.Fatalf("70 years on, another pair: mask %b", mask)
			}
		})
	}
}

// sizedWriter counts the bytes of the values written through it.
type sizedWriter struct {
	state.Writer
	bytes int
}

func (w *sizedWriter) Set(k, v []byte) error {
	w.bytes += len(k) + len(v)
	return w.Writer.Set(k, v)
}

// TestRepeatTableCompactsInParts: a table whose log passes twice its
// records is compacted over several commits, none of which carries more
// than a part of the table; after each commit a table loaded from the
// store holds what the table holds, and once the compaction is over the
// log holds about the table's records, not the history.
func TestRepeatTableCompactsInParts(t *testing.T) {
	fp := func(i int) uint64 { f, _ := pairFingerprint(nil, fmt.Sprint("u", i), fmt.Sprint("a", i%7)); return f }
	const pairs, perFlush = 20_000, 500
	_, ns := openNS(t)
	tab := newRepeatPairs(DefaultWindows(), true, pairs)
	loadEqual := func() {
		t.Helper()
		_, meta, err := storedRepeat(ns)
		if err != nil {
			t.Fatal(err)
		}
		got := newRepeatPairs(DefaultWindows(), true, pairs)
		if err := got.Load(ns, meta); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.fps, tab.fps) || !slices.Equal(got.vals, tab.vals) || !slices.Equal(got.spill, tab.spill) {
			t.Fatalf("loaded table differs: %d/%d pairs", got.Len(), tab.Len())
		}
	}
	// Each pair shares again a minute and more later: every share counts
	// in 1m (and some in 1h), so each one logs a record.
	ts := repeatT0
	compacting, compactions, largest, steady := 0, 0, 0, 0
	for i := range 400_000 {
		ts += 10
		tab.Decide(fp(i%pairs), ts, ts)
		if i%perFlush != perFlush-1 {
			continue
		}
		was := tab.compact.active
		b := ns.NewBatch()
		w := &sizedWriter{Writer: b}
		if err := tab.Flush(w); err != nil {
			t.Fatal(err)
		}
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
		largest = max(largest, w.bytes)
		if !was && !tab.compact.active {
			steady = max(steady, w.bytes)
		}
		if tab.compact.active {
			compacting++
		} else if was {
			compactions++
			if tab.logged > tab.Len()+(compacting+2)*perFlush {
				t.Fatalf("after the compaction the log holds %d records for %d pairs", tab.logged, tab.Len())
			}
			compacting = 0
		}
		if i%(20*perFlush) == 20*perFlush-1 || tab.compact.active != was {
			loadEqual()
		}
	}
	loadEqual()
	if compactions < 2 {
		t.Fatalf("%d compactions", compactions)
	}
	rec := 16 + 4*len(DefaultWindows())
	image := tab.Len() * rec
	if largest > steady+compactRecords*rec+1024 {
		t.Fatalf("a commit carried %d bytes of repeat pairs (%d without a compaction), the whole table is %d: not compacted in parts", largest, steady, image)
	}
	t.Logf("%d compactions; largest commit %d bytes (%d without a compaction), the table %d", compactions, largest, steady, image)
}
