package model

// The story model's tuning harness, skipped unless NEWSFLOW_TUNE is set:
//
//	NEWSFLOW_TUNE=1 SWEEP='[{}, {"Rounds": 6}]' go test -run 'TestSweep$' -v ./operators/story/model/
//
// TestSweep prints cross-validated B-cubed scores on uci_dev (spread
// times; merged and as labelled) for each TrainOptions in $SWEEP; the
// Diagnose tests show where articles of a story are lost.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"testing"
	"time"
)

// loadUCI reads uci_dev in time order, or skips.
func loadUCI(t testing.TB, merge bool) []Labelled {
	t.Helper()
	f, err := os.Open(uciPath)
	if err != nil {
		noData(t, err)
	}
	defer f.Close()
	var out []Labelled
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r struct {
			ID, Title, Story string
			PublishedAt      time.Time `json:"published_at"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, Labelled{Doc: Doc{ID: r.ID, Title: r.Title, Time: r.PublishedAt.UnixMilli()}, Story: r.Story})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	out = Spread(out, 0, 0) // sorted by time
	if merge {
		out = MergeLabels(out, UCIMergedPairs)
	}
	return out
}

// TestDiagnose prints, over the reference stories of uci_dev with spread
// times, how often an article's story is among its candidates and ranked
// first (set NEWSFLOW_TUNE=1).
func TestDiagnose(t *testing.T) {
	if os.Getenv("NEWSFLOW_TUNE") == "" {
		t.Skip("set NEWSFLOW_TUNE=1")
	}
	docs := Spread(loadUCI(t, true), 12*time.Hour, 1)
	m, err := Train(docs, TrainOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := NewClusterer(m)
	byLabel := map[string]int{}
	var exists, inCands, top, gated int
	for _, d := range docs {
		a := c.x.Extract(d.Doc)
		cands := c.candidates(a, m.Params)
		i, ok := byLabel[d.Story]
		if ok {
			exists++
			found := false
			bl := math.Inf(-1)
			bestTrue := false
			for _, k := range cands {
				l := m.Ranker.logit(k.f)
				if l > bl {
					bl, bestTrue = l, k.s == i
				}
				if k.s == i {
					found = true
				}
			}
			if found {
				inCands++
			} else if c.stories[i].shared(a) > 0 {
				gated++
				if gated < 15 {
					fmt.Printf("gated: %q (story of %d, e.g. %q)\n", d.Title, c.stories[i].n, c.stories[i].core[len(c.stories[i].core)-1].Title)
				}
			}
			if bestTrue {
				top++
			}
		} else {
			i = c.found(a, d.Story)
			byLabel[d.Story] = i
		}
		c.join(i, a)
	}
	fmt.Printf("story exists %d, among candidates %d, ranked first %d, sharing a word but gated %d\n", exists, inCands, top, gated)
	fmt.Printf("threshold %.2f, ranker %+v\ndecision %+v\n", m.Threshold, m.Ranker, m.Decision)
}

// TestDiagnoseRun prints why articles of uci_dev (spread times, merged
// labels) end outside their story's largest part when the model trained on
// all of it clusters it (set NEWSFLOW_TUNE=1).
func TestDiagnoseRun(t *testing.T) {
	if os.Getenv("NEWSFLOW_TUNE") == "" {
		t.Skip("set NEWSFLOW_TUNE=1")
	}
	docs := Spread(loadUCI(t, true), 12*time.Hour, 1)
	m, err := Train(docs, TrainOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := NewClusterer(m)
	var noCand, rejected, wrongBest, founded, wrongJoin, okJoin int
	shown := 0
	for _, d := range docs {
		a := c.x.Extract(d.Doc)
		cands := c.candidates(a, m.Params)
		best, bl, second := -1, math.Inf(-1), math.Inf(-1)
		hasTrue := false
		for k := range cands {
			l := m.Ranker.logit(cands[k].f)
			cands[k].logit = l
			if l > bl {
				second = bl
				best, bl = k, l
			} else if l > second {
				second = l
			}
			if c.stories[cands[k].s].majority() == d.Story {
				hasTrue = true
			}
		}
		i := -1
		if best >= 0 {
			p := m.Decision.prob(decisionFeatures(bl, second, cands[best].f))
			bs := c.stories[cands[best].s]
			right := bs.majority() == d.Story
			if p >= m.Threshold {
				i = cands[best].s
				if right {
					okJoin++
				} else {
					wrongJoin++
				}
			} else if right {
				rejected++
				if shown < 25 {
					shown++
					fmt.Printf("rejected p %.2f f %.2f: %q -> story of %d %q\n", p, cands[best].f, d.Title, bs.n, bs.core[len(bs.core)-1].Title)
				}
			} else if hasTrue {
				wrongBest++
			} else {
				founded++
			}
		} else {
			noCand++
		}
		if i < 0 {
			i = c.found(a, "")
		}
		c.join(i, a)
		c.stories[i].labels[d.Story]++
	}
	fmt.Printf("no candidates %d, right best rejected %d, wrong best (right one a candidate) %d, no right candidate %d, wrong joins %d, right joins %d\n",
		noCand, rejected, wrongBest, founded, wrongJoin, okJoin)
}

// TestDiagnoseParts prints the parts each label of uci_dev ends in.
func TestDiagnoseParts(t *testing.T) {
	if os.Getenv("NEWSFLOW_TUNE") == "" {
		t.Skip("set NEWSFLOW_TUNE=1")
	}
	docs := Spread(loadUCI(t, true), 12*time.Hour, 1)
	pred := cvPred(t, docs, 5, TrainOptions{})
	parts := map[string]map[string]int{}
	size := map[string]int{}
	first := map[string]string{}
	for _, d := range docs {
		if parts[d.Story] == nil {
			parts[d.Story] = map[string]int{}
		}
		parts[d.Story][pred[d.ID]]++
		size[pred[d.ID]]++
		if first[pred[d.ID]] == "" {
			first[pred[d.ID]] = d.Title
		}
	}
	for l, ps := range parts {
		n := 0
		var big []string
		for p, k := range ps {
			n += k
			if k >= 5 {
				big = append(big, fmt.Sprintf("%d/%d %q", k, size[p], first[p]))
			}
		}
		fmt.Printf("%s %d articles in %d parts: %v\n", l[:6], n, len(ps), big)
	}
}

// cv returns the pooled B-cubed scores of k-fold story-grouped
// cross-validation over docs.
func cv(t testing.TB, docs []Labelled, k int, opts TrainOptions) BCubedScores {
	t.Helper()
	truth := map[string]string{}
	for _, d := range docs {
		truth[d.ID] = d.Story
	}
	return BCubed(truth, cvPred(t, docs, k, opts))
}

// cvPred returns the out-of-fold stories of k-fold story-grouped
// cross-validation over docs.
func cvPred(t testing.TB, docs []Labelled, k int, opts TrainOptions) map[string]string {
	t.Helper()
	folds := Folds(docs, k, 1)
	pred := map[string]string{}
	for f := range k {
		train, test := Split(docs, folds, f)
		m, err := Train(train, opts)
		if err != nil {
			t.Fatal(err)
		}
		for id, s := range Run(m, test) {
			pred[id] = fmt.Sprint(f, "/", s)
		}
	}
	return pred
}

// TestSweep prints cross-validated scores on uci_dev for the training
// options in $SWEEP (a JSON array of TrainOptions).
func TestSweep(t *testing.T) {
	if os.Getenv("NEWSFLOW_TUNE") == "" {
		t.Skip("set NEWSFLOW_TUNE=1")
	}
	var sweep []TrainOptions
	if err := json.Unmarshal([]byte(os.Getenv("SWEEP")), &sweep); err != nil {
		t.Fatal(err)
	}
	merged := Spread(loadUCI(t, true), 12*time.Hour, 1)
	raw := Spread(loadUCI(t, false), 12*time.Hour, 1)
	for _, o := range sweep {
		a, b := cv(t, merged, 5, o), cv(t, raw, 5, o)
		fmt.Printf("%+v\n  merged P %.3f R %.3f F1 %.3f | labelled P %.3f R %.3f F1 %.3f\n", o, a.P, a.R, a.F1, b.P, b.R, b.F1)
	}
}
