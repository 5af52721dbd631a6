package story

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/operators/story/model"
)

func toModel(ls []labelled) []model.Labelled {
	var out []model.Labelled
	for _, l := range ls {
		out = append(out, model.Labelled{Doc: model.Doc{ID: l.ID, Title: l.Title, Body: l.Body, Time: l.Time}, Story: l.Story})
	}
	return out
}

// demoSet is the demo world of seed as labelled stories, one per event.
func demoSet(t *testing.T, seed uint64, every time.Duration) []model.Labelled {
	arts, ev := demoWorld(t, seed, 90, every)
	var ds []model.Labelled
	for _, a := range arts {
		ds = append(ds, model.Labelled{Doc: model.Doc{ID: a.ID, Title: a.Title, Body: a.Summary, Time: a.Published}, Story: "w" + ev[a.ID]})
	}
	return ds
}

// distractSet is uci_dev (raw times) among the even (0) or odd (1) half of
// orx365, each orx365 item its own story.
func distractSet(t *testing.T, half int) []model.Labelled {
	ud := loadLabelled(t, "uci_dev.ndjson")
	all := withDistractors(t, ud)
	var out []labelled
	for _, d := range all {
		if strings.HasPrefix(d.ID, "orx-") {
			var n int
			fmt.Sscanf(d.ID, "orx-%d", &n)
			if n%2 != half {
				continue
			}
			d.Story = d.ID
		}
		out = append(out, d)
	}
	return toModel(out)
}

// TestStageModelTrainingSets is the experiment behind the README's
// figures of stage models trained on more than uci_dev: set
// NEWSFLOW_STORY_SETS to a comma-separated list of uci (uci_dev, merged
// labels, spread times), demo (four demo worlds of seeds 11 to 14, none of
// those it is scored on), orx (uci_dev among the even half of orx365, each
// orx365 item its own story) and ecb (ECB+), and it prints: uci_dev
// cross-validated (the other sets in every fold's training), then for a
// model trained on everything the demo world's worst seed of 1 to 6 at two
// paces, uci_dev among the odd half of orx365 and among all of it, ECB+,
// and dense streams of the odd half at 10 and 100 a minute.
// NEWSFLOW_STORY_THRESHOLDS=1 scores the thresholds instead after the
// cross-validation. It asserts nothing: it measures.
func TestStageModelTrainingSets(t *testing.T) {
	if os.Getenv("NEWSFLOW_STORY_SETS") == "" {
		t.Skip("an experiment: set NEWSFLOW_STORY_SETS (e.g. uci,demo,orx,ecb)")
	}
	want := strings.Split(os.Getenv("NEWSFLOW_STORY_SETS"), ",")
	build := func(exclude []model.Labelled) [][]model.Labelled {
		var sets [][]model.Labelled
		for _, w := range want {
			switch w {
			case "uci":
				sets = append(sets, exclude)
			case "demo":
				for _, seed := range []uint64{11, 12, 13} {
					sets = append(sets, demoSet(t, seed, 0))
				}
				sets = append(sets, demoSet(t, 14, 20*time.Second))
			case "orx":
				sets = append(sets, distractSet(t, 0))
			case "ecb":
				sets = append(sets, toModel(loadLabelled(t, "ecbplus_docs.jsonl")))
			}
		}
		return sets
	}
	// uci CV
	ds := uciLabelled(t)
	folds := model.Folds(ds, 5, 1)
	pred := map[string]string{}
	for f := range 5 {
		train, test := model.Split(ds, folds, f)
		m, err := TrainModelSets(build(train), TrainOptions{})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := NewBuilder(Options{Cluster: ClusterOptions{Model: m}})
		for _, d := range test {
			r, _ := b.Apply(Article{ID: d.ID, Title: d.Title, Summary: d.Body, Published: d.Time, SourceID: "s"})
			pred[d.ID] = fmt.Sprint(f, "/", r.Story)
		}
		for id, s := range pred {
			if strings.HasPrefix(s, fmt.Sprint(f, "/")) {
				pred[id] = fmt.Sprint(f, "/", b.Current(strings.TrimPrefix(s, fmt.Sprint(f, "/"))))
			}
		}
	}
	truth := map[string]string{}
	for _, d := range ds {
		truth[d.ID] = d.Story
	}
	s := Score(truth, pred)
	t.Logf("uci CV merged spread: P %.3f R %.3f F1 %.3f", s.BCubedP, s.BCubedR, s.BCubedF1)
	m, err := TrainModelSets(build(ds), TrainOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("th %.2f ranker %.2f\n decision %.2f", m.Threshold, m.Ranker.Weights, m.Decision.Weights)
	opts := Options{Cluster: ClusterOptions{Model: m}}
	if os.Getenv("NEWSFLOW_STORY_THRESHOLDS") != "" {
		opts = Options{}
	}
	worst := 1.0
	for _, seed := range []uint64{1, 2, 3, 4, 5, 6} {
		for _, every := range []time.Duration{0, 20 * time.Second} {
			arts, event := demoWorld(t, seed, 90, every)
			b := newTestBuilder(t, opts)
			for _, a := range arts {
				mustApply(t, b, a)
			}
			pred := map[string]string{}
			for _, a := range arts {
				st, _ := b.StoryOf(a.ID)
				pred[a.ID] = st.ID
			}
			worst = min(worst, Score(event, pred).BCubedF1)
		}
	}
	t.Logf("demo worst F1 %.3f", worst)
	ud := loadLabelled(t, "uci_dev.ndjson")
	var odd []labelled
	for _, d := range withDistractors(t, ud) {
		var n int
		if _, err := fmt.Sscanf(d.ID, "orx-%d", &n); err == nil && n%2 == 0 {
			continue
		}
		odd = append(odd, d)
	}
	mt := mergedTruth(ud)
	s = scoreBuilder(t, opts, odd, mt)
	t.Logf("distractors (odd half) P %.3f R %.3f F1 %.3f", s.BCubedP, s.BCubedR, s.BCubedF1)
	s = scoreBuilder(t, opts, withDistractors(t, ud), mt)
	t.Logf("distractors (all) P %.3f R %.3f F1 %.3f", s.BCubedP, s.BCubedR, s.BCubedF1)
	ecb := loadLabelled(t, "ecbplus_docs.jsonl")
	s = scoreBuilder(t, opts, ecb, truthOf(ecb))
	t.Logf("ecb P %.3f R %.3f F1 %.3f", s.BCubedP, s.BCubedR, s.BCubedF1)
	var oddx []labelled
	for i, d := range loadDistractors(t) {
		if i%2 == 1 {
			oddx = append(oddx, d)
		}
	}
	for _, density := range []int{10, 100} {
		p := measurePurity(t, opts, denseMix(ud, oddx, density), mt)
		t.Logf("dense %d/min (odd half): P %.3f R %.3f F1 %.3f contaminated %.1f%% largest %d (%d unrelated)", density, p.BCubedP, p.BCubedR, p.BCubedF1, 100*p.Contaminated, p.Largest, p.LargestUnrelated)
	}
}
