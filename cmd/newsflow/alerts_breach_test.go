package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/cmd/newsflow/nodeproc"
	"github.com/newsflow/newsflow/demo/feedfarm"
	"github.com/newsflow/newsflow/internal/testutil"
	"go.yaml.in/yaml/v3"
)

// TestAlertsFireOnBreaches runs a node that crawls a local feed farm every
// second or two and takes articles, shares, searches and feed reads, and
// drives it through breaches while it scrapes the node's /metrics. Each
// stretch of scrapes becomes a promtool test of configs/alerts.yaml (see
// alerts_fixture_test.go):
//
//   - healthy traffic, replayed for seven hours at its steady state: no
//     alert at any time;
//   - malformed records (shares without an article, written to the topic
//     by a producer of their own, as Kafka lets any producer) among the
//     traffic: dead letters rising, for the stage that refused them;
//   - the feed farm stopped: crawl coverage falling, and the crawl_coverage
//     budget burning (page and ticket);
//   - the story stage paused while articles keep arriving: the stage
//     paused, its lag growing and the story state stale.
func TestAlertsFireOnBreaches(t *testing.T) {
	promtool := testutil.Promtool(t)
	_, root := nodeproc.Binary(t)
	farm := httptest.NewServer(feedfarm.New(feedfarm.Options{Now: time.Now}))
	defer farm.Close()
	env := append(slices.Clone(crawlEnv), "NEWSFLOW_CRAWL_MIN_INTERVAL_FLOOR=1s",
		"NEWSFLOW_CRAWL_HOST_RATE=100", "NEWSFLOW_CRAWL_HOST_CONCURRENCY=8")
	// Kafka (kfake), so that a producer of the test's own can write
	// records to the topics that the HTTP API would refuse.
	k := newKfake(t)
	brokers := k.ListenAddrs()
	n := runNode(t, t.TempDir(), env, "--brokers", brokers[0])
	const feeds = 4
	var ids []string
	for i := range feeds {
		body := fmt.Sprintf(`{"feed_url":"%s/news/%d.xml","min_interval":"1s","max_interval":"2s"}`, farm.URL, i)
		var src struct{ ID string }
		if code := postSource(t, n.URL("/api/v1/admin/sources?discover=false"), body, &src); code != http.StatusCreated {
			t.Fatalf("add source %d: %d", i, code)
		}
		ids = append(ids, src.ID)
	}
	waitCrawled(t, n, ids)

	rules := filepath.Join(root, "configs", "alerts.yaml")
	scr := startScraper(t, n.URL("/metrics"))
	start := time.Now()
	tr := &traffic{t: t, n: n, brokers: brokers}

	// Healthy: the traffic for 20 s, then its steady state for 7 hours (the
	// longest windows and for clauses).
	tr.drive(20*time.Second, 2, 0)
	base := newTimeline(scr.since(t, start))
	// The objectives had events to measure: quiet is not for want of them.
	for _, series := range [][]string{
		{"newsflow_event_visible_seconds", "stage", "articles"}, {"newsflow_event_visible_seconds", "stage", "stories"},
		{"newsflow_event_visible_seconds", "stage", "search"}, {"newsflow_event_visible_seconds", "stage", "trending", "input", "shares"},
		{"newsflow_query_seconds", "query", "feed", "cache", "hit"}, {"newsflow_query_seconds", "query", "search"},
		{"newsflow_http_group_requests_total", "group", "feed"}, {"newsflow_http_group_requests_total", "group", "search"},
	} {
		v0, _ := scr.since(t, start)[0].value(series[0], series[1:]...)
		v1, _ := scr.last(t).value(series[0], series[1:]...)
		if v1 <= v0 {
			t.Errorf("%s %v: %v before the healthy traffic, %v after", series[0], series[1:], v0, v1)
		}
	}
	var quiet []alertCheck
	for _, at := range []time.Duration{onStep(base.end()), time.Hour, 7 * time.Hour} {
		for _, name := range alertNames(t, rules) {
			quiet = append(quiet, alertCheck{at: at, name: name})
		}
	}
	runPromtoolTest(t, promtool, root, "healthy", base.testCase(7*time.Hour, quiet))

	// Dead letters: four malformed shares a second written to the shares
	// topic directly, among the traffic, for 25 s.
	aStart := time.Now()
	tr.drive(25*time.Second, 2, 1)
	tl := newTimeline(scr.since(t, start))
	var dead []map[string]string
	first, last := scr.since(t, aStart)[0], scr.last(t)
	for _, stage := range stageLabels(last, "newsflow_dead_letters_total") {
		v0, _ := first.value("newsflow_dead_letters_total", "stage", stage)
		v1, _ := last.value("newsflow_dead_letters_total", "stage", stage)
		if v1 > v0 {
			t.Logf("stage %s: %.0f dead letters in %s", stage, v1-v0, last.at.Sub(first.at).Round(time.Second))
			dead = append(dead, map[string]string{"stage": stage, "severity": "ticket"})
		}
	}
	if len(dead) == 0 {
		t.Fatalf("no stage dead-lettered the %d malformed shares", tr.bad)
	}
	runPromtoolTest(t, promtool, root, "dead_letters", tl.testCase(tl.end(), []alertCheck{
		{at: onStep(base.end()), name: "NewsflowDeadLettersRising"},
		{at: onStep(tl.end()), name: "NewsflowDeadLettersRising", firing: dead},
	}))

	// The feed farm stops: once no source has been crawled within twice
	// its interval, 20 s more.
	farm.Close()
	testutil.Eventually(t, time.Minute, func() error {
		sc := scr.last(t)
		active, _ := sc.value("newsflow_crawl_sources_active")
		onTime, ok := sc.value("newsflow_crawl_sources_on_time")
		if !ok || active != feeds || onTime != 0 {
			return fmt.Errorf("%v of %v sources crawled on time, want 0 of %d", onTime, active, feeds)
		}
		return nil
	})
	tr.drive(20*time.Second, 2, 0)
	tl = newTimeline(scr.since(t, start))
	coverage := map[string]string{"slo": "crawl_coverage"}
	runPromtoolTest(t, promtool, root, "crawl_coverage", tl.testCase(tl.end(), []alertCheck{
		{at: onStep(base.end()), name: "NewsflowCrawlCoverageFalling"},
		{at: onStep(base.end()), name: "NewsflowCrawlCoverageBudgetBurn"},
		{at: onStep(tl.end()), name: "NewsflowCrawlCoverageFalling", firing: []map[string]string{{"severity": "ticket"}}},
		{at: onStep(tl.end()), name: "NewsflowCrawlCoverageBudgetBurn", firing: []map[string]string{
			with(coverage, "severity", "page"), with(coverage, "severity", "ticket")}},
	}))

	// The story stage paused for 35 s while 160 articles a second arrive.
	stageAction(t, n, "stories", "pause")
	tr.drive(35*time.Second, 40, 0)
	tl = newTimeline(scr.since(t, start))
	stories := map[string]string{"stage": "stories"}
	runPromtoolTest(t, promtool, root, "stories_paused", tl.testCase(tl.end(), []alertCheck{
		{at: onStep(base.end()), name: "NewsflowStagePaused"},
		{at: onStep(base.end()), name: "NewsflowLagGrowing"},
		{at: onStep(base.end()), name: "NewsflowStoryStateStale"},
		{at: onStep(tl.end()), name: "NewsflowStagePaused", firing: []map[string]string{with(stories, "severity", "ticket")}},
		{at: onStep(tl.end()), name: "NewsflowLagGrowing", firing: []map[string]string{with(stories, "severity", "ticket")}},
		{at: onStep(tl.end()), name: "NewsflowStoryStateStale", firing: []map[string]string{with(stories, "severity", "page")}},
	}))
	stageAction(t, n, "stories", "resume")
}

