package searchindex

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestRelevance(t *testing.T) {
	ix, _ := newTestIndex(t, fixture)
	for _, tc := range []struct {
		name  string
		query string
		// top must be the first hits, in any order among themselves.
		top []string
		// below must rank after every id in top.
		below []string
	}{
		{name: "title beats summary", query: "inflation", top: []string{"a01", "a03"}, below: []string{"a02"}},
		{name: "content only comes last", query: "inflation", top: []string{"a01", "a03"}, below: []string{"a29"}},
		{name: "stemming running~runs", query: "running", top: []string{"a05"}},
		{name: "stemming plural query", query: "elections", top: []string{"a04", "a12"}},
		{name: "stemming raising~raises", query: "raising", top: []string{"a01", "a15"}},
		{name: "stop words ignored", query: "the election of the", top: []string{"a04", "a12"}},
		{name: "phrase beats scattered terms", query: "interest rates", top: []string{"a01"}, below: []string{"a06"}},
		{name: "all terms, in any field", query: "central bank rate", top: []string{"a01", "a24"}},
		{name: "content is indexed", query: "zeppelin", top: []string{"a29"}},
		{name: "possessive", query: "jerry", top: []string{"a07"}},
		{name: "case insensitive", query: "BERLIN", top: []string{"a05"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := mustSearch(t, ix, Request{Query: tc.query, Limit: MaxLimit})
			got := ids(res.Hits)
			want := expected(fixture, Request{Query: tc.query})
			if !slices.Equal(sortedCopy(got), sortedCopy(want)) {
				t.Fatalf("query %q matched %v, want %v", tc.query, got, want)
			}
			if res.Total != uint64(len(want)) {
				t.Errorf("total %d, want %d", res.Total, len(want))
			}
			if len(got) < len(tc.top) {
				t.Fatalf("query %q: %v has fewer hits than the top %v", tc.query, got, tc.top)
			}
			if !slices.Equal(sortedCopy(got[:len(tc.top)]), sortedCopy(tc.top)) {
				t.Errorf("query %q: top %v, want %v (all: %v)", tc.query, got[:len(tc.top)], tc.top, got)
			}
			for _, id := range tc.below {
				if i := slices.Index(got, id); i >= 0 && i < len(tc.top) {
					t.Errorf("query %q: %s at %d, want below %v", tc.query, id, i, tc.top)
				}
			}
			checkOrder(t, OrderRelevance, res.Hits)
			if res.Order != OrderRelevance {
				t.Errorf("order %v", res.Order)
			}
		})
	}
}

func TestStopWordsOnly(t *testing.T) {
	ix, _ := newTestIndex(t, fixture)
	for _, q := range []string{"the of and", "  !!! ,, ", "a"} {
		res := mustSearch(t, ix, Request{Query: q})
		if len(res.Hits) != 0 || res.Total != 0 || res.Next != nil {
			t.Errorf("query %q: %v total %d, want nothing", q, ids(res.Hits), res.Total)
		}
	}
}

func TestHitFields(t *testing.T) {
	ix, _ := newTestIndex(t, fixture)
	res := mustSearch(t, ix, Request{Query: "benchmark rate quarter point"})
	if len(res.Hits) == 0 || res.Hits[0].ID != "a01" {
		t.Fatalf("hits %v, want a01 first", ids(res.Hits))
	}
	h := res.Hits[0]
	d := fixture[0]
	if h.Title != d.Title || h.Summary != d.Summary || h.URL != d.URL || h.Source != d.Source ||
		h.SourceID != d.SourceID || h.StoryID != d.StoryID || !slices.Equal(h.Topics, d.Topics) ||
		!h.PublishedAt.Equal(d.PublishedAt) {
		t.Errorf("hit %+v does not match doc %+v", h, d)
	}
	if h.Score <= 0 {
		t.Errorf("score %v", h.Score)
	}
	// Several topics come back in order.
	res = mustSearch(t, ix, Request{Query: "chipmaker shares"})
	if res.Hits[0].ID != "a19" || !slices.Equal(res.Hits[0].Topics, []string{"tech", "economy"}) {
		t.Errorf("hit %+v, want a19 with topics tech, economy", res.Hits[0])
	}
	// No topics.
	res = mustSearch(t, ix, Request{Query: "supercomputer"})
	if res.Hits[0].ID != "a30" || res.Hits[0].Topics != nil {
		t.Errorf("hit %+v, want a30 without topics", res.Hits[0])
	}
}

