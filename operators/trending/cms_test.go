package trending

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/operators/internal/sketch"
	"github.com/newsflow/newsflow/state"
)

// opHarness runs the tasks of an operator over records given one by one,
// with commits and crashes (what a partition applied since its last
// commit is delivered again), as the engine would.
type opHarness struct {
	t           *testing.T
	o           *Operator
	nss         []state.Namespace
	tasks       []engine.Task
	uncommitted [][]*eventlog.Record
	deadLetters int
	restarts    int
}

func newOpHarness(t *testing.T, opts OperatorOptions, parts int32) *opHarness {
	t.Helper()
	o, err := New(opts, parts, nil)
	if err != nil {
		t.Fatal(err)
	}
	db, _ := openNS(t)
	h := &opHarness{t: t, o: o, tasks: make([]engine.Task, parts), uncommitted: make([][]*eventlog.Record, parts)}
	for p := range parts {
		h.nss = append(h.nss, db.Namespace(fmt.Sprintf("trending/%d", p)))
		if err := h.start(p); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, tk := range h.tasks {
			if tk != nil {
				tk.Close()
			}
		}
	})
	return h
}

// start restores partition p from its committed state (closing its
// running task first).
func (h *opHarness) start(p int32) error {
	if h.tasks[p] != nil {
		h.tasks[p].Close()
		h.tasks[p] = nil
	}
	tk, err := h.o.NewTask(engine.TaskContext{Partition: p, Partitions: int32(len(h.tasks))})
	if err != nil {
		return err
	}
	if err := tk.Restore(h.nss[p]); err != nil {
		return err
	}
	h.tasks[p] = tk
	return nil
}

func (h *opHarness) deliver(rec *eventlog.Record) {
	h.t.Helper()
	p := eventlog.PartitionFor(rec.Key, int32(len(h.tasks)))
	h.uncommitted[p] = append(h.uncommitted[p], rec)
	var pc engine.ProcessContext
	if err := h.tasks[p].Process(&pc, rec); err != nil {
		if _, ok := engine.IsInvalid(err); !ok {
			h.t.Fatal(err)
		}
		h.deadLetters++
	}
}

func (h *opHarness) commit(p int32) {
	h.t.Helper()
	flush(h.t, h.tasks[p], h.nss[p])
	h.uncommitted[p] = h.uncommitted[p][:0]
	h.tasks[p].Committed(engine.CommitInfo{CaughtUp: true})
}

func (h *opHarness) commitAll() {
	for p := range h.tasks {
		h.commit(int32(p))
	}
}

// crash loses what partition p applied since its last commit and delivers
// it again.
func (h *opHarness) crash(p int32) {
	h.t.Helper()
	if err := h.start(p); err != nil {
		h.t.Fatal(err)
	}
	again := slices.Clone(h.uncommitted[p])
	h.uncommitted[p] = h.uncommitted[p][:0]
	for _, r := range again {
		h.deliver(r)
	}
	h.restarts++
}

// restartAll restores every partition from committed state.
func (h *opHarness) restartAll() {
	h.t.Helper()
	for p := range h.tasks {
		if err := h.start(int32(p)); err != nil {
			h.t.Fatal(err)
		}
	}
}

// run delivers recs in order, committing each partition every commitEvery
// of its records and crashing a partition at random about crashes times.
func (h *opHarness) run(recs []*eventlog.Record, commitEvery, crashes int, seed uint64) {
	h.t.Helper()
	rng := rand.New(rand.NewPCG(seed, 21))
	since := make([]int, len(h.tasks))
	for _, r := range recs {
		h.deliver(r)
		p := eventlog.PartitionFor(r.Key, int32(len(h.tasks)))
		if since[p]++; since[p] >= commitEvery {
			h.commit(p)
			since[p] = 0
		} else if crashes > 0 && rng.IntN(len(recs)/crashes) == 0 {
			h.crash(p)
		}
	}
	h.commitAll()
}

// opAnswers is what a user reads of the operator: every window's top 100
// globally and per category, and every article's shares.
type opAnswers struct {
	Top    map[string]Result
	Shares map[string]Shares
}

