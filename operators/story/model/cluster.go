package model

import (
	"cmp"
	"math"
	"slices"
)

// Params are the fixed settings of the story representation and the
// candidate search. They are part of a Model, so a model is used with the
// representation it was trained with.
type Params struct {
	// DecayHours is the time constant of a story's centroids: a member's
	// weight is exp(-hours before the story's newest member / DecayHours),
	// so a long story is compared with what it is about now, not with the
	// sum of everything it ever held.
	DecayHours float64 `json:"decay_hours"`
	// WindowHours closes a story this long after its newest member.
	WindowHours float64 `json:"window_hours"`
	// Core is how many of a story's newest members the article is also
	// compared with one by one.
	Core int `json:"core"`
	// MinShared is how many distinct non-generic words an article must
	// share with a story of at most SmallStory articles to be a candidate;
	// with a larger story one word is enough (the story's size and the
	// cosines then decide). Generic words never count.
	MinShared  int `json:"min_shared"`
	SmallStory int `json:"small_story"`
	// NamesMustMeet makes a story that has names no candidate for an
	// article that has names but shares none of them.
	NamesMustMeet bool `json:"names_must_meet"`
	// MinRank is the ranker's probability below which an article never
	// joins a candidate, whatever the decision says. The decision, which
	// sees mostly right best candidates, is not calibrated for a lone weak
	// one.
	MinRank float64 `json:"min_rank"`
}

// DefaultParams returns the parameters Train uses when given none.
func DefaultParams() Params {
	return Params{DecayHours: 12, WindowHours: 72, Core: 8, MinShared: 2, SmallStory: 3, NamesMustMeet: true, MinRank: 0.2}
}

// story is an open story of a Clusterer.
type story struct {
	id                   string
	label                string         // in training: the reference label
	labels               map[string]int // in training: members by reference label
	cent                 [numSub]map[int32]float64
	norm2                [numSub]float64
	core                 []*Article // newest last
	terms                map[int32]int
	newest, oldest       int64
	sumT                 float64
	n                    int
	hasEntities, removed bool
	into                 int // when removed: the story it merged into
}

func newStory(id string) *story {
	s := &story{id: id, terms: map[int32]int{}, labels: map[string]int{}}
	for i := range s.cent {
		s.cent[i] = map[int32]float64{}
	}
	return s
}

const hourMS = 3600e3

func (s *story) add(a *Article, p Params) {
	scale, w := 1.0, 1.0
	switch {
	case s.n == 0:
		s.newest, s.oldest = a.Time, a.Time
	case a.Time > s.newest:
		scale = math.Exp(-float64(a.Time-s.newest) / hourMS / p.DecayHours)
		s.newest = a.Time
	default:
		w = math.Exp(-float64(s.newest-a.Time) / hourMS / p.DecayHours)
	}
	s.oldest = min(s.oldest, a.Time)
	for sub := range s.cent {
		c := s.cent[sub]
		if scale != 1 {
			for id := range c {
				c[id] *= scale
			}
		}
		for _, e := range a.vec[sub] {
			c[e.id] += w * e.w
		}
		s.norm2[sub] = norm2(c)
	}
	if len(a.vec[subEntity]) > 0 {
		s.hasEntities = true
	}
	s.core = append(s.core, a)
	if len(s.core) > p.Core {
		old := s.core[0]
		s.core = s.core[1:]
		for _, t := range old.terms {
			if s.terms[t]--; s.terms[t] == 0 {
				delete(s.terms, t)
			}
		}
	}
	for _, t := range a.terms {
		s.terms[t]++
	}
	s.sumT += float64(a.Time)
	s.n++
}

func (s *story) cos(sub int, v vector) float64 {
	if s.norm2[sub] == 0 || len(v) == 0 {
		return 0
	}
	var d float64
	c := s.cent[sub]
	for _, e := range v {
		d += e.w * c[e.id]
	}
	return d / math.Sqrt(s.norm2[sub])
}

