package query_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"math"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/crawl"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/internal/canon"
	"github.com/newsflow/newsflow/internal/feed"
	"github.com/newsflow/newsflow/internal/fetch"
	"github.com/newsflow/newsflow/internal/polite"
	"github.com/newsflow/newsflow/internal/testutil"
)

const realFeeds = "../../shared/data/feeds/real"

// TestRealFeedsKeepOldItems serves the real feeds of the shared data, with
// the dates their items were published years ago, crawls each once, and
// checks what a reader gets: every distinct item becomes one article,
// searchable and listed in the Miniflux API with its original publish
// date; nothing valid is dead-lettered for its age. Retention then removes
// them 30 days of first-seen time after the crawl (the node's clock), and
// not a moment before.
func TestRealFeedsKeepOldItems(t *testing.T) {
	if testing.Short() {
		t.Skip("crawls every real feed of the shared data")
	}
	if _, err := os.Stat(realFeeds); err != nil {
		testutil.NoSharedData(t, "real feeds not found at %s: %v", realFeeds, err)
	}
	n := newTestNode(t, withArticles())
	files := httptest.NewServer(http.StripPrefix("/files/", http.FileServer(http.Dir(realFeeds))))
	t.Cleanup(files.Close)
	c, err := crawl.New(n.sources, n.log, n.db, crawl.Options{
		Now:        n.clock.Now,
		Partitions: n.eng.Partitions(),
		Fetch:      fetch.Options{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, Timeout: 30 * time.Second},
		Limiter:    polite.LimiterOptions{HostRate: math.Inf(1), HostConcurrency: 16, GlobalConcurrency: 16},
		// The items link to sites a test must not reach.
		FullText: crawl.FullTextOptions{Disabled: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// want holds every distinct article of the feeds, as the crawler's
	// parser finds them, with the year of the oldest.
	want := map[string]bool{}
	oldest := time.Now()
	var sources []crawl.Source
	err = filepath.WalkDir(realFeeds, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		switch filepath.Ext(p) {
		case ".xml", ".rss", ".atom", ".json", ".rdf":
		default:
			return nil
		}
		rel, _ := filepath.Rel(realFeeds, p)
		src, err := n.sources.Add(ctx, crawl.Source{FeedURL: files.URL + "/files/" + filepath.ToSlash(rel)})
		if err != nil {
			return err
		}
		sources = append(sources, src)
		body, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		u, _ := url.Parse(src.FeedURL)
		f, err := feed.Parse(body, "", u, n.clock.Now())
		if err != nil {
			return nil // a broken feed marks its source; it has no items
		}
		for _, it := range f.Items {
			want[it.ArticleID] = true
			if !it.PublishedAt.IsZero() && it.PublishedAt.Before(oldest) {
				oldest = it.PublishedAt
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(want) < 500 || oldest.After(n.clock.Now().AddDate(-1, 0, 0)) {
		t.Fatalf("the real feeds hold %d items, the oldest from %s: not the data this test was written for", len(want), oldest)
	}
	for _, s := range sources {
		if _, err := c.CrawlNow(ctx, s.ID); err != nil {
			t.Fatalf("crawl %s: %v", s.FeedURL, err)
		}
	}
	t.Logf("%d feeds, %d distinct items, the oldest published %s", len(sources), len(want), oldest.Format(time.DateOnly))
	waitSearch(t, n, "", len(want))
	for k, v := range n.metrics(t) {
		if strings.HasPrefix(k, "newsflow_dead_letters_total") && v != 0 {
			t.Errorf("%s = %v: valid items were dead-lettered", k, v)
		}
	}

	// A reader subscribes to every feed in a Miniflux client: every item is
	// an entry, with its publish date.
	tok := login(t, n, "/api/v1/auth/register", "reader", "correct horse battery")
	r := n.do(t, "POST", "/api/v1/me/api-keys", []byte(`{"name":"miniflux client"}`), bearer(tok)...)
	var key struct{ Secret string }
	if r.status != 201 || json.Unmarshal(r.body, &key) != nil {
		t.Fatalf("api key: %s", r)
	}
	auth := []string{"X-Auth-Token", key.Secret}
	var feedIDs []int64
	for _, s := range sources {
		r := n.do(t, "POST", "/v1/feeds", fmt.Appendf(nil, `{"feed_url":%q,"category_id":1}`, s.FeedURL), auth...)
		var c struct {
			FeedID int64 `json:"feed_id"`
		}
		if r.status != 201 || json.Unmarshal(r.body, &c) != nil {
			t.Fatalf("subscribe %s: %s", s.FeedURL, r)
		}
		feedIDs = append(feedIDs, c.FeedID)
	}
	listed := func() (map[string]bool, int) {
		t.Helper()
		got, old := map[string]bool{}, 0
		for _, id := range feedIDs {
			r := n.do(t, "GET", fmt.Sprintf("/v1/feeds/%d/entries?limit=10000", id), nil, auth...)
			var l minifluxEntries
			if r.status != 200 || json.Unmarshal(r.body, &l) != nil {
				t.Fatalf("feed %d entries: %s", id, r)
			}
			for _, e := range l.Entries {
				u, err := canon.Canonical(e.URL, nil)
				if err != nil {
					t.Fatalf("entry url %q: %v", e.URL, err)
				}
				got[canon.ArticleID(u)] = true
				if p, err := time.Parse(time.RFC3339, e.PublishedAt); err == nil && p.Before(n.clock.Now().AddDate(-1, 0, 0)) {
					old++
				}
			}
		}
		return got, old
	}
	got, old := listed()
	missing := 0
	for id := range want {
		if !got[id] {
			missing++
		}
	}
	if missing > 0 || len(got) != len(want) {
		t.Errorf("Miniflux lists %d distinct entries, %d of the %d items missing", len(got), missing, len(want))
	}
	if old == 0 {
		t.Error("no entry carries a publish date older than a year")
	}

	// Retention runs at each partition's commit: a new article for every
	// partition, exactly 30 days after the crawl, removes nothing.
	n.clock.Advance(30 * 24 * time.Hour)
	postAll := func(round string) {
		t.Helper()
		var body string
		for p, i := range coverPartitions(t, n.eng.Partitions(), "https://local.example/"+round+"/") {
			a := fixtureArticle{url: i, source: "local", title: fmt.Sprintf("Harbour %s notice q%dz", round, p), summary: "Council news."}
			body += a.line(n.clock.Now()) + "\n"
		}
		if r := n.post(t, "/api/v1/articles", body, "Content-Type", "application/x-ndjson"); r.status != 202 {
			t.Fatalf("ingest: %s", r)
		}
	}
	parts := int(n.eng.Partitions())
	postAll("first")
	waitSearch(t, n, "", len(want)+parts)
	// A second later they have been kept for longer than 30 days: they go.
	n.clock.Advance(time.Second)
	postAll("second")
	waitSearch(t, n, "", 2*parts)
	testutil.Eventually(t, 20*time.Second, func() error {
		if got, _ := listed(); len(got) != 0 {
			return fmt.Errorf("Miniflux still lists %d entries of the crawled feeds", len(got))
		}
		return nil
	})
}

// coverPartitions returns, by partition, one URL under prefix whose
// article falls in it.
func coverPartitions(t *testing.T, parts int32, prefix string) map[int32]string {
	t.Helper()
	out := map[int32]string{}
	for i := 0; len(out) < int(parts); i++ {
		u, err := canon.Canonical(fmt.Sprint(prefix, i), nil)
		if err != nil {
			t.Fatal(err)
		}
		p := eventlog.PartitionFor([]byte(canon.ArticleID(u)), parts)
		if _, ok := out[p]; !ok {
			out[p] = u
		}
	}
	return out
}
