package query_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/internal/testutil"
	"github.com/newsflow/newsflow/query"
	"github.com/valyala/fasthttp"
)

// clusterFeed is the body of GET /api/v1/feed with explain=1.
type clusterFeed struct {
	Stories []struct {
		ID      string          `json:"id"`
		Score   float64         `json:"score"`
		Explain json.RawMessage `json:"explain"`
	} `json:"stories"`
	Partial       bool     `json:"partial"`
	Interest      string   `json:"interest"`
	InterestError string   `json:"interest_error"`
	Missing       []int32  `json:"missing_partitions"`
	FailedNodes   []string `json:"failed_nodes"`
}

// ranking renders the feed as id:score:explanation lines.
func (f clusterFeed) ranking() string {
	var b strings.Builder
	for _, s := range f.Stories {
		fmt.Fprintf(&b, "%s:%v:%s\n", s.ID, s.Score, s.Explain)
	}
	return b.String()
}

func feedOf(t testing.TB, n *testNode, hdr ...string) clusterFeed {
	t.Helper()
	r := n.do(t, "GET", "/api/v1/feed?limit=100&explain=1", nil, hdr...)
	if r.status != fasthttp.StatusOK {
		t.Fatalf("feed: %s", r)
	}
	var f clusterFeed
	if err := json.Unmarshal(r.body, &f); err != nil {
		t.Fatalf("feed: %v in %s", err, r)
	}
	return f
}

// TestClusterFeedReadsInterestFromOwner: the feed is ranked on the story
// owner, a, with the reader's interest profile from the owner of the
// reader's partition. Two readers with the same reads, one whose profile
// is on a and one whose profile is on b, get the same personal feed,
// through either node; when b is down the second reader still gets a
// feed, ranked without the profile, and the page says why.
//
// It is one scenario checked step by step (cyclomatic 49): the steps
// depend on each other's state, so they stay in order in one function.
func TestClusterFeedReadsInterestFromOwner(t *testing.T) {
	c := newClusterNet(t, map[string][]int32{"a": {0, 2}, "b": {1, 3}}, withQuery(query.Options{PeerTimeout: time.Second}))
	a, b := c.node("a"), c.node("b")
	ingestFixture(t, a, articleFixture)

	// One reader per node; accounts and sessions are in the shared
	// metadata, valid on every node.
	ctx := context.Background()
	users, tokens := map[string]string{}, map[string]string{}
	for i := 0; len(users) < 2 && i < 100; i++ {
		u, err := a.auth.Register(ctx, fmt.Sprintf("reader%d", i), "a long enough password")
		if err != nil {
			t.Fatal(err)
		}
		owner := c.ownerOf(u.ID)
		if _, ok := users[owner]; ok {
			continue
		}
		tok, _, err := a.auth.NewSession(ctx, u.ID)
		if err != nil {
			t.Fatal(err)
		}
		users[owner], tokens[owner] = u.ID, tok
	}
	if len(users) != 2 {
		t.Fatalf("readers by owner: %v", users)
	}
	// Both read the same three articles, in one session. The interest
	// operator applies a reader's reads in the order they arrive, which
	// is the order of the reads only among articles of one partition (the
	// reads are joined with the articles' topics by article partition):
	// the three are of one partition.
	byPartition := map[int32][]string{}
	for _, f := range articleFixture {
		id := canonID(t, f.url)
		byPartition[partitionOf(id)] = append(byPartition[partitionOf(id)], id)
	}
	var arts []string
	for _, ids := range byPartition {
		if len(ids) >= 3 {
			arts = ids[:3]
		}
	}
	if arts == nil {
		t.Fatalf("no partition with 3 articles: %v", byPartition)
	}
	a.waitCaughtUp(t)
	b.waitCaughtUp(t)
	var lines []string
	for owner, id := range users {
		for i, art := range arts {
			lines = append(lines, read(fmt.Sprintf("%s-%d", owner, i), id, art, "s1", c.clock.ms(time.Duration(i)*time.Second)))
		}
	}
	if r := b.post(t, "/api/v1/events/read/batch", strings.Join(lines, "\n")); r.status != fasthttp.StatusAccepted {
		t.Fatalf("reads: %s", r)
	}
	testutil.Eventually(t, 20*time.Second, func() error {
		for _, id := range users {
			// Routed to the owner of the user's partition.
			var p struct {
				Reads int `json:"reads"`
			}
			if r := a.get(t, "/api/v1/admin/users/"+id+"/interest"); json.Unmarshal(r.body, &p) != nil || p.Reads != 3 {
				return fmt.Errorf("profile of %s: %s", id, r)
			}
		}
		return nil
	})

	anonymous := feedOf(t, a, "X-Anonymous", "1")
	local := feedOf(t, a, bearer(tokens["a"])...)
	if local.Interest != "applied" || local.Partial || local.ranking() == anonymous.ranking() {
		t.Fatalf("reader on a: interest %q partial %v, same as anonymous: %v", local.Interest, local.Partial, local.ranking() == anonymous.ranking())
	}
	for _, n := range []*testNode{a, b} {
		remote := feedOf(t, n, bearer(tokens["b"])...)
		if remote.Interest != "applied" || remote.Partial || remote.Missing != nil || remote.FailedNodes != nil {
			t.Errorf("reader on b through %p: %+v", n, remote)
		}
		if got, want := remote.ranking(), local.ranking(); got != want {
			t.Errorf("feed of the reader on b:\n%s\nwant (the reader on a):\n%s", got, want)
		}
	}
	// The profile endpoint answers from the owner, through any node.
	for _, n := range []*testNode{a, b} {
		r := n.do(t, "GET", "/api/v1/me/interest", nil, bearer(tokens["b"])...)
		var p struct {
			UserID string `json:"user_id"`
			Reads  int    `json:"reads"`
			Topics []struct {
				Topic string `json:"topic"`
			} `json:"topics"`
		}
		if err := json.Unmarshal(r.body, &p); err != nil || r.status != fasthttp.StatusOK || p.UserID != users["b"] || p.Reads != 3 || len(p.Topics) == 0 {
			t.Errorf("my interest: %s", r)
		}
	}
	if r := a.do(t, "GET", "/api/v1/me/interest", nil, "X-Anonymous", "1"); r.status != fasthttp.StatusUnauthorized {
		t.Errorf("my interest without a session: %s", r)
	}
	// History: the reads from the user's partition, the titles from the
	// story owner, through either node.
	for owner, tok := range tokens {
		for _, n := range []*testNode{a, b} {
			var h struct {
				History []struct {
					ArticleID string `json:"article_id"`
					Title     string `json:"title"`
				} `json:"history"`
			}
			r := n.do(t, "GET", "/api/v1/history", nil, bearer(tok)...)
			if err := json.Unmarshal(r.body, &h); err != nil || len(h.History) != 3 || h.History[0].Title == "" {
				t.Errorf("history of the reader on %s: %s", owner, r)
			}
		}
	}

	// b is down (the leader has not noticed yet): the feed of its reader
	// is served within the peer timeout, without the profile, and says so.
	b.stop()
	start := time.Now()
	down := feedOf(t, a, bearer(tokens["b"])...)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("degraded feed took %v", took)
	}
	if !down.Partial || down.Interest != "unavailable" || !strings.Contains(down.InterestError, "node b") ||
		!slices.Equal(down.Missing, []int32{partitionOf(users["b"])}) || !slices.Equal(down.FailedNodes, []string{"b"}) {
		t.Errorf("feed with b down: partial %v, interest %q (%s), missing %v, failed %v", down.Partial, down.Interest, down.InterestError, down.Missing, down.FailedNodes)
	}
	if got, want := down.ranking(), anonymous.ranking(); got != want {
		t.Errorf("feed with b down:\n%s\nwant the ranking without a profile:\n%s", got, want)
	}
	if again := feedOf(t, a, bearer(tokens["a"])...); again.ranking() != local.ranking() || again.Partial {
		t.Errorf("the reader on a is affected by b: %+v", again)
	}
	if r := a.do(t, "GET", "/api/v1/history", nil, bearer(tokens["b"])...); r.status != fasthttp.StatusServiceUnavailable || !strings.Contains(string(r.body), `"failed_nodes":["b"]`) {
		t.Errorf("history with b down: %s", r)
	}
}

