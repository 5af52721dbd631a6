package story

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/internal/feed"
	"github.com/newsflow/newsflow/internal/text"
)

// denseMix compresses the UCI headlines and the orx365 items onto one time
// axis on which the whole mix arrives at perMinute articles a minute: the
// UCI headlines keep their relative times, squeezed into the span, and the
// unrelated items are spread evenly over it. Texts are cleaned as the
// articles operator cleans them (the orx365 descriptions carry markup).
func denseMix(docs, extra []labelled, perMinute int) []labelled {
	n := len(docs) + len(extra)
	span := int64(n) * int64(time.Minute/time.Millisecond) / int64(perMinute)
	lo, hi := docs[0].Time, docs[0].Time
	for _, d := range docs {
		lo, hi = min(lo, d.Time), max(hi, d.Time)
	}
	all := make([]labelled, 0, n)
	clean := func(d labelled) labelled {
		d.Title, d.Body = text.Clean(d.Title, feed.MaxTitleBytes), text.Clean(d.Body, feed.MaxSummaryBytes)
		return d
	}
	for _, d := range docs {
		d.Time = lo + (d.Time-lo)*span/max(hi-lo, 1)
		all = append(all, clean(d))
	}
	for i, d := range extra {
		d.Time = lo + span*int64(i)/int64(len(extra))
		all = append(all, clean(d))
	}
	return byTime(all)
}

// purity is what a reader of the real stories sees in a mixed stream.
type purity struct {
	Scores
	// Contaminated is the share of labelled articles whose story also
	// holds an unrelated article.
	Contaminated float64
	// Largest is the size of the largest story, and LargestUnrelated how
	// many of its articles are unrelated.
	Largest, LargestUnrelated int
}

func measurePurity(t testing.TB, opts Options, all []labelled, truth map[string]string) purity {
	t.Helper()
	pred := buildStories(t, opts, all)
	members := map[string][]string{}
	for id, s := range pred {
		members[s] = append(members[s], id)
	}
	p := purity{Scores: Score(truth, pred)}
	unrelated := func(id string) bool { return strings.HasPrefix(id, "orx-") }
	mixed := map[string]bool{}
	for s, ids := range members {
		u := 0
		for _, id := range ids {
			if unrelated(id) {
				u++
			}
		}
		mixed[s] = u > 0 && u < len(ids)
		if len(ids) > p.Largest {
			p.Largest, p.LargestUnrelated = len(ids), u
		}
	}
	n := 0
	for id := range truth {
		if mixed[pred[id]] {
			n++
		}
	}
	p.Contaminated = float64(n) / float64(len(truth))
	return p
}

// TestDenseStreamPurity measures the real stories of uci_dev when 10,851
// unrelated real articles arrive among them and the mix arrives at 10, 100
// and 1,000 articles a minute: B-cubed scores of the real stories, the
// share of their articles in a story that also holds an unrelated one, and
// the largest story. The floors are today's figures less a margin, so that
// the test fails on a regression; they rise as the story stage improves
// (the targets are precision ≥ 0.93 and ≤ 5% contaminated at every
// density).
func TestDenseStreamPurity(t *testing.T) {
	docs := loadLabelled(t, "uci_dev.ndjson")
	extra := loadDistractors(t)
	asLabelled, truth := truthOf(docs), mergedTruth(docs)
	// Against the labels as given (measured before merging the day-split
	// pairs), before any work on purity: P 0.913 / 0.754 / 0.751,
	// contaminated 28% / 62% / 63%, largest story 481 / 482 / 460 articles
	// (at 10 a minute a blob of unrelated pieces; at 100 and 1,000 two
	// launch days of one real event). Then P 0.894 / 0.753 / 0.754,
	// contaminated 28.5% / 60.1% / 66.1%, largest 443 / 471 / 472; now, with
	// the tokens of internal/text: P 0.895 / 0.754 / 0.753, contaminated
	// 28.5% / 60.2% / 61.5%, largest 455 / 467 / 470; with names: P
	// 0.894 / 0.772 / 0.775, contaminated 27.4% / 54.7% / 53.9%, largest 514
	// / 532 / 542. The floors below are against the labels with uci_dev's
	// three day-split pairs merged (one event each, minutes apart here).
	floors := map[int]struct{ p, contaminated float64 }{
		// Measured against them: P 0.940 / 0.879 / 0.882.
		10: {0.92, 0.30}, 100: {0.86, 0.58}, 1000: {0.86, 0.58},
	}
	for _, density := range []int{10, 100, 1000} {
		t.Run(fmt.Sprintf("%d-per-minute", density), func(t *testing.T) {
			mix := denseMix(docs, extra, density)
			p := measurePurity(t, Options{}, mix, truth)
			pl := measurePurity(t, Options{}, mix, asLabelled)
			t.Logf("%4d articles/min: B-cubed P %.3f R %.3f F1 %.3f (as labelled %.3f / %.3f / %.3f); %.1f%% of the real stories' articles share a story with unrelated ones; largest story %d (%d unrelated)",
				density, p.BCubedP, p.BCubedR, p.BCubedF1, pl.BCubedP, pl.BCubedR, pl.BCubedF1, 100*p.Contaminated, p.Largest, p.LargestUnrelated)
			if f := floors[density]; p.BCubedP < f.p || p.Contaminated > f.contaminated {
				t.Errorf("precision %.3f (floor %.2f), contaminated %.1f%% (ceiling %.0f%%)", p.BCubedP, f.p, 100*p.Contaminated, 100*f.contaminated)
			}
		})
	}
}

