package rank

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

const hour = int64(time.Hour / time.Millisecond)

func cand(id, src, topic string, age float64) Candidate {
	return Candidate{StoryID: id, SourceID: src, Sources: []string{src}, Topics: []Topic{{topic, 1}},
		Authority: 0.5, LastSeen: -int64(age * float64(hour)), Lambda: 0.1}
}

func ids(items []Item) []string {
	var out []string
	for _, it := range items {
		out = append(out, it.StoryID)
	}
	return out
}

func TestExcludedAndCappedSources(t *testing.T) {
	var cands []Candidate
	for i := range 10 {
		c := cand(fmt.Sprint("big", i), "big", fmt.Sprint("t", i), 0)
		c.Authority = 1 // reported by big alone, so the cap holds it back
		cands = append(cands, c)
	}
	for i := range 30 {
		cands = append(cands, cand(fmt.Sprint("s", i), fmt.Sprint("src", i%15), fmt.Sprint("t", i%7), 1))
	}
	cands = append(cands, cand("spam", "spammer", "t1", 0))
	items := Rank(cands, &Reader{Excluded: map[string]bool{"spammer": true}}, 0, Options{})
	if len(items) != 40 || slices.Contains(ids(items), "spam") {
		t.Fatalf("%d items, excluded source present: %v", len(items), slices.Contains(ids(items), "spam"))
	}
	per := map[string]int{}
	for _, it := range items[:20] {
		per[it.SourceID]++
	}
	for src, n := range per {
		if n > 2 {
			t.Errorf("%d stories of %s in the top 20", n, src)
		}
	}
	if items[0].SourceID != "big" {
		t.Errorf("best story from %s, want the big source", items[0].SourceID)
	}
	// Held-back stories come right after the top 20, before weaker ones.
	if items[20].SourceID != "big" {
		t.Errorf("item 21 from %s, want a held-back big story", items[20].SourceID)
	}
}

// TestCapShowsAnotherSource: when the outlet with the highest authority is
// the representative of most stories, the cap shows those stories through
// their other outlets instead of filling the top with one name, and every
// story stays in the top.
func TestCapShowsAnotherSource(t *testing.T) {
	var cands []Candidate
	for i := range 15 {
		c := cand(fmt.Sprint("big", i), "big", fmt.Sprint("t", i), 0)
		c.Sources = []string{"big", fmt.Sprint("o", i%6), fmt.Sprint("p", i%4)}
		c.Authority = 1
		cands = append(cands, c)
	}
	for i := range 10 {
		cands = append(cands, cand(fmt.Sprint("s", i), fmt.Sprint("src", i), fmt.Sprint("t", i), 1))
	}
	items := Rank(cands, nil, 0, Options{})
	per := map[string]int{}
	bigs := 0
	for _, it := range items[:20] {
		per[it.ShownSource()]++
		if strings.HasPrefix(it.StoryID, "big") {
			bigs++
			if it.Shown != "" && !slices.Contains(it.Sources, it.Shown) {
				t.Errorf("%s shown by %s, not one of its sources %v", it.StoryID, it.Shown, it.Sources)
			}
		} else if it.Shown != "" {
			t.Errorf("%s from a single source shown by %s", it.StoryID, it.Shown)
		}
	}
	for src, n := range per {
		if n > 2 {
			t.Errorf("%d cards of %s in the top 20: %v", n, src, per)
		}
	}
	// Held back by the cap, only 2 of them would be in the top 20 (MMR
	// still spreads stories that share a representative).
	if per["big"] != 2 || bigs < 8 {
		t.Errorf("top 20 holds %d of the 15 best stories, %d shown by big (want at least 8, and 2)", bigs, per["big"])
	}
}

func TestPersonalSignals(t *testing.T) {
	cands := []Candidate{cand("sport", "x", "sports", 1), cand("biz", "y", "business", 1), cand("old", "z", "sports", 30)}
	anon := Rank(cands, nil, 0, Options{Lambda: 1})
	fan := Rank(cands, &Reader{Interest: map[string]float64{"sports": 0.3, "business": 0.01}}, 0, Options{Lambda: 1})
	if fan[0].StoryID != "sport" || fan[0].Explain.Relevance <= anon[0].Explain.Relevance {
		t.Errorf("sports fan ranking %v (relevance %v)", ids(fan), fan[0].Explain.Relevance)
	}
	investor := Rank(cands, &Reader{Topics: []string{"business"}}, 0, Options{Lambda: 1})
	if investor[0].StoryID != "biz" {
		t.Errorf("a reader preferring business gets %v", ids(investor))
	}
	if slices.Index(ids(fan), "old") < slices.Index(ids(fan), "sport") || fan[slices.Index(ids(fan), "old")].Explain.Freshness >= fan[0].Explain.Freshness {
		t.Errorf("a 30-hour-old story above a fresh one of the same topic: %v", ids(fan))
	}
	read := Rank(cands, &Reader{Interest: map[string]float64{"sports": 1}, Read: map[string]bool{"sport": true}}, 0, Options{Lambda: 1})
	if read[len(read)-1].StoryID != "sport" || read[len(read)-1].Explain.Multiplier != 0.1 {
		t.Errorf("a read story is not pushed down: %v", ids(read))
	}
	cands[1].Breaking = true
	boosted := Rank(cands, &Reader{Preferred: map[string]bool{"y": true}}, 0, Options{Lambda: 1})
	if boosted[0].StoryID != "biz" || boosted[0].Explain.Multiplier != 1.3*1.2 {
		t.Errorf("breaking story from a preferred source: %v multiplier %v", ids(boosted), boosted[0].Explain.Multiplier)
	}
}

func TestMMRSpreadsTopics(t *testing.T) {
	cands := []Candidate{cand("a1", "x", "world", 0), cand("a2", "y", "world", 0.01), cand("b1", "z", "science", 0.5)}
	cands[0].Authority, cands[1].Authority = 1, 1
	byScore := Rank(cands, nil, 0, Options{Lambda: 1})
	mmr := Rank(cands, nil, 0, Options{Lambda: 0.7})
	if !slices.Equal(ids(byScore), []string{"a1", "a2", "b1"}) {
		t.Fatalf("by score: %v, want a1 a2 b1", ids(byScore))
	}
	if mmr[1].StoryID != "b1" {
		t.Errorf("MMR order %v: the second story should change topic", ids(mmr))
	}
	// Deterministic.
	for range 5 {
		if again := Rank(cands, nil, 0, Options{}); !slices.Equal(ids(again), ids(mmr)) {
			t.Fatalf("order changed: %v, then %v", ids(mmr), ids(again))
		}
	}
	if err := (Options{Lambda: 2}).Validate(); err == nil {
		t.Error("lambda 2 accepted")
	}
}

func BenchmarkRank20k(b *testing.B) {
	var cands []Candidate
	topics := []string{"world", "politics", "business", "technology", "science", "health", "sports", "entertainment"}
	for i := range 20000 {
		c := cand(fmt.Sprint("s", i), fmt.Sprint("src", i%500), topics[i%8], float64(i%48))
		c.Topics = append(c.Topics, Topic{topics[(i/8)%8], 0.5})
		cands = append(cands, c)
	}
	r := &Reader{Interest: map[string]float64{"sports": 0.4, "science": 0.2}, Read: map[string]bool{"s5": true}}
	for b.Loop() {
		Rank(cands, r, 0, Options{})
	}
}
