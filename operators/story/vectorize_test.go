package story

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/internal/feed"
	"github.com/newsflow/newsflow/internal/text"
	"github.com/newsflow/newsflow/operators/internal/features"
)

// featureStreams are the real streams the features tests run: the UCI
// headlines among the orx365 items (titles and summaries, cleaned as the
// articles operator cleans them), and the ECB+ full texts (long bodies
// that repeat their words), each article a minute after the previous one.
func featureStreams(t *testing.T) map[string][]Article {
	t.Helper()
	source := func(id string) string {
		h := fnv.New32a()
		h.Write([]byte(id))
		return fmt.Sprint("src", h.Sum32()%40)
	}
	var mix []Article
	for _, d := range withDistractors(t, loadLabelled(t, "uci_dev.ndjson")) {
		title, summary := text.Clean(d.Title, feed.MaxTitleBytes), text.Clean(d.Body, feed.MaxSummaryBytes)
		a := Article{ID: d.ID, URL: "https://example.com/" + d.ID, SourceID: source(d.ID), Source: source(d.ID), Authority: 0.5,
			Title: title, Summary: summary, Published: d.Time, Version: 1}
		if len(mix)%3 == 0 {
			a.Topics = []Label{{Topic: "business", Confidence: 0.75}}
		}
		mix = append(mix, a)
	}
	var ecb []Article
	for i, d := range loadLabelled(t, "ecbplus_docs.jsonl") {
		title, body, _ := strings.Cut(d.Body, "\n")
		ecb = append(ecb, Article{ID: d.ID, URL: "https://example.com/" + d.ID, SourceID: source(d.ID), Authority: 0.5,
			Title: title, Summary: body, Published: t0 + int64(i)*60_000, Version: 1})
	}
	return map[string][]Article{"uci+orx365": mix, "ecbplus": ecb}
}

// vectorizeTokens is Vectorize as it was before articles carried
// features: the text tokenized here, each token's weight added to its
// term's frequency as it comes. TestVectorizeTermsSameAsTokens holds
// VectorizeTerms to it.
func (c *Clusterer) vectorizeTokens(t Text) Vector {
	c.expire(t.Time)
	tf := map[uint32]float64{}
	tok := text.NewTokenizer(tokenOptions)
	tok.Reset(t.Title)
	for tok.Next() {
		id := c.termID(tok.Token())
		tf[id] += c.opts.TitleWeight * c.wordWeight(id)
	}
	tok.Reset(t.Body)
	for tok.Next() {
		id := c.termID(tok.Token())
		tf[id] += c.wordWeight(id)
	}
	c.docs++
	v := make(Vector, 0, len(tf))
	for id, n := range tf {
		c.df[id]++
		c.dirtyTerms[id] = struct{}{}
		v = append(v, term{ID: id, W: float32(n)})
	}
	slices.SortFunc(v, func(a, b term) int { return cmp.Compare(a.ID, b.ID) })
	for i := range v {
		tf := float64(v[i].W)
		if tf > 1 {
			tf = 1 + math.Log(tf)
		}
		v[i].W = float32(tf * c.idf(v[i].ID))
	}
	if len(v) > c.opts.MaxTerms {
		slices.SortFunc(v, byWeightDesc)
		v = v[:c.opts.MaxTerms]
		slices.SortFunc(v, func(a, b term) int { return cmp.Compare(a.ID, b.ID) })
	}
	var n float64
	for _, e := range v {
		n += float64(e.W) * float64(e.W)
	}
	if n > 0 {
		inv := 1 / math.Sqrt(n)
		for i := range v {
			v[i].W = float32(float64(v[i].W) * inv)
		}
	}
	c.lastVec = v
	return v
}

// TestVectorizeTermsSameAsTokens runs two clusterers over the real
// streams, one vectorizing the terms features count (the records' and the
// builder's way), the other the tokens as they come (the way before), and
// requires the same vectors, bit for bit, and the same assignments.
func TestVectorizeTermsSameAsTokens(t *testing.T) {
	for name, stream := range featureStreams(t) {
		t.Run(name, func(t *testing.T) {
			// A 2h window over the ECB+ minutes and the UCI days: terms
			// are forgotten and their ids reused.
			opts := ClusterOptions{Window: 2 * time.Hour}
			terms, tokens := mustClusterer(t, opts), mustClusterer(t, opts)
			ext := features.NewExtractor()
			for i, a := range stream {
				v1 := terms.VectorizeTerms(ext.Terms(a.Title, a.Summary), a.Published)
				v2 := tokens.vectorizeTokens(Text{Title: a.Title, Body: a.Summary, Time: a.Published})
				if !slices.Equal(v1, v2) {
					t.Fatalf("article %d (%s): vectors differ:\n%v\n%v", i, a.ID, v1, v2)
				}
				if a1, a2 := terms.Assign(v1, a.Published), tokens.Assign(v2, a.Published); !reflect.DeepEqual(a1, a2) {
					t.Fatalf("article %d (%s): %+v, %+v", i, a.ID, a1, a2)
				}
			}
			if !slices.Equal(terms.words, tokens.words) || !slices.Equal(terms.df, tokens.df) || !slices.Equal(terms.dfPrev, tokens.dfPrev) {
				t.Error("vocabularies differ")
			}
		})
	}
}

func mustClusterer(t *testing.T, opts ClusterOptions) *Clusterer {
	t.Helper()
	c, err := NewClusterer(opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
