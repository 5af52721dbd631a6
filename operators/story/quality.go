package story

import "sort"

// Scores compares a clustering with a reference one.
type Scores struct {
	// B-cubed precision, recall and F1, averaged over items.
	BCubedP, BCubedR, BCubedF1 float64
	// Pairwise precision, recall and F1 over item pairs.
	PairP, PairR, PairF1 float64
	// Items scored, clusters predicted and clusters in the reference.
	Items, Predicted, Reference int
}

// Score compares pred (item → cluster) with truth (item → cluster) over the
// items present in truth; items missing from pred count as singletons.
func Score(truth, pred map[string]string) Scores {
	items := make([]string, 0, len(truth))
	for id := range truth {
		items = append(items, id)
	}
	sort.Strings(items)
	predOf := func(id string) string {
		if p, ok := pred[id]; ok {
			return "p:" + p
		}
		return "singleton:" + id
	}
	// Contingency counts.
	type pair struct{ t, p string }
	joint := map[pair]int{}
	tsize := map[string]int{}
	psize := map[string]int{}
	for _, id := range items {
		t, p := truth[id], predOf(id)
		joint[pair{t, p}]++
		tsize[t]++
		psize[p]++
	}
	var s Scores
	s.Items, s.Predicted, s.Reference = len(items), len(psize), len(tsize)
	if len(items) == 0 {
		return s
	}
	var bp, br float64
	var tp, predPairs, truePairs float64
	for k, n := range joint {
		nf := float64(n)
		bp += nf * nf / float64(psize[k.p])
		br += nf * nf / float64(tsize[k.t])
		tp += nf * (nf - 1) / 2
	}
	for _, n := range psize {
		predPairs += float64(n) * float64(n-1) / 2
	}
	for _, n := range tsize {
		truePairs += float64(n) * float64(n-1) / 2
	}
	s.BCubedP = bp / float64(len(items))
	s.BCubedR = br / float64(len(items))
	s.BCubedF1 = f1(s.BCubedP, s.BCubedR)
	s.PairP, s.PairR = 1, 1
	if predPairs > 0 {
		s.PairP = tp / predPairs
	}
	if truePairs > 0 {
		s.PairR = tp / truePairs
	}
	s.PairF1 = f1(s.PairP, s.PairR)
	return s
}

func f1(p, r float64) float64 {
	if p+r == 0 {
		return 0
	}
	return 2 * p * r / (p + r)
}
