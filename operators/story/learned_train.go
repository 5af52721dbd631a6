package story

import (
	"errors"
	"fmt"
	"math"

	"github.com/newsflow/newsflow/internal/option"
	"github.com/newsflow/newsflow/operators/story/model"
)

// TrainOptions say how TrainModel fits a stage model. The zero value is
// the default.
type TrainOptions struct {
	// Cluster are the clusterer's options the model is trained with (and
	// is to be used with); zero means the defaults.
	Cluster ClusterOptions
	// Lambda is the L2 penalty of both logistic fits (default 1).
	Lambda float64
	// Rounds is how many times the ranker and the decision are refitted
	// on the stories the clusterer itself builds with the previous fit
	// (default 4; the first fit sees the reference stories).
	Rounds int
	// Thresholds are the decision thresholds tried on the training data;
	// the one with the best B-cubed F1 is kept (default 0.30 to 0.90 by
	// 0.05).
	Thresholds []float64
	// MinRank is the ranker probability below which an article never
	// joins a candidate (default 0.2).
	MinRank float64
	// DecayHours is the time constant, in hours, of the decay of the
	// centroids of a story under the model (Params.DecayHours); 0 keeps
	// them undecayed. A 12h decay gave more recall on uci_dev and less
	// precision on the other data sets (README).
	DecayHours float64
}

func (o TrainOptions) withDefaults() TrainOptions {
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
	if o.MinRank == 0 {
		o.MinRank = 0.2
	}

	return o
}

// TrainModel fits a stage model to docs, labelled articles in stream
// order. The ranker first learns from every candidate of every article
// while the stories are the reference ones, built article by article;
// the decision learns whether the ranker's best candidate is the
// article's story. Then, for Rounds-1 rounds, the clusterer runs with the
// model so far and both refit on what it meets there as well (a story
// whose commonest label is the article's counts as the article's), so
// the model learns from the states its own mistakes lead to. The
// threshold kept is the one with the best B-cubed F1 on docs.
func TrainModel(docs []model.Labelled, opts TrainOptions) (*model.Model, error) {
	return TrainModelSets([][]model.Labelled{docs}, opts)
}

// TrainModelSets is TrainModel over several labelled streams, each
// clustered on its own (their labels need not differ); the threshold kept
// is the one with the best mean of their B-cubed F1s.
func TrainModelSets(sets [][]model.Labelled, opts TrainOptions) (*model.Model, error) {
	opts = opts.withDefaults()
	n := 0
	for _, docs := range sets {
		n += len(docs)
	}
	if n == 0 {
		return nil, errors.New("train story model: no documents")
	}
	option.Fill(&opts.Cluster, DefaultClusterOptions())
	m := &model.Model{
		Format: model.Format, Version: model.Version, Stage: model.StageStories,
		Params:   model.Params{MinShared: opts.Cluster.MinShared, SmallStory: opts.Cluster.SmallStory, MinRank: opts.MinRank, DecayHours: max(opts.DecayHours, 0)},
		Features: StageFeatures, DecisionFeatures: StageDecisionFeatures,
		Ranker:    model.Linear{Weights: make([]float64, len(StageFeatures))},
		Decision:  model.Linear{Weights: make([]float64, len(StageDecisionFeatures))},
		Threshold: 0.5,
	}
	var ref groups
	stories := 0
	for _, docs := range sets {
		g, k, err := referenceExamples(docs, m, opts.Cluster)
		if err != nil {
			return nil, err
		}
		ref, stories = append(ref, g...), stories+k
	}
	flat := ref.flat()
	var err error
	if m.Ranker, err = flat.Fit(opts.Lambda); err != nil {
		return nil, fmt.Errorf("train story ranker: %w", err)
	}
	var decision model.Examples
	for _, g := range ref {
		best, bl, second := -1, math.Inf(-1), math.Inf(-1)
		for k, f := range g.f {
			l := m.Ranker.Logit(f)
			if l > bl {
				second, best, bl = bl, k, l
			} else if l > second {
				second = l
			}
		}
		if best >= 0 {
			d := make([]float64, len(StageDecisionFeatures))
			decisionFeatures(d, bl, second, g.f[best])
			decision.Add(d, g.y[best])
		}
	}
	if m.Decision, err = decision.Fit(opts.Lambda); err != nil {
		return nil, fmt.Errorf("train story decision: %w", err)
	}
	for round := 1; round < opts.Rounds; round++ {
		m.Threshold = 0.5
		for _, docs := range sets {
			if _, err := runModel(m, docs, opts.Cluster, &flat, &decision); err != nil {
				return nil, err
			}
		}
		if m.Ranker, err = flat.Fit(opts.Lambda); err != nil {
			return nil, fmt.Errorf("train story ranker: %w", err)
		}
		if m.Decision, err = decision.Fit(opts.Lambda); err != nil {
			return nil, fmt.Errorf("train story decision: %w", err)
		}
	}
	bestF, bestT := -1.0, 0.5
	for _, t := range opts.Thresholds {
		m.Threshold = t
		var sum float64
		for _, docs := range sets {
			pred, err := runModel(m, docs, opts.Cluster, nil, nil)
			if err != nil {
				return nil, err
			}
			sum += model.BCubed(labelsOf(docs), pred).F1
		}
		if sum > bestF {
			bestF, bestT = sum, t
		}
	}
	m.Threshold = bestT
	m.Trained = model.TrainInfo{Articles: n, Stories: stories}
	return m, nil
}

