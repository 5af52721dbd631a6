package query_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/internal/testutil"
	"github.com/valyala/fasthttp"
)

// fixtureArticle is one raw article of the test corpus, with the event it
// reports on.
type fixtureArticle struct {
	event, url, source, title, summary string
	minute                             int
}

// articleFixture: four events, each reported by several outlets with
// different headlines, plus unrelated single articles.
var articleFixture = []fixtureArticle{
	{"quake", "https://wire.example/quake-lisbon", "wire", "Strong earthquake shakes Lisbon, buildings damaged", "A magnitude 6.8 <b>earthquake</b> struck near Lisbon on Tuesday morning.", 0},
	{"quake", "https://daily.example/world/lisbon-earthquake", "daily", "Lisbon earthquake: residents flee damaged buildings", "<p>Residents of Lisbon ran into the streets after the earthquake.</p>", 4},
	{"quake", "https://tv.example/news/portugal-quake", "tv", "Portugal earthquake of magnitude 6.8 hits Lisbon region", "Emergency services in Portugal respond to the earthquake near Lisbon.", 9},
	{"quake", "https://post.example/lisbon-quake-damage", "post", "Earthquake near Lisbon damages buildings, injures dozens", "Dozens were injured when the earthquake hit Lisbon.", 15},
	{"rates", "https://wire.example/ecb-rates", "wire", "European Central Bank raises interest rates by a quarter point", "The ECB raised its key interest rate to fight inflation.", 20},
	{"rates", "https://biz.example/ecb-hike", "biz", "ECB hikes interest rates again as inflation persists", "The European Central Bank lifted rates for the third time.", 24},
	{"rates", "https://daily.example/business/ecb-interest-rates", "daily", "Central bank interest rates rise: what the ECB hike means for mortgages", "Mortgage holders face higher costs after the ECB interest rate decision.", 31},
	{"phone", "https://tech.example/acme-phone-x", "tech", "Acme unveils Phone X with foldable screen and satellite messaging", "Acme's new Phone X folds in half and sends texts by satellite.", 40},
	{"phone", "https://gadget.example/acme-phone-x-hands-on", "gadget", "Hands on with the Acme Phone X foldable phone", "We tried the foldable Acme Phone X at the launch event.", 44},
	{"phone", "https://daily.example/tech/acme-foldable", "daily", "Acme Phone X: foldable screen, satellite texts and a high price", "The Acme Phone X launch brings a foldable screen.", 50},
	{"final", "https://sport.example/cup-final", "sport", "United win the cup final after a penalty shootout", "United beat City on penalties in the cup final.", 55},
	{"final", "https://daily.example/sport/cup-final-penalties", "daily", "Cup final decided on penalties as United beat City", "A dramatic cup final at the national stadium ended in a shootout.", 58},
	{"zoo", "https://local.example/zoo-panda", "local", "Zoo welcomes twin panda cubs", "The city zoo announced the birth of twin panda cubs.", 60},
}

func (f fixtureArticle) line(t0 time.Time) string {
	b, _ := json.Marshal(map[string]string{
		"url": f.url, "source_id": f.source, "title": f.title, "summary": f.summary,
		"published_at": t0.Add(time.Duration(f.minute) * time.Minute).Format(time.RFC3339),
	})
	return string(b)
}

func fixtureBody(t0 time.Time, arts []fixtureArticle) string {
	var lines []string
	for _, a := range arts {
		lines = append(lines, a.line(t0))
	}
	return strings.Join(lines, "\n") + "\n"
}

type storyJSON struct {
	ID             string  `json:"id"`
	Title          string  `json:"title"`
	Representative string  `json:"representative"`
	ArticleCount   int     `json:"article_count"`
	Score          float64 `json:"score"`
	Sources        []struct {
		SourceID string `json:"source_id"`
	} `json:"sources"`
	Topics []struct {
		Topic string `json:"topic"`
	} `json:"topics"`
	Breaking   bool   `json:"breaking"`
	DecayClass string `json:"decay_class"`
	Articles   []struct {
		ID    string `json:"id"`
		URL   string `json:"url"`
		Title string `json:"title"`
	} `json:"articles"`
}

