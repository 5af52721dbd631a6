package story

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/newsflow/newsflow/operators/story/model"
)

// Explanation is why the clusterer put an article where it did: the open
// stories it scored and what each needed, and the stories it merged.
// Recording it (Clusterer.SetExplain) changes no decision.
type Explanation struct {
	// Terms are the article's index terms, heaviest first, up to 12.
	Terms []string
	// Candidates are the stories scored, most similar first.
	Candidates []ExplainedCandidate
	// Joined is the story the article joined, New whether it founded it.
	Joined uint64
	New    bool
	// NearCopyOf is the article it nearly copies, when it joined that
	// article's story as a near-copy without a search (set by the
	// Builder).
	NearCopyOf string
	// Merges are the candidates the article bridged into Joined.
	Merges []ExplainedCandidate
	// With a learned model (learned.go): its hash, the decision's join
	// probability for the best candidate and the threshold it needed.
	Model           string
	Join, Threshold float64
}

// Contribution is one feature of a learned model's score: its value and
// the weight it is multiplied by.
type Contribution struct {
	Feature       string
	Value, Weight float64
}

// ExplainedCandidate is one open story as the article saw it.
type ExplainedCandidate struct {
	Story uint64
	// StoryID and Title name it (set by the Builder).
	StoryID, Title string
	// Similarity is the cosine with the story's centroid times the time
	// decay (Decay, from AgeHours between the article and the story's
	// newest); Needed is the least similarity that joins (the join
	// threshold for the article's length plus the small-story boost for
	// Size) or, for a merge, that merges.
	Similarity, Decay, AgeHours, Needed float64
	Size                                int
	// Shared are the words other than generic ones the article and the
	// story both hold.
	Shared []string
	// With a learned model: the ranker's probability that this is the
	// article's story, its bias and each feature's contribution (in the
	// model's order); Apart when names kept the story out (namesApart).
	Rank          float64
	Bias          float64
	Contributions []Contribution
	Apart         bool
}

// SetExplain makes Assign record an Explanation of each decision
// (LastExplanation), for newsflow cluster --explain.
func (c *Clusterer) SetExplain(on bool) {
	c.explaining = on
	c.explained = Explanation{}
}

// LastExplanation is the Explanation of the last Assign or Join, when
// SetExplain is on.
func (c *Clusterer) LastExplanation() Explanation { return c.explained }

// explainCandidate describes candidate cd of the article v at now.
func (c *Clusterer) explainCandidate(v Vector, cd candidate, now int64, needed float64) ExplainedCandidate {
	e := ExplainedCandidate{Story: cd.num, Similarity: cd.sim, Needed: needed}
	if st := c.open.get(cd.num); st != nil {
		e.Size = st.size
		e.AgeHours = float64(abs(now-st.last)) / float64(time.Hour/time.Millisecond)
		e.Decay = c.decay(now, st.last)
		for x := range sharedTerms(v, st.terms) {
			if !c.generic[x.ID] {
				e.Shared = append(e.Shared, c.words[x.ID])
			}
		}
	}
	return e
}

// explainCandidates records the article v at now and the candidates it
// scored, before Assign adds it to a story.
func (c *Clusterer) explainCandidates(v Vector, now int64, cands []candidate, th float64) {
	x := Explanation{}
	terms := slices.Clone(v)
	slices.SortFunc(terms, byWeightDesc)
	for _, t := range terms[:min(len(terms), 12)] {
		x.Terms = append(x.Terms, c.words[t.ID])
	}
	if m := c.opts.Model; m != nil {
		x.Model, x.Threshold = m.SHA256, m.Threshold
		if len(c.scored) > 0 {
			x.Join = m.Decision.Prob(c.decBuf)
		}
		scored := map[uint64]scored{}
		for _, s := range c.scored {
			scored[s.num] = s
		}
		for _, s := range c.scored { // best first
			e := c.explainCandidate(v, s.candidate, now, 0)
			e.Rank, e.Bias = model.Sigmoid(s.logit), m.Ranker.Bias
			for i, w := range m.Ranker.Weights {
				e.Contributions = append(e.Contributions, Contribution{Feature: m.Features[i], Value: s.f[i], Weight: w})
			}
			x.Candidates = append(x.Candidates, e)
		}
		for _, cd := range cands {
			if _, ok := scored[cd.num]; !ok {
				e := c.explainCandidate(v, cd, now, 0)
				e.Apart = true
				x.Candidates = append(x.Candidates, e)
			}
		}
		c.explained = x
		return
	}
	for _, cd := range cands {
		size := 0
		if st := c.open.get(cd.num); st != nil {
			size = st.size
		}
		x.Candidates = append(x.Candidates, c.explainCandidate(v, cd, now, c.joinThreshold(th, size)))
	}
	c.explained = x
}

// explainDecision records what Assign decided: the story a, and the
// merges with the similarity of each (merged) and the one they needed.
func (c *Clusterer) explainDecision(a Assignment, merged map[uint64]float64, merge float64) {
	c.explained.Joined, c.explained.New = a.Story, a.New
	for _, num := range a.Merged {
		c.explained.Merges = append(c.explained.Merges, ExplainedCandidate{Story: num, Similarity: merged[num], Needed: merge})
	}
}

