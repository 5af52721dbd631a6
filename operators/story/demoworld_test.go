package story

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/demo/feedfarm"
	"github.com/newsflow/newsflow/internal/feed"
)

// demoWorld returns the articles every outlet of a feed farm (the demo's
// news world) has published after generations more events, in publish
// order, with the event each reports.
func demoWorld(t *testing.T, seed uint64, generations int, every time.Duration) (arts []Article, event map[string]string) {
	t.Helper()
	opts := feedfarm.Options{Seed: seed}
	if every > 0 { // the demo's clock: a generation every so often
		now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		opts.Now = func() time.Time { return now }
		defer func() { opts.Now = nil }()
		farm := feedfarm.New(opts)
		for range generations {
			now = now.Add(every)
			farm.Advance()
		}
		return worldArticles(farm)
	}
	farm := feedfarm.New(opts)
	for range generations {
		farm.Advance()
	}
	return worldArticles(farm)
}

// worldArticles returns what every outlet of farm has published, in
// publish order, with the event each reports.
func worldArticles(farm *feedfarm.Farm) (arts []Article, event map[string]string) {
	g := farm.Generation()
	event = map[string]string{}
	for n := range 8 {
		out := farm.Outlet(n)
		for _, a := range farm.Articles(n, g, 0) {
			arts = append(arts, Article{ID: a.GUID, SourceID: out.Domain, Title: a.Title, Summary: a.Summary, URL: a.Link,
				Published: a.Published.UnixMilli()})
			event[a.GUID] = strconv.Itoa(a.Event)
		}
	}
	slices.SortStableFunc(arts, func(a, b Article) int {
		if a.Published != b.Published {
			return int(a.Published - b.Published)
		}
		return 0
	})
	return arts, event
}

// TestDemoWorldStoriesAreEvents: the demo's news world (demo/feedfarm,
// six seeds), 120 events over eight simulated hours, four minutes apart,
// every kind of event, several covered at once, each kind coming round
// every 32 events (about two hours apart, with other names), clustered as
// the stories stage does against the event each article reports: B-cubed
// F1 at least 0.98, and two events in one story share at least a name.
func TestDemoWorldStoriesAreEvents(t *testing.T) {
	for _, c := range []struct {
		seed  uint64
		every time.Duration
	}{{1, 0}, {2, 0}, {3, 0}, {4, 0}, {5, 0}, {6, 0}, {1, 20 * time.Second}, {2, 20 * time.Second}, {3, 20 * time.Second}} {
		seed := c.seed
		arts, event := demoWorld(t, seed, 90, c.every)
		b := newTestBuilder(t, Options{})
		for _, a := range arts {
			mustApply(t, b, a)
		}
		pred := map[string]string{}
		members := map[string][]string{}
		for _, a := range arts {
			st, _ := b.StoryOf(a.ID)
			pred[a.ID] = st.ID
			members[st.ID] = append(members[st.ID], a.ID)
		}
		s := Score(event, pred)
		t.Logf("seed %d, a generation every %v: %d articles of %d events in %d stories: B-cubed P %.3f R %.3f F1 %.3f", seed, c.every, len(arts), s.Reference, s.Predicted, s.BCubedP, s.BCubedR, s.BCubedF1)
		// The names each event's articles give (names.go).
		names := map[string]map[string]bool{}
		for _, a := range arts {
			e := event[a.ID]
			if names[e] == nil {
				names[e] = map[string]bool{}
			}
			strong, parts, weak := nameTokens(a.Title, a.Summary)
			for _, n := range slices.Concat(strong, parts, weak) {
				names[e][n] = true
			}
		}
		mixed := 0
		for id, ms := range members {
			evs := map[string]bool{}
			for _, m := range ms {
				evs[event[m]] = true
			}
			if len(evs) < 2 {
				continue
			}
			mixed++
			var titles []string
			for _, a := range arts {
				if pred[a.ID] == id {
					titles = append(titles, fmt.Sprintf("[%s] %s", event[a.ID], a.Title))
				}
			}
			// Two events in one story must at least share a name.
			for e1 := range evs {
				for e2 := range evs {
					if e1 < e2 && !sharesName(names[e1], names[e2]) {
						t.Errorf("seed %d: story %s holds events %s and %s, which share no name:\n  %v", seed, id, e1, e2, titles)
					}
				}
			}
			t.Logf("seed %d: story %s holds events %v (they share a name):\n  %v", seed, id, evs, titles)
		}
		if s.BCubedF1 < 0.98 {
			t.Errorf("seed %d: B-cubed F1 %.3f, want at least 0.98", seed, s.BCubedF1)
		}
	}
}

