package search_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/operators/search"
	"github.com/newsflow/newsflow/operators/search/searchtest"
	"github.com/newsflow/newsflow/operators/searchindex"
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

// TestRetentionSearchByFirstSeen: documents of old news (published three
// years before they were first seen) are indexed and found, by text and
// by a date filter on their publish date, until the newest document was
// first seen more than the retention age after them: then the partition
// that commits deletes them, and the one that does not hides them.
func TestRetentionSearchByFirstSeen(t *testing.T) {
	st := searchtest.New(t, statetest.Open(t), search.Options{Retention: 48 * time.Hour}, 2)
	old := day0.AddDate(-3, 0, 0)
	for i := range 4 {
		st.Index(int32(i%2), schema.Article{ID: fmt.Sprint("old", i), Title: "Archived report " + fmt.Sprint(i),
			PublishedAt: old.Add(time.Duration(i) * time.Hour).UnixMilli(), FirstSeen: day0.UnixMilli()}, "s")
	}
	st.Commit()
	ids := func(r searchindex.Request) []string {
		t.Helper()
		res, err := st.Op.Search(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, h := range res.Hits {
			out = append(out, h.ID)
		}
		slices.Sort(out)
		return out
	}
	all := []string{"old0", "old1", "old2", "old3"}
	if got := ids(searchindex.Request{Query: "archived report"}); !slices.Equal(got, all) {
		t.Fatalf("old news by text: %v, want %v", got, all)
	}
	if got := ids(searchindex.Request{From: old, To: old.Add(2 * time.Hour)}); !slices.Equal(got, all[:2]) {
		t.Errorf("old news by its publish date: %v, want %v", got, all[:2])
	}
	// A new document first seen exactly 48h later: nothing goes.
	st.Index(0, schema.Article{ID: "new1", Title: "Fresh report", PublishedAt: day0.Add(48 * time.Hour).UnixMilli(), FirstSeen: day0.Add(48 * time.Hour).UnixMilli()}, "n")
	st.Commit()
	if got := ids(searchindex.Request{Query: "archived report"}); !slices.Equal(got, all) {
		t.Fatalf("old news within the retention age of its first-seen time: %v, want %v", got, all)
	}
	// A millisecond later: partition 0 deletes its old documents,
	// partition 1 (no commit) hides them.
	late := day0.Add(48*time.Hour + time.Millisecond).UnixMilli()
	st.Index(0, schema.Article{ID: "new2", Title: "Fresh report again", PublishedAt: late, FirstSeen: late}, "n")
	st.Commit()
	if got := ids(searchindex.Request{Query: "report"}); !slices.Equal(got, []string{"new1", "new2"}) {
		t.Errorf("after the retention age: %v, want only the new documents", got)
	}
	if n := st.Count(); n != 4 { // new1, new2, and old1 and old3 in partition 1
		t.Errorf("%d documents indexed, want 4 (partition 1 has not committed since)", n)
	}
}
