package story

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/newsflow/newsflow/operators/story/model"
	"github.com/newsflow/newsflow/state"
)

var t0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC).UnixMilli()

func minutes(m float64) int64 { return t0 + int64(m*float64(time.Minute/time.Millisecond)) }

func newTestBuilder(t *testing.T, opts Options) *Builder {
	t.Helper()
	b, err := NewBuilder(opts)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustApply(t *testing.T, b *Builder, a Article) Result {
	t.Helper()
	r, err := b.Apply(a)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestBuilderRepresentativeAndSources(t *testing.T) {
	b := newTestBuilder(t, Options{})
	r1 := mustApply(t, b, Article{ID: "a1", SourceID: "blog", Authority: 0.3, Title: "Volcano erupts near Reykjavik as flights are grounded", Published: minutes(0), Topics: []Label{{Topic: "world", Confidence: 0.9}}})
	if !r1.NewStory || r1.Story != "a1" {
		t.Fatalf("first article: %+v", r1)
	}
	r2 := mustApply(t, b, Article{ID: "a2", SourceID: "wire", Authority: 0.9, Title: "Reykjavik volcano eruption grounds flights across Iceland", Published: minutes(5), Topics: []Label{{Topic: "world", Confidence: 0.7}, {Topic: "science", Confidence: 0.4}}})
	r3 := mustApply(t, b, Article{ID: "a3", SourceID: "paper", Authority: 0.9, Title: "Iceland volcano erupts near Reykjavik, flights grounded", Published: minutes(9)})
	if r2.Story != "a1" || r3.Story != "a1" {
		t.Fatalf("related articles in other stories: %+v %+v", r2, r3)
	}
	st, _ := b.StoryOf("a3")
	if st.Representative != "a2" {
		t.Errorf("representative %s, want a2 (highest authority, then earliest)", st.Representative)
	}
	if st.Articles != 3 || len(st.Sources) != 3 || st.FirstSeen != minutes(0) || st.LastSeen != minutes(9) {
		t.Errorf("story aggregates %+v", st)
	}
	if len(st.Topics) == 0 || st.Topics[0].Topic != "world" {
		t.Errorf("topics %+v, want world first", st.Topics)
	}
	if st.Velocity != 3 || st.DecayClass != ClassRegular || st.Lambda != 0.1 {
		t.Errorf("velocity %v class %s λ %v", st.Velocity, st.DecayClass, st.Lambda)
	}
	r4 := mustApply(t, b, Article{ID: "b1", SourceID: "biz", Title: "Central bank raises interest rates by half a point", Published: minutes(10)})
	if r4.Story == "a1" || !r4.NewStory {
		t.Errorf("unrelated article joined: %+v", r4)
	}
	// An edit of the representative updates the story's title.
	r5 := mustApply(t, b, Article{ID: "a2", SourceID: "wire", Authority: 0.9, Title: "Reykjavik volcano: flights resume", Published: minutes(30)})
	if !r5.Update || r5.Story != "a1" {
		t.Errorf("edit: %+v", r5)
	}
	if st, _ := b.StoryOf("a1"); st.Title != "Reykjavik volcano: flights resume" || st.Articles != 3 {
		t.Errorf("after edit: title %q, %d articles", st.Title, st.Articles)
	}
}

func TestBuilderBreaking(t *testing.T) {
	b := newTestBuilder(t, Options{})
	// 70 articles in 30 minutes (2.33/min) from 6 sources: breaking.
	var st *Story
	for i := range 70 {
		id := fmt.Sprintf("q%d", i)
		mustApply(t, b, Article{ID: id, SourceID: fmt.Sprintf("s%d", i%6),
			Title:     fmt.Sprintf("Earthquake of magnitude 7 strikes Lisbon region report %d", i),
			Published: minutes(float64(i) * 30 / 70)})
		st, _ = b.StoryOf(id)
		if i == 30 && st.Breaking {
			t.Fatalf("breaking after %d articles in %v min", i+1, float64(i)*30/70)
		}
	}
	if !st.Breaking || st.DecayClass != ClassBreaking || st.Lambda != 0.5 || st.Articles != 70 {
		t.Fatalf("after 70 articles in 30 min from 6 sources: breaking %v class %s articles %d", st.Breaking, st.DecayClass, st.Articles)
	}
	// The same rate from 4 sources is not breaking.
	b = newTestBuilder(t, Options{})
	for i := range 70 {
		id := fmt.Sprintf("q%d", i)
		mustApply(t, b, Article{ID: id, SourceID: fmt.Sprintf("s%d", i%4),
			Title:     fmt.Sprintf("Earthquake of magnitude 7 strikes Lisbon region report %d", i),
			Published: minutes(float64(i) * 30 / 70)})
	}
	if st, _ := b.StoryOf("q69"); st.Breaking {
		t.Fatal("breaking with only 4 sources")
	}
}

// TestBuilderBreakingEpisodes: a story that stays breaking is one
// episode, however many articles keep it so; once its window passes
// without the condition, the next burst is a new episode.
func TestBuilderBreakingEpisodes(t *testing.T) {
	b := newTestBuilder(t, Options{})
	var began []int64
	burst := func(from float64, n int) {
		for i := range n {
			id := fmt.Sprintf("q%.0f-%d", from, i)
			at := minutes(from + float64(i)*30/70)
			r := mustApply(t, b, Article{ID: id, SourceID: fmt.Sprintf("s%d", i%6),
				Title:     fmt.Sprintf("Earthquake of magnitude 7 strikes Lisbon region report %d", i),
				Published: at})
			st, _ := b.StoryOf(id)
			if r.BecameBreaking {
				if !st.Breaking || st.BreakingSince != at {
					t.Errorf("%s began an episode: breaking %v since %d, want since %d", id, st.Breaking, st.BreakingSince, at)
				}
				began = append(began, st.BreakingSince)
			}
		}
	}
	burst(0, 70)
	if len(began) != 1 {
		t.Fatalf("70 articles in 30 minutes began %d episodes, want 1", len(began))
	}
	burst(31, 40) // still breaking: the same episode
	if len(began) != 1 {
		t.Fatalf("a story that stayed breaking began %d episodes, want 1", len(began))
	}
	burst(300, 70) // hours later: a new episode
	if len(began) != 2 || began[1] <= began[0] {
		t.Fatalf("episodes began at %v, want a second after the gap", began)
	}
}

func TestBuilderMergesBridgedStories(t *testing.T) {
	b := newTestBuilder(t, Options{Cluster: ClusterOptions{Threshold: 0.5, ThresholdLong: 0.5, Bridge: 0.3, BridgeLong: 0.3, Merge: 0.3, MergeLong: 0.3}})
	a := mustApply(t, b, Article{ID: "x1", SourceID: "a", Title: "Mars rover finds ancient lake bed", Published: minutes(0)})
	c := mustApply(t, b, Article{ID: "y1", SourceID: "b", Title: "Ancient lake sediments discovered by NASA scientists", Published: minutes(1)})
	if a.Story == c.Story {
		t.Skip("fixture did not form two stories")
	}
	// An article close to both merges them; the older story survives.
	r := mustApply(t, b, Article{ID: "z1", SourceID: "c", Title: "NASA Mars rover finds ancient lake bed sediments", Published: minutes(2)})
	if r.Story != "x1" || len(r.Merged) != 1 || r.Merged[0] != "y1" {
		t.Fatalf("bridge: %+v", r)
	}
	if b.Current("y1") != "x1" {
		t.Errorf("Current(y1) = %s", b.Current("y1"))
	}
	st, _ := b.StoryOf("y1")
	if st.ID != "x1" || st.Articles != 3 || len(st.MergedFrom) != 1 {
		t.Errorf("merged story %+v", st)
	}
}

func TestBuilderDeterministic(t *testing.T) {
	docs := loadLabelled(t, "uci_dev.ndjson")
	run := func() []string {
		b := newTestBuilder(t, Options{})
		var out []string
		for _, d := range docs {
			r := mustApply(t, b, Article{ID: d.ID, SourceID: "s", Title: d.Title, Published: d.Time})
			out = append(out, r.Story)
		}
		for i := range out {
			out[i] = b.Current(out[i])
		}
		return out
	}
	a, c := run(), run()
	for i := range a {
		if a[i] != c[i] {
			t.Fatalf("article %d: story %s, then %s", i, a[i], c[i])
		}
	}
}

func TestBuilderRejects(t *testing.T) {
	b := newTestBuilder(t, Options{})
	if _, err := b.Apply(Article{Title: "x"}); err == nil {
		t.Error("article without id accepted")
	}
	for _, o := range []Options{{Breaking: BreakingOptions{Rate: -1}}, {Lambda: map[string]float64{"hot": 1}}, {NearDupWindow: -1}} {
		if _, err := NewBuilder(o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}

// TestBuilderRestoreContinuesIdentically persists and restores the builder
// every few hundred articles and compares with one uninterrupted run.
func TestBuilderRestoreContinuesIdentically(t *testing.T) {
	all := loadLabelled(t, "uci_dev.ndjson")
	m, err := LoadModel("builtin")
	if err != nil {
		t.Fatal(err)
	}
	decaying, err := TrainModel(fixtureStream(), TrainOptions{DecayHours: 12})
	if err != nil {
		t.Fatal(err)
	}
	for name, docs := range map[string][]labelled{"in order": all, "interleaved": interleave(all, 5)} {
		t.Run(name, func(t *testing.T) { testBuilderRestore(t, docs, nil) })
		t.Run(name+" with the builtin model", func(t *testing.T) { testBuilderRestore(t, docs, m) })
		t.Run(name+" with a model whose centroids decay", func(t *testing.T) { testBuilderRestore(t, docs, decaying) })
	}
}

func testBuilderRestore(t *testing.T, docs []labelled, m *model.Model) {
	// A short window, so that articles and stories expire, also while
	// event times go back and forth.
	opts := Options{Cluster: ClusterOptions{Window: 2 * time.Hour, Model: m}}
	apply := func(restoreEvery int) []Result {
		db, err := state.Open(t.TempDir(), state.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		ns := db.Namespace("stories")
		b := newTestBuilder(t, opts)
		var out []Result
		for i, d := range docs {
			a := Article{ID: d.ID, SourceID: fmt.Sprint(i % 7), Authority: float64(i%5) / 5, Title: d.Title, Published: d.Time, Version: 1,
				Topics: []Label{{Topic: fmt.Sprint("t", i%3), Confidence: 0.5}}}
			if i%3 == 0 {
				a.ImageURL = fmt.Sprintf("https://img.example/%d.jpg", i)
			}
			out = append(out, mustApply(t, b, a))
			if i%50 == 49 { // an edit of an earlier article
				e := Article{ID: docs[i-3].ID, SourceID: "e", Title: docs[i-3].Title + " (updated)", Published: d.Time, Version: 2}
				out = append(out, mustApply(t, b, e))
			}
			if restoreEvery > 0 && i%restoreEvery == restoreEvery-1 {
				batch := ns.NewBatch()
				if err := b.Persist(batch, ns); err != nil {
					t.Fatal(err)
				}
				if err := batch.Commit(); err != nil {
					t.Fatal(err)
				}
				if b, err = RestoreBuilder(opts, ns); err != nil {
					t.Fatal(err)
				}
			}
		}
		st, _ := b.StoryOf(docs[len(docs)-1].ID)
		out = append(out, Result{Story: fmt.Sprintf("%+v", *st)})
		return out
	}
	want, got := apply(0), apply(211)
	if len(want) != len(got) {
		t.Fatalf("%d results, want %d", len(got), len(want))
	}
	for i := range want {
		if fmt.Sprint(want[i]) != fmt.Sprint(got[i]) {
			t.Fatalf("result %d: %+v after restores, %+v without", i, got[i], want[i])
		}
	}
}

// interleave orders docs as a live node may see them: split over 8
// partitions in input order, then read in chunks of random size from a
// random partition, as 8 tasks appending to one topic would.
func interleave(docs []labelled, seed uint64) []labelled {
	parts := make([][]labelled, 8)
	for i, d := range docs {
		p := (i * 2654435761) % 8
		parts[p] = append(parts[p], d)
	}
	r := rand.New(rand.NewPCG(seed, seed))
	var order []labelled
	for len(order) < len(docs) {
		p := r.IntN(8)
		n := min(len(parts[p]), 1+r.IntN(200))
		order = append(order, parts[p][:n]...)
		parts[p] = parts[p][n:]
	}
	return order
}

// TestBuilderQualityInterleaved scores the whole story stage (near-copies
// and clustering) on uci_dev in the order a live node with 8 partitions
// may apply it.
func TestBuilderQualityInterleaved(t *testing.T) {
	docs := loadLabelled(t, "uci_dev.ndjson")
	for _, seed := range []uint64{1, 2, 3} {
		b := newTestBuilder(t, Options{})
		pred := map[string]string{}
		for _, d := range interleave(docs, seed) {
			pred[d.ID] = mustApply(t, b, Article{ID: d.ID, Title: d.Title, Summary: d.Body, Published: d.Time, SourceID: "s"}).Story
		}
		for id, s := range pred {
			pred[id] = b.Current(s)
		}
		s := Score(truthOf(docs), pred)
		t.Logf("uci_dev interleaved (seed %d): B-cubed P %.3f R %.3f F1 %.3f; pairwise F1 %.3f", seed, s.BCubedP, s.BCubedR, s.BCubedF1, s.PairF1)
		if s.BCubedF1 < 0.80 || s.BCubedP < 0.88 {
			t.Errorf("seed %d: B-cubed F1 %.3f (want ≥ 0.80), precision %.3f (want ≥ 0.88)", seed, s.BCubedF1, s.BCubedP)
		}
	}
}

// TestBuilderExpiryFollowsWatermark: an edit moves the watermark past a
// story's window; a late article like that story's must then found a new
// story rather than join the closed one.
func TestBuilderExpiryFollowsWatermark(t *testing.T) {
	b := newTestBuilder(t, Options{Cluster: ClusterOptions{Window: time.Hour}})
	first := mustApply(t, b, Article{ID: "a1", SourceID: "x", Title: "Volcano erupts near Reykjavik as flights are grounded", Published: minutes(0)})
	mustApply(t, b, Article{ID: "b1", SourceID: "y", Title: "Central bank raises interest rates", Published: minutes(10)})
	if r := mustApply(t, b, Article{ID: "b1", SourceID: "y", Title: "Central bank raises interest rates again", Published: minutes(70), Version: 2}); !r.Update {
		t.Fatalf("edit: %+v", r)
	}
	late := mustApply(t, b, Article{ID: "a2", SourceID: "z", Title: "Reykjavik volcano erupts, flights grounded", Published: minutes(5)})
	if late.Story == first.Story || !late.NewStory {
		t.Fatalf("late article %+v joined the expired story %s", late, first.Story)
	}
}