// TestDenseStreamPrecisionCeiling shows why precision 0.93 cannot be
// reached at 100 and 1,000 articles a minute. uci_dev labels three events
// as two stories each, one per day: the Titanfall launch, the Cosmos
// premiere and the Mt. Gox collapse. Compressed to 140 or 14 minutes, the
// two days of each arrive minutes apart in the same words, and a stage that
// keeps them apart would have to split a live story on a pause of minutes.
// Scoring the labels themselves, with only those three pairs merged,
// already gives less than 0.93.
func TestDenseStreamPrecisionCeiling(t *testing.T) {
	docs := loadLabelled(t, "uci_dev.ndjson")
	truth := truthOf(docs)
	pairs := [][2]string{
		{"dw0Jnfj8vEPaLZM8TQMSCbVaYeyrM", "d8bRIS2P12vQAfMQyl607kCwJ9A5M"},
		{"dF8Q4zU4z14K2OMVh3PR3dzl6x5BM", "dZ9Dt3M_96s6vvMSB5n0INMObqVuM"},
		{"d85PwV5UxEUaHMM0to00pLgkAXkbM", "dUtPmDoOKHwco0M4wh2hZy-Sx5CrM"},
	}
	// The three commonest title words of each label: the pairs share one,
	// so the data, not this comment, shows each pair is about one thing.
	top := func(label string) []string {
		n := map[string]int{}
		for _, d := range docs {
			if d.Story == label {
				for _, w := range text.Tokenize(d.Title, tokenOptions) {
					n[w]++
				}
			}
		}
		ws := make([]string, 0, len(n))
		for w := range n {
			ws = append(ws, w)
		}
		slices.SortFunc(ws, func(a, b string) int { return cmp.Or(n[b]-n[a], strings.Compare(a, b)) })
		return ws[:min(3, len(ws))]
	}
	merged := map[string]string{}
	for id, s := range truth {
		merged[id] = s
	}
	for _, p := range pairs {
		a, b := top(p[0]), top(p[1])
		i := slices.IndexFunc(a, func(w string) bool { return slices.Contains(b, w) })
		if i < 0 {
			t.Fatalf("labels %s and %s: commonest title words %q and %q share none", p[0], p[1], a, b)
		}
		t.Logf("%s and %s: both about %q (%q, %q)", p[0][:6], p[1][:6], a[i], a, b)
		for id, s := range merged {
			if s == p[1] {
				merged[id] = p[0]
			}
		}
	}
	s := Score(truth, merged)
	t.Logf("the labels with the three pairs merged: B-cubed P %.3f R %.3f", s.BCubedP, s.BCubedR)
	if s.BCubedP >= 0.93 {
		t.Errorf("precision %.3f: the ceiling argument no longer holds", s.BCubedP)
	}
}