// TestClusterFeedTrendingCountsEveryNode: the story owner, a, ranks feeds
// with the whole cluster's trending: shares of an article in one of b's
// partitions lift its story in a's feed.
func TestClusterFeedTrendingCountsEveryNode(t *testing.T) {
	c := newClusterNet(t, map[string][]int32{"a": {0, 2}, "b": {1, 3}}, withQuery(query.Options{PeerTimeout: time.Second}))
	a, b := c.node("a"), c.node("b")
	ingestFixture(t, a, articleFixture)
	var art string
	for _, f := range articleFixture {
		if id := canonID(t, f.url); c.ownerOf(id) == "b" {
			art = id
			break
		}
	}
	if art == "" {
		t.Fatal("no fixture article in b's partitions")
	}
	var lines []string
	for i := range 20 {
		lines = append(lines, share(fmt.Sprintf("sh-%d", i), art, c.clock.ms(time.Duration(i)*time.Second)))
	}
	b.postShareBatch(t, lines)
	testutil.Eventually(t, 20*time.Second, func() error {
		var sh struct {
			Counts map[string]uint64 `json:"counts"`
		}
		if r := a.get(t, "/api/v1/articles/"+art+"/shares"); json.Unmarshal(r.body, &sh) != nil || sh.Counts["1h"] != 20 {
			return fmt.Errorf("shares of %s through a: %s", art, r)
		}
		return nil
	})
	// a refreshes the cluster's top every second. The feed is asked once,
	// after that: its first answer is cached for a minute, so it cannot be
	// polled.
	time.Sleep(3 * time.Second)
	var explained []struct {
		Trending float64 `json:"trending"`
	}
	for _, s := range feedOf(t, a, "X-Anonymous", "1").Stories {
		var e struct {
			Trending float64 `json:"trending"`
		}
		if json.Unmarshal(s.Explain, &e) == nil && e.Trending > 0 {
			explained = append(explained, e)
		}
	}
	if len(explained) != 1 || explained[0].Trending != 1 {
		t.Fatalf("stories with a trending signal in a's feed: %v, want one (the shared article's story, at 1)", explained)
	}
}
