package rank

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// SimOptions describe a simulated population for offline evaluation.
type SimOptions struct {
	Users, Stories, Sources, Topics int
	// HistoryReads is how many reads build each user's interest vector.
	HistoryReads int
	// Alpha is the interest EMA weight per read (as the interest operator).
	Alpha float64
	Seed  uint64
}

// DefaultSimOptions returns a small realistic population.
func DefaultSimOptions() SimOptions {
	return SimOptions{Users: 500, Stories: 2000, Sources: 120, Topics: 8, HistoryReads: 40, Alpha: 0.1, Seed: 1}
}

// Metrics of a ranker over the simulated users (means).
type Metrics struct {
	AUC, MRR, NDCG10 float64
	// Diversity is the mean topic dissimilarity of pairs in the top 10.
	Diversity float64
	// MaxPerSourceTop20 is the most stories of one source in any top 20.
	MaxPerSourceTop20 int
}

func (m Metrics) String() string {
	return fmt.Sprintf("AUC %.3f MRR %.3f nDCG@10 %.3f diversity %.3f max/source(top20) %d", m.AUC, m.MRR, m.NDCG10, m.Diversity, m.MaxPerSourceTop20)
}

// Evaluation compares the personalized ranking with popularity-only and
// recency-only rankings on the same simulated users.
type Evaluation struct {
	Personalized, Popularity, Recency Metrics
}

type simUser struct {
	pref []float64 // latent topic preference, sums to 1
}

// Simulate builds a population of users with latent topic preferences and
// stories from sources of varying authority, lets each user read from a
// feed of popular stories (clicks driven by preference, freshness and a
// position bias) to build their interest vector with the interest
// operator's EMA, and then scores each ranker against fresh clicks drawn
// from the same click model on all candidates.
func Simulate(o SimOptions, opts Options) Evaluation {
	r := rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15))
	topics := make([]string, o.Topics)
	for i := range topics {
		topics[i] = fmt.Sprint("topic", i)
	}
	authority := make([]float64, o.Sources)
	for i := range authority {
		authority[i] = 0.2 + 0.8*r.Float64()
	}
	now := int64(48 * time.Hour / time.Millisecond)
	cands := make([]Candidate, o.Stories)
	for i := range cands {
		src := int(float64(o.Sources) * math.Pow(r.Float64(), 2)) // big sources publish more
		main := r.IntN(o.Topics)
		c := Candidate{
			StoryID: fmt.Sprintf("s%05d", i), SourceID: fmt.Sprint("src", src), Authority: authority[src],
			LastSeen: now - int64(r.Float64()*48*float64(time.Hour/time.Millisecond)), Lambda: 0.1,
			Topics: []Topic{{topics[main], 0.8}},
		}
		if r.IntN(2) == 0 {
			c.Topics = append(c.Topics, Topic{topics[(main+1+r.IntN(o.Topics-1))%o.Topics], 0.3})
		}
		n := 1 + int(math.Exp(r.NormFloat64()*1.2))
		for k := range n {
			c.Sources = append(c.Sources, fmt.Sprint("src", (src+k)%o.Sources))
		}
		c.Breaking = r.Float64() < 0.01
		c.Trending = math.Min(1, float64(n)/30*r.Float64())
		cands[i] = c
	}
	// Popularity ranking: sources, trending; recency: latest first.
	popular := slices.Clone(cands)
	slices.SortFunc(popular, func(a, b Candidate) int {
		pa, pb := float64(len(a.Sources))+10*a.Trending, float64(len(b.Sources))+10*b.Trending
		if c := cmp.Compare(pb, pa); c != 0 {
			return c
		}
		return cmp.Compare(a.StoryID, b.StoryID)
	})
	recent := slices.Clone(cands)
	slices.SortFunc(recent, func(a, b Candidate) int {
		if c := cmp.Compare(b.LastSeen, a.LastSeen); c != 0 {
			return c
		}
		return cmp.Compare(a.StoryID, b.StoryID)
	})

	var ev Evaluation
	var nUsers float64
	for range o.Users {
		u := simUser{pref: make([]float64, o.Topics)}
		// One or two favourite topics, a little of everything else.
		for k := range u.pref {
			u.pref[k] = 0.05 * r.Float64()
		}
		u.pref[r.IntN(o.Topics)] += 1
		if r.IntN(2) == 0 {
			u.pref[r.IntN(o.Topics)] += 0.5
		}
		normalize(u.pref)
		topicIndex := func(t string) int {
			var k int
			fmt.Sscanf(t, "topic%d", &k)
			return k
		}
		clickP := func(c *Candidate) float64 {
			var aff float64
			var w float64
			for _, t := range c.Topics {
				aff += t.Weight * u.pref[topicIndex(t.Topic)]
				w += t.Weight
			}
			aff /= w
			h := float64(now-c.LastSeen) / float64(time.Hour/time.Millisecond)
			fresh := math.Exp(-0.1 * h)
			return math.Min(1, 1.6*aff*(0.3+0.7*fresh)*(0.7+0.3*c.Authority))
		}
		// History: the user browses pages of the popular feed; position
		// bias 1/log2(rank+2); clicks build the interest vector (EMA).
		interest := map[string]float64{}
		reads := 0
		for pos := 0; reads < o.HistoryReads && pos < len(popular); pos++ {
			c := &popular[pos]
			if r.Float64() < clickP(c)/math.Log2(float64(pos%20)+2) {
				x := map[string]float64{}
				var tot float64
				for _, t := range c.Topics {
					tot += t.Weight
				}
				for _, t := range c.Topics {
					x[t.Topic] += t.Weight / tot
				}
				for k := range interest {
					interest[k] *= 1 - o.Alpha
				}
				for k, v := range x {
					interest[k] += o.Alpha * v
				}
				reads++
			}
		}
		// Ground truth: clicks on the candidates, without position bias.
		clicked := map[string]bool{}
		for i := range cands {
			if r.Float64() < clickP(&cands[i]) {
				clicked[cands[i].StoryID] = true
			}
		}
		if len(clicked) == 0 || len(clicked) == len(cands) {
			continue
		}
		nUsers++
		reader := &Reader{Interest: interest}
		items := Rank(cands, reader, now, opts)
		pers := make([]Candidate, len(items))
		for i, it := range items {
			pers[i] = it.Candidate
			pers[i].SourceID = it.ShownSource() // the outlet the card shows
		}
		add(&ev.Personalized, score(pers, clicked))
		add(&ev.Popularity, score(popular, clicked))
		add(&ev.Recency, score(recent, clicked))
	}
	for _, m := range []*Metrics{&ev.Personalized, &ev.Popularity, &ev.Recency} {
		m.AUC /= nUsers
		m.MRR /= nUsers
		m.NDCG10 /= nUsers
		m.Diversity /= nUsers
	}
	return ev
}

