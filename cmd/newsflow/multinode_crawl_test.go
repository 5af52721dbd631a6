package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/newsflow/newsflow/engine/eventlog"
)

// fetchLog records when a feed was fetched.
type fetchLog struct {
	mu sync.Mutex
	at []time.Time
}

func (f *fetchLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/feed.xml" {
		http.NotFound(w, r) // robots.txt: none, everything allowed
		return
	}
	f.mu.Lock()
	f.at = append(f.at, time.Now())
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/rss+xml")
	fmt.Fprint(w, `<?xml version="1.0"?><rss version="2.0"><channel><title>Once</title><link>http://example.org/</link>`)
	for i := range 3 {
		fmt.Fprintf(w, `<item><title>Harbour report %d</title><link>http://example.org/once/%d</link><pubDate>Mon, 02 Jan 2006 15:04:05 GMT</pubDate><description>Ships came and went, day %d.</description></item>`, i, i, i)
	}
	fmt.Fprint(w, `</channel></rss>`)
}

func (f *fetchLog) times() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.at...)
}

// TestClusterCrawlsOncePerInterval: a source added through node b with a
// fixed 2 s interval is fetched once per interval by the cluster as a
// whole, not once per node, also while the node crawling it is killed and
// after it comes back and takes partitions again.
func TestClusterCrawlsOncePerInterval(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test skipped in -short mode")
	}
	const interval = 2 * time.Second
	feeds := &fetchLog{}
	srv := httptest.NewServer(feeds)
	defer srv.Close()
	tc := startTestCluster(t, "NEWSFLOW_CRAWL_ENABLED=true", "NEWSFLOW_CRAWL_SEED_OPML=",
		"NEWSFLOW_CRAWL_ALLOW_CIDRS=127.0.0.1/32", "NEWSFLOW_CRAWL_MIN_INTERVAL_FLOOR=1s")

	body := fmt.Sprintf(`{"feed_url":%q,"min_interval":"%s","max_interval":"%s"}`, srv.URL+"/feed.xml", interval, interval)
	var src struct {
		ID string `json:"id"`
	}
	if code := postSource(t, tc.nodes["b"].URL("/api/v1/admin/sources"), body, &src); code != http.StatusCreated || src.ID == "" {
		t.Fatalf("add source through b: %d %+v", code, src)
	}
	// Adding fetched the feed once, to check it; crawls come after.
	start := time.Now()

	// Steady state, then the crawling node dies.
	time.Sleep(6 * interval)
	v, _ := tc.waitView(10*time.Second, "with an owner for every partition", func(v clusterView) bool { return v.allRunning() })
	p := eventlog.PartitionFor([]byte(src.ID), int32(len(v.Partitions)))
	var owner string
	for _, pp := range v.Partitions {
		if pp.Partition == p {
			owner = pp.Owner
		}
	}
	tc.nodes[owner].Kill()
	killed := time.Now()
	_, moved := tc.waitView(20*time.Second, "with the source's partition moved", func(v clusterView) bool {
		return v.owns(owner) == 0 && v.allRunning()
	})
	t.Logf("source %s in partition %d of node %s; killed, its partition runs elsewhere after %s", src.ID, p, owner, moved.Round(time.Millisecond))
	failover := killed.Add(moved + interval) // until then one interval may pass without a fetch
	time.Sleep(5 * interval)

	// The node comes back and takes partitions again: whichever node has
	// the source's partition now, the source is still fetched once.
	tc.nodes[owner].Start()
	_, back := tc.waitView(60*time.Second, "rejoined by "+owner, func(v clusterView) bool { return v.owns(owner) > 0 && v.allRunning() })
	t.Logf("%s restarted: runs partitions again after %s", owner, back.Round(time.Millisecond))
	time.Sleep(5 * interval)
	end := time.Now()

	var at []time.Time
	for _, t := range feeds.times() {
		if t.After(start) {
			at = append(at, t)
		}
	}
	if len(at) < 10 {
		t.Fatalf("%d fetches in %s, want about one every %s", len(at), end.Sub(start).Round(time.Second), interval)
	}
	var gaps []string
	for i := 1; i < len(at); i++ {
		gap := at[i].Sub(at[i-1])
		gaps = append(gaps, gap.Round(10*time.Millisecond).String())
		switch {
		case gap < interval*3/4:
			t.Errorf("fetches %d and %d %s apart (at %s after the add): the source was crawled twice in one interval",
				i-1, i, gap.Round(time.Millisecond), at[i].Sub(start).Round(time.Millisecond))
		case gap > interval*3/2 && !(at[i-1].Before(failover) && at[i].After(killed)):
			t.Errorf("fetches %d and %d %s apart (at %s after the add), outside the failover: an interval was skipped",
				i-1, i, gap.Round(time.Millisecond), at[i].Sub(start).Round(time.Millisecond))
		}
	}
	t.Logf("%d fetches in %s; gaps %v", len(at), end.Sub(start).Round(time.Millisecond), gaps)
}