type storiesJSON struct {
	Stories []storyJSON `json:"stories"`
	Next    string      `json:"next_cursor"`
}

// ingestFixture posts the fixture and waits until every article is in a
// story and in the search index.
func ingestFixture(t *testing.T, n *testNode, arts []fixtureArticle) {
	t.Helper()
	r := n.post(t, "/api/v1/articles", fixtureBody(baseTime, arts), "Content-Type", "application/x-ndjson")
	if r.status != fasthttp.StatusAccepted {
		t.Fatalf("ingest: %s", r)
	}
	waitArticles(t, n, len(arts))
}

// newFixtureNode returns a node with the article operators on, holding
// articleFixture.
func newFixtureNode(t *testing.T) *testNode {
	t.Helper()
	n := newTestNode(t, withArticles())
	ingestFixture(t, n, articleFixture)
	return n
}

func waitArticles(t *testing.T, n *testNode, want int) {
	t.Helper()
	testutil.Eventually(t, 20*time.Second, func() error {
		var total int
		for _, st := range allStories(t, n) {
			total += st.ArticleCount
		}
		if total != want {
			return fmt.Errorf("%d articles in stories, want %d", total, want)
		}
		r := n.get(t, "/api/v1/search?limit=100")
		var page struct {
			Total int `json:"total"`
		}
		if err := json.Unmarshal(r.body, &page); err != nil || page.Total != want {
			return fmt.Errorf("search holds %d articles, want %d (%s)", page.Total, want, r)
		}
		return nil
	})
}

// eachPage GETs uri (which holds a query) page by page, from the first,
// and hands each page, decoded into a P, to visit; it fails the test on
// a status other than 200 and if the pages do not end within 100.
func eachPage[P any](t testing.TB, n *testNode, uri string, visit func(page P, r response)) {
	t.Helper()
	cursor := ""
	for range 100 {
		r := n.get(t, uri+"&cursor="+url.QueryEscape(cursor))
		if r.status != fasthttp.StatusOK {
			t.Fatalf("GET %s: %s", uri, r)
		}
		var page P
		var next struct {
			Cursor string `json:"next_cursor"`
		}
		if err := json.Unmarshal(r.body, &page); err != nil {
			t.Fatalf("GET %s: %v", uri, err)
		}
		if err := json.Unmarshal(r.body, &next); err != nil {
			t.Fatalf("GET %s: %v", uri, err)
		}
		visit(page, r)
		if next.Cursor == "" {
			return
		}
		cursor = next.Cursor
	}
	t.Fatalf("GET %s: the pages do not end", uri)
}

// allStories pages through /api/v1/stories.
func allStories(t testing.TB, n *testNode) []storyJSON {
	t.Helper()
	var out []storyJSON
	eachPage(t, n, "/api/v1/stories?limit=2", func(page storiesJSON, _ response) {
		out = append(out, page.Stories...)
	})
	return out
}

// assignments maps article URL → story id, from the story details.
func assignments(t testing.TB, n *testNode) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, st := range allStories(t, n) {
		r := n.get(t, "/api/v1/stories/"+st.ID)
		if r.status != fasthttp.StatusOK {
			t.Fatalf("story %s: %s", st.ID, r)
		}
		var d storyJSON
		if err := json.Unmarshal(r.body, &d); err != nil {
			t.Fatal(err)
		}
		if len(d.Articles) != d.ArticleCount {
			t.Errorf("story %s lists %d articles, counts %d", st.ID, len(d.Articles), d.ArticleCount)
		}
		for _, a := range d.Articles {
			m[a.URL] = st.ID
		}
	}
	return m
}

