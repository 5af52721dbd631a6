package classify

import (
	"strings"
	"testing"
)

// The accuracy tests below run on real data when it is present (they skip
// otherwise) and fail when a change makes a classifier clearly worse: each
// floor sits a little below what was measured.

func logReport(t *testing.T, name string, e *Evaluation) {
	t.Helper()
	var b strings.Builder
	if err := e.Report(&b); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s:\n%s", name, b.String())
}

func checkFloor(t *testing.T, name string, e *Evaluation, floor float64) {
	t.Helper()
	if acc := e.Accuracy(); acc < floor {
		t.Errorf("%s: accuracy %.4f, want ≥ %.2f", name, acc, floor)
	} else {
		t.Logf("%s: accuracy %.4f (floor %.2f)", name, acc, floor)
	}
}

// TestRealDataRules measures the default rules on BBC News (full articles,
// measured 0.928) and on the UCI headlines (titles only, measured 0.679;
// "t" counts as technology or science). The rules were written with these
// data sets at hand, so treat the numbers as a regression baseline rather
// than as an unbiased estimate.
func TestRealDataRules(t *testing.T) {
	r, err := LoadRules(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("bbc", func(t *testing.T) {
		e := Evaluate(r, examples(loadBBC(t)), nil)
		logReport(t, "default rules on BBC News", e)
		checkFloor(t, "rules/bbc", e, 0.91)
		for _, s := range e.Scores() {
			if s.Support > 0 && s.Recall < 0.8 {
				t.Errorf("rules/bbc: %s recall %.3f, want ≥ 0.8", s.Topic, s.Recall)
			}
		}
	})
	t.Run("uci", func(t *testing.T) {
		e := Evaluate(r, examples(loadUCI(t)), uciAlternatives)
		logReport(t, "default rules on UCI headlines", e)
		checkFloor(t, "rules/uci", e, 0.65)
	})
}

// TestRealDataNaiveBayes measures Naive Bayes with the default options on
// held-out fifths of the data, chosen by a hash of the document id (or, for
// UCI, also of the story), and across domains.
func TestRealDataNaiveBayes(t *testing.T) {
	t.Run("bbc", func(t *testing.T) {
		bbc := loadBBC(t)
		train, test := split(bbc)
		m := mustTrain(t, train, TrainOptions{})
		e := Evaluate(m, test, nil)
		logReport(t, "Naive Bayes on BBC News, held-out fifth", e)
		checkFloor(t, "nb/bbc", e, 0.95) // measured 0.975
		r, err := LoadRules(rulesFile)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("rules on the same held-out fifth: accuracy %.4f", Evaluate(r, test, nil).Accuracy())
	})
	t.Run("uci", func(t *testing.T) {
		uci := loadUCI(t)
		// By headline: the 43 stories are on both sides of the split, so
		// this mostly measures recognizing a story seen in training.
		train, test := split(groupByID(uci))
		e := Evaluate(mustTrain(t, train, TrainOptions{}), test, uciAlternatives)
		logReport(t, "Naive Bayes on UCI headlines, held-out fifth of the headlines", e)
		checkFloor(t, "nb/uci-by-headline", e, 0.93) // measured 0.953
		// By story: every test headline is about a story never seen in
		// training, the honest (and much harder) measure on 43 stories.
		train, test = split(uci)
		e = Evaluate(mustTrain(t, train, TrainOptions{}), test, uciAlternatives)
		logReport(t, "Naive Bayes on UCI headlines, held-out fifth of the stories", e)
		checkFloor(t, "nb/uci-by-story", e, 0.25) // measured 0.432
	})
	t.Run("bbc-to-uci", func(t *testing.T) {
		bbc, uci := loadBBC(t), loadUCI(t)
		m := mustTrain(t, examples(bbc), TrainOptions{})
		// BBC has no health topic, so UCI's 25 health headlines count as
		// errors.
		e := Evaluate(m, examples(uci), uciAlternatives)
		logReport(t, "Naive Bayes trained on all of BBC News, tested on the UCI headlines", e)
		checkFloor(t, "nb/bbc-to-uci", e, 0.60) // measured 0.642
	})
}
