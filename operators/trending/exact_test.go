package trending

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/state"
)

// exactShare is one generated share event.
type exactShare struct {
	line     []byte
	art, cat string
	ts       int64
	part     int32 // the trending task it belongs to
	source   int32 // the log partition a round-robin producer put it in
	dup      bool  // a repeat of an earlier event id
}

// genExact makes n share events spread over 24h of event time after t0
// (skewed over the articles), and repeats dupFrac of them with the same
// event id, timestamp and content, anywhere in the stream.
func genExact(n int, dupFrac float64, parts int32, seed uint64) []exactShare {
	rng := rand.New(rand.NewPCG(seed, 11))
	const t0 = 1_780_000_000_000
	span := (24 * time.Hour).Milliseconds()
	cats := []string{"world", "business", "tech", "", "sports"}
	out := make([]exactShare, 0, n+int(float64(n)*dupFrac))
	for i := range n {
		f := rng.Float64()
		a := int(f * f * f * 20_000)
		art := fmt.Sprintf("art-%05d", a)
		cat := cats[a%len(cats)]
		ts := t0 + rng.Int64N(span)
		line := fmt.Appendf(nil, `{"event_id":"ev-%d","article_id":"%s","user_id":"u%d-%d","category":"%s","timestamp":%d}`,
			i, art, rng.IntN(9999), i, cat, ts)
		out = append(out, exactShare{line: line, art: art, cat: cat, ts: ts,
			part: eventlog.PartitionFor([]byte(art), parts), source: int32(i % 8)})
	}
	for range int(float64(n) * dupFrac) {
		d := out[rng.IntN(n)]
		d.dup = true
		d.source = rng.Int32N(8) // a retry may land in another partition
		out = append(out, d)
	}
	return out
}

// exactCounts counts each distinct event in every window that holds its
// bucket at its partition's final watermark (the newest event time).
func exactCounts(shares []exactShare, parts int32, windows []WindowSpec) (wm []int64, global []map[string]uint64, byCat []map[string]map[string]uint64) {
	wm = make([]int64, parts)
	for _, s := range shares {
		wm[s.part] = max(wm[s.part], s.ts)
	}
	for range windows {
		global = append(global, map[string]uint64{})
		byCat = append(byCat, map[string]map[string]uint64{})
	}
	for _, s := range shares {
		if s.dup {
			continue
		}
		for w, spec := range windows {
			width := spec.Width().Milliseconds()
			if s.ts/width < wm[s.part]/width-int64(spec.Buckets)+1 {
				continue
			}
			global[w][s.art]++
			if s.cat != "" {
				if byCat[w][s.cat] == nil {
					byCat[w][s.cat] = map[string]uint64{}
				}
				byCat[w][s.cat][s.art]++
			}
		}
	}
	return wm, global, byCat
}

// Delivery orders of the same multiset of shares.
func sortedOrder(shares []exactShare) []int {
	idx := make([]int, len(shares))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(shares[a].ts, shares[b].ts) })
	return idx
}

func shuffledOrder(shares []exactShare, seed uint64) []int {
	idx := sortedOrder(shares)
	rand.New(rand.NewPCG(seed, 3)).Shuffle(len(idx), func(i, j int) { idx[i], idx[j] = idx[j], idx[i] })
	return idx
}

// burstOrder delivers each source partition in its own time order, in
// bursts of up to 5,000 records, source s running s×4 minutes behind
// source 0: what a task sees when producers are bursty or a partition is
// restored late.
func burstOrder(shares []exactShare, seed uint64) []int {
	rng := rand.New(rand.NewPCG(seed, 5))
	perSource := map[int32][]int{}
	for _, i := range sortedOrder(shares) {
		perSource[shares[i].source] = append(perSource[shares[i].source], i)
	}
	type burst struct {
		at  int64
		idx []int
	}
	var bursts []burst
	for src, idx := range perSource {
		for len(idx) > 0 {
			n := min(len(idx), 1+rng.IntN(5000))
			last := shares[idx[n-1]].ts
			bursts = append(bursts, burst{last + int64(src)*4*60_000, idx[:n]})
			idx = idx[n:]
		}
	}
	slices.SortStableFunc(bursts, func(a, b burst) int { return cmp.Compare(a.at, b.at) })
	var out []int
	for _, b := range bursts {
		out = append(out, b.idx...)
	}
	return out
}