// TestStoriesGroupEventsAcrossOutlets is one scenario checked step by step (cyclomatic 31): the steps
// depend on each other's state, so they stay in order in one function.
func TestStoriesGroupEventsAcrossOutlets(t *testing.T) {
	n := newFixtureNode(t)

	got := assignments(t, n)
	byEvent := map[string]string{}
	for _, a := range articleFixture {
		s, ok := got[a.url]
		if !ok {
			t.Fatalf("article %s in no story", a.url)
		}
		if prev, ok := byEvent[a.event]; ok && prev != s {
			t.Errorf("event %s split over stories %s and %s", a.event, prev, s)
		}
		byEvent[a.event] = s
	}
	seen := map[string]string{}
	for ev, s := range byEvent {
		if other, ok := seen[s]; ok {
			t.Errorf("events %s and %s share story %s", ev, other, s)
		}
		seen[s] = ev
	}

	// Search hits name the story their article is in now.
	var hits struct {
		Hits []struct {
			URL     string `json:"url"`
			StoryID string `json:"story_id"`
		} `json:"hits"`
	}
	json.Unmarshal(n.get(t, "/api/v1/search?limit=100").body, &hits)
	if len(hits.Hits) != len(articleFixture) {
		t.Fatalf("%d hits for an empty query, want %d", len(hits.Hits), len(articleFixture))
	}
	for _, h := range hits.Hits {
		if h.StoryID != got[h.URL] {
			t.Errorf("search hit %s in story %s, story page says %s", h.URL, h.StoryID, got[h.URL])
		}
	}

	stories := allStories(t, n)
	if len(stories) != 5 {
		t.Fatalf("%d stories, want 5", len(stories))
	}
	// Ranked by score: bigger stories first.
	for i := 1; i < len(stories); i++ {
		if stories[i].Score > stories[i-1].Score {
			t.Errorf("stories out of order: %v before %v", stories[i-1].Score, stories[i].Score)
		}
	}
	if stories[0].ID != byEvent["quake"] || len(stories[0].Sources) != 4 {
		t.Errorf("top story %+v, want the quake story with 4 sources", stories[0])
	}
	// The topic filter and the topics endpoint agree.
	r := n.get(t, "/api/v1/topics")
	var topics struct {
		Topics []struct {
			Topic   string `json:"topic"`
			Stories int    `json:"stories"`
		} `json:"topics"`
	}
	if err := json.Unmarshal(r.body, &topics); err != nil || len(topics.Topics) == 0 {
		t.Fatalf("topics: %s", r)
	}
	for _, tc := range topics.Topics {
		var page storiesJSON
		if err := json.Unmarshal(n.get(t, "/api/v1/stories?limit=100&topic="+tc.Topic).body, &page); err != nil {
			t.Fatal(err)
		}
		if len(page.Stories) != tc.Stories {
			t.Errorf("topic %s: %d stories listed, %d counted", tc.Topic, len(page.Stories), tc.Stories)
		}
	}
	var sport storiesJSON
	json.Unmarshal(n.get(t, "/api/v1/stories?topic=sports").body, &sport)
	if len(sport.Stories) != 1 || sport.Stories[0].ID != byEvent["final"] {
		t.Errorf("sports stories %+v, want the cup final", sport.Stories)
	}

	// A story page lists every article and source.
	var d storyJSON
	json.Unmarshal(n.get(t, "/api/v1/stories/"+byEvent["rates"]).body, &d)
	if d.ArticleCount != 3 || len(d.Articles) != 3 || len(d.Sources) != 3 {
		t.Errorf("rates story: %d articles listed, count %d, %d sources", len(d.Articles), d.ArticleCount, len(d.Sources))
	}
	if r := n.get(t, "/api/v1/stories/nope"); r.status != fasthttp.StatusNotFound || !strings.Contains(string(r.body), `"error"`) {
		t.Errorf("unknown story: %s", r)
	}
	for _, bad := range []string{"/api/v1/stories?limit=0", "/api/v1/stories?limit=101", "/api/v1/stories?cursor=%21%21", "/api/v1/stories?since=yesterday"} {
		if r := n.get(t, bad); r.status != fasthttp.StatusBadRequest {
			t.Errorf("%s: %s", bad, r)
		}
	}
	if r := n.get(t, "/api/v1/breaking"); r.status != fasthttp.StatusOK || !strings.Contains(string(r.body), `"stories":[]`) {
		t.Errorf("breaking with 4 articles an event: %s", r)
	}
}