// shared counts the article's terms held by the story's core members.
func (s *story) shared(a *Article) int {
	n := 0
	for _, t := range a.terms {
		if s.terms[t] > 0 {
			n++
		}
	}
	return n
}

// The candidate features, in the order of their weights in a Model.
var featureNames = []string{
	"cos_title", "cos_body", "cos_all", "cos_entity",
	"core_title", "core_all", "core_entity",
	"shared", "one_shared", "no_shared_entity",
	"gap_newest_3h", "gap_newest_24h", "gap_oldest_24h", "gap_mean_12h",
	"size",
}

// decisionNames are the features of the join-or-found decision: the
// ranker's logit of the best candidate, its margin over the second, and
// the best candidate's own features.
var decisionNames = append([]string{"best_logit", "margin"}, featureNames...)

func gauss(ms int64, sigmaHours float64) float64 {
	h := math.Abs(float64(ms)) / hourMS / sigmaHours
	return math.Exp(-h * h / 2)
}

// candidateFeatures returns the candidate features of article a against story s,
// and how many terms they share.
func candidateFeatures(a *Article, s *story) ([]float64, int) {
	f := make([]float64, len(featureNames))
	for sub := range numSub {
		f[sub] = s.cos(sub, a.vec[sub])
	}
	for _, m := range s.core {
		f[4] = max(f[4], a.vec[subTitle].dot(m.vec[subTitle]))
		f[5] = max(f[5], a.vec[subAll].dot(m.vec[subAll]))
		f[6] = max(f[6], a.vec[subEntity].dot(m.vec[subEntity]))
	}
	sh := s.shared(a)
	f[7] = float64(min(sh, 5)) / 5
	if sh == 1 {
		f[8] = 1
	}
	if len(a.vec[subEntity]) > 0 && s.hasEntities && f[3] == 0 {
		f[9] = 1
	}
	f[10] = gauss(a.Time-s.newest, 3)
	f[11] = gauss(a.Time-s.newest, 24)
	f[12] = gauss(a.Time-s.oldest, 24)
	f[13] = gauss(a.Time-int64(s.sumT/float64(s.n)), 12)
	f[14] = math.Log1p(float64(s.n)) / 5
	return f, sh
}

func decisionFeatures(best, second float64, f []float64) []float64 {
	margin := 5.0
	if !math.IsInf(second, -1) {
		margin = min(best-second, 5)
	}
	return append([]float64{best / 5, margin / 5}, f...)
}

// Clusterer assigns articles to stories in one pass with a Model. It is
// not safe for concurrent use.
type Clusterer struct {
	m       *Model
	x       *Extractor
	stories []*story
	byTerm  map[int32][]int // term → indexes of stories whose members had it
	byID    map[string]int
	mark    []int
	seq     int
	// watermark is the latest article time seen; adds counts articles, for
	// pruning.
	watermark  int64
	adds       int
	pruneEvery int
	// In training: the decisions' examples are recorded with the label of
	// the article being added.
	record     *Examples
	recordRank *Examples
	label      string
}

// NewClusterer returns a Clusterer that has seen nothing.
func NewClusterer(m *Model) *Clusterer {
	return &Clusterer{m: m, x: NewExtractor(), byTerm: map[int32][]int{}, byID: map[string]int{}, pruneEvery: pruneEvery}
}

// candidate is an open story sharing enough with an article.
type candidate struct {
	s     int
	f     []float64
	logit float64
}

// candidates returns the open stories that share at least MinShared terms
// with a, in the order they were founded, and closes stories past the
// window.
func (c *Clusterer) candidates(a *Article, p Params) []candidate {
	c.seq++
	var idx []int
	for _, t := range a.terms {
		for _, s := range c.byTerm[t] {
			for len(c.mark) <= s {
				c.mark = append(c.mark, 0)
			}
			if c.mark[s] != c.seq {
				c.mark[s] = c.seq
				idx = append(idx, s)
			}
		}
	}
	slices.Sort(idx)
	window := int64(p.WindowHours * hourMS)
	var out []candidate
	for _, i := range idx {
		s := c.stories[i]
		if s.removed || s.core == nil || a.Time-s.newest > window {
			continue
		}
		f, sh := candidateFeatures(a, s)
		if sh == 0 || sh < p.MinShared && s.n <= p.SmallStory || p.NamesMustMeet && f[9] == 1 {
			continue
		}
		out = append(out, candidate{s: i, f: f})
	}
	return out
}