func TestFilters(t *testing.T) {
	ix, _ := newTestIndex(t, fixture)
	reqs := []Request{
		{},
		{Topic: "economy"},
		{Topic: "tech"},
		{Topic: "nope"},
		{Source: "reuters"},
		{Source: "bbc", Topic: "sport"},
		{From: at(10)},
		{To: at(10)},
		{From: at(5), To: at(6)},
		{From: at(5), To: at(20), Topic: "economy"},
		{From: at(5), To: at(20), Topic: "economy", Source: "ft"},
		{Query: "inflation", Topic: "economy"},
		{Query: "inflation", Source: "ft"},
		{Query: "record", From: at(6), To: at(19)},
		{Query: "record", Topic: "sport", Source: "bbc", From: at(1)},
		{Query: "bank rate", To: at(24)},
		{Query: "bank rate", From: at(24)},
		{Sources: []string{"bbc", "ft"}},
		{Sources: []string{"bbc", "ft", "nope"}, Topic: "economy"},
		{Sources: []string{"ft", "reuters"}, Source: "ft"},
		{Sources: []string{"nope"}},
		{Query: "inflation", Sources: []string{"ft", "reuters"}},
		{Query: "record", Sources: []string{"bbc", "reuters"}, From: at(1)},
	}
	for _, r := range reqs {
		t.Run(fmt.Sprintf("%+v", r), func(t *testing.T) {
			r.Limit = MaxLimit
			res := mustSearch(t, ix, r)
			want := expected(fixture, r)
			got := ids(res.Hits)
			if r.Query == "" {
				// Newest first, ID breaking the tie between a28 and a29.
				if !slices.Equal(got, want) {
					t.Fatalf("got %v, want %v", got, want)
				}
				checkOrder(t, OrderNewest, res.Hits)
			} else if !slices.Equal(sortedCopy(got), sortedCopy(want)) {
				t.Fatalf("got %v, want %v", got, want)
			}
			if res.Total != uint64(len(want)) {
				t.Errorf("total %d, want %d", res.Total, len(want))
			}
		})
	}
}

// Filters select without changing relevance: the scores of a filtered query
// are the scores of the same hits unfiltered.
func TestFiltersDoNotScore(t *testing.T) {
	ix, _ := newTestIndex(t, fixture)
	all := mustSearch(t, ix, Request{Query: "new", Limit: MaxLimit})
	scores := map[string]float64{}
	for _, h := range all.Hits {
		scores[h.ID] = h.Score
	}
	for _, r := range []Request{{Topic: "politics"}, {Source: "bbc"}, {From: at(3), To: at(20)}, {From: at(3).Add(30 * time.Minute), To: at(20).Add(time.Second), Topic: "health"}} {
		r.Query, r.Limit = "new", MaxLimit
		res := mustSearch(t, ix, r)
		if len(res.Hits) == 0 {
			t.Fatalf("%+v: no hits", r)
		}
		for _, h := range res.Hits {
			if h.Score != scores[h.ID] {
				t.Errorf("%+v: %s scored %v, unfiltered %v", r, h.ID, h.Score, scores[h.ID])
			}
		}
	}
}