// with returns a copy of m with k set to v.
func with(m map[string]string, k, v string) map[string]string {
	c := map[string]string{k: v}
	for mk, mv := range m {
		c[mk] = mv
	}
	return c
}

// waitCrawled waits until every source has been crawled successfully.
func waitCrawled(t *testing.T, n *nodeProc, ids []string) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, func() error {
		for _, id := range ids {
			var st struct {
				Crawl struct {
					LastResult *struct {
						Outcome string `json:"outcome"`
					} `json:"last_result"`
				} `json:"crawl"`
			}
			if err := getJSON(n.URL("/api/v1/admin/sources/"+id+"/status"), &st); err != nil {
				return err
			}
			if r := st.Crawl.LastResult; r == nil || r.Outcome != "ok" {
				return fmt.Errorf("source %s not crawled: %+v", id, r)
			}
		}
		return nil
	})
}

// stageAction pauses or resumes a stage on the node.
func stageAction(t *testing.T, n *nodeProc, stage, action string) {
	t.Helper()
	resp, err := adminPost(n.URL("/api/v1/admin/stages/"+stage+"/"+action), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s stage %s: %s %s", action, stage, resp.Status, body)
	}
}

// stageLabels returns the values of the stage label of name's series.
func stageLabels(sc reading, name string) []string {
	var out []string
	for _, m := range sc.mfs[name].GetMetric() {
		for _, lp := range m.GetLabel() {
			if lp.GetName() == "stage" {
				out = append(out, lp.GetValue())
			}
		}
	}
	return out
}