func answersOf(t *testing.T, o *Operator, categories, arts []string) opAnswers {
	t.Helper()
	// Top-K answers come from snapshots up to SnapshotInterval stale:
	// take fresh ones.
	for p := range o.parts {
		o.parts[p].Load().rebuild(o)
	}
	a := opAnswers{Top: map[string]Result{}, Shares: map[string]Shares{}}
	for _, w := range o.WindowNames() {
		for _, cat := range append([]string{""}, categories...) {
			res, err := o.Top(w, cat, 100)
			if err != nil {
				t.Fatal(err)
			}
			a.Top[w+"/"+cat] = res
		}
	}
	for _, id := range arts {
		sh, err := o.Shares(id)
		if err != nil {
			t.Fatal(err)
		}
		a.Shares[id] = sh
	}
	return a
}

// cmsStream is a share stream with exact counts: genExact's shares (in
// random time order over 24h, 10% repeated event ids) and, first, the
// indexed articles whose topics the shares without a category count under.
type cmsStream struct {
	recs   []*eventlog.Record
	arts   []string
	cats   []string
	global []map[string]uint64            // per window
	byCat  []map[string]map[string]uint64 // per window, category
}

func genCMSStream(n int, parts int32, seed uint64) *cmsStream {
	shares := genExact(n, 0.1, parts, seed)
	// Articles without a category in genExact (index%5 == 3) get topics:
	// science, and tech (an explicit category of others) for half.
	topicsOf := func(art string) []string {
		var a int
		fmt.Sscanf(art, "art-%d", &a)
		switch {
		case a%10 == 3:
			return []string{"science", "tech"}
		case a%10 == 8:
			return []string{"science"}
		}
		return nil
	}
	s := &cmsStream{cats: []string{"business", "science", "sports", "tech", "world"}}
	seen := map[string]bool{}
	for _, sh := range shares {
		if !seen[sh.art] {
			seen[sh.art] = true
			s.arts = append(s.arts, sh.art)
			if tps := topicsOf(sh.art); sh.cat == "" && len(tps) > 0 {
				s.recs = append(s.recs, articleRec(sh.art, sh.ts, tps...))
			}
		}
	}
	slices.Sort(s.arts)
	wm, _, _ := exactCounts(shares, parts, DefaultWindows())
	for range DefaultWindows() {
		s.global = append(s.global, map[string]uint64{})
		s.byCat = append(s.byCat, map[string]map[string]uint64{})
	}
	for _, sh := range shares {
		s.recs = append(s.recs, &eventlog.Record{Topic: shareTopic, Key: []byte(sh.art), Value: sh.line, Timestamp: sh.ts})
		if sh.dup {
			continue
		}
		cats := []string{sh.cat}
		if sh.cat == "" {
			cats = topicsOf(sh.art)
		}
		for w, spec := range DefaultWindows() {
			width := spec.Width().Milliseconds()
			if sh.ts/width < wm[sh.part]/width-int64(spec.Buckets)+1 {
				continue
			}
			s.global[w][sh.art]++
			for _, c := range cats {
				if s.byCat[w][c] == nil {
					s.byCat[w][c] = map[string]uint64{}
				}
				s.byCat[w][c][sh.art]++
			}
		}
	}
	return s
}

var shareTopic = shareRec("x", "x", "", 1).Topic

func cmsSize() int {
	if testing.Short() {
		return 30_000
	}
	return 150_000
}

