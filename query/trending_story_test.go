package query_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// TestTrendingByStory: /api/v1/trending?by=story sums the shares of a
// story's articles, so a story shared through three of its articles ranks
// once, above a story with more shares on its single best article than any
// one of the first story's; each story appears once.
func TestTrendingByStory(t *testing.T) {
	n := newFixtureNode(t)
	idOf := articleIDsByURL(t, n)
	q1, q2, q3 := idOf["https://wire.example/quake-lisbon"], idOf["https://daily.example/world/lisbon-earthquake"], idOf["https://tv.example/news/portugal-quake"]
	final, zoo := idOf["https://sport.example/cup-final"], idOf["https://local.example/zoo-panda"]
	quakeStory, _ := n.stories.StoryOfArticle(q1)
	finalStory, _ := n.stories.StoryOfArticle(final)
	for _, id := range []string{q2, q3} {
		if s, _ := n.stories.StoryOfArticle(id); s != quakeStory {
			t.Fatalf("fixture: %s in story %s, want the quake story %s", id, s, quakeStory)
		}
	}
	ts := n.clock.ms(0)
	var lines []string
	add := func(id string, k int) {
		for range k {
			lines = append(lines, share("s"+string(rune('a'+len(lines))), id, ts))
		}
	}
	add(q1, 2)
	add(q2, 2)
	add(q3, 1)
	add(final, 4)
	add(zoo, 1)
	n.postShareBatch(t, lines)
	n.waitShares(t, final, map[string]uint64{"1m": 4, "1h": 4, "24h": 4})
	n.waitShares(t, q3, map[string]uint64{"1m": 1, "1h": 1, "24h": 1})
	n.waitShares(t, zoo, map[string]uint64{"1m": 1, "1h": 1, "24h": 1})
	n.waitShares(t, q1, map[string]uint64{"1m": 2, "1h": 2, "24h": 2})

	var res struct {
		Items []struct {
			Rank     int    `json:"rank"`
			StoryID  string `json:"story_id"`
			Title    string `json:"title"`
			Count    uint64 `json:"count"`
			Articles []struct {
				ArticleID string `json:"article_id"`
			} `json:"articles"`
		} `json:"items"`
	}
	r := n.get(t, "/api/v1/trending?window=1h&by=story&k=2")
	if err := json.Unmarshal(r.body, &res); err != nil || r.status != fasthttp.StatusOK {
		t.Fatalf("trending by story: %s", r)
	}
	if len(res.Items) != 2 {
		t.Fatalf("k=2 gave %d items: %s", len(res.Items), r)
	}
	top, second := res.Items[0], res.Items[1]
	if top.Rank != 1 || top.StoryID != quakeStory || top.Count != 5 || len(top.Articles) != 3 || top.Title == "" {
		t.Errorf("first %+v, want the quake story %s with 5 shares over 3 articles", top, quakeStory)
	}
	if second.Rank != 2 || second.StoryID != finalStory || second.Count != 4 {
		t.Errorf("second %+v, want the final story %s with 4 shares", second, finalStory)
	}
	// By article the final's article leads: the quake story's shares are
	// spread over three.
	if r := n.get(t, "/api/v1/trending?window=1h&k=1"); !strings.Contains(string(r.body), final) {
		t.Errorf("by article: %s, want %s first", r, final)
	}
	if r := n.get(t, "/api/v1/trending?by=topic"); r.status != fasthttp.StatusBadRequest || !strings.Contains(string(r.body), "by") {
		t.Errorf("by=topic: %s, want 400 naming by", r)
	}
}
