package searchindex

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/blevesearch/bleve/v2/numeric"
)

// bleveTwin returns an Index over ix's Bleve index whose relevance
// searches take Bleve's path (every match scored by Bleve's searchers).
func bleveTwin(ix *Index) *Index {
	one := &Index{dir: ix.dir, opts: ix.opts, bi: ix.bi, en: ix.en, keyword: ix.keyword, hl: ix.hl, bleveOnly: true}
	one.maxPublished.Store(ix.maxPublished.Load())
	return one
}

// topkCorpus is real headlines over several segments, with deletions, plus
// documents made to test the bounds: a match only in summary and content
// that outranks titles, long titles, repeated terms, phrases with stop
// words, and times around 1970 and before it.
func topkCorpus(t *testing.T, o Options) *Index {
	t.Helper()
	var docs []Doc
	for i := range 12_000 {
		d := benchDoc(i)
		if i%7 == 0 {
			d.Content = benchContent(i, 300)
		}
		docs = append(docs, d)
	}
	long := strings.Repeat("word ", 40)
	for i := range 30 {
		docs = append(docs, Doc{ID: fmt.Sprintf("z%02d", i), Title: long + "zebra", PublishedAt: at(i)})
	}
	docs = append(docs,
		Doc{ID: "zz", Title: "Quiet day", Summary: "zebra", Content: "zebra", PublishedAt: at(1)},
		Doc{ID: "zq", Title: "Zebra zebra zebra", Summary: "zebra crossing", PublishedAt: at(2)},
		Doc{ID: "zr", Title: "The state of the market", Summary: "state market", PublishedAt: at(3)},
		Doc{ID: "zs", Title: "Market state", Summary: "the state of the market", PublishedAt: at(3)},
		Doc{ID: "e1", Title: "Epoch market report", PublishedAt: time.Unix(0, 0).Add(-90 * time.Minute)},
		Doc{ID: "e2", Title: "Epoch market report", PublishedAt: time.Unix(0, 0).Add(30 * time.Minute)},
		Doc{ID: "e3", Title: "Epoch market report"}, // zero time: the epoch
		Doc{ID: "e4", Title: "Old market report", PublishedAt: time.Date(1850, 5, 1, 10, 20, 0, 0, time.UTC)},
	)
	ix, _ := newTestIndex(t, nil, o)
	for lo := 0; lo < len(docs); lo += 3_000 {
		if err := ix.Apply(docs[lo:min(lo+3_000, len(docs))], nil); err != nil {
			t.Fatal(err)
		}
	}
	var deletes []string
	for i := 0; i < 12_000; i += 89 {
		deletes = append(deletes, docs[i].ID)
	}
	if err := ix.Apply(nil, deletes); err != nil {
		t.Fatal(err)
	}
	return ix
}

// TestTopKSameAsBleve compares every relevance page of the top-k path with
// Bleve's path over the same index: the same hits with the same scores
// (bit for bit), fields and highlights, the same totals and cursors, for
// one to four terms, with phrases, filters, aligned and unaligned time
// ranges, page sizes and cursors three pages deep.
func TestTopKSameAsBleve(t *testing.T) {
	if testing.Short() {
		t.Skip("indexes 12,000 documents")
	}
	for _, o := range []Options{{}, {AnyTerm: true}} {
		ix := topkCorpus(t, o)
		one := bleveTwin(ix)
		queries := append(benchQueries(40), "zebra", "quiet zebra", "zebra zebra", "the state of the market",
			"market state", "market", "epoch market", "report", "china", "trade deal talks", "the market",
			"investors", "nonexistentword", "market nonexistentword")
		for _, classes := range []int{64, 0} {
			maxClasses = classes
			checkTopK(t, ix, one, o, queries)
		}
		maxClasses = 64
	}
}