func (c *Clusterer) found(a *Article, label string) int {
	s := newStory(a.ID)
	s.label = label
	c.stories = append(c.stories, s)
	i := len(c.stories) - 1
	c.byID[a.ID] = i
	return i
}

func (c *Clusterer) join(i int, a *Article) {
	s := c.stories[i]
	for _, t := range a.terms {
		if s.terms[t] == 0 {
			c.byTerm[t] = append(c.byTerm[t], i)
		}
	}
	s.add(a, c.m.Params)
}

// mergeOthers merges into story i (which a just joined) every other
// candidate that a would also have joined, on its own, and whose centroid
// is close to i's with at least MinShared words in common: the same
// evidence as a join, twice, so a merge cannot chain through one article.
// The older story survives; mergeOthers returns the story a is in.
func (c *Clusterer) mergeOthers(i int, cands []candidate, best int) int {
	for k, cd := range cands {
		if k == best || c.stories[cd.s].removed {
			continue
		}
		o := c.stories[cd.s]
		if sigmoid(cd.logit) < c.m.Params.MinRank || c.m.Decision.prob(decisionFeatures(cd.logit, math.Inf(-1), cd.f)) < c.m.Threshold {
			continue
		}
		s := c.stories[i]
		if centroidCos(s, o) < c.m.MergeCos || sharedStories(s, o) < c.m.Params.MinShared {
			continue
		}
		keep, gone := i, cd.s
		if gone < keep {
			keep, gone = gone, keep
		}
		c.stories[keep].absorb(c.stories[gone], c.m.Params)
		c.stories[gone].removed, c.stories[gone].into = true, keep
		for _, t := range sortedTerms(c.stories[gone].terms) {
			c.byTerm[t] = append(c.byTerm[t], keep)
		}
		i = keep
	}
	return i
}

