package story

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"time"

	"github.com/newsflow/newsflow/configs"
	"github.com/newsflow/newsflow/operators/story/model"
)

// The stories stage's learned story model (ClusterOptions.Model).
//
// With a model, every open story that shares a distinctive word with an
// article is a candidate (the probe limits still bound how many are
// scored), and the model decides instead of the similarity thresholds:
// (a small story still needs MinShared words in common), and the model decides instead of the similarity thresholds:
// its ranker scores each candidate over the features below, and its
// decision says whether the article joins the best one or founds a story.
// A second candidate is merged into the story the article joined when the
// decision would have joined it too and the two stories' centroids meet
// the merge rule, so that a merge needs the same evidence as a join. Names
// that never meet (namesApart) still keep a candidate out, with or without
// a model.
//
// The features are computed from the story's centroid, which holds its
// members' unit vectors summed and cut to StoryTerms, and from its times:
// the newest, the oldest and the mean event time of its articles.

// StageFeatures are the ranker's features, in the order of a stage
// model's weights; StageDecisionFeatures the decision's: the ranker's
// logit of the best candidate, its margin over the second, and the best
// candidate's features.
var (
	StageFeatures = []string{
		"cos", "cos_long", "cos_decayed", "long",
		"shared", "one_shared", "names_meet", "names_shared",
		"gap_newest_3h", "gap_newest_24h", "gap_oldest_24h", "gap_mean_12h",
		"size",
	}
	StageDecisionFeatures = append([]string{"best_logit", "margin"}, StageFeatures...)
)

// learnedFloor is the least cosine (undecayed) of a candidate with a
// model: below it no story is worth scoring.
const learnedFloor = 0.03

// ErrModelChanged is returned when a clusterer's stored state was built
// by another story model (or none) than the one it is given: the stories
// would continue from decisions the new model would not have made.
var ErrModelChanged = errors.New("story: the stored stories were built by another story model")

// CheckStageModel reports whether m is a model for the stories stage that
// this build can use.
func CheckStageModel(m *model.Model) error {
	switch {
	case m.Stage != model.StageStories:
		return fmt.Errorf("%w: a model for stage %q, not for the stories stage (train one with newsflow stories train)", model.ErrModel, m.Stage)
	case !slices.Equal(m.Features, StageFeatures):
		return fmt.Errorf("%w: ranker features %v, the stories stage computes %v", model.ErrModel, m.Features, StageFeatures)
	case !slices.Equal(m.DecisionFeatures, StageDecisionFeatures):
		return fmt.Errorf("%w: decision features %v, the stories stage computes %v", model.ErrModel, m.DecisionFeatures, StageDecisionFeatures)
	}
	return nil
}

