package model

import (
	"cmp"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"time"
)

// UCIMergedPairs are the three events uci_dev labels as two stories each,
// one a day (the Titanfall launch, the Cosmos premiere, the Mt. Gox
// collapse; see operators/story TestDenseStreamPrecisionCeiling): the
// second label of each pair is scored as the first.
var UCIMergedPairs = [][2]string{
	{"dw0Jnfj8vEPaLZM8TQMSCbVaYeyrM", "d8bRIS2P12vQAfMQyl607kCwJ9A5M"},
	{"dF8Q4zU4z14K2OMVh3PR3dzl6x5BM", "dZ9Dt3M_96s6vvMSB5n0INMObqVuM"},
	{"d85PwV5UxEUaHMM0to00pLgkAXkbM", "dUtPmDoOKHwco0M4wh2hZy-Sx5CrM"},
}

// MergeLabels returns docs with the second label of each pair replaced by
// the first.
func MergeLabels(docs []Labelled, pairs [][2]string) []Labelled {
	to := map[string]string{}
	for _, p := range pairs {
		to[p[1]] = p[0]
	}
	out := slices.Clone(docs)
	for i := range out {
		if l, ok := to[out[i].Story]; ok {
			out[i].Story = l
		}
	}
	return out
}

// Spread moves each document's time later by a random offset in [0, d),
// drawn from a generator seeded with seed in document order, and sorts the
// documents by the new time (stably). uci_dev's times are per-story crawl
// times that give the labels away; coverage of a real event spreads over
// hours.
func Spread(docs []Labelled, d time.Duration, seed uint64) []Labelled {
	out := slices.Clone(docs)
	if d <= 0 {
		return out
	}
	r := rand.New(rand.NewPCG(seed, 0x6e657773666c6f77))
	for i := range out {
		out[i].Time += r.Int64N(d.Milliseconds())
	}
	slices.SortStableFunc(out, func(a, b Labelled) int { return cmp.Compare(a.Time, b.Time) })
	return out
}

// Folds assigns the stories of docs to k folds, so that every article of a
// story is in the same fold: the stories sorted by a hash of their label
// and the seed, dealt in turn. It returns the fold of each document.
func Folds(docs []Labelled, k int, seed uint64) []int {
	var labels []string
	seen := map[string]bool{}
	for _, d := range docs {
		if !seen[d.Story] {
			seen[d.Story] = true
			labels = append(labels, d.Story)
		}
	}
	h := func(l string) uint64 {
		f := fnv.New64a()
		var b [8]byte
		for i := range b {
			b[i] = byte(seed >> (8 * i))
		}
		f.Write(b[:])
		f.Write([]byte(l))
		return f.Sum64()
	}
	slices.SortFunc(labels, func(a, b string) int { return cmp.Or(cmp.Compare(h(a), h(b)), cmp.Compare(a, b)) })
	fold := map[string]int{}
	for i, l := range labels {
		fold[l] = i % k
	}
	out := make([]int, len(docs))
	for i, d := range docs {
		out[i] = fold[d.Story]
	}
	return out
}

// Split returns the documents of fold f (test) and of the others (train),
// each in the order of docs.
func Split(docs []Labelled, folds []int, f int) (train, test []Labelled) {
	for i, d := range docs {
		if folds[i] == f {
			test = append(test, d)
		} else {
			train = append(train, d)
		}
	}
	return train, test
}

// BCubedScores are B-cubed precision, recall and F1 averaged over items.
type BCubedScores struct{ P, R, F1 float64 }

// BCubed scores pred against truth over the items of truth (items missing
// from pred are singletons). operators/story.Score computes the same
// B-cubed figures with the pairwise ones; this one serves the threshold
// search of Train, which that package cannot be imported for.
func BCubed(truth, pred map[string]string) BCubedScores {
	type pair struct{ t, p string }
	joint, ts, ps := map[pair]int{}, map[string]int{}, map[string]int{}
	for id, t := range truth {
		p, ok := pred[id]
		if !ok {
			p = "\x00" + id
		}
		joint[pair{t, p}]++
		ts[t]++
		ps[p]++
	}
	var s BCubedScores
	if len(truth) == 0 {
		return s
	}
	keys := make([]pair, 0, len(joint))
	for k := range joint {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b pair) int { return cmp.Or(cmp.Compare(a.t, b.t), cmp.Compare(a.p, b.p)) })
	for _, k := range keys {
		n := float64(joint[k])
		s.P += n * n / float64(ps[k.p])
		s.R += n * n / float64(ts[k.t])
	}
	s.P /= float64(len(truth))
	s.R /= float64(len(truth))
	if s.P+s.R > 0 {
		s.F1 = 2 * s.P * s.R / (s.P + s.R)
	}
	return s
}