func TestHighlights(t *testing.T) {
	ix, _ := newTestIndex(t, fixture)
	res := mustSearch(t, ix, Request{Query: "studio"})
	if len(res.Hits) != 1 || res.Hits[0].ID != "a07" {
		t.Fatalf("hits %v, want a07", ids(res.Hits))
	}
	h := res.Hits[0].Highlights
	wantTitle := "Tom &amp; Jerry&#39;s &lt;b&gt;cartoon&lt;/b&gt; <mark>studio</mark> sold"
	if got := h["title"]; len(got) != 1 || got[0] != wantTitle {
		t.Errorf("title highlight %q, want %q", got, wantTitle)
	}
	wantSummary := "The &#34;classic&#34; <mark>studio</mark> fetched &lt;script&gt;alert(1)&lt;/script&gt; a record price."
	if got := h["summary"]; len(got) != 1 || got[0] != wantSummary {
		t.Errorf("summary highlight %q, want %q", got, wantSummary)
	}
	if res.Hits[0].Title != fixture[6].Title {
		t.Errorf("plain title %q changed", res.Hits[0].Title)
	}

	// Stemmed matches are marked as written; fields without a match have no
	// highlight.
	res = mustSearch(t, ix, Request{Query: "raising"})
	for _, hit := range res.Hits {
		if hit.ID != "a01" {
			continue
		}
		if got := hit.Highlights["title"]; len(got) != 1 || !strings.Contains(got[0], "<mark>raises</mark>") {
			t.Errorf("a01 title highlight %q", got)
		}
		if _, ok := hit.Highlights["summary"]; ok {
			t.Errorf("a01 summary highlighted without a match: %q", hit.Highlights["summary"])
		}
	}

	// Every query term is marked.
	res = mustSearch(t, ix, Request{Query: "hospital record"})
	for _, hit := range res.Hits {
		if hit.ID == "a10" {
			want := "<mark>Hospital</mark> waiting lists reach <mark>record</mark> high"
			if got := hit.Highlights["title"]; len(got) != 1 || got[0] != want {
				t.Errorf("a10 title highlight %q, want %q", got, want)
			}
		}
	}

	// Newest-first results have no highlights.
	res = mustSearch(t, ix, Request{Topic: "tech"})
	for _, hit := range res.Hits {
		if hit.Highlights != nil {
			t.Errorf("%s: highlights %v in a query without text", hit.ID, hit.Highlights)
		}
	}
}

func TestHighlightFragment(t *testing.T) {
	long := strings.Repeat("filler words here ", 40) + "the unicorn appears " + strings.Repeat("more filler text ", 40)
	ix, _ := newTestIndex(t, []Doc{{ID: "x", Title: "t", Summary: long, PublishedAt: t0}}, Options{FragmentSize: 60})
	res := mustSearch(t, ix, Request{Query: "unicorn"})
	got := res.Hits[0].Highlights["summary"]
	if len(got) != 1 || !strings.Contains(got[0], "<mark>unicorn</mark>") {
		t.Fatalf("highlight %q", got)
	}
	plain := strings.NewReplacer("<mark>", "", "</mark>", "").Replace(got[0])
	if n := len([]rune(plain)); n > 60+2 {
		t.Errorf("fragment of %d characters, size 60: %q", n, got[0])
	}
	if !strings.HasPrefix(plain, "…") || !strings.HasSuffix(plain, "…") {
		t.Errorf("cut fragment %q lacks ellipses", got[0])
	}
}

func TestPagination(t *testing.T) {
	ix, _ := newTestIndex(t, fixture)
	for _, r := range []Request{
		{},
		{Topic: "economy"},
		{Query: "the record"},
		{Query: "new"},
		{Query: "central bank", Topic: "economy"},
	} {
		for _, limit := range []int{1, 3, 7} {
			t.Run(fmt.Sprintf("%q/%d", r.Query, limit), func(t *testing.T) {
				big := r
				big.Limit = MaxLimit
				one := mustSearch(t, ix, big)
				if one.Next != nil {
					t.Fatalf("one page of %d hits has a next cursor", len(one.Hits))
				}
				paged := r
				paged.Limit = limit
				all := searchAll(t, ix, paged)
				if !slices.Equal(ids(all), ids(one.Hits)) {
					t.Fatalf("pages %v, one page %v", ids(all), ids(one.Hits))
				}
				if len(all) == 0 {
					t.Fatal("no hits")
				}
			})
		}
	}
}

