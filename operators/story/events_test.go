package story

import "testing"

// Two coalition deals in two places, two hours apart, share words of the
// kind (coalition, pact, party, lawmakers, vote, Monday) and no name: a
// reader sees two events, so they are two stories. Reports of one deal
// naming its people and places are one.
func TestCoalitionDealsWithoutSharedNames(t *testing.T) {
	got := assignNamed(t,
		"Bridge Party joins Halcroft coalition over trawler licences",
		"Elwich lawmakers vote on the coalition pact on Monday",
		"Florian Halcroft to lead Elwich coalition with Bridge Party",
		"Belfold coalition deal: Yannick Crandale's party agrees pact",
		"Belfold lawmakers vote on the coalition pact on Monday",
		"Yannick Crandale will head a Belfold coalition after talks",
	)
	if got[0] != got[2] || got[3] != got[5] {
		t.Errorf("one deal's reports split: stories %v", got)
	}
	for _, i := range []int{0, 1, 2} {
		for _, j := range []int{3, 4, 5} {
			if got[i] == got[j] {
				t.Errorf("the Elwich and the Belfold deals share story %s (headlines %d and %d): stories %v", got[i], i, j, got)
			}
		}
	}
}

// "… Day" headlines (a memorial, a sales event, a film opening) share one
// word and nothing else: no story chains them.
func TestDayHeadlinesDoNotChain(t *testing.T) {
	got := assignNamed(t,
		"Veterans gather for Memorial Day parade in Arlington",
		"Prime Day deals: the best discounts on headphones",
		"Memorial Day weekend traffic expected to break records",
		"Opening Day: Mariners beat Guardians in home opener",
		"Prime Day 2024 dates announced by Amazon",
		"Mother's Day brunch ideas from top chefs",
	)
	seen := map[string][]int{}
	for i, s := range got {
		seen[s] = append(seen[s], i)
	}
	for s, members := range seen {
		if len(members) > 2 {
			t.Errorf("story %s chains %d \"… Day\" headlines: %v", s, len(members), members)
		}
	}
	if got[1] == got[0] || got[3] == got[0] || got[5] == got[1] || got[3] == got[1] {
		t.Errorf("different days in one story: %v", got)
	}
}

// assignNamed runs headlines a few minutes apart through a builder (names
// and all) and returns each one's story id, merges followed.
func assignNamed(t *testing.T, titles ...string) []string {
	t.Helper()
	b := newTestBuilder(t, Options{})
	ids := make([]string, len(titles))
	for i, title := range titles {
		ids[i] = string(rune('a' + i))
		mustApply(t, b, Article{ID: ids[i], SourceID: "s" + ids[i], Title: title, Published: minutes(float64(i) * 20)})
	}
	out := make([]string, len(titles))
	for i, id := range ids {
		st, ok := b.StoryOf(id)
		if !ok {
			t.Fatalf("no story of %s", id)
		}
		out[i] = st.ID
	}
	return out
}
