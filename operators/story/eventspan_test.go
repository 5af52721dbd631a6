package story

import (
	"cmp"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/newsflow/newsflow/internal/feed"
	"github.com/newsflow/newsflow/internal/text"
)

// spanItem is an orx365 item with its original first-seen time.
type spanItem struct {
	labelled
	seen int64 // ms
}

// loadSpanStream reads orx365 alone in first-seen order, titles and
// cleaned descriptions as the live pipeline takes them.
func loadSpanStream(t testing.TB) []spanItem {
	t.Helper()
	var out []spanItem
	readJSONLines(t, filepath.Join(sharedData, "..", "streams", "orx365_items.jsonl"), func(r struct {
		Title, Description string
		FirstSeen          int64 `json:"first_seen_ts"`
	}) {
		out = append(out, spanItem{
			labelled: labelled{ID: fmt.Sprint("orx-", len(out)), Title: text.Clean(r.Title, feed.MaxTitleBytes), Body: text.Clean(r.Description, feed.MaxSummaryBytes)},
			seen:     r.FirstSeen * 1000,
		})
	})
	slices.SortStableFunc(out, func(a, b spanItem) int { return cmp.Compare(a.seen, b.seen) })
	return out
}

// eventSpan replays items with time compressed to perMinute articles a
// minute (at their own first-seen times when perMinute is 0) and returns the share of articles in a story whose members'
// original first-seen times span more than maxSpan, and the largest story.
func eventSpan(t testing.TB, opts Options, items []spanItem, perMinute int, maxSpan time.Duration) (wide float64, largest int) {
	t.Helper()
	docs := make([]labelled, len(items))
	seen := make(map[string]int64, len(items))
	t0 := items[0].seen
	for i, it := range items {
		d := it.labelled
		d.Time = it.seen
		if perMinute > 0 {
			d.Time = t0 + int64(i)*int64(time.Minute/time.Millisecond)/int64(perMinute)
		}
		docs[i] = d
		seen[d.ID] = it.seen
	}
	pred := buildStories(t, opts, docs)
	type span struct {
		lo, hi int64
		n      int
	}
	spans := map[string]*span{}
	for id, s := range pred {
		sp := spans[s]
		if sp == nil {
			sp = &span{lo: seen[id], hi: seen[id]}
			spans[s] = sp
		}
		sp.lo, sp.hi, sp.n = min(sp.lo, seen[id]), max(sp.hi, seen[id]), sp.n+1
	}
	n := 0
	for _, sp := range spans {
		largest = max(largest, sp.n)
		if time.Duration(sp.hi-sp.lo)*time.Millisecond > maxSpan {
			n += sp.n
		}
	}
	return float64(n) / float64(len(items)), largest
}

// TestStoriesAreEventsInTime replays orx365 alone, ten months of five
// outlets, compressed to 10, 100 and 1,000 articles a minute: a story is
// one event, so few articles should sit in a story whose members were
// first seen more than 7 days apart (the target is at most 15%). The
// ceilings are the figures measured when the test was written, so that
// the stage does not get worse while the target is not met.
func TestStoriesAreEventsInTime(t *testing.T) {
	items := loadSpanStream(t)
	m, err := LoadModel("builtin")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		opts    Options
		ceiling map[int]float64
	}{
		// Measured: 57.4%, 70.3%, 72.7% (largest 330, 387, 593).
		{"thresholds", Options{}, map[int]float64{10: 0.60, 100: 0.73, 1000: 0.76}},
		// Measured: 73.7%, 87.4%, 88.8% (largest 419, 341, 494).
		{"builtin model", Options{Cluster: ClusterOptions{Model: m}}, map[int]float64{10: 0.77, 100: 0.90, 1000: 0.91}},
	} {
		for _, rate := range []int{10, 100, 1000} {
			wide, largest := eventSpan(t, c.opts, items, rate, 7*24*time.Hour)
			t.Logf("%s, %4d articles/min: %.1f%% of %d articles in a story spanning more than 7 days of first-seen time; largest story %d",
				c.name, rate, 100*wide, len(items), largest)
			if wide > c.ceiling[rate] {
				t.Errorf("%s at %d a minute: %.1f%% in stories spanning more than 7 days, ceiling %.0f%% (target 15%%)", c.name, rate, 100*wide, 100*c.ceiling[rate])
			}
		}
	}
}

// TestStoriesAreEventsInRealTime replays orx365 at its own first-seen
// times, ten months as they happened: a story closes when its event stops
// being reported, so no story should span more than 7 days (measured: 0 of
// 10,851 articles with the thresholds and with the builtin model; largest
// stories 19 and 33). What the compressed replays above measure is therefore
// how well the text alone keeps one subject's events apart; real time
// already does it.
func TestStoriesAreEventsInRealTime(t *testing.T) {
	items := loadSpanStream(t)
	m, err := LoadModel("builtin")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		opts Options
	}{{"thresholds", Options{}}, {"builtin model", Options{Cluster: ClusterOptions{Model: m}}}} {
		wide, largest := eventSpan(t, c.opts, items, 0, 7*24*time.Hour)
		t.Logf("%s, first-seen times: %.2f%% of %d articles in a story spanning more than 7 days; largest story %d", c.name, 100*wide, len(items), largest)
		if wide > 0.01 || largest > 40 {
			t.Errorf("%s at first-seen times: %.2f%% in stories spanning more than 7 days (at most 1%%), largest story %d (at most 40)", c.name, 100*wide, largest)
		}
	}
}

// TestEventSpanTradesRecall shows why the compressed target (at most 15%
// of orx365 in stories spanning more than 7 days at 100 articles a minute)
// is not met together with uci_dev's: with the time axis squeezed, the
// text is all the stage has to tell one subject's events apart, and the
// only way it keeps ten months of a subject in separate stories is to join
// less, which splits uci_dev's real events as well. Across the stage's join
// threshold, every setting that brings the span under 15% leaves uci_dev
// (merged labels, times spread over 12 h) at B-cubed F1 below 0.70, against
// a target of 0.88 and 0.80 with the default threshold. The test fails if a
// setting ever reaches both, which would make the span target reachable.
// Measured: threshold 0.1: F1 0.803, 70.3% wide; 0.3: 0.650, 22.4%; 0.4:
// 0.624, 10.3%; 0.5: 0.550, 4.7%.
func TestEventSpanTradesRecall(t *testing.T) {
	items := loadSpanStream(t)
	var uci []labelled
	for _, d := range uciLabelled(t) {
		uci = append(uci, labelled{ID: d.ID, Title: d.Title, Body: d.Body, Time: d.Time, Story: d.Story})
	}
	met := 0
	for _, th := range []float64{0.1, 0.3, 0.4, 0.5} {
		opts := Options{Cluster: ClusterOptions{Threshold: th}}
		s := scoreBuilder(t, opts, uci, truthOf(uci))
		wide, largest := eventSpan(t, opts, items, 100, 7*24*time.Hour)
		t.Logf("join threshold %.1f: uci_dev B-cubed P %.3f R %.3f F1 %.3f; orx365 at 100 a minute %.1f%% wide, largest story %d", th, s.BCubedP, s.BCubedR, s.BCubedF1, 100*wide, largest)
		if wide <= 0.15 {
			met++
			if s.BCubedF1 >= 0.70 {
				t.Errorf("threshold %.1f keeps the span at %.1f%% with uci_dev F1 %.3f: the trade no longer holds, raise the span test's expectations", th, 100*wide, s.BCubedF1)
			}
		}
	}
	if met == 0 {
		t.Error("no threshold brought the span under 15%: the sweep shows no trade")
	}
}
