package query_test

import (
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// TestShareWithoutCategoryCountsUnderArticleTopics: the reader's Share
// button sends no category. Such a share counts under its article's topics
// in /api/v1/trending?category=, whether the article reached the node
// before the share or after it; a share with a category keeps it. A
// restart and a replay of trending count every share once.
func TestShareWithoutCategoryCountsUnderArticleTopics(t *testing.T) {
	dir := t.TempDir()
	n := newTestNode(t, withArticles(), withDir(dir))
	final, quake := articleFixture[10], articleFixture[0] // sports, world
	finalID, quakeID := canonID(t, final.url), canonID(t, quake.url)
	ingestFixture(t, n, []fixtureArticle{final})

	ts := n.clock.ms(0)
	post := func(lines ...string) {
		t.Helper()
		if r := n.post(t, pathBatch, strings.Join(lines, "\n")); r.status != fasthttp.StatusAccepted {
			t.Fatalf("shares: %s", r)
		}
	}
	post(share("s1", finalID, ts), share("s2", finalID, ts, "category", "culture"))
	n.waitTrending(t, "?category=sports", finalID+":1")
	n.waitTrending(t, "?category=culture", finalID+":1")

	// The quake report is shared before the node has seen it: the share
	// counts at once, under its topic once the article comes.
	post(share("s3", quakeID, ts+1000))
	n.waitTrending(t, "", finalID+":2 "+quakeID+":1")
	n.waitTrending(t, "?category=world", "")
	if r := n.post(t, "/api/v1/articles", fixtureBody(baseTime, []fixtureArticle{quake})); r.status != fasthttp.StatusAccepted {
		t.Fatalf("article: %s", r)
	}
	waitArticles(t, n, 2)

	check := func(name string, n *testNode) {
		t.Helper()
		t.Logf("%s", name)
		n.waitTrending(t, "?category=world", quakeID+":1")
		n.waitTrending(t, "?category=sports", finalID+":1")
		n.waitTrending(t, "?category=culture", finalID+":1")
		n.waitTrending(t, "", finalID+":2 "+quakeID+":1")
		n.waitTrending(t, "?window=24h&category=sports", finalID+":1")
	}
	check("live", n)
	n.stop()
	n = newTestNode(t, withArticles(), withDir(dir))
	check("restart", n)
	n.stop()
	n = newTestNode(t, withArticles(), withDir(dir), withReplay("trending"))
	check("replay", n)
}
