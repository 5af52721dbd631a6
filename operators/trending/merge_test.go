package trending

import (
	"fmt"
	"testing"
)

// Lists from nodes serving disjoint partitions merge into one ranking; an
// article two nodes listed (a partition in the middle of a move) counts
// once, with its higher count.
func TestMergeItems(t *testing.T) {
	a := []Item{{Rank: 1, ArticleID: "x", Count: 9}, {Rank: 2, ArticleID: "y", Count: 4}}
	b := []Item{{Rank: 1, ArticleID: "z", Count: 7}, {Rank: 2, ArticleID: "w", Count: 4}, {Rank: 3, ArticleID: "x", Count: 8}}
	got := MergeItems(3, a, b, nil)
	want := []Item{{Rank: 1, ArticleID: "x", Count: 9}, {Rank: 2, ArticleID: "z", Count: 7}, {Rank: 3, ArticleID: "w", Count: 4}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("merged %v, want %v", got, want)
	}
	if got := MergeItems(10); len(got) != 0 {
		t.Fatalf("merge of nothing: %v", got)
	}
}
