package query_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/query"
	"github.com/valyala/fasthttp"
)

// searchHit is what the cluster search tests compare of a hit.
type searchHit struct {
	ID          string  `json:"id"`
	Score       float64 `json:"score"`
	PublishedAt int64   `json:"published_at"` // ms
	StoryID     string  `json:"story_id"`
}

// clusterSearchPage is the body of GET /api/v1/search.
type clusterSearchPage struct {
	Hits        []searchHit `json:"hits"`
	Total       int         `json:"total"`
	Order       string      `json:"order"`
	Next        string      `json:"next_cursor"`
	Partial     bool        `json:"partial"`
	Missing     []int32     `json:"missing_partitions"`
	FailedNodes []string    `json:"failed_nodes"`
	// Warning is the answer's Warning header.
	Warning string `json:"-"`
}

func (h searchHit) String() string {
	return fmt.Sprintf("%s/%v/%d", h.ID, h.Score, h.PublishedAt)
}

func searchPageOf(t testing.TB, n *testNode, query string, hdr ...string) clusterSearchPage {
	t.Helper()
	r := n.do(t, "GET", "/api/v1/search?"+query, nil, hdr...)
	if r.status != fasthttp.StatusOK {
		t.Fatalf("search %s: %s", query, r)
	}
	var p clusterSearchPage
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatalf("search %s: %v in %s", query, err, r)
	}
	p.Warning = r.header["Warning"]
	return p
}

// searchThrough pages through a search with limit 3, asking the nodes in
// turn (the cursor of one node's page continues on the next node), and
// returns the pages.
func searchThrough(t testing.TB, query string, nodes ...*testNode) []clusterSearchPage {
	t.Helper()
	var pages []clusterSearchPage
	cursor := ""
	for i := 0; i < 50; i++ {
		q := query + "&limit=3"
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		p := searchPageOf(t, nodes[i%len(nodes)], q)
		pages = append(pages, p)
		if p.Next == "" {
			return pages
		}
		cursor = p.Next
	}
	t.Fatalf("search %s does not end", query)
	return nil
}

// hitsOf concatenates the pages' hits.
func hitsOf(pages []clusterSearchPage) []string {
	var out []string
	for _, p := range pages {
		for _, h := range p.Hits {
			out = append(out, h.String())
		}
	}
	return out
}

func partitionOf(id string) int32 { return eventlog.PartitionFor([]byte(id), clusterPartitions) }

var clusterSearchQueries = []string{
	"q=earthquake+lisbon", "q=interest+rates", "q=phone&source=tech", "q=the", "topic=sports", "",
	"from=" + baseTime.Add(40*time.Minute).Format(time.RFC3339) + "&to=" + baseTime.Add(56*time.Minute).Format(time.RFC3339),
}