// checkTopK compares the pages of queries with Bleve's.
func checkTopK(t *testing.T, ix, one *Index, o Options, queries []string) {
	t.Helper()
	checked, onPath := 0, 0
	for qi, q := range queries {
		for _, r := range []Request{
			{Query: q},
			{Query: q, Limit: 3},
			{Query: q, Limit: MaxLimit},
			{Query: q, Topic: benchTopics[qi%len(benchTopics)]},
			{Query: q, Source: benchCorpus()[qi].source, Topic: benchTopics[qi%len(benchTopics)]},
			{Query: q, From: t0.Add(12 * time.Hour)},
			{Query: q, From: t0.Add(5*time.Hour + 17*time.Minute), To: t0.Add(20*time.Hour + 3*time.Second)},
			{Query: q, From: t0.Add(5*time.Hour + 17*time.Minute), To: t0.Add(5*time.Hour + 50*time.Minute)},
			{Query: q, To: t0.Add(3 * time.Hour)},
			{Query: q, From: time.Unix(0, 0).Add(-time.Hour), To: time.Unix(0, 0).Add(40 * time.Minute)},
			{Query: q, To: time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC)},
		} {
			p, err := ix.plan(r)
			if err != nil {
				t.Fatal(err)
			}
			if p.text != nil {
				if _, _, err := ix.relevantTopK(context.Background(), p); err == nil {
					onPath++
				} else if !errors.Is(err, errNotTopK) {
					t.Fatal(err)
				}
			}
			for page := 0; page < 3; page++ {
				got, want := mustSearch(t, ix, r), mustSearch(t, one, r)
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("options %+v, %+v page %d:\ntop-k %v %v (total %d, next %v)\nBleve %v %v (total %d, next %v)",
						o, r, page, ids(got.Hits), scores(got.Hits), got.Total, got.Next, ids(want.Hits), scores(want.Hits), want.Total, want.Next)
				}
				checked++
				if want.Next == nil {
					break
				}
				r.After = want.Next
			}
		}
	}
	if onPath < checked/4 {
		t.Errorf("options %+v: %d requests on the top-k path, of %d pages", o, onPath, checked)
	}
	t.Logf("options %+v, classes %d: %d pages equal, %d requests on the top-k path", o, maxClasses, checked, onPath)
}

func scores(hits []Hit) []float64 {
	s := make([]float64, len(hits))
	for i, h := range hits {
		s[i] = h.Score
	}
	return s
}

// TestTopKBoundRanksSummaryFirst checks that a document without the term
// in its title still comes first when it scores highest: the bound lets
// the top-k path visit it.
func TestTopKBoundRanksSummaryFirst(t *testing.T) {
	long := strings.Repeat("word ", 60)
	var docs []Doc
	for i := range 40 {
		docs = append(docs, Doc{ID: fmt.Sprintf("t%02d", i), Title: long + "zebra", PublishedAt: at(i)})
	}
	docs = append(docs, Doc{ID: "s", Title: "Quiet day", Summary: "zebra", Content: "zebra", PublishedAt: at(1)})
	ix, _ := newTestIndex(t, docs)
	res := mustSearch(t, ix, Request{Query: "zebra", Limit: 5})
	if len(res.Hits) == 0 || res.Hits[0].ID != "s" {
		t.Fatalf("hits %v, want s first", ids(res.Hits))
	}
	if res.Total != 41 {
		t.Errorf("total %d, want 41", res.Total)
	}
	if h := res.Hits[0].Highlights["summary"]; len(h) != 1 || !strings.Contains(h[0], "<mark>zebra</mark>") {
		t.Errorf("highlights %v", res.Hits[0].Highlights)
	}
	if !reflect.DeepEqual(res, mustSearch(t, bleveTwin(ix), Request{Query: "zebra", Limit: 5})) {
		t.Errorf("top-k and Bleve differ")
	}
}

// TestSplitInt64Range checks that the ranges cover exactly [lo, hi].
func TestSplitInt64Range(t *testing.T) {
	for _, c := range [][2]int64{{0, 0}, {-5, 5}, {-3600, 7200}, {1 << 40, 1<<40 + 12345}, {-1 << 50, 1 << 50}, {3, 2}} {
		lo, hi := c[0], c[1]
		rs := splitInt64Range(lo, hi, 4)
		if lo > hi {
			if len(rs) != 0 {
				t.Errorf("[%d, %d]: %d ranges", lo, hi, len(rs))
			}
			continue
		}
		// Every probe is inside iff some range's terms at its shift hold it.
		for _, v := range []int64{lo - 1, lo, lo + 1, (lo + hi) / 2, hi - 1, hi, hi + 1} {
			in := false
			for _, r := range rs {
				shift := uint(r.start[0] - 0x20)
				key := string(mustPrefix(v, shift))
				if key >= string(r.start) && key <= string(r.end) {
					in = true
				}
			}
			if want := lo <= v && v <= hi; in != want {
				t.Errorf("[%d, %d]: %d covered %v, want %v", lo, hi, v, in, want)
			}
		}
	}
}

func mustPrefix(v int64, shift uint) []byte { return numeric.MustNewPrefixCodedInt64(v, shift) }
