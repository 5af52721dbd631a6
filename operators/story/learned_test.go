package story

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/operators/story/model"
	"github.com/newsflow/newsflow/state/statetest"
)

// fixtureStream is a small labelled stream of our own: three events told
// by several headlines each, two of them of the same kind (storms) in
// different places, interleaved over a few hours.
func fixtureStream() []model.Labelled {
	t0 := time.Date(2026, 5, 4, 8, 0, 0, 0, time.UTC).UnixMilli()
	events := map[string][]string{
		"storm-a": {"Storm Ardal floods the Venmoor coast", "Venmoor evacuates villages as Storm Ardal hits",
			"Storm Ardal: Venmoor coast flooded, 12 missing", "Rescue boats reach flooded Venmoor villages after Storm Ardal"},
		"storm-b": {"Storm Bexley cuts power across Caldris", "Caldris without power as Storm Bexley passes",
			"Storm Bexley leaves Caldris in the dark", "Caldris restores power after Storm Bexley"},
		"merger": {"Halden Steel agrees merger with Orvik Metals", "Orvik Metals and Halden Steel to merge in 4bn deal",
			"Halden Steel shareholders back Orvik Metals merger", "Regulators clear Halden Steel and Orvik Metals merger"},
	}
	var out []model.Labelled
	for i := range 4 {
		for k, label := range []string{"storm-a", "storm-b", "merger"} {
			out = append(out, model.Labelled{
				Doc:   model.Doc{ID: fmt.Sprintf("%s-%d", label, i), Title: events[label][i], Time: t0 + int64(i*40+k*7)*60_000},
				Story: label,
			})
		}
	}
	return out
}

// Training is deterministic: the same stream gives the same model, to the
// byte; the model is a stories-stage model the stage accepts, and
// clustering the fixture with it keeps the two storms apart.
func TestTrainModelDeterministic(t *testing.T) {
	docs := fixtureStream()
	a, err := TrainModel(docs, TrainOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := TrainModel(docs, TrainOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ea, err := a.Encode()
	if err != nil {
		t.Fatal(err)
	}
	eb, err := b.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if string(ea) != string(eb) {
		t.Fatalf("two trainings on the same stream differ:\n%s\n%s", ea, eb)
	}
	m, err := model.Decode(ea)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckStageModel(m); err != nil {
		t.Fatal(err)
	}
	if m.Trained.Articles != len(docs) || m.Trained.Stories != 3 {
		t.Errorf("trained on %d articles in %d stories, want %d in 3", m.Trained.Articles, m.Trained.Stories, len(docs))
	}
	pred, err := runModel(m, docs, ClusterOptions{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if pred["storm-a-0"] == pred["storm-b-0"] {
		t.Errorf("the two storms share story %s", pred["storm-a-0"])
	}
}

// The reference model of operators/story/model is not a stage model, and
// a stage model whose features are not the stage's is refused, both with
// errors that say so.
func TestStageModelChecked(t *testing.T) {
	ref, err := model.Default()
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckStageModel(ref); err == nil || !strings.Contains(err.Error(), "not for the stories stage") {
		t.Errorf("reference model: %v", err)
	}
	m, err := LoadModel("builtin")
	if err != nil {
		t.Fatal(err)
	}
	other := *m
	other.Features = append([]string{"colour"}, m.Features[1:]...)
	b, err := other.Encode()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "other.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadModel(path); err == nil || !strings.Contains(err.Error(), "the stories stage computes") {
		t.Errorf("model with other features: %v", err)
	}
	if _, err := LoadModel(filepath.Join(t.TempDir(), "none.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing model file: %v", err)
	}
	if _, err := New(OperatorOptions{Model: path}, 1, nil); err == nil || !strings.Contains(err.Error(), "stories.model") {
		t.Errorf("operator with a bad model: %v", err)
	}
	if _, err := New(OperatorOptions{Model: "builtin"}, 1, nil); err != nil {
		t.Errorf("operator with the builtin model: %v", err)
	}
}

// Stories built by one model (or by the thresholds) are refused by a
// clusterer given another, with the replay that rebuilds them; the same
// model restores them.
func TestRestoreRefusesAnotherModel(t *testing.T) {
	m, err := LoadModel("builtin")
	if err != nil {
		t.Fatal(err)
	}
	trained, err := TrainModel(fixtureStream(), TrainOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := trained.Encode(); err != nil { // sets its hash
		t.Fatal(err)
	}
	for _, c := range []struct {
		name        string
		built, with *model.Model
		refused     bool
	}{
		{"thresholds, then the model", nil, m, true},
		{"the model, then thresholds", m, nil, true},
		{"one model, then another", m, trained, true},
		{"the same model", m, m, false},
		{"thresholds both times", nil, nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ns := statetest.Open(t).Namespace("cluster")
			cl, err := NewClusterer(ClusterOptions{Model: c.built})
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range fixtureStream() {
				v := cl.Vectorize(Text{Title: d.Title, Time: d.Time})
				cl.AssignNames(v, cl.Names(v, d.Title, ""), d.Time)
			}
			b := ns.NewBatch()
			if err := cl.Persist(b, []byte("c")); err != nil {
				t.Fatal(err)
			}
			if err := b.Commit(); err != nil {
				t.Fatal(err)
			}
			_, err = RestoreClusterer(ClusterOptions{Model: c.with}, ns, []byte("c"))
			switch {
			case c.refused && !errors.Is(err, ErrModelChanged):
				t.Fatalf("restore: %v, want %v", err, ErrModelChanged)
			case c.refused && !strings.Contains(err.Error(), "newsflow replay --operator stories"):
				t.Errorf("refusal does not say how to rebuild: %v", err)
			case !c.refused && err != nil:
				t.Fatalf("restore: %v", err)
			}
		})
	}
}

// Under a model whose centroids decay, an article 12 hours after a
// story's latest weighs e times the story's old terms; the thresholds and
// a model without decay sum them as they are.
func TestCentroidDecay(t *testing.T) {
	m, err := TrainModel(fixtureStream(), TrainOptions{DecayHours: 12})
	if err != nil {
		t.Fatal(err)
	}
	if m.Params.DecayHours != 12 {
		t.Fatalf("trained with decay_hours %v, want 12", m.Params.DecayHours)
	}
	old, recent := []term{{ID: 1, W: 1}, {ID: 2, W: 0.5}}, []term{{ID: 2, W: 1}}
	const h12 = 12 * 3600_000
	for _, c := range []struct {
		model *model.Model
		want  float64 // the old terms' factor
	}{{nil, 1}, {&model.Model{}, 1}, {m, math.Exp(-1)}} {
		cl := &Clusterer{opts: ClusterOptions{Model: c.model}}
		a, b := cl.align(old, 0, recent, h12)
		if math.Abs(float64(a[0].W)-c.want) > 1e-6 || math.Abs(float64(a[1].W)-0.5*c.want) > 1e-6 || b[0].W != 1 {
			t.Errorf("decay %v: aligned %v and %v, want the old ones times %.4f", c.model != nil && c.model.Params.DecayHours > 0, a, b, c.want)
		}
		b, a = cl.align(recent, h12, old, 0) // either order
		if math.Abs(float64(a[0].W)-c.want) > 1e-6 || b[0].W != 1 {
			t.Errorf("reversed: aligned %v and %v", b, a)
		}
	}
	if old[0].W != 1 {
		t.Errorf("align changed its input: %v", old)
	}
}