func TestArticleIngestCleansAndDedups(t *testing.T) {
	n := newTestNode(t, withArticles())
	base := articleFixture[:2]
	ingestFixture(t, n, base)

	// A re-crawl and a tracking-parameter variant of the first URL are the
	// same article; an edited title updates it.
	again := base[0]
	again.url = "HTTPS://WIRE.example:443/quake-lisbon?utm_source=rss&fbclid=x#top"
	edited := base[0]
	edited.title = "Strong earthquake shakes Lisbon, dozens of buildings damaged"
	r := n.post(t, "/api/v1/articles", fixtureBody(baseTime, []fixtureArticle{again, base[1], edited}), "Content-Type", "application/x-ndjson")
	if r.status != fasthttp.StatusAccepted {
		t.Fatalf("ingest: %s", r)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		res := n.get(t, "/api/v1/search?q=dozens+buildings")
		if !strings.Contains(string(res.body), "dozens of buildings damaged") {
			return fmt.Errorf("edit not indexed: %s", res)
		}
		return nil
	})
	waitArticles(t, n, 2)

	// Markup is stripped, invalid UTF-8 repaired, long content truncated.
	long := strings.Repeat("lorem ipsum dolor ", 10<<20/18) // 10 MiB
	body, _ := json.Marshal(map[string]string{
		"url": "https://odd.example/a", "source_id": "odd", "published_at": baseTime.Format(time.RFC3339),
		"title":   "Museum <em>reopens</em> after renovation \xff\xfe",
		"summary": "<div><script>alert(1)</script><p>The museum &amp; its garden reopen.</p></div>",
		"content": long,
	})
	if r := n.post(t, "/api/v1/articles", string(body)); r.status != fasthttp.StatusAccepted {
		t.Fatalf("ingest odd article: %s", r)
	}
	waitArticles(t, n, 3)
	var page struct {
		Hits []struct {
			Title, Summary string
		} `json:"hits"`
	}
	json.Unmarshal(n.get(t, "/api/v1/search?q=museum").body, &page)
	if len(page.Hits) != 1 {
		t.Fatalf("museum hits: %+v", page.Hits)
	}
	h := page.Hits[0]
	if strings.ContainsAny(h.Title+h.Summary, "<>") || strings.Contains(h.Summary, "alert") || !utf8.ValidString(h.Title) ||
		!strings.HasPrefix(h.Title, "Museum reopens after renovation") || h.Summary != "The museum & its garden reopen." {
		t.Errorf("cleaned article: title %q summary %q", h.Title, h.Summary)
	}
}

func TestArticleIngestRejectsBadLines(t *testing.T) {
	n := newTestNode(t, withArticles())
	good := articleFixture[0].line(baseTime)
	lines := []string{
		good,
		`{"url":"https://x.example/a","summary":"no title"}`,
		`{"title":"no url"}`,
		`{"url":"ftp://x.example/a","title":"bad scheme"}`,
		`{"url":"https://x.example/b","title":"bad time","published_at":"last week"}`,
		`{"url":`,
	}
	r := n.post(t, "/api/v1/articles", strings.Join(lines, "\n"), "Content-Type", "application/x-ndjson")
	if r.status != fasthttp.StatusMultiStatus {
		t.Fatalf("batch with bad lines: %s, want 207", r)
	}
	var res struct {
		Accepted, Rejected int
		Errors             []struct {
			Line  int
			Error string
		}
	}
	if err := json.Unmarshal(r.body, &res); err != nil {
		t.Fatal(err)
	}
	if res.Accepted != 1 || res.Rejected != 5 {
		t.Fatalf("accepted %d rejected %d: %s", res.Accepted, res.Rejected, r)
	}
	want := []string{"missing title", "missing url", "url", "published_at", "malformed JSON"}
	for i, e := range res.Errors {
		if e.Line != i+2 || !strings.Contains(e.Error, want[i]) {
			t.Errorf("error %d: line %d %q, want line %d containing %q", i, e.Line, e.Error, i+2, want[i])
		}
	}
	if r := n.post(t, "/api/v1/articles", `{"title":"single, no url"}`); r.status != fasthttp.StatusBadRequest || !strings.Contains(string(r.body), "missing url") {
		t.Errorf("single bad article: %s", r)
	}

	// Records that bypass HTTP (a crawler or a Kafka producer) go to the
	// dead-letter topic with the reason.
	bad := []*eventlog.Record{
		{Topic: schema.TopicArticlesRaw, Partition: 0, Value: []byte(`{"url":"https://x.example/c","summary":"no title"}`), Timestamp: baseTime.UnixMilli()},
		{Topic: schema.TopicArticlesRaw, Partition: 1, Value: []byte(`not json`), Timestamp: baseTime.UnixMilli()},
	}
	if err := n.log.Append(context.Background(), bad); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		reasons := deadLetterReasons(t, n)
		for _, w := range []string{"missing title", "malformed JSON"} {
			if !slices.ContainsFunc(reasons, func(r string) bool { return strings.Contains(r, w) }) {
				return fmt.Errorf("no dead letter with %q in %q", w, reasons)
			}
		}
		return nil
	})
	waitArticles(t, n, 1)
}

