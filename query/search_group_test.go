package query_test

import (
	"testing"

	"github.com/valyala/fasthttp"
)

// groupedHitJSON is what a reader of /api/v1/search?group=story sees of a
// result.
type groupedHitJSON struct {
	ID          string `json:"id"`
	StoryID     string `json:"story_id"`
	PublishedAt int64  `json:"published_at"`
	Also        []struct {
		ID      string `json:"id"`
		StoryID string `json:"story_id"`
	} `json:"also"`
}

// TestSearchGroupedByStory: with group=story a search answers one result
// per story, the story's other matching articles folded under it, and
// paging through every page with a small limit shows every matching
// article exactly once, no story leading two results on one page.
func TestSearchGroupedByStory(t *testing.T) {
	n := newFixtureNode(t)
	stories := map[string]string{} // fixture story → story id
	type pageJSON struct {
		Hits []groupedHitJSON `json:"hits"`
	}
	for _, q := range []string{"", "q=earthquake+lisbon", "q=acme+phone", "q=interest+rates+ecb"} {
		seen := map[string]int{} // article id → times shown
		leads := map[string]int{}
		eachPage(t, n, "/api/v1/search?group=story&limit=1&"+q, func(page pageJSON, _ response) {
			if len(page.Hits) > 1 {
				t.Fatalf("%s: limit 1 gave %d results", q, len(page.Hits))
			}
			for _, h := range page.Hits {
				if h.PublishedAt < baseTime.UnixMilli() {
					t.Errorf("%s: hit %s published_at %d, want ms at or after %d", q, h.ID, h.PublishedAt, baseTime.UnixMilli())
				}
				seen[h.ID]++
				leads[h.StoryID]++
				for _, a := range h.Also {
					if a.StoryID != h.StoryID {
						t.Errorf("%s: %s folded under story %s but is in %s", q, a.ID, h.StoryID, a.StoryID)
					}
					seen[a.ID]++
				}
			}
		})
		for id, k := range seen {
			if k != 1 {
				t.Errorf("%s: article %s shown %d times", q, id, k)
			}
		}
		if q == "" {
			if len(seen) != len(articleFixture) {
				t.Errorf("listing shows %d articles, want %d", len(seen), len(articleFixture))
			}
			continue
		}
		// Each text query here matches one story: with limit 1 it leads
		// one result, and the rest of its articles fold under it.
		var lead string
		for s := range leads {
			lead = s
		}
		if len(leads) != 1 || leads[lead] != 1 {
			t.Errorf("%s: stories leading results %v, want one story once", q, leads)
		}
		stories[q] = lead
	}
	if len(stories) != 3 || stories["q=earthquake+lisbon"] == stories["q=acme+phone"] {
		t.Errorf("stories of the queries %v", stories)
	}
	if r := n.get(t, "/api/v1/search?group=source"); r.status != fasthttp.StatusBadRequest {
		t.Errorf("group=source: %s, want 400", r)
	}
}