// The same multiset of 1,000,000 shares over 24h of event time (plus 10%
// repeated event ids), delivered sorted, fully shuffled and in
// per-partition bursts minutes apart, with restarts from committed state at
// random points: every window's counts and top-K equal the exact counts at
// the final watermark, in every order.
func TestExactInAnyOrder(t *testing.T) {
	n := 1_000_000
	if testing.Short() {
		n = 100_000
	}
	const parts = 4
	opts := OperatorOptions{}
	shares := genExact(n, 0.1, parts, 1)
	windows := DefaultWindows()
	wm, global, byCat := exactCounts(shares, parts, windows)

	orders := []struct {
		name     string
		idx      []int
		restarts bool
	}{
		{"sorted", sortedOrder(shares), false},
		{"shuffled", shuffledOrder(shares, 2), true},
		{"bursts", burstOrder(shares, 3), true},
	}
	for _, ord := range orders {
		t.Run(ord.name, func(t *testing.T) {
			o, err := New(opts, parts, nil)
			if err != nil {
				t.Fatal(err)
			}
			db, _ := openNS(t)
			tasks := make([]engine.Task, parts)
			nss := make([]state.Namespace, parts)
			start := func(p int32) {
				tk, err := o.NewTask(engine.TaskContext{Partition: p, Partitions: parts})
				if err != nil {
					t.Fatal(err)
				}
				if err := tk.Restore(nss[p]); err != nil {
					t.Fatal(err)
				}
				tasks[p] = tk
			}
			// Deliveries since each partition's last commit, delivered
			// again after a crash.
			uncommitted := make([][]int, parts)
			commit := func(p int32) {
				uncommitted[p] = uncommitted[p][:0]
				flush(t, tasks[p], nss[p])
			}
			for p := range int32(parts) {
				nss[p] = db.Namespace(fmt.Sprintf("trending/%d", p))
				start(p)
			}
			rng := rand.New(rand.NewPCG(9, 9))
			var pc engine.ProcessContext
			deadLetters, restarts := 0, 0
			deliver := func(j int) {
				s := &shares[j]
				uncommitted[s.part] = append(uncommitted[s.part], j)
				err := tasks[s.part].Process(&pc, &eventlog.Record{Key: []byte(s.art), Value: s.line, Timestamp: s.ts})
				if err != nil {
					if _, ok := engine.IsInvalid(err); !ok {
						t.Fatal(err)
					}
					deadLetters++
				}
			}
			for i, j := range ord.idx {
				deliver(j)
				p := shares[j].part
				switch {
				case i%20_000 == 0:
					commit(p)
				case ord.restarts && rng.IntN(len(ord.idx)/16) == 0:
					// A crash: what was applied since the last commit is
					// lost, and delivered again from the log.
					tasks[p].Close()
					start(p)
					again := slices.Clone(uncommitted[p])
					uncommitted[p] = uncommitted[p][:0]
					for _, j := range again {
						deliver(j)
					}
					restarts++
				}
			}
			for p := range int32(parts) {
				commit(p)
			}
			if ord.restarts && restarts == 0 {
				t.Fatal("no restart happened")
			}
			checkExact(t, o, parts, wm, windows, global, byCat)
			// And after restoring every task from its committed state.
			for p := range int32(parts) {
				tasks[p].Close()
				start(p)
			}
			checkExact(t, o, parts, wm, windows, global, byCat)
			t.Logf("%d deliveries, %d restarts, %d dead-lettered as older than every window", len(ord.idx), restarts, deadLetters)
		})
	}
}

func checkExact(t *testing.T, o *Operator, parts int32, wm []int64, windows []WindowSpec, global []map[string]uint64, byCat []map[string]map[string]uint64) {
	t.Helper()
	arts := map[string]bool{}
	for _, m := range global {
		for a := range m {
			arts[a] = true
		}
	}
	wrong := 0
	for a := range arts {
		sh, err := o.Shares(a)
		if err != nil {
			t.Fatal(err)
		}
		if sh.AsOf != wm[eventlog.PartitionFor([]byte(a), parts)] {
			t.Fatalf("%s: as of %d, want the final watermark", a, sh.AsOf)
		}
		for w, spec := range windows {
			if got, want := sh.Counts[spec.Name], global[w][a]; got != want {
				if wrong++; wrong <= 5 {
					t.Errorf("%s window %s: %d, exact %d", a, spec.Name, got, want)
				}
			}
		}
	}
	if wrong > 0 {
		t.Fatalf("%d wrong counts", wrong)
	}
	// Top-K answers come from snapshots up to SnapshotInterval stale:
	// take fresh ones.
	for p := range o.parts {
		o.parts[p].Load().rebuild(o)
	}
	for w, spec := range windows {
		for _, cat := range []string{"", "tech"} {
			exact := global[w]
			if cat != "" {
				exact = byCat[w][cat]
			}
			res, err := o.Top(spec.Name, cat, 100)
			if err != nil {
				t.Fatal(err)
			}
			want := topOf(exact, 100)
			if len(res.Items) != len(want) {
				t.Fatalf("window %s category %q: %d items, want %d", spec.Name, cat, len(res.Items), len(want))
			}
			for i, it := range res.Items {
				if it.ArticleID != want[i].ArticleID || it.Count != want[i].Count {
					t.Fatalf("window %s category %q rank %d: %s %d, exact %s %d", spec.Name, cat, i+1, it.ArticleID, it.Count, want[i].ArticleID, want[i].Count)
				}
			}
		}
	}
}
