package story

import (
	"fmt"
	"slices"
	"strconv"
	"testing"

	"github.com/newsflow/newsflow/internal/feedfarm"
)

// demoWorld returns the articles every outlet of a feed farm (the demo's
// news world) has published after generations more events, in publish
// order, with the event each reports.
func demoWorld(t *testing.T, seed uint64, generations int) (arts []Article, event map[string]string) {
	t.Helper()
	farm := feedfarm.New(feedfarm.Options{Seed: seed})
	for range generations {
		farm.Advance()
	}
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

// TestDemoWorldStoriesAreEvents: the demo's news world (internal/feedfarm,
// six seeds), 120 events over eight simulated hours, four minutes apart,
// every kind of event, several covered at once, each kind coming round
// every 32 events (about two hours apart, with other names), clustered as
// the stories stage does against the event each article reports: B-cubed
// F1 at least 0.98, and two events in one story share at least a name.
func TestDemoWorldStoriesAreEvents(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 4, 5, 6} {
		arts, event := demoWorld(t, seed, 90)
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
		t.Logf("seed %d: %d articles of %d events in %d stories: B-cubed P %.3f R %.3f F1 %.3f", seed, len(arts), s.Reference, s.Predicted, s.BCubedP, s.BCubedR, s.BCubedF1)
		// The names each event's articles give (names.go).
		names := map[string]map[string]bool{}
		for _, a := range arts {
			e := event[a.ID]
			if names[e] == nil {
				names[e] = map[string]bool{}
			}
			for _, n := range nameTokens(a.Title, a.Summary) {
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
