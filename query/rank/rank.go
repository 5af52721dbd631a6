// Package rank orders stories into a feed: a score per story from several
// signals, then a greedy maximal-marginal-relevance (MMR) re-ranking with
// a cap on stories per source at the top.
//
// Everything here is a pure function of its inputs (candidates, the
// reader's profile and a time), so the evaluation harness runs the same
// code the HTTP feed runs.
package rank

import (
	"cmp"
	"errors"
	"math"
	"slices"
	"time"

	"github.com/newsflow/newsflow/internal/option"
)

// Weights of the signals in a story's score; they sum to 1 by default.
type Weights struct {
	Relevance float64 `json:"relevance"`
	Freshness float64 `json:"freshness"`
	Quality   float64 `json:"quality"`
	Trending  float64 `json:"trending"`
	Diversity float64 `json:"diversity"`
}

// Options tune the ranking. The zero value stands for the defaults.
type Options struct {
	Weights Weights
	// BreakingBoost multiplies the score of a breaking story (default 1.3).
	BreakingBoost float64
	// PreferredBoost multiplies the score of a story from a preferred
	// source (default 1.2).
	PreferredBoost float64
	// ReadFactor multiplies the score of a story the reader has read
	// (default 0.1).
	ReadFactor float64
	// Lambda is the MMR trade-off: 1 ranks by score only (default 0.7).
	Lambda float64
	// MaxPerSource caps stories of one source in the first TopN (defaults
	// 2 and 20).
	MaxPerSource, TopN int
	// MMRDepth is how many of the best-scored stories MMR re-ranks; the
	// rest follow by score (default 200).
	MMRDepth int
	// SourceSaturation is the number of sources at which the size part of
	// quality reaches 1 (default 50).
	SourceSaturation int
}

// DefaultOptions returns the defaults.
func DefaultOptions() Options {
	return Options{
		Weights:       Weights{Relevance: 0.35, Freshness: 0.25, Quality: 0.20, Trending: 0.10, Diversity: 0.10},
		BreakingBoost: 1.3, PreferredBoost: 1.2, ReadFactor: 0.1,
		Lambda: 0.7, MaxPerSource: 2, TopN: 20, MMRDepth: 200, SourceSaturation: 50,
	}
}

func (o Options) withDefaults() Options {
	option.Fill(&o, DefaultOptions()) // Weights only when all are zero
	return o
}

// Validate reports invalid option values.
func (o Options) Validate() error {
	w := o.Weights
	for _, v := range []float64{w.Relevance, w.Freshness, w.Quality, w.Trending, w.Diversity, o.BreakingBoost, o.PreferredBoost, o.ReadFactor} {
		if v < 0 || math.IsNaN(v) {
			return errors.New("rank: weights and factors must not be negative")
		}
	}
	if o.Lambda < 0 || o.Lambda > 1 {
		return errors.New("rank: lambda must be from 0 to 1")
	}
	if o.MaxPerSource < 0 || o.TopN < 0 || o.MMRDepth < 0 || o.SourceSaturation < 0 {
		return errors.New("rank: counts must not be negative")
	}
	return nil
}

// Topic is a topic with a weight.
type Topic struct {
	Topic  string
	Weight float64
}

// Candidate is a story that may enter a feed.
type Candidate struct {
	StoryID string
	// SourceID is the source of the story's representative article, the
	// one a card shows; Sources are all the story's sources.
	SourceID string
	Sources  []string
	Topics   []Topic
	// Authority is the representative source's authority in [0, 1].
	Authority float64
	// LastSeen is the event time of the latest article (ms); Lambda the
	// freshness decay per hour of the story's decay class.
	LastSeen int64
	Lambda   float64
	Breaking bool
	// Trending is the story's share activity, normalized to [0, 1] over
	// the candidates.
	Trending float64
}