func normalize(v []float64) {
	var s float64
	for _, x := range v {
		s += x
	}
	for i := range v {
		v[i] /= s
	}
}

func add(acc *Metrics, m Metrics) {
	acc.AUC += m.AUC
	acc.MRR += m.MRR
	acc.NDCG10 += m.NDCG10
	acc.Diversity += m.Diversity
	acc.MaxPerSourceTop20 = max(acc.MaxPerSourceTop20, m.MaxPerSourceTop20)
}

// score computes the metrics of one ordering against one user's clicks.
func score(order []Candidate, clicked map[string]bool) Metrics {
	var m Metrics
	// AUC: the chance a clicked story ranks above a non-clicked one.
	pos, neg, above := 0.0, 0.0, 0.0
	for _, c := range order {
		if clicked[c.StoryID] {
			pos++
		} else {
			neg++
			above += pos
		}
	}
	if pos > 0 && neg > 0 {
		m.AUC = above / (pos * neg)
	}
	for i, c := range order {
		if clicked[c.StoryID] {
			m.MRR = 1 / float64(i+1)
			break
		}
	}
	var dcg, idcg float64
	for i := 0; i < 10 && i < len(order); i++ {
		if clicked[order[i].StoryID] {
			dcg += 1 / math.Log2(float64(i)+2)
		}
		if float64(i) < pos {
			idcg += 1 / math.Log2(float64(i)+2)
		}
	}
	if idcg > 0 {
		m.NDCG10 = dcg / idcg
	}
	top := order[:min(10, len(order))]
	var pairs, diff float64
	for i := range top {
		for j := i + 1; j < len(top); j++ {
			pairs++
			diff += 1 - topicOverlap(&top[i], &top[j])
		}
	}
	if pairs > 0 {
		m.Diversity = diff / pairs
	}
	per := map[string]int{}
	for _, c := range order[:min(20, len(order))] {
		per[c.SourceID]++
		m.MaxPerSourceTop20 = max(m.MaxPerSourceTop20, per[c.SourceID])
	}
	return m
}
