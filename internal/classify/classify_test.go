package classify

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestOptionsValidate(t *testing.T) {
	if err := DefaultOptions().Validate(); err != nil {
		t.Errorf("default options: %v", err)
	}
	if err := (Options{}).Validate(); err != nil {
		t.Errorf("zero options: %v", err)
	}
	for _, o := range []Options{{MinConfidence: -0.1}, {MinConfidence: 1.1}, {MaxLabels: -1}} {
		if err := o.Validate(); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
	if _, err := New(Options{MaxLabels: -1}); err == nil {
		t.Error("New accepted invalid options")
	}
}

func TestNewRules(t *testing.T) {
	path := filepath.Join(t.TempDir(), "topics.yaml")
	if err := os.WriteFile(path, []byte(testRules), 0o644); err != nil {
		t.Fatal(err)
	}
	doc := Document{Title: "Striker", Summary: "profit", Content: "rocket"} // 9/17, 4/17, 2/17
	c, err := New(Options{RulesFile: path})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Classify(doc); len(got) != 3 {
		t.Errorf("file limits: labels %v, want 3", got)
	}
	c, err = New(Options{RulesFile: path, MinConfidence: 0.2, MaxLabels: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Classify(doc); len(got) != 1 || got[0].Topic != "football" {
		t.Errorf("max labels 1: labels %v", got)
	}
	c, err = New(Options{RulesFile: path, MinConfidence: 0.2})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Classify(doc); len(got) != 2 {
		t.Errorf("min confidence 0.2: labels %v, want 2", got)
	}
	if _, err := New(Options{RulesFile: filepath.Join(t.TempDir(), "missing.yaml")}); err == nil {
		t.Error("missing rules file: no error")
	}
}

func TestNewDefaultRulesFile(t *testing.T) {
	t.Chdir(t.TempDir()) // the built-in rules do not depend on the working directory
	c, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	r, ok := c.(*Rules)
	if !ok {
		t.Fatalf("New(Options{}) = %T, want *Rules", c)
	}
	want := []string{"world", "politics", "business", "technology", "science", "health", "sports", "entertainment"}
	if got := r.Topics(); !slices.Equal(got, want) {
		t.Errorf("default topics %v, want %v", got, want)
	}
	for _, topic := range want {
		if r.Description(topic) == "" {
			t.Errorf("topic %s has no description", topic)
		}
	}
	// Guard against a truncated or mangled file: every topic has a good
	// vocabulary.
	entries := map[string]int{}
	for _, hits := range r.keys {
		for _, h := range hits {
			if h.weight > 0 {
				entries[r.topics[h.topic]]++
			}
		}
	}
	for _, topic := range want {
		if entries[topic] < 150 {
			t.Errorf("topic %s has %d terms and phrases, want ≥ 150", topic, entries[topic])
		}
	}
}

func TestNewModel(t *testing.T) {
	m := mustTrain(t, fixtureExamples(), TrainOptions{MinCount: 1})
	path := filepath.Join(t.TempDir(), "model.json")
	if err := os.WriteFile(path, save(t, m), 0o644); err != nil {
		t.Fatal(err)
	}
	// The model wins over the rules file, which is not even read.
	c, err := New(Options{ModelFile: path, RulesFile: "does-not-exist.yaml", MaxLabels: 1, MinConfidence: 0.01})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.(*Model); !ok {
		t.Fatalf("New with a model file = %T", c)
	}
	if got := c.Classify(Document{Title: "Bank shares and the striker"}); len(got) != 1 {
		t.Errorf("max labels 1: labels %v", got)
	}
	if _, err := New(Options{ModelFile: path + ".missing"}); err == nil {
		t.Error("missing model: no error")
	}
}

// TestClassifyConcurrent runs both classifiers from many goroutines (run it
// with -race) and checks they answer as they do alone.
func TestClassifyConcurrent(t *testing.T) {
	rules, err := LoadRules(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	model := mustTrain(t, fixtureExamples(), TrainOptions{Bigrams: true, MinCount: 1})
	var docs []Document
	for i, ex := range fixtureExamples() {
		docs = append(docs, ex.Document, Document{Title: ex.Title + fmt.Sprint(" ", i), Content: strings.Repeat(ex.Content+" ", i)})
	}
	for _, c := range []Classifier{rules, model} {
		want := make([][]Label, len(docs))
		for i, d := range docs {
			want[i] = c.Classify(d)
		}
		var wg sync.WaitGroup
		errs := make(chan string, 8*len(docs))
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range docs {
					i := (i + g) % len(docs)
					if got := c.Classify(docs[i]); !slices.Equal(got, want[i]) {
						errs <- fmt.Sprintf("%T: doc %d: %v, alone %v", c, i, got, want[i])
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Error(e)
		}
	}
}
