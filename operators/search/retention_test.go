package search_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/internal/searchindex"
	"github.com/newsflow/newsflow/operators/search"
	"github.com/newsflow/newsflow/operators/search/searchtest"
	"github.com/newsflow/newsflow/state/statetest"
)

var day0 = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

// index applies an article published h hours after day0 to partition p.
func index(st *searchtest.Tasks, p int32, id string, h int) {
	st.Index(p, schema.Article{ID: id, Title: "Report " + id, PublishedAt: day0.Add(time.Duration(h) * time.Hour).UnixMilli()}, "s"+id)
}

// TestRetentionSearchFlat: 14 days of a document an hour with 48h
// retention: the index holds the last 48h, all of them, whatever the
// commits, and the count stays flat.
func TestRetentionSearchFlat(t *testing.T) {
	st := searchtest.New(t, statetest.Open(t), search.Options{Retention: 48 * time.Hour}, 1)
	const hours = 14 * 24
	var counts []uint64
	for h := range hours {
		index(st, 0, fmt.Sprint("a", h), h)
		if h%7 == 6 {
			st.Commit()
		}
		if h%24 == 23 {
			st.Commit()
			counts = append(counts, st.Count())
		}
	}
	for d := 2; d < len(counts); d++ {
		if counts[d] != 49 {
			t.Errorf("day %d: %d documents, want 49 (the last 48h and the newest)", d+1, counts[d])
		}
	}
	res, err := st.Op.Search(context.Background(), searchindex.Request{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var got, want []string
	for _, h := range res.Hits {
		got = append(got, h.ID)
	}
	for h := hours - 49; h < hours; h++ {
		want = append(want, fmt.Sprint("a", h))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("search finds %v, want %v", got, want)
	}
	// A document already older than the retention age is not indexed.
	index(st, 0, "late", hours-60)
	st.Commit()
	if n := st.Count(); n != 49 {
		t.Errorf("%d documents after a late one, want 49", n)
	}
}

// TestRetentionSearchHides: a partition that has not deleted its old
// documents yet (no newer document reached it) does not show them.
func TestRetentionSearchHides(t *testing.T) {
	st := searchtest.New(t, statetest.Open(t), search.Options{Retention: 48 * time.Hour}, 2)
	index(st, 1, "old", 0)
	st.Commit()
	index(st, 0, "new", 72)
	st.Commit()
	if st.Count() != 2 {
		t.Fatal("partition 1 deleted its document without a newer one")
	}
	res, err := st.Op.Search(context.Background(), searchindex.Request{Query: "report"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Hits) != 1 || res.Hits[0].ID != "new" {
		t.Errorf("hits %+v, want only the new document", res.Hits)
	}
	res, err = st.Op.Search(context.Background(), searchindex.Request{To: day0.Add(time.Hour)})
	if err != nil || len(res.Hits) != 0 {
		t.Errorf("search up to an expired time: %+v, %v", res, err)
	}
}
