package story

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"testing"
	"time"

	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/operators/search"
	"github.com/newsflow/newsflow/operators/search/searchtest"
	"github.com/newsflow/newsflow/operators/searchindex"
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

// TestLongRunRetentionFlat runs fourteen days of the long-run stream (see
// TestLongRunStateFlat) with stories closing 2h after their latest
// article and a retention of two days, through the story builder and,
// for the articles it takes, a search operator of 4 partitions. Once the
// stream is longer than the retention age, the story stage's whole state
// (every key and value) and the search index's document count must stay
// flat: within 10% of what they were one retention age (two days)
// before. Nothing younger than the retention age may be deleted: every
// article within it keeps its record and its search document. A builder
// restored after every commit must leave exactly the state of the one
// that ran without interruption.
func TestLongRunRetentionFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("fourteen days of articles: skipped with -short")
	}
	docs := loadLabelled(t, "uci_dev.ndjson")
	extra := loadDistractors(t)
	const days = 14
	retention := 48 * time.Hour
	opts := Options{Cluster: ClusterOptions{Window: 2 * time.Hour}, Retention: retention}
	db := statetest.Open(t)
	ns, rns := db.Namespace("stories/0"), db.Namespace("restored/0")
	b, err := RestoreBuilder(opts, ns)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := RestoreBuilder(opts, rns)
	if err != nil {
		t.Fatal(err)
	}
	ix := newSearchRun(t, db, retention)
	commit := func() {
		statetest.Commit(t, builderFlusher{b, ns}, ns)
		statetest.Commit(t, builderFlusher{rb, rns}, rns)
		if rb, err = RestoreBuilder(opts, rns); err != nil {
			t.Fatal(err)
		}
		ix.Commit()
	}
	type applied struct {
		id string
		t  int64
	}
	var kept []applied // the articles taken, in order
	var sizes []int
	var counts []uint64
	for d := range days {
		stream, _ := dayStream(docs, extra, d, days)
		for i, x := range stream {
			a := Article{ID: x.ID, Title: x.Title, Summary: x.Body, Published: x.Time, SourceID: "s"}
			_, err := b.Apply(a)
			_, rerr := rb.Apply(a)
			if (err == nil) != (rerr == nil) {
				t.Fatalf("day %d, article %s: %v uninterrupted, %v restored", d+1, x.ID, err, rerr)
			}
			if err != nil {
				t.Fatalf("day %d, article %s: %v", d+1, x.ID, err) // the stream is in time order
			}
			r, _ := b.StoryOf(a.ID)
			ix.index(a, r.ID)
			kept = append(kept, applied{a.ID, a.Published})
			if i%500 == 499 {
				commit()
			}
		}
		commit()
		size := 0
		if err := ns.Scan(nil, nil, func(k, v []byte) error { size += len(k) + len(v); return nil }); err != nil {
			t.Fatal(err)
		}
		sizes, counts = append(sizes, size), append(counts, ix.Count())
		t.Logf("day %d: story state %d KB, search index %d documents", d+1, size/1000, counts[d])
		// Nothing younger than the retention age is deleted.
		cut := b.wm - retention.Milliseconds()
		young := uint64(0)
		for i := len(kept) - 1; i >= 0 && kept[i].t >= cut; i-- {
			young++
			if _, ok, err := ns.Get(articleKey(kept[i].id)); err != nil || !ok {
				t.Fatalf("day %d: article %s (%s before the newest) deleted", d+1, kept[i].id, time.Duration(b.wm-kept[i].t)*time.Millisecond)
			}
		}
		if n := ix.younger(t, cut); n != young {
			t.Errorf("day %d: search finds %d documents within the retention age, want %d", d+1, n, young)
		}
		if err := ns.Scan([]byte("s"), []byte("t"), func(k, v []byte) error {
			var rec storyRecord
			if err := json.Unmarshal(v, &rec); err != nil {
				return err
			}
			if rec.MergedInto == "" && rec.LastSeen < cut {
				return fmt.Errorf("story %s (latest article %s before the newest) kept", rec.ID, time.Duration(b.wm-rec.LastSeen)*time.Millisecond)
			}
			return nil
		}); err != nil {
			t.Fatalf("day %d: %v", d+1, err)
		}
	}
	for d := 4; d < days; d++ {
		if r := float64(sizes[d]) / float64(sizes[d-2]); r > 1.1 || r < 0.9 {
			t.Errorf("day %d: story state %.2f× that of day %d (%d vs %d bytes)", d+1, r, d-1, sizes[d], sizes[d-2])
		}
		if r := float64(counts[d]) / float64(counts[d-2]); r > 1.1 || r < 0.9 {
			t.Errorf("day %d: %.2f× the search documents of day %d (%d vs %d)", d+1, r, d-1, counts[d], counts[d-2])
		}
	}
	if len(b.redirect) > 2*len(b.stories)+1000 {
		t.Errorf("%d merge redirects in memory for %d open stories", len(b.redirect), len(b.stories))
	}
	if got, want := dump(t, rns), dump(t, ns); !maps.Equal(got, want) {
		t.Errorf("restored after every commit: %d keys, uninterrupted: %d", len(got), len(want))
	}
}

// searchRun feeds the articles the story stage takes to a search
// operator of 4 partitions (by article id).
type searchRun struct{ *searchtest.Tasks }

func newSearchRun(t *testing.T, db *state.DB, retention time.Duration) searchRun {
	return searchRun{searchtest.New(t, db, search.Options{Retention: retention}, 4)}
}

func (s searchRun) index(a Article, story string) {
	h := fnv.New32a()
	h.Write([]byte(a.ID))
	s.Index(int32(h.Sum32()%4), schema.Article{ID: a.ID, Title: a.Title, Summary: a.Summary, SourceID: a.SourceID, PublishedAt: a.Published}, story)
}

// younger returns the documents searches find published at or after cut.
func (s searchRun) younger(t *testing.T, cut int64) uint64 {
	res, err := s.Op.Search(t.Context(), searchindex.Request{From: time.UnixMilli(cut), Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	return res.Total
}