// deadLetterReasons reads the reasons of every dead letter.
func deadLetterReasons(t testing.TB, n *testNode) []string {
	t.Helper()
	ctx := context.Background()
	parts, err := n.log.Partitions(ctx, "newsflow-deadletter")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for p := range parts {
		recs := readAll(t, n, eventlog.TopicPartition{Topic: "newsflow-deadletter", Partition: p})
		for _, r := range recs {
			if v, ok := r.Header(engine.HeaderDLQReason); ok {
				out = append(out, string(v))
			}
		}
	}
	return out
}

// readAll reads every record of a partition.
func readAll(t testing.TB, n *testNode, tp eventlog.TopicPartition) []*eventlog.Record {
	t.Helper()
	return testutil.ReadPartition(t, n.log, tp)
}

// searchIDs returns the ids of every hit of a search, page by page.
func searchIDs(t testing.TB, n *testNode, query string) []string {
	t.Helper()
	var ids []string
	type hitsJSON struct {
		Hits []struct {
			ID         string              `json:"id"`
			Highlights map[string][]string `json:"highlights"`
		} `json:"hits"`
		Partial bool `json:"partial"`
	}
	eachPage(t, n, "/api/v1/search?limit=3&"+query, func(page hitsJSON, r response) {
		if page.Partial {
			t.Fatalf("partial search result: %s", r)
		}
		for _, h := range page.Hits {
			ids = append(ids, h.ID)
		}
	})
	return ids
}

// TestStoriesAndSearchSurviveRestartAndReplay checks that stories and the
// search index come back after a restart, and that rebuilding them from the
// log gives the same story assignments and search results.
func TestStoriesAndSearchSurviveRestartAndReplay(t *testing.T) {
	dir := t.TempDir()
	queries := []string{"q=earthquake+lisbon", "q=interest+rates&topic=business", "q=phone&source=tech", "topic=sports",
		"from=" + baseTime.Add(40*time.Minute).Format(time.RFC3339) + "&to=" + baseTime.Add(56*time.Minute).Format(time.RFC3339)}
	snapshot := func(n *testNode) (map[string]string, map[string][]string) {
		res := map[string][]string{}
		for _, q := range queries {
			res[q] = searchIDs(t, n, q)
		}
		return assignments(t, n), res
	}

	n := newTestNode(t, withArticles(), withDir(dir))
	ingestFixture(t, n, articleFixture)
	wantStories, wantSearch := snapshot(n)
	if got := wantSearch["q=earthquake+lisbon"]; len(got) != 4 {
		t.Errorf("earthquake search found %d articles, want the 4 quake reports", len(got))
	}
	if got := wantSearch["topic=sports"]; len(got) != 2 {
		t.Errorf("sports filter found %d articles, want 2", len(got))
	}
	if got := wantSearch[queries[4]]; len(got) != 4 { // minutes 40, 44, 50 and 55
		t.Errorf("date range 40-56 min found %d articles, want 4", len(got))
	}
	n.stop()

	check := func(name string, n *testNode) {
		t.Helper()
		waitArticles(t, n, len(articleFixture))
		gotStories, gotSearch := snapshot(n)
		if fmt.Sprint(gotStories) != fmt.Sprint(wantStories) {
			t.Errorf("%s: story assignments %v, want %v", name, gotStories, wantStories)
		}
		for _, q := range queries {
			if !slices.Equal(gotSearch[q], wantSearch[q]) {
				t.Errorf("%s: search %s = %v, want %v", name, q, gotSearch[q], wantSearch[q])
			}
		}
	}
	n = newTestNode(t, withArticles(), withDir(dir))
	check("restart", n)
	n.stop()

	n = newTestNode(t, withArticles(), withDir(dir), withReplay("stories", "search"))
	check("replay", n)
}