// TestPaginationTies pages through many documents with equal scores and
// equal times, where only the ID orders them.
func TestPaginationTies(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	words := []string{"alpha", "beta", "gamma", "delta"}
	var docs []Doc
	for i := range 250 {
		docs = append(docs, Doc{
			ID:          fmt.Sprintf("%04x", rng.IntN(1<<16)) + fmt.Sprint(i),
			Title:       words[rng.IntN(2)] + " " + words[2+rng.IntN(2)],
			PublishedAt: at(rng.IntN(5)),
			Topics:      []string{words[rng.IntN(4)]},
		})
	}
	ix, _ := newTestIndex(t, docs)
	for _, r := range []Request{{Query: "alpha gamma"}, {}, {Topic: "beta"}, {Query: "delta", Topic: "alpha"}} {
		for _, limit := range []int{1, 13, 100} {
			r.Limit = limit
			all := searchAll(t, ix, r)
			want := expected(docs, r)
			if !slices.Equal(sortedCopy(ids(all)), sortedCopy(want)) {
				t.Fatalf("%+v: %d hits, want %d", r, len(all), len(want))
			}
			o := OrderNewest
			if r.Query != "" {
				o = OrderRelevance
			}
			checkOrder(t, o, all)
		}
	}
}

func TestMerge(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	// The fixture plus generated documents, so pages span partitions.
	docs := slices.Clone(fixture)
	words := strings.Fields("bank rate inflation record city market election health battery")
	for i := range 120 {
		docs = append(docs, Doc{
			ID:          fmt.Sprintf("g%03d", i),
			Title:       words[rng.IntN(len(words))] + " " + words[rng.IntN(len(words))],
			Summary:     words[rng.IntN(len(words))],
			PublishedAt: at(rng.IntN(40)),
			SourceID:    []string{"reuters", "bbc", "ft"}[rng.IntN(3)],
			Topics:      []string{[]string{"economy", "tech", "sport"}[rng.IntN(3)]},
		})
	}
	parts := make([]*Index, 3)
	var partDocs [3][]Doc
	for i, d := range docs {
		partDocs[i%3] = append(partDocs[i%3], d)
	}
	for p := range parts {
		parts[p], _ = newTestIndex(t, partDocs[p])
	}
	single, _ := newTestIndex(t, docs)

	for _, r := range []Request{
		{},
		{Topic: "economy"},
		{Source: "bbc", From: at(5)},
		{Query: "bank rate"},
		{Query: "inflation record", Topic: "economy"},
		{Query: "election"},
	} {
		for _, limit := range []int{1, 7, 50} {
			t.Run(fmt.Sprintf("%+v/%d", r, limit), func(t *testing.T) {
				r := r
				r.Limit = limit
				var all []Hit
				var order Order
				for pages := 0; ; pages++ {
					if pages > 1000 {
						t.Fatal("pagination does not end")
					}
					results := make([]*Result, len(parts))
					for p, ix := range parts {
						results[p] = mustSearch(t, ix, r)
					}
					m := Merge(r.Limit, results...)
					if want := expected(docs, r); m.Total != uint64(len(want)) {
						t.Fatalf("merged total %d, want %d", m.Total, len(want))
					}
					order = m.Order
					all = append(all, m.Hits...)
					if m.Next == nil {
						break
					}
					if len(m.Hits) != limit {
						t.Fatalf("short merged page %d with a next cursor", len(m.Hits))
					}
					r.After = m.Next
				}
				want := expected(docs, r)
				if !slices.Equal(sortedCopy(ids(all)), sortedCopy(want)) {
					t.Fatalf("merged pages %v, want %v", ids(all), want)
				}
				checkOrder(t, order, all)
				if r.Query == "" {
					// Without scores the global order is the single index's.
					one := searchAll(t, single, Request{Topic: r.Topic, Source: r.Source, From: r.From, To: r.To, Limit: MaxLimit})
					if !slices.Equal(ids(all), ids(one)) {
						t.Fatalf("merged %v, single index %v", ids(all), ids(one))
					}
				}
			})
		}
	}
}