func sharesName(a, b map[string]bool) bool {
	for n := range a {
		if b[n] {
			return true
		}
	}
	return false
}

// crawlFarm returns a farm whose clock moves 20 seconds before each
// Advance, as in the demo, and a function that advances it n generations.
func crawlFarm() (*feedfarm.Farm, func(n int)) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	f := feedfarm.New(feedfarm.Options{Now: func() time.Time { return now }})
	return f, func(n int) {
		for range n {
			now = now.Add(20 * time.Second)
			f.Advance()
		}
	}
}

// parseNewsFeed parses outlet n's feed at generation g as the crawler does.
func parseNewsFeed(t *testing.T, f *feedfarm.Farm, n int, g int64) *feed.Feed {
	t.Helper()
	b, err := f.NewsFeed(n, g)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse("http://farm.test/news/" + strconv.Itoa(n) + ".xml")
	fd, err := feed.Parse(b, "application/rss+xml", u, time.Now())
	if err != nil {
		t.Fatalf("outlet %d: %v", n, err)
	}
	return fd
}

// eventOf returns the event number in a GUID ("domain:k").
func eventOf(t *testing.T, guid string) int {
	t.Helper()
	_, k, ok := strings.Cut(guid, ":")
	n, err := strconv.Atoi(k)
	if !ok || err != nil {
		t.Fatalf("guid %q does not name an event", guid)
	}
	return n
}

// crawled is an article as the story stage sees it, with its event.
type crawled struct {
	Article
	event int
}

// TestDemoWorldCrawled runs the outlets' feeds through the real story builder,
// crawled as a node crawls them (each outlet in turn, a round per minute),
// and in publication order: every event is one story, and no story has
// articles about two events.
func TestDemoWorldCrawled(t *testing.T) {
	const gens = 30
	f, advance := crawlFarm()
	var rounds [][]crawled
	seen := map[string]bool{}
	for g := int64(0); g <= gens; g++ {
		if g > 0 {
			advance(1)
		}
		if g%3 != 0 {
			continue
		}
		var round []crawled
		for n := range 8 {
			fd := parseNewsFeed(t, f, n, g)
			for _, it := range fd.Items {
				if seen[it.ArticleID] {
					continue
				}
				seen[it.ArticleID] = true
				round = append(round, crawled{Article{ID: it.ArticleID, URL: it.URL, SourceID: f.Outlet(n).Domain,
					Title: it.Title, Summary: it.Summary, Published: it.PublishedAt.UnixMilli(), Version: 1}, eventOf(t, it.GUID)})
			}
		}
		rounds = append(rounds, round)
	}
	crawlOrder := slices.Concat(rounds...)
	byTime := slices.Clone(crawlOrder)
	slices.SortStableFunc(byTime, func(a, b crawled) int { return int(a.Published - b.Published) })

	wantEvents := f.Events(gens)
	for name, order := range map[string][]crawled{"crawl order": crawlOrder, "publication order": byTime} {
		t.Run(name, func(t *testing.T) {
			b, err := NewBuilder(Options{})
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range order {
				if _, err := b.Apply(a.Article); err != nil {
					t.Fatal(err)
				}
			}
			events := map[string]map[int]bool{} // story → events
			sources := map[string]map[string]bool{}
			for _, a := range order {
				st, ok := b.StoryOf(a.ID)
				if !ok {
					t.Fatalf("article %s has no story", a.ID)
				}
				if events[st.ID] == nil {
					events[st.ID], sources[st.ID] = map[int]bool{}, map[string]bool{}
				}
				events[st.ID][a.event] = true
				sources[st.ID][a.SourceID] = true
			}
			multi, three := 0, 0
			for id, evs := range events {
				if len(evs) != 1 {
					t.Errorf("story %s mixes events %v", id, evs)
				}
				if len(sources[id]) >= 2 {
					multi++
				}
				if len(sources[id]) >= 3 {
					three++
				}
			}
			// Every event is covered by at least two outlets.
			if len(events) != wantEvents || multi != wantEvents {
				t.Errorf("%d stories, %d with several sources; want %d of each (one per event)", len(events), multi, wantEvents)
			}
			if three < wantEvents/2 {
				t.Errorf("only %d of %d stories have three sources or more", three, wantEvents)
			}
		})
	}
}
