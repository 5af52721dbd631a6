package story

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// loadDistractors reads the titles and descriptions of the orx365 stream.
func loadDistractors(t testing.TB) []labelled {
	t.Helper()
	var out []labelled
	readJSONLines(t, filepath.Join(sharedData, "..", "streams", "orx365_items.jsonl"), func(r struct{ Title, Description string }) {
		out = append(out, labelled{ID: fmt.Sprint("orx-", len(out)), Title: r.Title, Body: r.Description})
	})
	return out
}

// withDistractors spreads the 10,851 orx365 items (FT, WSJ, NYT, The
// Economist, The Atlantic) evenly over the time span of the UCI headlines,
// so that their stories compete with the labelled ones, and orders
// everything by time.
func withDistractors(t testing.TB, docs []labelled) []labelled {
	t.Helper()
	extra := loadDistractors(t)
	lo, hi := docs[0].Time, docs[0].Time
	for _, d := range docs {
		lo, hi = min(lo, d.Time), max(hi, d.Time)
	}
	for i := range extra {
		extra[i].Time = lo + (hi-lo)*int64(i)/int64(len(extra))
	}
	return byTime(append(slices.Clone(docs), extra...))
}

// byTime sorts docs by time, stably, and returns them.
func byTime(docs []labelled) []labelled {
	slices.SortStableFunc(docs, func(a, b labelled) int { return cmp.Compare(a.Time, b.Time) })
	return docs
}

// buildStories runs the story builder over docs in order and returns the
// story each ended in (merges followed).
func buildStories(t testing.TB, opts Options, docs []labelled) map[string]string {
	t.Helper()
	b, err := NewBuilder(opts)
	if err != nil {
		t.Fatal(err)
	}
	pred := map[string]string{}
	for _, d := range docs {
		r, err := b.Apply(Article{ID: d.ID, Title: d.Title, Summary: d.Body, Published: d.Time, SourceID: "s"})
		if err != nil {
			t.Fatal(err)
		}
		pred[d.ID] = r.Story
	}
	for id, s := range pred {
		pred[id] = b.Current(s)
	}
	return pred
}

func scoreBuilder(t testing.TB, opts Options, docs []labelled, truth map[string]string) Scores {
	t.Helper()
	return Score(truth, buildStories(t, opts, docs))
}

// TestQualityWithDistractors scores the UCI stories when 10,851 unrelated
// real articles arrive among them.
func TestQualityWithDistractors(t *testing.T) {
	docs := loadLabelled(t, "uci_dev.ndjson")
	all := withDistractors(t, docs)
	s := scoreBuilder(t, Options{}, all, truthOf(docs))
	t.Logf("uci_dev among %d distractors: B-cubed P %.3f R %.3f F1 %.3f; pairwise F1 %.3f", len(all)-len(docs), s.BCubedP, s.BCubedR, s.BCubedF1, s.PairF1)
	if s.BCubedF1 < 0.80 || s.BCubedP < 0.88 {
		t.Errorf("B-cubed F1 %.3f (want ≥ 0.80), precision %.3f (want ≥ 0.88)", s.BCubedF1, s.BCubedP)
	}
}

func TestProbeSweep(t *testing.T) {
	if os.Getenv("NEWSFLOW_SWEEP") == "" {
		t.Skip("set NEWSFLOW_SWEEP=1")
	}
	docs := loadLabelled(t, "uci_dev.ndjson")
	all := withDistractors(t, docs)
	for _, pt := range []int{3, 4, 5, 6, 8} {
		for _, pd := range []int{30, 50, 100} {
			s := scoreBuilder(t, Options{Cluster: ClusterOptions{ProbeTerms: pt, ProbeDepth: pd}}, all, truthOf(docs))
			t.Logf("terms %d depth %d: B-cubed P %.3f R %.3f F1 %.3f", pt, pd, s.BCubedP, s.BCubedR, s.BCubedF1)
		}
	}
}