func TestMergeEdges(t *testing.T) {
	if m := Merge(5); len(m.Hits) != 0 || m.Next != nil || m.Total != 0 {
		t.Errorf("empty merge %+v", m)
	}
	a := &Result{Order: OrderNewest, Total: 2, Hits: []Hit{{ID: "b", PublishedAt: at(2)}, {ID: "a", PublishedAt: at(1)}}}
	b := &Result{Order: OrderNewest, Total: 1, Hits: []Hit{{ID: "c", PublishedAt: at(2)}}}
	m := Merge(2, a, nil, b)
	if got := ids(m.Hits); !slices.Equal(got, []string{"b", "c"}) || m.Total != 3 || m.Next == nil {
		t.Fatalf("merge %v total %d next %v", got, m.Total, m.Next)
	}
	if m.Next.order != OrderNewest || m.Next.id != "c" || m.Next.published != at(2).UnixNano() {
		t.Errorf("next %+v", m.Next)
	}
	// All hits fit and no partition has more: no next page.
	if m := Merge(3, a, b); m.Next != nil || len(m.Hits) != 3 {
		t.Errorf("merge %v next %v", ids(m.Hits), m.Next)
	}
	// A partition with more hits means a next page even when all fit.
	a.Next = cursorAt(OrderNewest, &a.Hits[1])
	if m := Merge(3, a, b); m.Next == nil || m.Next.id != "a" {
		t.Errorf("merge next %+v, want after a", m.Next)
	}
	// Limits are normalized like Search's.
	many := &Result{Order: OrderRelevance}
	for i := range 150 {
		many.Hits = append(many.Hits, Hit{ID: fmt.Sprintf("%03d", i), Score: 1})
	}
	if m := Merge(0, many); len(m.Hits) != DefaultLimit || m.Hits[0].ID != "000" {
		t.Errorf("limit 0: %d hits", len(m.Hits))
	}
	if m := Merge(1000, many); len(m.Hits) != MaxLimit {
		t.Errorf("limit 1000: %d hits", len(m.Hits))
	}
}

func TestLimit(t *testing.T) {
	var docs []Doc
	for i := range 150 {
		docs = append(docs, Doc{ID: fmt.Sprintf("d%03d", i), Title: "same words", PublishedAt: at(i)})
	}
	ix, _ := newTestIndex(t, docs)
	for _, tc := range []struct{ limit, want int }{{0, DefaultLimit}, {5, 5}, {MaxLimit, MaxLimit}, {MaxLimit + 1, MaxLimit}, {1 << 30, MaxLimit}} {
		res := mustSearch(t, ix, Request{Limit: tc.limit})
		if len(res.Hits) != tc.want || res.Total != 150 || res.Next == nil {
			t.Errorf("limit %d: %d hits, total %d, next %v; want %d hits", tc.limit, len(res.Hits), res.Total, res.Next, tc.want)
		}
	}
}

func TestBadRequests(t *testing.T) {
	ix, _ := newTestIndex(t, fixture)
	newest, err := ix.Search(context.Background(), Request{Limit: 1})
	if err != nil || newest.Next == nil {
		t.Fatalf("search: %v", err)
	}
	relevant := mustSearch(t, ix, Request{Query: "bank", Limit: 1})
	for name, r := range map[string]Request{
		"negative limit":     {Limit: -1},
		"long query":         {Query: strings.Repeat("x", DefaultOptions().MaxQueryBytes+1)},
		"query not utf8":     {Query: "bad \xff"},
		"topic not utf8":     {Topic: "\xfe"},
		"long source":        {Source: strings.Repeat("s", 300)},
		"sources not utf8":   {Sources: []string{"ok", "\xfe"}},
		"too many sources":   {Sources: make([]string, MaxSources+1)},
		"from after to":      {From: at(5), To: at(4)},
		"from equals to":     {From: at(5), To: at(5)},
		"from too early":     {From: time.Date(1500, 1, 1, 0, 0, 0, 0, time.UTC)},
		"to too late":        {To: time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)},
		"newest cursor text": {Query: "bank", After: newest.Next},
		"text cursor newest": {After: relevant.Next},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ix.Search(context.Background(), r)
			if !errors.Is(err, ErrBadRequest) {
				t.Fatalf("error %v, want ErrBadRequest", err)
			}
		})
	}
}