// TestAnonymousFeed: the feed without a reader ranks every recent story,
// at most 2 of a source in the first 20, and pages through all of them.
func TestAnonymousFeed(t *testing.T) {
	n := newFixtureNode(t)
	var seen []string
	type feedJSON struct {
		Stories []struct {
			ID      string `json:"id"`
			Explain *struct {
				Score float64 `json:"score"`
			} `json:"explain"`
		} `json:"stories"`
	}
	eachPage(t, n, "/api/v1/feed?limit=2&explain=1", func(page feedJSON, r response) {
		for _, st := range page.Stories {
			if st.Explain == nil || st.Explain.Score <= 0 {
				t.Errorf("story %s without explanation: %s", st.ID, r)
			}
			seen = append(seen, st.ID)
		}
	})
	stories := allStories(t, n)
	if len(seen) != len(stories) {
		t.Fatalf("feed pages hold %d stories, want %d: %v", len(seen), len(stories), seen)
	}
	dup := map[string]bool{}
	for _, id := range seen {
		if dup[id] {
			t.Errorf("story %s twice in the feed", id)
		}
		dup[id] = true
	}
	for _, bad := range []string{"/api/v1/feed?limit=0", "/api/v1/feed?cursor=zzz"} {
		if r := n.get(t, bad); r.status != fasthttp.StatusBadRequest {
			t.Errorf("%s: %s", bad, r)
		}
	}
}

// TestRetentionDeletesOldStories: articles published 40 days before they
// arrive are kept like any other (searchable, their stories readable);
// once an article arrives 30 days after them (by the node's clock:
// retention ages articles from when the node first saw them), their
// stories answer 404 and search no longer finds their articles. An
// article published as long ago but arriving now is kept, never
// dead-lettered.
func TestRetentionDeletesOldStories(t *testing.T) {
	n := newTestNode(t, withArticles())
	old := baseTime.Add(-40 * 24 * time.Hour)
	r := n.post(t, "/api/v1/articles", fixtureBody(old, articleFixture), "Content-Type", "application/x-ndjson")
	if r.status != fasthttp.StatusAccepted {
		t.Fatalf("ingest: %s", r)
	}
	waitArticles(t, n, len(articleFixture))
	quake := ""
	for _, st := range allStories(t, n) {
		if strings.Contains(st.Title, "arthquake") {
			quake = st.ID
		}
	}
	if quake == "" || n.get(t, "/api/v1/stories/"+quake).status != fasthttp.StatusOK {
		t.Fatalf("no earthquake story before retention: %q", quake)
	}
	post := func(a fixtureArticle, published time.Time) {
		t.Helper()
		if r := n.post(t, "/api/v1/articles", a.line(published), "Content-Type", "application/x-ndjson"); r.status != fasthttp.StatusAccepted {
			t.Fatalf("ingest: %s", r)
		}
	}
	// 30 days after they arrived, a new article: nothing goes yet.
	n.clock.Advance(30 * 24 * time.Hour)
	post(fixtureArticle{url: "https://local.example/new-pool", source: "local", title: "Town opens a heated swimming pool", summary: "The pool has six lanes."}, n.clock.Now())
	waitSearch(t, n, "", len(articleFixture)+1)
	if r := n.get(t, "/api/v1/stories/"+quake); r.status != fasthttp.StatusOK {
		t.Fatalf("story deleted within 30 days of first-seen time: %s", r)
	}
	// A second later: the fixture's stories are deleted at the story
	// stage's next commit, and its articles leave search.
	n.clock.Advance(time.Second)
	post(fixtureArticle{url: "https://local.example/new-library", source: "local", title: "City opens a new public library", summary: "The library has a rooftop garden."}, n.clock.Now())
	waitSearch(t, n, "", 2)
	// Published 40 days ago, arriving now: kept.
	post(fixtureArticle{url: "https://late.example/lisbon-quake", source: "late", title: "Lisbon earthquake: a late report", summary: "Buildings were damaged."}, old)
	waitSearch(t, n, "", 3)
	for k, v := range n.metrics(t) {
		if strings.HasPrefix(k, "newsflow_dead_letters_total") && v != 0 {
			t.Errorf("%s = %v: valid old news was dead-lettered", k, v)
		}
	}
	testutil.Eventually(t, 20*time.Second, func() error {
		if r := n.get(t, "/api/v1/stories/"+quake); r.status != fasthttp.StatusNotFound || !strings.Contains(string(r.body), `"error"`) {
			return fmt.Errorf("deleted story: %s, want 404 with an error", r)
		}
		return nil
	})
	for q, want := range map[string]int{"earthquake": 1, "Lisbon": 1, "ECB": 0, "library": 1} {
		waitSearch(t, n, q, want)
	}
}