// TestClusterSearchFansOut: a search through any node of a cluster asks
// every node and merges their pages into the pages one node holding every
// partition answers (same hits, scores, order, limit, totals; cursors
// continue on any node); a node answering a fan-out answers from its own
// partitions; a dead node is reported with its partitions missing.
//
// It is one scenario checked step by step (cyclomatic 40): the steps
// depend on each other's state, so they stay in order in one function.
func TestClusterSearchFansOut(t *testing.T) {
	c := newClusterNet(t, map[string][]int32{"a": {0, 2}, "b": {1, 3}, "c": nil})
	a, b, cn := c.node("a"), c.node("b"), c.node("c")
	ref := newFixtureNode(t)
	ingestFixture(t, a, articleFixture) // waits until a search through a counts every article

	// Each node alone answers from its own partitions.
	forwarded := []string{query.HeaderForwarded, "test", query.HeaderPeer, "peer-token"}
	onB := 0
	for id, want := range map[string][]int32{"a": {1, 3}, "b": {0, 2}, "c": {0, 1, 2, 3}} {
		p := searchPageOf(t, c.node(id), "limit=100", forwarded...)
		if !slices.Equal(p.Missing, want) || !p.Partial || len(p.FailedNodes) != 0 || p.Total != len(p.Hits) {
			t.Errorf("node %s alone: missing %v (want %v), partial %v, failed %v, total %d, %d hits", id, p.Missing, want, p.Partial, p.FailedNodes, p.Total, len(p.Hits))
		}
		for _, h := range p.Hits {
			if slices.Contains(want, partitionOf(h.ID)) {
				t.Errorf("node %s answered %s of partition %d, which it does not own", id, h.ID, partitionOf(h.ID))
			}
			if id == "b" {
				onB++
			}
		}
	}
	if onB == 0 || onB == len(articleFixture) {
		t.Fatalf("%d of %d articles are indexed on b: the test needs some on each node", onB, len(articleFixture))
	}

	// Through any node, and paging across nodes: the pages of one node.
	for _, q := range clusterSearchQueries {
		want := searchThrough(t, q, ref)
		for _, order := range [][]*testNode{{a}, {b}, {cn}, {cn, b, a}} {
			got := searchThrough(t, q, order...)
			if !slices.Equal(hitsOf(got), hitsOf(want)) {
				t.Errorf("search %q through %d nodes:\n got %v\nwant %v", q, len(order), hitsOf(got), hitsOf(want))
			}
			if len(got) != len(want) {
				continue
			}
			for i, p := range got {
				if p.Total != want[i].Total || p.Order != want[i].Order || p.Partial || p.Missing != nil || p.FailedNodes != nil || p.Warning != "" {
					t.Errorf("search %q page %d: total %d order %s partial %v missing %v failed %v; want total %d order %s, complete",
						q, i, p.Total, p.Order, p.Partial, p.Missing, p.FailedNodes, want[i].Total, want[i].Order)
				}
				for _, h := range p.Hits {
					if h.StoryID == "" {
						t.Errorf("search %q: hit %s without its story", q, h.ID)
					}
				}
			}
		}
	}
	// An invalid request is refused even by a node without partitions.
	if r := cn.get(t, "/api/v1/search?q=%ff"); r.status != fasthttp.StatusBadRequest {
		t.Errorf("invalid query through c: %s", r)
	}

	// b dies (the leader has not noticed yet): its partitions are missing.
	b.stop()
	for _, q := range clusterSearchQueries {
		var want []string
		total := 0
		for _, p := range searchThrough(t, q, ref) {
			for _, h := range p.Hits {
				if owner := partitionOf(h.ID); owner == 0 || owner == 2 {
					want = append(want, h.String())
				}
			}
		}
		total = len(want)
		for _, n := range []*testNode{a, cn} {
			got := searchThrough(t, q, n)
			if !slices.Equal(hitsOf(got), want) {
				t.Errorf("search %q without b:\n got %v\nwant %v", q, hitsOf(got), want)
			}
			for i, p := range got {
				if !p.Partial || !slices.Equal(p.Missing, []int32{1, 3}) || !slices.Equal(p.FailedNodes, []string{"b"}) || p.Total != total ||
					p.Warning != `199 newsflow "partial answer: partitions 1, 3 missing; nodes b did not answer"` {
					t.Errorf("search %q page %d without b: partial %v, missing %v, failed %v, total %d (want %d), warning %q", q, i, p.Partial, p.Missing, p.FailedNodes, p.Total, total, p.Warning)
				}
			}
		}
	}
	// Without a and b no partition answers.
	a.stop()
	r := cn.get(t, "/api/v1/search?q=lisbon")
	var gone struct {
		Missing     []int32  `json:"missing_partitions"`
		FailedNodes []string `json:"failed_nodes"`
	}
	if err := json.Unmarshal(r.body, &gone); err != nil || r.status != fasthttp.StatusServiceUnavailable ||
		!slices.Equal(gone.Missing, []int32{0, 1, 2, 3}) || !slices.Equal(gone.FailedNodes, []string{"a", "b"}) {
		t.Errorf("search with no node up: %s", r)
	}
}
