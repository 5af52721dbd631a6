package story

import (
	"fmt"
	"testing"
	"time"

	"github.com/newsflow/newsflow/state"
	"github.com/newsflow/newsflow/state/statetest"
)

// builderFlusher commits a builder's changes with statetest.Commit; r
// reads the namespace they are committed to.
type builderFlusher struct {
	*Builder
	r state.Reader
}

func (f builderFlusher) Flush(w state.Writer) error { return f.Persist(w, f.r) }

// TestLongRunStateFlat feeds a steady stream over seven days of event time
// through a builder whose stories stay open for 2h without a new article
// (the default is 72h; 2h makes a day 12 windows long). Each day the UCI
// headlines arrive again (the same events, squeezed into the day) among a
// seventh of the orx365 items, so that each day brings words no day before
// it had. The clustering state (the clusterer's vocabulary, document
// frequencies and open centroids, and the window index) must be as large
// after seven days as after one, within 10%: the vocabulary covers the
// last two windows only. The stories of each day must be as good as those
// of the first.
func TestLongRunStateFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("seven days of articles: skipped with -short")
	}
	docs := loadLabelled(t, "uci_dev.ndjson")
	extra := loadDistractors(t)
	const days = 7
	opts := Options{Cluster: ClusterOptions{Window: 2 * time.Hour}}
	b, err := NewBuilder(opts)
	if err != nil {
		t.Fatal(err)
	}
	ns := statetest.Open(t).Namespace("stories/0")
	working := func() (bytes int) {
		for _, prefix := range []string{"c", "w"} {
			err := ns.Scan([]byte(prefix), state.PrefixEnd([]byte(prefix)), func(k, v []byte) error {
				bytes += len(k) + len(v)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		if testing.Verbose() {
			kinds := map[string]int{}
			_ = ns.Scan(nil, nil, func(k, v []byte) error {
				n := min(len(k), 2)
				if k[0] != 'c' {
					n = 1
				}
				kinds[string(k[:n])] += len(k) + len(v)
				return nil
			})
			t.Logf("%v", kinds)
		}
		return bytes
	}
	var sizes, terms []int
	var f1 []float64
	for d := range days {
		stream, truth := dayStream(docs, extra, d, days)
		pred := map[string]string{}
		for i, x := range byTime(stream) {
			r, err := b.Apply(Article{ID: x.ID, Title: x.Title, Summary: x.Body, Published: x.Time, SourceID: "s"})
			if err != nil {
				t.Fatal(err)
			}
			pred[x.ID] = r.Story
			if i%500 == 499 {
				statetest.Commit(t, builderFlusher{b, ns}, ns)
			}
		}
		statetest.Commit(t, builderFlusher{b, ns}, ns)
		for id, s := range pred {
			pred[id] = b.Current(s)
		}
		s := Score(truth, pred)
		sizes, terms, f1 = append(sizes, working()), append(terms, b.c.Terms()), append(f1, s.BCubedF1)
		t.Logf("day %d: clustering state %d KB, %d terms, %d open stories; UCI stories B-cubed P %.3f R %.3f F1 %.3f",
			d+1, sizes[d]/1000, terms[d], b.c.Open(), s.BCubedP, s.BCubedR, s.BCubedF1)
	}
	if r := float64(sizes[days-1]) / float64(sizes[0]); r > 1.1 {
		t.Errorf("clustering state after %d days is %.2f× that after one (%d vs %d bytes)", days, r, sizes[days-1], sizes[0])
	}
	if r := float64(terms[days-1]) / float64(terms[0]); r > 1.1 {
		t.Errorf("vocabulary after %d days is %.2f× that after one (%d vs %d terms)", days, r, terms[days-1], terms[0])
	}
	for d := 1; d < days; d++ {
		if f1[d] < f1[0]-0.02 {
			t.Errorf("day %d: B-cubed F1 %.3f, below the first day's %.3f", d+1, f1[d], f1[0])
		}
	}
	// A builder restored from the state continues with the same
	// vocabulary.
	r, err := RestoreBuilder(opts, ns)
	if err != nil {
		t.Fatal(err)
	}
	if r.c.Terms() != b.c.Terms() || r.c.Open() != b.c.Open() {
		t.Fatalf("restored: %d terms, %d open stories; want %d, %d", r.c.Terms(), r.c.Open(), b.c.Terms(), b.c.Open())
	}
}

// dayStream is day d of a run of days: the UCI headlines docs squeezed into
// the day (ids and stories prefixed with the day) among the day's share of
// the orx365 items extra, in time order, and the true story of each
// headline.
func dayStream(docs, extra []labelled, d, days int) ([]labelled, map[string]string) {
	day := (24 * time.Hour).Milliseconds()
	lo, hi := docs[0].Time, docs[0].Time
	for _, x := range docs {
		lo, hi = min(lo, x.Time), max(hi, x.Time)
	}
	t0 := lo + int64(d)*day
	var stream []labelled
	truth := map[string]string{}
	for _, x := range docs {
		x.ID, x.Story = fmt.Sprint(d, ":", x.ID), fmt.Sprint(d, ":", x.Story)
		x.Time = t0 + (x.Time-lo)*(day-1)/max(hi-lo, 1)
		truth[x.ID] = x.Story
		stream = append(stream, x)
	}
	perDay := len(extra) / days
	for i, x := range extra[d*perDay : (d+1)*perDay] {
		x.ID = fmt.Sprint(d, ":", x.ID)
		x.Time = t0 + day*int64(i)/int64(perDay)
		stream = append(stream, x)
	}
	return byTime(stream), truth
}