// Reader is what the ranking knows of the person reading.
type Reader struct {
	// Interest is the decayed interest vector (topic → weight); empty for
	// a new or anonymous reader.
	Interest map[string]float64
	// Topics are the reader's preferred topics.
	Topics []string
	// Preferred and Excluded sources.
	Preferred, Excluded map[string]bool
	// Read holds the stories the reader has read.
	Read map[string]bool
}

// Anonymous reports whether the reader carries no personal signal.
func (r *Reader) Anonymous() bool {
	return r == nil || (len(r.Interest) == 0 && len(r.Topics) == 0 && len(r.Preferred) == 0 && len(r.Read) == 0)
}

// Explain is a story's score broken into its signals.
type Explain struct {
	Relevance float64 `json:"relevance"`
	Freshness float64 `json:"freshness"`
	Quality   float64 `json:"quality"`
	Trending  float64 `json:"trending"`
	Diversity float64 `json:"diversity"`
	// Multiplier is the product of the breaking, preferred-source and
	// already-read factors.
	Multiplier float64 `json:"multiplier"`
	Score      float64 `json:"score"`
	// MMR is the story's marginal relevance when it was picked (0 beyond
	// MMRDepth).
	MMR float64 `json:"mmr"`
}

// Item is one ranked story.
type Item struct {
	Candidate
	Explain Explain
	// Shown is the source whose article the card shows instead of the
	// representative's, when the representative's source had reached
	// MaxPerSource in the top and the story has another source that had
	// not (empty: the representative).
	Shown string
}

// ShownSource is the source whose article the item's card shows.
func (it *Item) ShownSource() string {
	if it.Shown != "" {
		return it.Shown
	}
	return it.SourceID
}

// Rank orders the candidates for a reader at event time now (ms). Stories
// from excluded sources are left out.
func Rank(cands []Candidate, r *Reader, now int64, opts Options) []Item {
	o := opts.withDefaults()
	if r == nil {
		r = &Reader{}
	}
	interest := normalized(r)
	items := make([]Item, 0, len(cands))
	topicCount := map[string]int{}
	for _, c := range cands {
		if len(c.Topics) > 0 {
			topicCount[c.Topics[0].Topic]++
		}
	}
	for _, c := range cands {
		if r.Excluded[c.SourceID] {
			continue
		}
		var e Explain
		e.Relevance = relevance(c, interest, r.Anonymous())
		h := max(0, float64(now-c.LastSeen)/float64(time.Hour.Milliseconds()))
		e.Freshness = math.Exp(-c.Lambda * h)
		e.Quality = 0.5*math.Min(1, math.Log1p(float64(len(c.Sources)))/math.Log1p(float64(o.SourceSaturation))) + 0.5*c.Authority
		e.Trending = c.Trending
		// Diversity favours stories whose main topic is rare among the
		// candidates.
		e.Diversity = 1
		if len(c.Topics) > 0 && len(cands) > 0 {
			e.Diversity = 1 - float64(topicCount[c.Topics[0].Topic])/float64(len(cands))
		}
		w := o.Weights
		s := w.Relevance*e.Relevance + w.Freshness*e.Freshness + w.Quality*e.Quality + w.Trending*e.Trending + w.Diversity*e.Diversity
		e.Multiplier = 1
		if c.Breaking {
			e.Multiplier *= o.BreakingBoost
		}
		if r.Preferred[c.SourceID] {
			e.Multiplier *= o.PreferredBoost
		}
		if r.Read[c.StoryID] {
			e.Multiplier *= o.ReadFactor
		}
		e.Score = s * e.Multiplier
		items = append(items, Item{Candidate: c, Explain: e})
	}
	// Sort indices, not the (large) items.
	order := make([]int32, len(items))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int {
		x, y := &items[a], &items[b]
		if c := cmp.Compare(y.Explain.Score, x.Explain.Score); c != 0 {
			return c
		}
		return cmp.Compare(x.StoryID, y.StoryID)
	})
	sorted := make([]Item, len(items))
	for i, j := range order {
		sorted[i] = items[j]
	}
	return rerank(sorted, o)
}

