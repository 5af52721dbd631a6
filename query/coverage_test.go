package query_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/valyala/fasthttp"
)

// A story card lists other outlets' headlines of the story (full
// coverage): never the outlet the card shows, one per outlet, newest
// first, at most three.
func TestCardsCarryFullCoverage(t *testing.T) {
	n := newFixtureNode(t)
	minute := map[string]int{}
	for _, a := range articleFixture {
		minute[a.title] = a.minute
	}
	for _, uri := range []string{"/api/v1/feed?limit=100", "/api/v1/stories?limit=100"} {
		var page struct {
			Stories []struct {
				ID       string `json:"id"`
				SourceID string `json:"source_id"`
				Sources  []any  `json:"sources"`
				Coverage []struct {
					Title     string `json:"title"`
					SourceID  string `json:"source_id"`
					Published int64  `json:"published_at"`
				} `json:"coverage"`
			} `json:"stories"`
		}
		r := n.get(t, uri)
		if err := json.Unmarshal(r.body, &page); err != nil || r.status != fasthttp.StatusOK {
			t.Fatalf("%s: %s", uri, r)
		}
		withCoverage := 0
		for _, st := range page.Stories {
			if want := min(len(st.Sources)-1, 3); len(st.Coverage) != want {
				t.Errorf("%s: story %s of %d sources has %d coverage items, want %d", uri, st.ID, len(st.Sources), len(st.Coverage), want)
			}
			var seen []string
			for i, c := range st.Coverage {
				if c.SourceID == st.SourceID || slices.Contains(seen, c.SourceID) {
					t.Errorf("%s: story %s coverage repeats an outlet: %+v", uri, st.ID, st.Coverage)
				}
				seen = append(seen, c.SourceID)
				if _, ok := minute[c.Title]; !ok {
					t.Errorf("%s: coverage title %q is not an article", uri, c.Title)
				}
				if i > 0 && c.Published > st.Coverage[i-1].Published {
					t.Errorf("%s: story %s coverage not newest first", uri, st.ID)
				}
			}
			if len(st.Coverage) > 0 {
				withCoverage++
			}
		}
		if withCoverage < 3 {
			t.Errorf("%s: %d stories with coverage, want the quake, rates and phone stories at least", uri, withCoverage)
		}
	}
}