// WriteExplanation writes x for the article id with title, in lines a
// person reads.
func WriteExplanation(w io.Writer, id, title string, x Explanation) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %q\n", id, title)
	if x.NearCopyOf != "" {
		fmt.Fprintf(&b, "  joined %s as a near-copy of article %s (SimHash and MinHash, before any story is scored)\n",
			storyName(x.Joined, x.joined().StoryID, x.joined().Title), x.NearCopyOf)
		_, err := io.WriteString(w, b.String())
		return err
	}
	fmt.Fprintf(&b, "  terms: %s\n", strings.Join(x.Terms, " "))
	if x.Model != "" {
		writeLearned(&b, x)
		_, err := io.WriteString(w, b.String())
		return err
	}
	switch {
	case x.New && len(x.Candidates) == 0:
		b.WriteString("  founded a new story: no open story sharing its distinctive words came near enough to consider\n")
	case x.New:
		best := x.Candidates[0]
		fmt.Fprintf(&b, "  founded a new story: the most similar, %s, scored %.3f, under the %.3f it needed\n",
			storyName(best.Story, best.StoryID, best.Title), best.Similarity, best.Needed)
	default:
		for _, cd := range x.Candidates {
			if cd.Story == x.Joined || (len(x.Merges) > 0 && slices.ContainsFunc(x.Merges, func(m ExplainedCandidate) bool { return m.Story == cd.Story })) {
				if cd.Similarity >= cd.Needed {
					fmt.Fprintf(&b, "  joined %s: similarity %.3f, at least the %.3f it needed\n", storyName(cd.Story, cd.StoryID, cd.Title), cd.Similarity, cd.Needed)
					break
				}
			}
		}
	}
	for _, cd := range x.Candidates {
		fmt.Fprintf(&b, "  candidate %s: similarity %.3f (needs %.3f; decay %.3f for %.1f h), %d articles, shared: %s\n",
			storyName(cd.Story, cd.StoryID, cd.Title), cd.Similarity, cd.Needed, cd.Decay, cd.AgeHours, cd.Size, strings.Join(cd.Shared, " "))
	}
	for _, m := range x.Merges {
		fmt.Fprintf(&b, "  merged %s: its centroid and the joined story's at %.3f (needs %.3f)\n", storyName(m.Story, m.StoryID, m.Title), m.Similarity, m.Needed)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeLearned writes the decision of a learned model and its candidates,
// each with the ranker's probability and the features that weighed most.
func writeLearned(b *strings.Builder, x Explanation) {
	fmt.Fprintf(b, "  decided by the story model %.12s\n", x.Model)
	var best *ExplainedCandidate
	if len(x.Candidates) > 0 && !x.Candidates[0].Apart {
		best = &x.Candidates[0]
	}
	switch {
	case best == nil:
		b.WriteString("  founded a new story: no open story sharing its distinctive words was a candidate\n")
	case x.New:
		fmt.Fprintf(b, "  founded a new story: the best candidate, %s, ranked %.3f, and the decision gave joining it %.3f, under the %.2f it needed\n",
			storyName(best.Story, best.StoryID, best.Title), best.Rank, x.Join, x.Threshold)
	default:
		fmt.Fprintf(b, "  joined %s: ranked first at %.3f, and the decision gave joining it %.3f, at least the %.2f it needed\n",
			storyName(best.Story, best.StoryID, best.Title), best.Rank, x.Join, x.Threshold)
	}
	for _, cd := range x.Candidates {
		if cd.Apart {
			fmt.Fprintf(b, "  not a candidate: %s, whose names the article shares none of (similarity %.3f), shared: %s\n",
				storyName(cd.Story, cd.StoryID, cd.Title), cd.Similarity, strings.Join(cd.Shared, " "))
			continue
		}
		cs := slices.Clone(cd.Contributions)
		slices.SortStableFunc(cs, func(a, b Contribution) int {
			return cmp.Compare(math.Abs(b.Value*b.Weight), math.Abs(a.Value*a.Weight))
		})
		var parts []string
		for _, c := range cs {
			if c.Value*c.Weight != 0 {
				parts = append(parts, fmt.Sprintf("%s %.3f×%.2f", c.Feature, c.Value, c.Weight))
			}
		}
		fmt.Fprintf(b, "  candidate %s: rank %.3f = σ(%.2f + %s), %d articles, %.1f h since its newest, shared: %s\n",
			storyName(cd.Story, cd.StoryID, cd.Title), cd.Rank, cd.Bias, strings.Join(parts, " + "), cd.Size, cd.AgeHours, strings.Join(cd.Shared, " "))
	}
	for _, m := range x.Merges {
		fmt.Fprintf(b, "  merged %s: the decision would join it too, and its centroid and the joined story's meet at %.3f (needs %.3f)\n",
			storyName(m.Story, m.StoryID, m.Title), m.Similarity, m.Needed)
	}
}

// joined is the candidate the article joined, if it was one.
func (x Explanation) joined() ExplainedCandidate {
	for _, cd := range x.Candidates {
		if cd.Story == x.Joined {
			return cd
		}
	}
	return ExplainedCandidate{Story: x.Joined}
}

func storyName(num uint64, id, title string) string {
	switch {
	case id != "" && title != "":
		return fmt.Sprintf("story %s %q", id, title)
	case id != "":
		return "story " + id
	}
	return fmt.Sprintf("story #%d", num)
}
