package trending

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// sourceStreams are per-source share sequences, each in its own (jittered)
// time order, with source i running lag[i] behind source 0.
type sourceStreams [][]srcShare

type srcShare struct {
	art, cat string
	ts       int64
}

func genSources(seed uint64, sources, perSource int, lag []time.Duration) sourceStreams {
	rng := rand.New(rand.NewPCG(seed, 99))
	t0 := int64(1_800_000_000_000)
	out := make(sourceStreams, sources)
	for s := range sources {
		ts := t0 - lag[s].Milliseconds()
		for range perSource {
			ts += rng.Int64N(400)
			a := rng.IntN(40)
			if rng.IntN(4) == 0 {
				a = rng.IntN(400) // a long tail
			}
			cat := []string{"", "x", "y", "z"}[a%4]
			jitter := rng.Int64N(90_000)
			if rng.IntN(200) == 0 {
				jitter = 10 * 60_000 // out of order within its own source
			}
			out[s] = append(out[s], srcShare{fmt.Sprintf("a%03d", a), cat, ts - jitter})
		}
	}
	return out
}

// interleave merges the sources in a random order that keeps each source's
// own order.
func (ss sourceStreams) interleave(seed uint64) []struct {
	src int32
	sh  srcShare
} {
	rng := rand.New(rand.NewPCG(seed, 7))
	pos := make([]int, len(ss))
	var out []struct {
		src int32
		sh  srcShare
	}
	for {
		var live []int
		for s := range ss {
			if pos[s] < len(ss[s]) {
				live = append(live, s)
			}
		}
		if len(live) == 0 {
			return out
		}
		s := live[rng.IntN(len(live))]
		// Runs of one source, so that sources drift far apart.
		for n := 1 + rng.IntN(300); n > 0 && pos[s] < len(ss[s]); n-- {
			out = append(out, struct {
				src int32
				sh  srcShare
			}{int32(s), ss[s][pos[s]]})
			pos[s]++
		}
	}
}

// Sources minutes apart: every share inside a window counts, every window
// matches the reference, and a flush/load at random points changes nothing.
func TestMultiSourceMatchesReference(t *testing.T) {
	opts := Options{}
	lag := []time.Duration{0, 12 * time.Minute, 40 * time.Minute}
	ss := genSources(1, 3, 4000, lag)
	_, ns := openNS(t)
	c, r := NewCounts(opts), newRef(opts)
	rng := rand.New(rand.NewPCG(3, 4))
	reopened := 0
	for i, e := range ss.interleave(2) {
		wasClosed := false
		for w := range c.win {
			win := &c.win[w]
			b := e.sh.ts / win.width
			if sl := win.slot(b); sl.n > 0 && sl.id == b && !sl.open {
				wasClosed = true
			}
		}
		got, want := c.Add(e.sh.art, e.sh.cat, e.sh.ts), r.add(e.sh.art, e.sh.cat, e.sh.ts)
		if got != want || !got {
			t.Fatalf("step %d: Add(%+v) from source %d = %v, want %v (every share is within the 24h window)", i, e.sh, e.src, got, want)
		}
		if wasClosed {
			reopened++
		}
		if rng.IntN(500) == 0 {
			flush(t, c, ns)
			c = NewCounts(opts)
			if err := c.Load(ns); err != nil {
				t.Fatal(err)
			}
		}
		if i%101 == 0 {
			for w := range c.win {
				for _, cat := range []string{"", "x", "y"} {
					if got, want := c.TopK(w, cat, 20), topOf(r.counts(w, cat), 20); !slices.Equal(got, want) {
						t.Fatalf("step %d window %d category %q: TopK %v, want %v", i, w, cat, got, want)
					}
				}
			}
		}
	}
	if reopened == 0 {
		t.Fatal("stream exercised too little: no writes to compacted buckets")
	}
	t.Logf("%d writes to compacted buckets", reopened)
}

// Once every share is in, the counts do not depend on how the sources were
// interleaved: a replay that reads them in another order ends in the same
// state.
func TestMultiSourceOrderIndependent(t *testing.T) {
	lag := []time.Duration{0, 3 * time.Minute, 25 * time.Minute, 70 * time.Minute}
	ss := genSources(5, 4, 3000, lag)
	final := func(seed uint64) *Counts {
		c := NewCounts(Options{})
		for _, e := range ss.interleave(seed) {
			c.Add(e.sh.art, e.sh.cat, e.sh.ts)
		}
		return c
	}
	a, b := final(1), final(2)
	for w := range a.win {
		for _, cat := range []string{"", "x", "y", "z"} {
			if ta, tb := a.TopK(w, cat, 500), b.TopK(w, cat, 500); !slices.Equal(ta, tb) {
				t.Fatalf("window %d category %q differs between interleavings:\n%v\n%v", w, cat, ta, tb)
			}
		}
	}
}