func TestContextCancelled(t *testing.T) {
	ix, _ := newTestIndex(t, fixture)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, r := range []Request{{Query: "bank"}, {}} {
		if _, err := ix.Search(ctx, r); !errors.Is(err, context.Canceled) {
			t.Errorf("%+v: error %v, want context.Canceled", r, err)
		}
	}
	ctx, cancel = context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	if _, err := ix.Search(ctx, Request{Query: "bank"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %v, want context.DeadlineExceeded", err)
	}
}

func TestConcurrentSearchAndApply(t *testing.T) {
	ix, _ := newTestIndex(t, fixture)
	want := uint64(len(expected(fixture, Request{Query: "record"})))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 4)
	for range 4 {
		go func() {
			for ctx.Err() == nil {
				res, err := ix.Search(ctx, Request{Query: "record"})
				if err != nil && ctx.Err() == nil {
					errc <- err
					return
				}
				// Every snapshot holds the whole fixture, whatever the
				// writer is doing.
				if err == nil && res.Total < want {
					errc <- fmt.Errorf("total %d", res.Total)
					return
				}
			}
			errc <- nil
		}()
	}
	for i := range 20 {
		d := Doc{ID: fmt.Sprintf("c%02d", i), Title: "bank record number " + fmt.Sprint(i), PublishedAt: at(i)}
		if err := ix.Apply([]Doc{d}, nil); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	for range 4 {
		if err := <-errc; err != nil {
			t.Error(err)
		}
	}
}

// TestDateRangeExact checks ranges whose bounds fall inside hours against
// documents minutes apart, and newest-first pages over documents spread
// from minutes to years apart (so that every search window is needed).
func TestDateRangeExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var docs []Doc
	for i := range 200 {
		var p time.Time
		switch i % 4 {
		case 0, 1:
			p = t0.Add(time.Duration(i*7) * time.Minute)
		case 2:
			p = t0.Add(-time.Duration(rng.IntN(5000)) * time.Hour)
		case 3:
			p = t0.Add(time.Duration(rng.IntN(1<<20)) * time.Second)
		}
		docs = append(docs, Doc{
			ID:          fmt.Sprintf("d%03d", i),
			Title:       []string{"storm warning", "market news", "storm market"}[i%3],
			Topics:      []string{[]string{"a", "b"}[rng.IntN(2)]},
			PublishedAt: p,
		})
	}
	ix, _ := newTestIndex(t, docs)
	m := func(min int) time.Time { return t0.Add(time.Duration(min) * time.Minute) }
	for _, r := range []Request{
		{From: m(10), To: m(50)},           // inside one hour
		{From: m(10), To: m(60)},           // to the end of the hour
		{From: m(50), To: m(70)},           // across one hour boundary
		{From: m(50), To: m(180)},          // whole hours between
		{From: m(60), To: m(61)},           // one minute
		{From: m(-30), Limit: 3},           // open end
		{To: m(95), Limit: 3},              // open start
		{From: m(60), To: m(240)},          // aligned
		{From: m(7), To: m(8), Query: "x"}, // nothing
	} {
		if got, want := ids(searchAll(t, ix, r)), expected(docs, r); !slices.Equal(sortedCopy(got), sortedCopy(want)) {
			t.Fatalf("%+v:\n got %v\nwant %v", r, got, want)
		}
	}
	for range 60 {
		r := Request{Limit: 1 + rng.IntN(30)}
		if rng.IntN(3) > 0 {
			r.From = t0.Add(time.Duration(rng.IntN(48*60)-600) * time.Minute).Add(time.Duration(rng.IntN(60)) * time.Second)
		}
		if rng.IntN(3) > 0 {
			r.To = t0.Add(time.Duration(rng.IntN(48*60)+60) * time.Minute)
			if !r.From.IsZero() && !r.From.Before(r.To) {
				r.From, r.To = r.To.Add(-time.Minute), r.From.Add(time.Minute)
			}
		}
		switch rng.IntN(3) {
		case 0:
			r.Query = "storm"
		case 1:
			r.Topic = "a"
		}
		all := searchAll(t, ix, r)
		want := expected(docs, r)
		if r.Query == "" {
			if !slices.Equal(ids(all), want) {
				t.Fatalf("%+v:\n got %v\nwant %v", r, ids(all), want)
			}
		} else if !slices.Equal(sortedCopy(ids(all)), sortedCopy(want)) {
			t.Fatalf("%+v:\n got %v\nwant %v", r, sortedCopy(ids(all)), sortedCopy(want))
		}
		if res := mustSearch(t, ix, r); res.Total != uint64(len(want)) {
			t.Fatalf("%+v: total %d, want %d", r, res.Total, len(want))
		}
	}
	// Unfiltered, page by page, across all windows.
	for _, limit := range []int{1, 7, 100} {
		if got, want := ids(searchAll(t, ix, Request{Limit: limit})), expected(docs, Request{}); !slices.Equal(got, want) {
			t.Fatalf("limit %d: got %v, want %v", limit, got, want)
		}
	}
}