// alertNames returns the names of the alerts of the rule file at path.
func alertNames(t *testing.T, path string) []string {
	t.Helper()
	var rf struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(rulesWithoutAnnotations(t, path), &rf); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				names = append(names, r.Alert)
			}
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// traffic is what a healthy node gets: fresh articles, shares, a search
// and a feed read every tick; and, when asked, malformed shares written to
// the topic directly, which the trending stage dead-letters.
type traffic struct {
	t        *testing.T
	n        *nodeProc
	brokers  []string
	articles int // fresh articles sent
	bad      int // malformed shares sent
	shares   int
}

// trafficEvery is how often traffic sends.
const trafficEvery = 250 * time.Millisecond

// drive sends fresh articles and malformed shares every tick for d, with
// the rest of the traffic.
func (tr *traffic) drive(d time.Duration, fresh, bad int) {
	tr.t.Helper()
	tk := time.NewTicker(trafficEvery)
	defer tk.Stop()
	for end := time.Now().Add(d); time.Now().Before(end); <-tk.C {
		tr.send(fresh, bad)
	}
}

func (tr *traffic) send(fresh, bad int) {
	tr.t.Helper()
	// Readers first, while the story view holds what the last tick sent:
	// two visitors open the feed, the second from the cache.
	for _, path := range []string{"/api/v1/search?q=" + url.QueryEscape("harbour ferry"), "/api/v1/feed?limit=20", "/api/v1/feed?limit=20"} {
		resp, err := http.Get(tr.n.URL(path))
		if err != nil {
			tr.t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			tr.t.Fatalf("GET %s: %s", path, resp.Status)
		}
	}
	now := time.Now().UTC()
	var lines []string
	line := func(u, title string, at time.Time) {
		b, _ := json.Marshal(map[string]string{"url": u, "title": title, "source_id": "wire",
			"summary": title + ", the council said on " + at.Format("Monday") + ".", "published_at": at.Format(time.RFC3339)})
		lines = append(lines, string(b))
	}
	for range fresh {
		tr.articles++
		line(fmt.Sprintf("https://wire.example/harbour/%d", tr.articles), fmt.Sprintf("Harbour ferry line %d opens after council vote", tr.articles), now)
	}
	if bad > 0 {
		var recs [][]byte
		for range bad {
			tr.bad++
			recs = append(recs, fmt.Appendf(nil, `{"event_id":"malformed-%d","user_id":"u1","timestamp":%d}`, tr.bad, now.UnixMilli()))
		}
		if err := <-produceShares(tr.t, tr.brokers, recs, len(recs), 0); err != nil {
			tr.t.Fatalf("produce malformed shares: %v", err)
		}
	}
	if len(lines) > 0 {
		tr.post(ingestPost, "/api/v1/articles", "application/x-ndjson", strings.Join(lines, "\n")+"\n")
	}
	var shares []string
	for range 2 {
		tr.shares++
		shares = append(shares, fmt.Sprintf(`{"event_id":"alerts-%d","article_id":"art-%d","user_id":"u%d","category":"world","timestamp":%d}`,
			tr.shares, tr.shares%50, tr.shares%7, now.UnixMilli()))
	}
	tr.post(ingestPost, "/api/v1/events/share/batch", "application/x-ndjson", strings.Join(shares, "\n")+"\n")
}

func (tr *traffic) post(post func(url, contentType string, body io.Reader) (*http.Response, error), path, contentType, body string) {
	tr.t.Helper()
	resp, err := post(tr.n.URL(path), contentType, strings.NewReader(body))
	if err != nil {
		tr.t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		tr.t.Fatalf("POST %s: %s %s", path, resp.Status, b)
	}
}