// normalized returns the reader's topic weights scaled to a maximum of 1,
// with preferred topics at least 0.5 (a new reader starts from them).
func normalized(r *Reader) map[string]float64 {
	out := map[string]float64{}
	var top float64
	for _, w := range r.Interest {
		top = max(top, w)
	}
	for t, w := range r.Interest {
		if top > 0 {
			out[t] = w / top
		}
	}
	for _, t := range r.Topics {
		out[t] = max(out[t], 0.5)
	}
	return out
}

// relevance is the overlap of the story's topics with the reader's
// interests, in [0, 1]; a reader without interests gets a neutral 0.5.
func relevance(c Candidate, interest map[string]float64, anonymous bool) float64 {
	if anonymous || len(interest) == 0 {
		return 0.5
	}
	var num, den float64
	for _, t := range c.Topics {
		num += t.Weight * interest[t.Topic]
		den += t.Weight
	}
	if den == 0 {
		return 0
	}
	return num / den
}

// similarity of two stories for MMR: their topic overlap, raised when they
// come from the same source.
func similarity(a, b *Candidate) float64 {
	s := topicOverlap(a, b)
	if a.SourceID == b.SourceID {
		s = 0.5 + 0.5*s
	}
	return s
}

// topicOverlap is the cosine of the topic weights of a and b, 0 when either
// has none.
func topicOverlap(a, b *Candidate) float64 {
	var dot, na, nb float64
	for _, x := range a.Topics {
		na += x.Weight * x.Weight
		for _, y := range b.Topics {
			if x.Topic == y.Topic {
				dot += x.Weight * y.Weight
			}
		}
	}
	for _, y := range b.Topics {
		nb += y.Weight * y.Weight
	}
	if na > 0 && nb > 0 {
		return dot / math.Sqrt(na*nb)
	}
	return 0
}

// rerank applies MMR to the best MMRDepth items and caps stories per
// source in the first TopN. A story whose representative's source is at
// the cap is shown by another of its sources below the cap, if it has one
// (Shown): a high-authority outlet that covers most stories does not lead
// every card. Otherwise it is held back, and competes again once TopN
// stories are placed. (With fewer than TopN/MaxPerSource sources the cap
// cannot hold, and held back stories fill the rest of the top.)
func rerank(items []Item, o Options) []Item {
	depth := min(o.MMRDepth, len(items))
	pool := items[:depth]
	maxSim := make([]float64, depth) // to the items placed so far
	placed := make([]bool, depth)
	held := make([]bool, depth) // by the source cap
	out := make([]Item, 0, len(items))
	perSource := map[string]int{}
	maxScore := 0.0
	if depth > 0 {
		maxScore = pool[0].Explain.Score
	}
	capOn := true
	for len(out) < depth {
		best, bestVal := -1, math.Inf(-1)
		for i := range pool {
			if placed[i] || (held[i] && capOn) {
				continue
			}
			rel := 0.0
			if maxScore > 0 {
				rel = pool[i].Explain.Score / maxScore
			}
			if v := o.Lambda*rel - (1-o.Lambda)*maxSim[i]; v > bestVal {
				best, bestVal = i, v
			}
		}
		if best < 0 { // only held stories remain
			capOn = false
			continue
		}
		it := pool[best]
		shownBy := it.SourceID
		if capOn && perSource[shownBy] >= o.MaxPerSource {
			i := slices.IndexFunc(it.Sources, func(src string) bool { return perSource[src] < o.MaxPerSource })
			if i < 0 {
				held[best] = true
				continue
			}
			shownBy, it.Shown = it.Sources[i], it.Sources[i]
		}
		placed[best] = true
		it.Explain.MMR = bestVal
		perSource[shownBy]++
		out = append(out, it)
		if len(out) >= o.TopN {
			capOn = false
		}
		for i := range pool {
			if !placed[i] {
				maxSim[i] = max(maxSim[i], similarity(&pool[i].Candidate, &it.Candidate))
			}
		}
	}
	return append(out, items[depth:]...)
}