// TestNewestWindowRespectsFrom: a search window that starts on the hour
// before From must not let documents before From into the page.
func TestNewestWindowRespectsFrom(t *testing.T) {
	var docs []Doc
	for i := range 151 {
		docs = append(docs, Doc{ID: fmt.Sprintf("m%03d", i), Title: "minute", PublishedAt: t0.Add(time.Duration(i) * time.Minute)})
	}
	ix, _ := newTestIndex(t, docs)
	for _, r := range []Request{
		{From: t0.Add(75 * time.Minute), Limit: 80},
		{From: t0.Add(75*time.Minute + time.Second), Limit: 90},
		{From: t0.Add(61 * time.Minute), To: t0.Add(149 * time.Minute), Limit: 100},
	} {
		res := mustSearch(t, ix, r)
		if got, want := ids(res.Hits), expected(docs, r); !slices.Equal(got, want) {
			t.Errorf("%+v:\n got %v\nwant %v", r, got, want)
		}
	}
}

func TestAnyTerm(t *testing.T) {
	o := Options{AnyTerm: true}
	ix, _ := newTestIndex(t, fixture, o)
	for _, q := range []string{"zeppelin election", "interest rates", "central bank rate", "inflation"} {
		res := mustSearch(t, ix, Request{Query: q, Limit: MaxLimit})
		want := expectedOpts(fixture, Request{Query: q}, o)
		if got := ids(res.Hits); !slices.Equal(sortedCopy(got), sortedCopy(want)) {
			t.Errorf("any term of %q: %v, want %v", q, got, want)
		}
		checkOrder(t, OrderRelevance, res.Hits)
	}
	// Documents with more of the terms rank first.
	res := mustSearch(t, ix, Request{Query: "central bank rate"})
	if got := sortedCopy(ids(res.Hits[:2])); !slices.Equal(got, []string{"a01", "a24"}) {
		t.Errorf("top %v, want a01 and a24, which have all three terms", ids(res.Hits))
	}
}

func TestPhraseBoost(t *testing.T) {
	// Same terms, same lengths; only the order differs. Without the phrase
	// boost the scores would tie and p1 would come first by ID.
	ix, _ := newTestIndex(t, []Doc{
		{ID: "p1", Title: "rates interest rise", PublishedAt: at(1)},
		{ID: "p2", Title: "interest rates rise", PublishedAt: at(1)},
	})
	res := mustSearch(t, ix, Request{Query: "interest rates"})
	if got := ids(res.Hits); !slices.Equal(got, []string{"p2", "p1"}) || res.Hits[0].Score <= res.Hits[1].Score {
		t.Errorf("hits %v (scores %v, %v), want the phrase match p2 first", got, res.Hits[0].Score, res.Hits[1].Score)
	}
}