// LoadModel reads a stage model: "builtin" is the one shipped in the
// binary (configs/stories-model.json), anything else a model file's path.
func LoadModel(path string) (*model.Model, error) {
	b := configs.StoriesModel
	if path != "builtin" {
		var err error
		if b, err = os.ReadFile(path); err != nil {
			return nil, err
		}
	}
	m, err := model.Decode(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := CheckStageModel(m); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// modelHash names the model a clusterer's state is built by ("" for the
// similarity thresholds).
func (o ClusterOptions) modelHash() string {
	if o.Model == nil {
		return ""
	}
	return o.Model.SHA256
}

func gaussHours(ms int64, sigmaHours float64) float64 {
	h := math.Abs(float64(ms)) / float64(time.Hour/time.Millisecond) / sigmaHours
	return math.Exp(-h * h / 2)
}

// stageFeatures fills f with the features of candidate cd for the article
// v with names at now; long is where v's length sits between a headline
// (0) and a full text (1), as the thresholds interpolate it.
func (c *Clusterer) stageFeatures(f []float64, v Vector, names []uint32, long float64, cd candidate, now int64) {
	st := c.open.get(cd.num)
	f[0] = cd.cos
	f[1] = cd.cos * long
	f[2] = cd.sim
	f[3] = long
	f[4] = float64(min(cd.shared, 5)) / 5
	f[5] = 0
	if cd.shared == 1 {
		f[5] = 1
	}
	f[6] = 0
	if len(names) > 0 && len(st.names) > 0 { // and not apart: apart ones are no candidates
		f[6] = 1
	}
	f[7] = float64(min(sharedNames(names, st), 3)) / 3
	f[8] = gaussHours(now-st.last, 3)
	f[9] = gaussHours(now-st.last, 24)
	f[10] = gaussHours(now-st.first, 24)
	f[11] = gaussHours(now-st.mean, 12)
	f[12] = math.Log1p(float64(st.size)) / 5
}

// sharedNames counts the article's names (strong ones and parts) that
// story st names too.
func sharedNames(names []uint32, st *centroid) int {
	n := 0
	for _, id := range names {
		if id&weakName == 0 && (hasName(st.names, id&^nameKind) || hasName(st.names, id&^nameKind|partName)) {
			n++
		}
	}
	return n
}

// decisionFeatures fills d with the decision's features for a best
// candidate of logit best and features f, the second best at second
// (-Inf when there is none).
func decisionFeatures(d []float64, best, second float64, f []float64) {
	margin := 5.0
	if !math.IsInf(second, -1) {
		margin = min(best-second, 5)
	}
	d[0], d[1] = best/5, margin/5
	copy(d[2:], f)
}

// scored is a candidate with a model's view of it.
type scored struct {
	candidate
	f     []float64
	logit float64
}

// scoreLearned computes the features and ranker logits of the candidates
// that names do not keep apart, best first (ties: the older story).
func (c *Clusterer) scoreLearned(v Vector, names []uint32, cands []candidate, now int64) []scored {
	m := c.opts.Model
	nf := len(StageFeatures)
	c.scored = c.scored[:0]
	if need := len(cands) * nf; cap(c.featBuf) < need {
		c.featBuf = make([]float64, need)
	}
	buf := c.featBuf[:len(cands)*nf]
	long := c.threshold(v, 0, 1)
	for i, cd := range cands {
		if namesApart(names, v, c.open.get(cd.num)) {
			continue
		}
		f := buf[i*nf : (i+1)*nf : (i+1)*nf]
		c.stageFeatures(f, v, names, long, cd, now)
		c.scored = append(c.scored, scored{candidate: cd, f: f, logit: m.Ranker.Logit(f)})
	}
	slices.SortStableFunc(c.scored, func(a, b scored) int {
		if a.logit != b.logit {
			return cmp.Compare(b.logit, a.logit)
		}
		return cmp.Compare(a.num, b.num)
	})
	return c.scored
}

// joinsLearned reports whether the model joins an article to candidate s,
// the best, with the second best's logit second; it also returns the
// decision's probability.
func (c *Clusterer) joinsLearned(s scored, second float64) (bool, float64) {
	m := c.opts.Model
	if n := len(StageDecisionFeatures); len(c.decBuf) != n {
		c.decBuf = make([]float64, n)
	}
	decisionFeatures(c.decBuf, s.logit, second, s.f)
	p := m.Decision.Prob(c.decBuf)
	return model.Sigmoid(s.logit) >= m.Params.MinRank && p >= m.Threshold, p
}

// chooseLearned is AssignNames's choice with a model: the best candidate
// if the decision joins it. It returns the candidate index in c.scored, or
// -1 for a new story.
func (c *Clusterer) chooseLearned(v Vector, names []uint32, cands []candidate, now int64) int {
	ss := c.scoreLearned(v, names, cands, now)
	if len(ss) == 0 {
		return -1
	}
	second := math.Inf(-1)
	if len(ss) > 1 {
		second = ss[1].logit
	}
	ok, p := c.joinsLearned(ss[0], second)
	if c.observe != nil {
		c.observe(ss, p)
	}
	if !ok {
		return -1
	}
	return 0
}

// bridgeCandidates are the candidates AssignNames considers merging into
// the story an article joined: without a model all of them (the bridge
// threshold then decides); with one, those the decision would have
// joined the article to on their own.
func (c *Clusterer) bridgeCandidates(cands []candidate) []candidate {
	if c.opts.Model == nil {
		return cands
	}
	out := c.bridges[:0]
	for _, s := range c.scored[min(1, len(c.scored)):] {
		if ok, _ := c.joinsLearned(s, math.Inf(-1)); ok {
			out = append(out, s.candidate)
		}
	}
	c.bridges = out
	return out
}

// modelReplayHint tells an operator how to rebuild the stories with the
// model now configured.
const modelReplayHint = "stop the node and rebuild the stories with `newsflow replay --operator stories --from-offset 0` " +
	"(with the new stories.model in its config; the log must still hold the story window), or set stories.model back"

func modelName(hash string) string {
	if hash == "" {
		return "the similarity thresholds (no model)"
	}
	return "the story model " + hash[:min(12, len(hash))]
}

// align returns centroid (or vector) a of latest time ta and b of tb with
// the older one's weights decayed to the newer one's time, as a learned
// model's centroids decay (Params.DecayHours; none without a model or with
// 0): a story is then compared with what it is about lately, not with the
// sum of all it ever held. The older one is copied, not changed.
func (c *Clusterer) align(a []term, ta int64, b []term, tb int64) ([]term, []term) {
	m := c.opts.Model
	if m == nil || m.Params.DecayHours <= 0 || ta == tb {
		return a, b
	}
	scale := func(ts []term, dt int64) []term {
		f := math.Exp(-float64(dt) / float64(time.Hour/time.Millisecond) / m.Params.DecayHours)
		out := make([]term, len(ts))
		for i, t := range ts {
			out[i] = term{ID: t.ID, W: float32(float64(t.W) * f)}
		}
		return out
	}
	if ta < tb {
		return scale(a, tb-ta), b
	}
	return a, scale(b, ta-tb)
}