func sortedTerms(m map[int32]int) []int32 {
	ks := make([]int32, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// pruneEvery is how many articles Add takes between two prunes (a
// Clusterer's pruneEvery; 0 in a test never prunes).
const pruneEvery = 1024

// prune forgets the centroids and members of the stories closed for a
// window before the watermark (so that an article up to a window late still
// finds every story it could join) and drops them from the term index: the
// memory of the open stories stays flat however long the stream runs. The
// stories stay known by id, for Current.
func (c *Clusterer) prune() {
	cut := c.watermark - 2*int64(c.m.Params.WindowHours*hourMS)
	closed := func(i int) bool { return c.stories[i].removed || c.stories[i].newest < cut }
	for t, list := range c.byTerm {
		list = slices.DeleteFunc(list, closed)
		if len(list) == 0 {
			delete(c.byTerm, t)
		} else {
			c.byTerm[t] = list
		}
	}
	for _, s := range c.stories {
		if s.newest < cut || s.removed {
			s.cent, s.core, s.terms = [numSub]map[int32]float64{}, nil, nil
		}
	}
}

// Add assigns d to a story and returns the story's id: the id of its
// founding article.
func (c *Clusterer) Add(d Doc) string {
	a := c.x.Extract(d)
	p := c.m.Params
	c.watermark = max(c.watermark, d.Time)
	if c.adds++; c.pruneEvery > 0 && c.adds%c.pruneEvery == 0 {
		c.prune()
	}
	cands := c.candidates(a, p)
	best, second := -1, math.Inf(-1)
	bestLogit := math.Inf(-1)
	for k := range cands {
		cands[k].logit = c.m.Ranker.logit(cands[k].f)
		if cands[k].logit > bestLogit {
			second = bestLogit
			best, bestLogit = k, cands[k].logit
		} else if cands[k].logit > second {
			second = cands[k].logit
		}
	}
	i := -1
	var df []float64
	if best >= 0 {
		df = decisionFeatures(bestLogit, second, cands[best].f)
		if c.record != nil {
			c.record.Add(df, c.stories[cands[best].s].majority() == c.label)
		}
		if c.recordRank != nil {
			for _, k := range cands {
				c.recordRank.Add(k.f, c.stories[k.s].majority() == c.label)
			}
		}
	}
	if best >= 0 && sigmoid(bestLogit) >= p.MinRank && c.m.Decision.prob(df) >= c.m.Threshold {
		i = cands[best].s
	} else {
		i = c.found(a, "")
	}
	joinedBest := best >= 0 && i == cands[best].s
	c.join(i, a)
	if joinedBest && c.m.MergeCos > 0 {
		i = c.mergeOthers(i, cands, best)
	}
	if c.record != nil {
		c.stories[i].labels[c.label]++
	}
	return c.Current(c.stories[i].id)
}

// majority returns the commonest reference label of the story's members
// (the smallest of equals).
func (s *story) majority() string {
	best, n := s.label, 0
	for l, k := range s.labels {
		if k > n || k == n && l < best {
			best, n = l, k
		}
	}
	return best
}

// absorb merges story o into s: centroids aligned on the newer of the two
// newest times, the newest members of both as the core.
func (s *story) absorb(o *story, p Params) {
	newest := max(s.newest, o.newest)
	ws := math.Exp(-float64(newest-s.newest) / hourMS / p.DecayHours)
	wo := math.Exp(-float64(newest-o.newest) / hourMS / p.DecayHours)
	for sub := range s.cent {
		c := s.cent[sub]
		for id := range c {
			c[id] *= ws
		}
		for _, id := range sortedKeys(o.cent[sub]) {
			c[id] += wo * o.cent[sub][id]
		}
		s.norm2[sub] = norm2(c)
	}
	core := append(slices.Clone(s.core), o.core...)
	slices.SortStableFunc(core, func(a, b *Article) int { return cmp.Compare(a.Time, b.Time) })
	if len(core) > p.Core {
		core = core[len(core)-p.Core:]
	}
	s.core = core
	s.terms = map[int32]int{}
	for _, a := range core {
		for _, t := range a.terms {
			s.terms[t]++
		}
	}
	s.newest, s.oldest = newest, min(s.oldest, o.oldest)
	s.sumT += o.sumT
	s.n += o.n
	s.hasEntities = s.hasEntities || o.hasEntities
	for l, k := range o.labels {
		s.labels[l] += k
	}
}

// norm2 is the squared length of c, summed in the order of term ids so
// that it does not depend on map order.
func norm2(c map[int32]float64) float64 {
	var n2 float64
	for _, id := range sortedKeys(c) {
		n2 += c[id] * c[id]
	}
	return n2
}

func sortedKeys(m map[int32]float64) []int32 {
	ks := make([]int32, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// centroidCos is the cosine of two stories' all-text centroids.
func centroidCos(a, b *story) float64 {
	if a.norm2[subAll] == 0 || b.norm2[subAll] == 0 {
		return 0
	}
	var d float64
	for _, id := range sortedKeys(a.cent[subAll]) {
		d += a.cent[subAll][id] * b.cent[subAll][id]
	}
	return d / math.Sqrt(a.norm2[subAll]*b.norm2[subAll])
}

// sharedStories counts the distinct words two stories' core members share.
func sharedStories(a, b *story) int {
	n := 0
	for t := range a.terms {
		if b.terms[t] > 0 {
			n++
		}
	}
	return n
}

// Current returns the id of the story that story id is part of now,
// following merges; an unknown id is returned as it is.
func (c *Clusterer) Current(id string) string {
	i, ok := c.byID[id]
	if !ok {
		return id
	}
	for c.stories[i].removed {
		i = c.stories[i].into
	}
	return c.stories[i].id
}