func labelsOf(docs []model.Labelled) map[string]string {
	truth := make(map[string]string, len(docs))
	for _, d := range docs {
		truth[d.ID] = d.Story
	}
	return truth
}

// group is one article's candidates: their features, and which is its
// story.
type group struct {
	f [][]float64
	y []bool
}

type groups []group

func (gs groups) flat() model.Examples {
	var e model.Examples
	for _, g := range gs {
		for k := range g.f {
			e.Add(g.f[k], g.y[k])
		}
	}
	return e
}

// referenceExamples builds the reference stories of docs in order with a
// clusterer that scores with m (for the features only) and returns every
// article's candidates and the number of reference stories.
func referenceExamples(docs []model.Labelled, m *model.Model, opts ClusterOptions) (groups, int, error) {
	opts.Model = m
	c, err := NewClusterer(opts)
	if err != nil {
		return nil, 0, err
	}
	byLabel := map[string]uint64{}
	labelOf := map[uint64]string{}
	var gs groups
	for _, d := range docs {
		c.expire(d.Time)
		v := c.Vectorize(Text{Title: d.Title, Body: d.Body, Time: d.Time})
		names := c.Names(v, d.Title, d.Body)
		var g group
		for _, s := range c.scoreLearned(v, names, c.candidates(v, d.Time), d.Time) {
			g.f = append(g.f, append([]float64(nil), s.f...))
			g.y = append(g.y, labelOf[s.num] == d.Story)
		}
		gs = append(gs, g)
		num, ok := byLabel[d.Story]
		if !ok || c.open.get(num) == nil {
			num = c.newStory()
			byLabel[d.Story], labelOf[num] = num, d.Story
		}
		c.lastVec = nil
		st := c.open.get(num)
		c.add(st, v, d.Time)
		c.addNames(st, names)
	}
	return gs, len(byLabel), nil
}

// runModel clusters docs in order with m and returns article id → story
// number. With rank and dec set, it records the examples each choice
// meets: every scored candidate for the ranker, the best for the
// decision, labelled by whether the story's commonest label (the
// smallest of equals) is the article's.
func runModel(m *model.Model, docs []model.Labelled, opts ClusterOptions, rank, dec *model.Examples) (map[string]string, error) {
	opts.Model = m
	c, err := NewClusterer(opts)
	if err != nil {
		return nil, err
	}
	counts := map[uint64]map[string]int{}
	majority := func(num uint64) string {
		best, n := "", 0
		for l, k := range counts[num] {
			if k > n || k == n && l < best {
				best, n = l, k
			}
		}
		return best
	}
	var label string
	if rank != nil {
		c.observe = func(ss []scored, _ float64) {
			for _, s := range ss {
				rank.Add(append([]float64(nil), s.f...), majority(s.num) == label)
			}
			second := math.Inf(-1)
			if len(ss) > 1 {
				second = ss[1].logit
			}
			d := make([]float64, len(StageDecisionFeatures))
			decisionFeatures(d, ss[0].logit, second, ss[0].f)
			dec.Add(d, majority(ss[0].num) == label)
		}
	}
	nums := make(map[string]uint64, len(docs))
	merged := map[uint64]uint64{}
	for _, d := range docs {
		label = d.Story
		v := c.Vectorize(Text{Title: d.Title, Body: d.Body, Time: d.Time})
		a := c.AssignNames(v, c.Names(v, d.Title, d.Body), d.Time)
		if counts[a.Story] == nil {
			counts[a.Story] = map[string]int{}
		}
		for _, g := range a.Merged {
			for l, k := range counts[g] {
				counts[a.Story][l] += k
			}
			delete(counts, g)
			merged[g] = a.Story
		}
		counts[a.Story][d.Story]++
		nums[d.ID] = a.Story
	}
	out := make(map[string]string, len(nums))
	for id, num := range nums {
		out[id] = fmt.Sprint(follow(merged, num))
	}
	return out, nil
}
