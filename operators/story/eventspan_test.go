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