// waitSearch waits until a search for q (every document, if empty) finds
// want documents.
func waitSearch(t *testing.T, n *testNode, q string, want int) {
	t.Helper()
	testutil.Eventually(t, 20*time.Second, func() error {
		var page struct {
			Total int `json:"total"`
		}
		r := n.get(t, "/api/v1/search?limit=100&q="+url.QueryEscape(q))
		if err := json.Unmarshal(r.body, &page); err != nil {
			return fmt.Errorf("search %q: %s", q, r)
		}
		if page.Total != want {
			return fmt.Errorf("search %q finds %d, want %d", q, page.Total, want)
		}
		return nil
	})
}

// TestFeedFirstPageSeesNewStories: a reader's feed is ranked once and its
// pages follow that list, but a first page asked after new stories came is
// ranked again: the reader who opened the feed before the articles
// arrived sees them on the next load, not a minute later.
func TestFeedFirstPageSeesNewStories(t *testing.T) {
	n := newTestNode(t, withArticles())
	tok := login(t, n, "/api/v1/auth/register", "erin", "correct horse battery")
	type feedJSON struct {
		Stories []struct {
			ID string `json:"id"`
		} `json:"stories"`
		Next string `json:"next_cursor"`
	}
	feed := func(uri string) feedJSON {
		t.Helper()
		r := n.do(t, fasthttp.MethodGet, uri, nil, bearer(tok)...)
		var f feedJSON
		if r.status != fasthttp.StatusOK || json.Unmarshal(r.body, &f) != nil {
			t.Fatalf("feed: %s", r)
		}
		return f
	}
	ingestFixture(t, n, articleFixture[:4]) // one story: the earthquake
	first := feed("/api/v1/feed?limit=1")
	if len(first.Stories) != 1 {
		t.Fatalf("feed before: %+v", first)
	}
	ingestFixture(t, n, articleFixture)
	all := len(allStories(t, n))
	if got := feed("/api/v1/feed?limit=100"); len(got.Stories) != all {
		t.Fatalf("first page after new stories: %d stories, want all %d", len(got.Stories), all)
	}
}

// TestSearchAnyOfSources: source may repeat, and a search then keeps the
// articles of any of them, newest first or by relevance, page by page.
func TestSearchAnyOfSources(t *testing.T) {
	n := newFixtureNode(t)
	bySource := map[string][]string{}
	for _, a := range articleFixture {
		bySource[a.source] = append(bySource[a.source], a.url)
	}
	if len(bySource["wire"]) == 0 || len(bySource["tech"]) == 0 {
		t.Fatalf("fixture sources %v", bySource)
	}
	one := func(q string) int { return len(searchIDs(t, n, q)) }
	wire, tech := one("source=wire"), one("source=tech")
	if got := one("source=wire&source=tech"); got != wire+tech || wire == 0 || tech == 0 {
		t.Errorf("wire or tech: %d hits, want %d + %d", got, wire, tech)
	}
	if got := one("source=wire&source=nope"); got != wire {
		t.Errorf("wire or an unknown source: %d hits, want %d", got, wire)
	}
	if got := one("q=earthquake&source=wire&source=daily"); got != 2 {
		t.Errorf("earthquake in wire or daily: %d hits, want 2", got)
	}
}