// Results travel between nodes as JSON; Merge must work on decoded ones.
func TestResultJSON(t *testing.T) {
	ix, _ := newTestIndex(t, fixture)
	for _, r := range []Request{{Query: "record", Limit: 2}, {Topic: "economy", Limit: 3}} {
		res := mustSearch(t, ix, r)
		b, err := json.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		var back Result
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("unmarshal %s: %v", b, err)
		}
		if back.Order != res.Order || back.Total != res.Total || back.Next.Encode() != res.Next.Encode() ||
			!slices.EqualFunc(back.Hits, res.Hits, func(a, b Hit) bool {
				return a.ID == b.ID && a.Score == b.Score && a.PublishedAt.Equal(b.PublishedAt)
			}) {
			t.Fatalf("round trip of %s changed the result", b)
		}
		// The next page through a decoded cursor.
		r.After = back.Next
		if m := Merge(r.Limit, &back); m.Next.Encode() != res.Next.Encode() {
			t.Errorf("merge of one decoded result: next %v, want %v", m.Next, res.Next)
		}
		next := mustSearch(t, ix, r)
		if len(next.Hits) == 0 || compareHits(res.Order, &res.Hits[len(res.Hits)-1], &next.Hits[0]) >= 0 {
			t.Errorf("page after a decoded cursor does not follow: %v then %v", ids(res.Hits), ids(next.Hits))
		}
	}
	var o Order
	if err := o.UnmarshalText([]byte("sideways")); err == nil {
		t.Error("unknown order decoded")
	}
	var c Cursor
	if err := json.Unmarshal([]byte(`"garbage!"`), &c); !errors.Is(err, ErrBadRequest) {
		t.Errorf("bad cursor in JSON: %v", err)
	}
}

// TestHitJSONTimeInMilliseconds: a hit's published_at goes on the wire as
// milliseconds since the epoch, like every other endpoint's times (the web
// reader showed "NaN days ago" for an RFC 3339 string), and reads back.
func TestHitJSONTimeInMilliseconds(t *testing.T) {
	at := time.Date(2026, 3, 1, 10, 0, 0, 123e6, time.UTC)
	h := Hit{ID: "a", Title: "t", StoryID: "s", PublishedAt: at}
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if ms, ok := m["published_at"].(float64); !ok || int64(ms) != at.UnixMilli() {
		t.Fatalf("published_at %#v in %s, want %d", m["published_at"], b, at.UnixMilli())
	}
	var back Hit
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !back.PublishedAt.Equal(at) || back.ID != "a" || back.StoryID != "s" {
		t.Errorf("round trip %+v, want %+v", back, h)
	}
}

// TestHighlightFragmentsCutAtWords: a summary longer than the fragment is
// cut at word boundaries on both sides ("…" marks each cut), whatever the
// position of the match, and the match stays marked.
func TestHighlightFragmentsCutAtWords(t *testing.T) {
	words := strings.Fields(strings.Repeat("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima ", 8))
	var docs []Doc
	for i := range 6 {
		w := slices.Clone(words)
		w[5+i*15] = "zeppelin"
		docs = append(docs, Doc{ID: fmt.Sprintf("z%d", i), Title: "Airship news", Summary: strings.Join(w, " "), PublishedAt: at(i)})
	}
	ix, _ := newTestIndex(t, docs, Options{FragmentSize: 60})
	res := mustSearch(t, ix, Request{Query: "zeppelin", Limit: 10})
	if len(res.Hits) != len(docs) {
		t.Fatalf("%d hits, want %d", len(res.Hits), len(docs))
	}
	known := map[string]bool{"zeppelin": true}
	for _, w := range words {
		known[w] = true
	}
	for _, h := range res.Hits {
		frag := h.Highlights["summary"]
		if len(frag) != 1 || !strings.Contains(frag[0], "<mark>zeppelin</mark>") {
			t.Fatalf("%s: highlight %q", h.ID, frag)
		}
		plain := strings.NewReplacer("<mark>", "", "</mark>", "").Replace(frag[0])
		plain = strings.Trim(plain, "…")
		for _, w := range strings.Fields(plain) {
			if !known[w] {
				t.Errorf("%s: fragment %q has the cut word %q", h.ID, frag[0], w)
			}
		}
	}
}
