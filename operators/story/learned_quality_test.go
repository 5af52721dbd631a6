package story

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/operators/story/model"
)

// uciLabelled is uci_dev in time order as the models read it, with its
// three day-split story pairs merged and times spread over [0, 12 h).
func uciLabelled(t testing.TB) []model.Labelled {
	t.Helper()
	var docs []model.Labelled
	for _, l := range loadLabelled(t, "uci_dev.ndjson") {
		docs = append(docs, model.Labelled{Doc: model.Doc{ID: l.ID, Title: l.Title, Body: l.Body, Time: l.Time}, Story: l.Story})
	}
	slices.SortStableFunc(docs, func(a, b model.Labelled) int { return cmp.Compare(a.Time, b.Time) })
	return model.Spread(model.MergeLabels(docs, model.UCIMergedPairs), 12*time.Hour, 1)
}

// mergedTruth is uci_dev's labels with the day-split pairs merged.
func mergedTruth(docs []labelled) map[string]string {
	mt := truthOf(docs)
	for id, l := range mt {
		for _, pr := range model.UCIMergedPairs {
			if l == pr[1] {
				mt[id] = pr[0]
			}
		}
	}
	return mt
}

// TestStageModelQuality holds the stories stage's learned model to the
// figures measured when it was built: on uci_dev (merged labels, spread
// times) cross-validated with folds grouped by story, each fold clustered
// by the stage with a model trained on the others; and the builtin model
// (trained on all of uci_dev) on the data it was not trained on: the
// demo's world, uci_dev among orx365 distractors, ECB+ full texts. The
// similarity thresholds are scored beside it. It is not the default: it
// loses to them on the demo world and in dense streams.
func TestStageModelQuality(t *testing.T) {
	docs := uciLabelled(t)
	folds := model.Folds(docs, 5, 1)
	pred := map[string]string{}
	for f := range 5 {
		train, test := model.Split(docs, folds, f)
		m, err := TrainModel(train, TrainOptions{})
		if err != nil {
			t.Fatal(err)
		}
		b := newTestBuilder(t, Options{Cluster: ClusterOptions{Model: m}})
		for _, d := range test {
			mustApply(t, b, Article{ID: d.ID, Title: d.Title, Summary: d.Body, Published: d.Time, SourceID: "s"})
		}
		for _, d := range test {
			st, _ := b.StoryOf(d.ID)
			pred[d.ID] = fmt.Sprint(f, "/", st.ID)
		}
	}
	s := Score(labelsOf(docs), pred)
	t.Logf("uci_dev, merged labels, spread times, 5-fold CV grouped by story: stage with a learned model B-cubed P %.3f R %.3f F1 %.3f", s.BCubedP, s.BCubedR, s.BCubedF1)
	// Measured: P 0.981–0.988, F1 0.798–0.825 as the features changed.
	if s.BCubedF1 < 0.78 || s.BCubedP < 0.95 {
		t.Errorf("cross-validated B-cubed F1 %.3f (floor 0.78), P %.3f (floor 0.95)", s.BCubedF1, s.BCubedP)
	}

	m, err := LoadModel("builtin")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		opts Options
		// floors: demo world worst F1, distractors F1, ECB+ F1
		demo, distract, ecb float64
	}{
		{"builtin model", Options{Cluster: ClusterOptions{Model: m}}, 0.93, 0.84, 0.78},
		{"thresholds", Options{}, 0.98, 0.80, 0.78},
	} {
		worst := 1.0
		for _, seed := range []uint64{1, 2, 3} {
			for _, every := range []time.Duration{0, 20 * time.Second} {
				arts, event := demoWorld(t, seed, 90, every)
				b := newTestBuilder(t, c.opts)
				p := map[string]string{}
				for _, a := range arts {
					mustApply(t, b, a)
				}
				for _, a := range arts {
					st, _ := b.StoryOf(a.ID)
					p[a.ID] = st.ID
				}
				worst = min(worst, Score(event, p).BCubedF1)
			}
		}
		ud := loadLabelled(t, "uci_dev.ndjson")
		ds := scoreBuilder(t, c.opts, withDistractors(t, ud), mergedTruth(ud))
		ecb := loadLabelled(t, "ecbplus_docs.jsonl")
		es := scoreBuilder(t, c.opts, ecb, truthOf(ecb))
		t.Logf("%s: demo world (3 seeds, two paces) worst B-cubed F1 %.3f; uci_dev among distractors, merged labels, P %.3f R %.3f F1 %.3f; ECB+ P %.3f R %.3f F1 %.3f",
			c.name, worst, ds.BCubedP, ds.BCubedR, ds.BCubedF1, es.BCubedP, es.BCubedR, es.BCubedF1)
		var low []string
		for _, x := range []struct {
			what       string
			got, floor float64
		}{{"demo world", worst, c.demo}, {"distractors", ds.BCubedF1, c.distract}, {"ECB+", es.BCubedF1, c.ecb}} {
			if x.got < x.floor {
				low = append(low, fmt.Sprintf("%s F1 %.3f (floor %.2f)", x.what, x.got, x.floor))
			}
		}
		if len(low) > 0 {
			t.Errorf("%s: %s", c.name, strings.Join(low, "; "))
		}
	}
}
