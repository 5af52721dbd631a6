package model

import (
	"errors"
	"fmt"
	"math"
)

// Labelled is a document with its reference story.
type Labelled struct {
	Doc
	Story string
}

// TrainOptions say how Train fits a model. The zero value is the default.
type TrainOptions struct {
	// Params of the representation; zero means DefaultParams.
	Params Params
	// Lambda is the L2 penalty of both logistic fits (default 1).
	Lambda float64
	// Rounds is how many times the decision is refitted on the states the
	// clusterer itself reaches with the previous fit (default 4; the
	// first fit sees the reference stories).
	Rounds int
	// Thresholds are the decision thresholds tried on the training data;
	// the one with the best B-cubed F1 is kept (default 0.30 to 0.90 by
	// 0.05).
	Thresholds []float64
	// MergeCos are the merge cosines tried after the threshold is chosen
	// (Model.MergeCos; default 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, and never
	// merging).
	MergeCos []float64
	// FixedRanker keeps the ranker fitted to the reference stories; by
	// default each round refits it too, adding every candidate of the
	// clusterer's own states (a fragment of the article's story is a
	// positive: the story of its commonest label is the article's).
	FixedRanker bool
}

func (o TrainOptions) withDefaults() TrainOptions {
	if o.Params == (Params{}) {
		o.Params = DefaultParams()
	}
	if o.Lambda == 0 {
		o.Lambda = 1
	}
	if o.Rounds == 0 {
		o.Rounds = 4
	}
	if len(o.Thresholds) == 0 {
		for t := 30; t <= 90; t += 5 {
			o.Thresholds = append(o.Thresholds, float64(t)/100)
		}
	}
	if o.MergeCos == nil {
		o.MergeCos = []float64{0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5}
	}
	return o
}

// Examples are the rows of a logistic fit and their labels.
type Examples struct {
	x [][]float64
	y []bool
}

// Add appends a row and its label.
func (e *Examples) Add(x []float64, y bool) {
	e.x = append(e.x, x)
	e.y = append(e.y, y)
}

// Fit fits a logistic model to the examples: Newton's method with an L2
// penalty lambda on the weights, deterministic for the rows in the order
// added.
func (e *Examples) Fit(lambda float64) (Linear, error) { return fitLogistic(e.x, e.y, lambda) }

// Train fits a model to docs, which must be in stream order. The ranker
// learns from every candidate story of every article while the stories are
// the reference ones, built article by article in order; the decision
// learns, for the ranker's best candidate, whether it is the article's
// story, first over the reference stories, then over the stories the
// clusterer itself builds with the previous fit (so it learns from the
// mistakes it makes), and the threshold is the one with the best B-cubed
// F1 on docs.
func Train(docs []Labelled, opts TrainOptions) (*Model, error) {
	opts = opts.withDefaults()
	if len(docs) == 0 {
		return nil, errors.New("train story model: no documents")
	}
	m := &Model{
		Format: Format, Version: Version, Params: opts.Params,
		Features: featureNames, DecisionFeatures: decisionNames,
		Threshold: 0.5,
	}
	// The reference stories, built in order.
	var rank Examples
	type group struct {
		f []([]float64)
		y []bool
	}
	var groups []group
	c := NewClusterer(m)
	byLabel := map[string]int{}
	for _, d := range docs {
		a := c.x.Extract(d.Doc)
		var g group
		for _, k := range c.candidates(a, m.Params) {
			y := c.stories[k.s].label == d.Story
			rank.Add(k.f, y)
			g.f = append(g.f, k.f)
			g.y = append(g.y, y)
		}
		groups = append(groups, g)
		i, ok := byLabel[d.Story]
		if !ok {
			i = c.found(a, d.Story)
			byLabel[d.Story] = i
		}
		c.join(i, a)
	}
	var err error
	if m.Ranker, err = rank.Fit(opts.Lambda); err != nil {
		return nil, fmt.Errorf("train story ranker: %w", err)
	}
	var dec Examples
	for _, g := range groups {
		best, bl, second := -1, math.Inf(-1), math.Inf(-1)
		for k, f := range g.f {
			l := m.Ranker.logit(f)
			if l > bl {
				second = bl
				best, bl = k, l
			} else if l > second {
				second = l
			}
		}
		if best >= 0 {
			dec.Add(decisionFeatures(bl, second, g.f[best]), g.y[best])
		}
	}
	if m.Decision, err = dec.Fit(opts.Lambda); err != nil {
		return nil, fmt.Errorf("train story decision: %w", err)
	}
	for round := 1; round < opts.Rounds; round++ {
		m.Threshold = 0.5
		c := NewClusterer(m)
		c.record = &dec
		if !opts.FixedRanker {
			c.recordRank = &rank
		}
		for _, d := range docs {
			c.label = d.Story
			c.Add(d.Doc)
		}
		if !opts.FixedRanker {
			if m.Ranker, err = rank.Fit(opts.Lambda); err != nil {
				return nil, fmt.Errorf("train story ranker: %w", err)
			}
		}
		if m.Decision, err = dec.Fit(opts.Lambda); err != nil {
			return nil, fmt.Errorf("train story decision: %w", err)
		}
	}
	truth := make(map[string]string, len(docs))
	for _, d := range docs {
		truth[d.ID] = d.Story
	}
	bestF, bestT := -1.0, 0.5
	for _, t := range opts.Thresholds {
		m.Threshold = t
		if s := BCubed(truth, Run(m, docs)); s.F1 > bestF {
			bestF, bestT = s.F1, t
		}
	}
	m.Threshold = bestT
	bestM := 0.0
	for _, mc := range opts.MergeCos {
		m.MergeCos = mc
		if s := BCubed(truth, Run(m, docs)); s.F1 > bestF {
			bestF, bestM = s.F1, mc
		}
	}
	m.MergeCos = bestM
	m.Trained = TrainInfo{Articles: len(docs), Stories: len(byLabel)}
	return m, nil
}

// Run clusters docs in order with m and returns article id → story id.
func Run(m *Model, docs []Labelled) map[string]string {
	c := NewClusterer(m)
	out := make(map[string]string, len(docs))
	for _, d := range docs {
		out[d.ID] = c.Add(d.Doc)
	}
	for id, s := range out {
		out[id] = c.Current(s)
	}
	return out
}
