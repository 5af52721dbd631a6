package trending

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// topicShare is a share counted globally under no category (Add) and in
// its article's topics (AddToCategory), the topics maybe later.
type topicShare struct {
	art    string
	topics []string
	ts     int64
}

// topicStream turns s into a stream where most shares without a category
// count under one to three topics of their article (fixed per article).
func topicStream(s *stream, rng *rand.Rand) func() (art, cat string, ts int64, topics []string) {
	return func() (string, string, int64, []string) {
		a, cat, ts := s.next()
		if cat != "" || rng.IntN(5) == 0 {
			return a, cat, ts, nil
		}
		i := slices.Index(s.arts, a)
		var topics []string
		for j := range 1 + i%3 {
			topics = append(topics, s.cats[(i+j)%len(s.cats)])
		}
		return a, "", ts, topics
	}
}

// TestAddToCategoryMatchesReference: shares counted under their article's
// topics, some of them only later (as a share waits for its article),
// count once globally and once in each topic; flushes, loads and crashes
// change nothing, and neither does when the topics were added.
func TestAddToCategoryMatchesReference(t *testing.T) {
	for name, opts := range testOptions {
		for seed := range uint64(2) {
			t.Run(fmt.Sprintf("%s/seed=%d", name, seed), func(t *testing.T) {
				s := streamFor(name, seed+200)
				next := topicStream(s, rand.New(rand.NewPCG(seed, 11)))
				rng := rand.New(rand.NewPCG(seed, 13))
				d := newDurable(t, opts, s, rand.New(rand.NewPCG(seed, 17)))
				now, r := NewCounts(opts), newRef(opts)
				step := func(o countOp) {
					if want := r.apply(o.art, o.cat, o.ts, o.only); d.apply(o) != want {
						t.Fatalf("%+v disagrees with the reference", o)
					}
				}
				var later []topicShare
				steps, onlyCounted := 3000, 0
				if testing.Short() {
					steps = 1500
				}
				for i := range steps {
					a, cat, ts, topics := next()
					step(countOp{a, cat, ts, false})
					if !now.Add(a, cat, ts) && len(topics) > 0 {
						t.Fatalf("step %d: share older than every window", i)
					}
					for _, tp := range topics {
						now.AddToCategory(a, tp, ts)
					}
					if len(topics) > 0 && rng.IntN(3) == 0 {
						later = append(later, topicShare{a, topics, ts})
					} else {
						for _, tp := range topics {
							step(countOp{a, tp, ts, true})
						}
					}
					// The topics of waiting shares arrive in bursts.
					if rng.IntN(50) == 0 {
						for _, ls := range later {
							for _, tp := range ls.topics {
								step(countOp{ls.art, tp, ls.ts, true})
								onlyCounted++
							}
						}
						later = later[:0]
					}
					if i%150 == 0 {
						checkAgainstRef(t, d.cur, r, s)
					}
				}
				for _, ls := range later {
					for _, tp := range ls.topics {
						step(countOp{ls.art, tp, ls.ts, true})
					}
				}
				final := d.final()
				checkAgainstRef(t, final, r, s)
				// Topics added at once or later end in the same counts.
				sameState(t, final, now, s)
				if d.restarts == 0 || onlyCounted == 0 {
					t.Errorf("%d restarts, %d topics added later", d.restarts, onlyCounted)
				}
			})
		}
	}
}

// TestAddToCategoryBasics: a share with two topics counts once globally
// and once in each topic, and both expire together.
func TestAddToCategoryBasics(t *testing.T) {
	c := NewCounts(Options{})
	const t0 = 1_000_000_000
	if c.AddToCategory("a", "", t0) || c.Add("a", "\x00x", t0) || c.AddToCategory("a", "\x00x", t0) {
		t.Fatal("category \"\" or one starting with NUL accepted")
	}
	c.Add("a", "", t0)
	c.AddToCategory("a", "science", t0)
	c.AddToCategory("a", "tech", t0)
	c.Add("a", "science", t0+1) // an explicit category still counts globally
	for w := range c.nw {
		if got := c.Count(w, "a"); got != 2 {
			t.Errorf("window %d: global %d, want 2", w, got)
		}
		if s, tc := c.CategoryCount(w, "science", "a"), c.CategoryCount(w, "tech", "a"); s != 2 || tc != 1 {
			t.Errorf("window %d: science %d, tech %d; want 2, 1", w, s, tc)
		}
	}
	if got := c.Categories(); !slices.Equal(got, []string{"science", "tech"}) {
		t.Errorf("categories %v", got)
	}
	if err := c.checkInvariants(); err != nil {
		t.Fatal(err)
	}
	c.Add("z", "", t0+25*3600*1000)
	if c.ids.n != 1 || len(c.catIdx) != 1 || c.CategoryCount(2, "tech", "a") != 0 {
		t.Fatalf("after expiry: %d ids, %d categories", c.ids.n, len(c.catIdx))
	}
	if err := c.checkInvariants(); err != nil {
		t.Fatal(err)
	}
}