// TestCMSWithinBounds: in cms mode, for a random stream (any time order,
// repeated event ids, shares counted under their articles' topics) with
// commits and crashes, every count the operator answers, per article and
// in every window's top 100 globally and per category, is at least the
// exact count and at most its error bound above it, and the top of each
// answer is the exact top.
func TestCMSWithinBounds(t *testing.T) {
	const parts = 2
	s := genCMSStream(cmsSize(), parts, 7)
	h := newOpHarness(t, OperatorOptions{Counter: CounterCMS}, parts)
	h.run(s.recs, 5000, 8, 1)
	if h.restarts == 0 {
		t.Fatal("no crash happened")
	}
	a := answersOf(t, h.o, s.cats, s.arts)
	windows := DefaultWindows()
	maxErr, maxBound := uint64(0), uint64(0)
	for _, id := range s.arts {
		sh := a.Shares[id]
		if len(sh.Bounds) != len(windows) {
			t.Fatalf("%s: bounds %v", id, sh.Bounds)
		}
		for w, spec := range windows {
			got, bound, exact := sh.Counts[spec.Name], sh.Bounds[spec.Name], s.global[w][id]
			if got < exact || got-exact > bound || bound > got {
				t.Fatalf("%s window %s: %d ± %d, exact %d", id, spec.Name, got, bound, exact)
			}
			maxErr, maxBound = max(maxErr, got-exact), max(maxBound, bound)
		}
	}
	for w, spec := range windows {
		for _, cat := range append([]string{""}, s.cats...) {
			exact := s.global[w]
			if cat != "" {
				exact = s.byCat[w][cat]
			}
			res := a.Top[spec.Name+"/"+cat]
			if len(res.Items) == 0 && len(exact) > 0 {
				t.Fatalf("window %s category %q: no items", spec.Name, cat)
			}
			for i, it := range res.Items {
				n := exact[it.ArticleID]
				if it.Rank != i+1 || it.Count < n || it.Count-n > it.Bound || it.Bound == 0 || it.Bound > it.Count {
					t.Fatalf("window %s category %q: %+v, exact %d", spec.Name, cat, it, n)
				}
			}
			// An article of the exact top 10 whose count exceeds the
			// 11th's by more than the answer's bounds is in its top 10:
			// every article below the exact top 10 is estimated lower.
			want := topOf(exact, 11)
			var bound uint64
			for _, it := range res.Items {
				bound = max(bound, it.Bound)
			}
			top10 := map[string]bool{}
			for _, it := range res.Items[:min(10, len(res.Items))] {
				top10[it.ArticleID] = true
			}
			for i, e := range want[:min(10, len(want))] {
				if (len(want) < 11 || e.Count > want[10].Count+bound) && !top10[e.ArticleID] {
					t.Fatalf("window %s category %q: exact rank %d %s (%d) not in the top 10: %+v", spec.Name, cat, i+1, e.ArticleID, e.Count, res.Items[:min(10, len(res.Items))])
				}
			}
		}
	}
	t.Logf("%d records, %d restarts, %d dead-lettered; largest error %d, largest bound %d", len(s.recs), h.restarts, h.deadLetters, maxErr, maxBound)
}

// TestCMSCloseReleases: closing a task in cms mode returns the memory of
// its sketch's counters, and a query that found the partition before
// still gets its answers.
func TestCMSCloseReleases(t *testing.T) {
	s := genCMSStream(40_000, 1, 9)
	h := newOpHarness(t, OperatorOptions{Counter: CounterCMS}, 1)
	for _, rec := range s.recs {
		h.deliver(rec)
	}
	h.commitAll()
	pt := h.o.parts[0].Load()
	before, top := pt.counts.MemoryBytes(), pt.counts.TopK(2, "", 10)
	if err := h.tasks[0].Close(); err != nil {
		t.Fatal(err)
	}
	h.tasks[0] = nil
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if after := pt.counts.MemoryBytes(); after >= before || len(top) == 0 {
		t.Fatalf("memory %d bytes after Close, %d before; top %v", after, before, top)
	}
	if got := pt.counts.TopK(2, "", 10); !reflect.DeepEqual(got, top) {
		t.Fatalf("top after Close %v, want %v", got, top)
	}
}

// TestCMSDeterministic: in cms mode, the answers after restoring every
// partition from flushed state are those before; the same input replayed
// into a fresh operator, committed at other points and with crashes, gives
// identical answers, bounds included.
func TestCMSDeterministic(t *testing.T) {
	const parts = 2
	s := genCMSStream(cmsSize()/2, parts, 8)
	first := newOpHarness(t, OperatorOptions{Counter: CounterCMS}, parts)
	first.run(s.recs, 3000, 0, 1)
	want := answersOf(t, first.o, s.cats, s.arts)
	first.restartAll()
	if got := answersOf(t, first.o, s.cats, s.arts); !reflect.DeepEqual(got, want) {
		diffAnswers(t, "after restoring from flushed state", got, want)
	}
	replay := newOpHarness(t, OperatorOptions{Counter: CounterCMS}, parts)
	replay.run(s.recs, 1777, 6, 2)
	if replay.restarts == 0 {
		t.Fatal("no crash happened")
	}
	if got := answersOf(t, replay.o, s.cats, s.arts); !reflect.DeepEqual(got, want) {
		diffAnswers(t, "replayed into a fresh operator", got, want)
	}
}

func diffAnswers(t *testing.T, what string, got, want opAnswers) {
	t.Helper()
	for k, w := range want.Top {
		if g := got.Top[k]; !reflect.DeepEqual(g, w) {
			t.Fatalf("%s: top %s differs:\ngot  %+v\nwant %+v", what, k, g.Items[:min(5, len(g.Items))], w.Items[:min(5, len(w.Items))])
		}
	}
	for id, w := range want.Shares {
		if g := got.Shares[id]; !reflect.DeepEqual(g, w) {
			t.Fatalf("%s: shares of %s: got %+v, want %+v", what, id, g, w)
		}
	}
	t.Fatalf("%s: answers differ", what)
}

// TestCounterModeStored: a task refuses state counted in the other mode,
// with an error that says how to rebuild it, whichever way the setting
// changed, and state of the exact counter written before the mode was
// stored counts as exact.
func TestCounterModeStored(t *testing.T) {
	recs := []*eventlog.Record{shareRec("e1", "a", "tech", joinT0), shareRec("e2", "b", "", joinT0+1)}
	for _, from := range []string{CounterExact, CounterCMS} {
		to := map[string]string{CounterExact: CounterCMS, CounterCMS: CounterExact}[from]
		t.Run(from+"->"+to, func(t *testing.T) {
			h := newOpHarness(t, OperatorOptions{Counter: from}, 1)
			h.run(recs, 10, 0, 1)
			if v, ok, err := h.nss[0].Get(modeKey); err != nil || !ok || string(v) != from {
				t.Fatalf("stored mode %q %v %v", v, ok, err)
			}
			// The same mode restores.
			if err := h.start(0); err != nil {
				t.Fatal(err)
			}
			o, err := New(OperatorOptions{Counter: to}, 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			h.o = o
			err = h.start(0)
			if !errors.Is(err, ErrCounterChanged) || !strings.Contains(err.Error(), "newsflow replay --operator trending --from-offset 0") ||
				!strings.Contains(err.Error(), "holds "+from+" counts and trending.counter is "+to) {
				t.Fatalf("restore %s state in %s mode: %v", from, to, err)
			}
		})
	}
	t.Run("exact state without mode", func(t *testing.T) {
		h := newOpHarness(t, OperatorOptions{}, 1)
		h.run(recs, 10, 0, 1)
		b := h.nss[0].NewBatch()
		if err := b.Delete(modeKey); err != nil {
			t.Fatal(err)
		}
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
		h.o, _ = New(OperatorOptions{Counter: CounterCMS}, 1, nil)
		if err := h.start(0); !errors.Is(err, ErrCounterChanged) {
			t.Fatalf("restore old exact state in cms mode: %v", err)
		}
		h.o, _ = New(OperatorOptions{}, 1, nil)
		if err := h.start(0); err != nil {
			t.Fatal(err)
		}
		if sh, err := h.o.Shares("a"); err != nil || sh.Counts["1h"] != 1 {
			t.Fatalf("old exact state: %+v %v", sh, err)
		}
		h.commit(0) // stores the mode
		if v, ok, _ := h.nss[0].Get(modeKey); !ok || string(v) != CounterExact {
			t.Fatalf("mode after a commit: %q", v)
		}
	})
}

// TestCounterOptions: unknown modes and invalid sketch options are
// refused; the sketch takes the operator's windows and MaxK.
func TestCounterOptions(t *testing.T) {
	for _, o := range []OperatorOptions{{Counter: "approx"}, {Counter: "CMS"}, {Counter: CounterCMS, CMS: sketch.Options{Width: 1000}},
		{Counter: CounterCMS, CMS: sketch.Options{MaxCategories: 300}}} {
		if err := o.Validate(); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
	ws := []WindowSpec{{Name: "5m", Size: 5 * time.Minute, Buckets: 5}}
	o, err := New(OperatorOptions{Counter: CounterCMS, MaxK: 7, Counts: Options{Windows: ws}}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := o.opts.CMS
	if len(c.Windows) != 1 || c.Windows[0].Name != "5m" || c.Windows[0].Buckets != 5 || c.MaxK != 7 || c.Prefix != cmsPrefix || c.MaxIDLen != 128 {
		t.Fatalf("sketch options %+v", c)
	}
	if o, _ := New(OperatorOptions{}, 1, nil); o.opts.Counter != CounterExact || !reflect.ValueOf(o.opts.CMS).IsZero() {
		t.Fatalf("exact options %+v", o.opts)
	}
}

// TestExactAnswersCarryNoBound: exact answers serialise as before, without
// error_bound or bounds.
func TestExactAnswersCarryNoBound(t *testing.T) {
	for _, mode := range []string{CounterExact, CounterCMS} {
		h := newOpHarness(t, OperatorOptions{Counter: mode}, 1)
		h.run([]*eventlog.Record{shareRec("e1", "a", "tech", joinT0)}, 10, 0, 1)
		a := answersOf(t, h.o, []string{"tech"}, []string{"a"})
		top, _ := json.Marshal(a.Top["1h/tech"])
		sh, _ := json.Marshal(a.Shares["a"])
		switch mode {
		case CounterExact:
			if string(top) != `{"window":"1h","category":"tech","items":[{"rank":1,"article_id":"a","count":1}],"as_of":1763700000000}` ||
				string(sh) != `{"article_id":"a","counts":{"1h":1,"1m":1,"24h":1},"as_of":1763700000000}` {
				t.Fatalf("exact answers: %s %s", top, sh)
			}
		case CounterCMS:
			if string(top) != `{"window":"1h","category":"tech","items":[{"rank":1,"article_id":"a","count":1,"error_bound":1}],"as_of":1763700000000}` ||
				string(sh) != `{"article_id":"a","counts":{"1h":1,"1m":1,"24h":1},"bounds":{"1h":1,"1m":1,"24h":1},"as_of":1763700000000}` {
				t.Fatalf("cms answers: %s %s", top, sh)
			}
		}
	}
}

// BenchmarkOperatorIngest measures what one trending task ingests, in
// each counter mode: shares of BenchmarkRestore's stream (every other
// share a new article, the rest Zipf-popular ones, each with a category)
// decoded, deduplicated and counted, with a Flush and Pebble commit every
// 20,000 records as the engine does. The event times rise evenly over 24h
// (12 shares a second: nearly every share moves the 1m window on a
// bucket) or at 10,000 shares a second (dense: the design's rate of a
// partition). NEWSFLOW_BENCH_INGEST_SHARES=N sets the stream's size
// (default 1,000,000).
//
// Each iteration loads the stream twice on fresh stores, with
// repeat_shares every and once, alternating which goes first, so that
// both see the same machine. Every share is another user's, so with once
// each is a new (user, article) pair: the most the pairs table does per
// share. Reported: every-shares/s and once-shares/s (medians), once/every
// (the median of the iterations' ratios), every-cpu-us/share and
// once-cpu-us/share (the process's CPU time per share, GC included,
// medians: steadier than rates on a shared machine) and once/every-cpu
// (the median ratio), every-B/share and once-B/share
// (bytes allocated per share while ingesting, medians), counts-MB (the
// counter's MemoryBytes at the end) and pairs-MB (the pairs table's, with
// once).
func BenchmarkOperatorIngest(b *testing.B) {
	n := 1_000_000
	if v := os.Getenv("NEWSFLOW_BENCH_INGEST_SHARES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatal(err)
		}
	}
	for _, sp := range []struct {
		name string
		span time.Duration
	}{{"24h", 24 * time.Hour}, {"dense", time.Duration(n/10_000) * time.Second}} {
		m := manyArticles{n: n, span: sp.span.Milliseconds(), t0: 1_780_000_000_000, parts: 1}
		var recs []*eventlog.Record
		m.records(0, func(rec *eventlog.Record) {
			r := *rec
			r.Key, r.Value = slices.Clone(rec.Key), slices.Clone(rec.Value)
			recs = append(recs, &r)
		})
		for _, mode := range []string{CounterExact, CounterCMS} {
			b.Run(sp.name+"/"+mode, func(b *testing.B) { benchIngest(b, mode, recs) })
		}
	}
}

// ingestRun is what one load of a stream measured.
type ingestRun struct {
	rate, cpu, bytesPerShare float64
	counts, pairs            int // MemoryBytes at the end
}

func benchIngest(b *testing.B, mode string, recs []*eventlog.Record) {
	var every, once []ingestRun
	var ratio, cpuRatio []float64
	for i := 0; b.Loop(); i++ {
		var e, o ingestRun
		if i%2 == 0 {
			e = ingestStream(b, OperatorOptions{Counter: mode, RepeatShares: RepeatEvery}, recs)
			o = ingestStream(b, OperatorOptions{Counter: mode, RepeatShares: RepeatOnce}, recs)
		} else {
			o = ingestStream(b, OperatorOptions{Counter: mode, RepeatShares: RepeatOnce}, recs)
			e = ingestStream(b, OperatorOptions{Counter: mode, RepeatShares: RepeatEvery}, recs)
		}
		every, once = append(every, e), append(once, o)
		ratio, cpuRatio = append(ratio, o.rate/e.rate), append(cpuRatio, o.cpu/e.cpu)
		b.Logf("every %.0f shares/s %.2f µs CPU a share, once %.0f %.2f (%.3f, CPU %.3f)", e.rate, e.cpu, o.rate, o.cpu, o.rate/e.rate, o.cpu/e.cpu)
	}
	med := func(rs []ingestRun, get func(ingestRun) float64) float64 {
		xs := make([]float64, len(rs))
		for i, r := range rs {
			xs[i] = get(r)
		}
		slices.Sort(xs)
		return xs[len(xs)/2]
	}
	rate := func(r ingestRun) float64 { return r.rate }
	alloc := func(r ingestRun) float64 { return r.bytesPerShare }
	cpu := func(r ingestRun) float64 { return r.cpu }
	slices.Sort(ratio)
	slices.Sort(cpuRatio)
	b.ReportMetric(med(every, rate), "every-shares/s")
	b.ReportMetric(med(once, rate), "once-shares/s")
	b.ReportMetric(ratio[len(ratio)/2], "once/every")
	b.ReportMetric(med(every, cpu), "every-cpu-us/share")
	b.ReportMetric(med(once, cpu), "once-cpu-us/share")
	b.ReportMetric(cpuRatio[len(cpuRatio)/2], "once/every-cpu")
	b.ReportMetric(med(every, alloc), "every-B/share")
	b.ReportMetric(med(once, alloc), "once-B/share")
	b.ReportMetric(float64(once[0].counts)/(1<<20), "counts-MB")
	b.ReportMetric(float64(once[0].pairs)/(1<<20), "pairs-MB")
}

// ingestStream loads recs into a fresh task as the engine would.
func ingestStream(b *testing.B, opts OperatorOptions, recs []*eventlog.Record) ingestRun {
	o, err := New(opts, 1, nil)
	if err != nil {
		b.Fatal(err)
	}
	db, err := state.Open(b.TempDir(), state.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ns := db.Namespace("trending/0")
	tk, err := o.NewTask(engine.TaskContext{Partition: 0, Partitions: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer tk.Close()
	if err := tk.Restore(ns); err != nil {
		b.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start, cpu0 := time.Now(), cpuTime(b)
	var pc engine.ProcessContext
	for i, rec := range recs {
		if err := tk.Process(&pc, rec); err != nil {
			b.Fatal(err)
		}
		if i%20_000 == 19_999 {
			flush(b, tk, ns)
		}
	}
	flush(b, tk, ns)
	el, cpu := time.Since(start), cpuTime(b)-cpu0
	runtime.ReadMemStats(&after)
	r := ingestRun{rate: float64(len(recs)) / el.Seconds(), cpu: float64(cpu.Microseconds()) / float64(len(recs)), bytesPerShare: float64(after.TotalAlloc-before.TotalAlloc) / float64(len(recs)),
		counts: o.parts[0].Load().counts.MemoryBytes()}
	if p := tk.(*task).pairs; p != nil {
		r.pairs = p.MemoryBytes()
	}
	return r
}
