package query_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/internal/canon"
	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/internal/testutil"
	"github.com/valyala/fasthttp"
)

func read(id, user, article, session string, ts int64) string {
	return fmt.Sprintf(`{"event_id":%q,"user_id":%q,"article_id":%q,"session_id":%q,"timestamp":%d,"dwell_ms":1500}`, id, user, article, session, ts)
}

func TestReadIngestion(t *testing.T) {
	n := newTestNode(t)
	if r := n.post(t, "/api/v1/events/read", read("r1", "alice", "a1", "s1", n.clock.ms(0))); r.status != fasthttp.StatusAccepted {
		t.Fatalf("read: %s", r)
	}
	batch := strings.Join([]string{
		read("r2", "bob", "a1", "s2", n.clock.ms(0)),
		`{"event_id":"r3","user_id":"bob","timestamp":1}`,
		read("r4", "alice", "a2", "s1", n.clock.ms(0)),
	}, "\n")
	r := n.post(t, "/api/v1/events/read/batch", batch)
	res := decodeBatch(t, r)
	if r.status != fasthttp.StatusMultiStatus || res.Accepted == nil || *res.Accepted != 2 || res.Rejected == nil || *res.Rejected != 1 || len(res.Errors) != 1 || res.Errors[0].Line != 2 {
		t.Fatalf("batch: %s", r)
	}
	for _, bad := range []string{
		`{"event_id":"x","user_id":"u","article_id":"a","timestamp":1772359200000,"dwell_ms":-5}`,
		read("x", "u", "a", "s", n.clock.ms(24*time.Hour)), // a day in the future
		`not json`,
	} {
		if r := n.post(t, "/api/v1/events/read", bad); r.status != fasthttp.StatusBadRequest || !strings.Contains(string(r.body), `"error"`) {
			t.Errorf("%s: %s", bad, r)
		}
	}
	// The accepted reads are on the reads topic, keyed and partitioned by
	// user.
	parts := n.eng.Partitions()
	byUser := map[string]int{}
	for p := range parts {
		for _, rec := range readAll(t, n, eventlog.TopicPartition{Topic: schema.TopicReads, Partition: p}) {
			if want := eventlog.PartitionFor(rec.Key, parts); want != p {
				t.Errorf("read of %s in partition %d, want %d", rec.Key, p, want)
			}
			byUser[string(rec.Key)]++
		}
	}
	if byUser["alice"] != 2 || byUser["bob"] != 1 || len(byUser) != 2 {
		t.Errorf("reads on the log by user: %v", byUser)
	}
}

// TestReadsMoveInterest: reads of articles move the reader's interest
// towards the articles' topics; repeats of (user, article, session) count
// once; a read of an article the node has not seen waits for it.
//
// It is one scenario checked step by step (cyclomatic 26): the steps
// depend on each other's state, so they stay in order in one function.
func TestReadsMoveInterest(t *testing.T) {
	n := newFixtureNode(t)
	idOf := articleIDsByURL(t, n)
	quake := []string{idOf["https://wire.example/quake-lisbon"], idOf["https://daily.example/world/lisbon-earthquake"]}
	final := idOf["https://sport.example/cup-final"]
	ts := n.clock.ms(0)
	lines := []string{
		read("r1", "alice", quake[0], "s1", ts),
		read("r2", "alice", quake[1], "s1", ts+1000),
		read("r3", "alice", quake[1], "s1", ts+2000), // a repeat: same article and session
		read("r4", "bob", final, "s9", ts),
	}
	if r := n.post(t, "/api/v1/events/read/batch", strings.Join(lines, "\n")); r.status != fasthttp.StatusAccepted {
		t.Fatalf("reads: %s", r)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		p, ok, err := n.interest.Profile("alice")
		if err != nil || !ok {
			return fmt.Errorf("no profile for alice (%v)", err)
		}
		if p.Reads != 2 || len(p.History) != 2 || len(p.Topics) == 0 || p.Topics[0].Topic != "world" {
			return fmt.Errorf("alice's profile %+v", p)
		}
		b, ok, err := n.interest.Profile("bob")
		if err != nil || !ok || len(b.Topics) == 0 || b.Topics[0].Topic != "sports" {
			return fmt.Errorf("bob's profile %+v (%v)", b, err)
		}
		return nil
	})
	// A read of an article that arrives later is joined when it does.
	late := fixtureArticle{"zoo", "https://local.example/zoo-lion", "local", "Zoo lion cubs born", "Two lion cubs were born at the zoo.", 70}
	lateID := canonID(t, late.url)
	if r := n.post(t, "/api/v1/events/read", read("r5", "carol", lateID, "s5", ts)); r.status != fasthttp.StatusAccepted {
		t.Fatalf("read: %s", r)
	}
	if r := n.post(t, "/api/v1/articles", fixtureBody(baseTime, []fixtureArticle{late})); r.status != fasthttp.StatusAccepted {
		t.Fatalf("late article: %s", r)
	}
	// The admin API shows the profile.
	testutil.Eventually(t, 10*time.Second, func() error {
		r := n.get(t, "/api/v1/admin/users/alice/interest")
		var p struct {
			Topics []struct{ Topic string } `json:"topics"`
			Reads  int                      `json:"reads"`
		}
		if err := json.Unmarshal(r.body, &p); err != nil || r.status != fasthttp.StatusOK || p.Reads != 2 || p.Topics[0].Topic != "world" {
			return fmt.Errorf("interest of alice: %s", r)
		}
		return nil
	})
	if r := n.get(t, "/api/v1/admin/users/nobody/interest"); r.status != fasthttp.StatusOK || !strings.Contains(string(r.body), `"reads":0`) {
		t.Errorf("interest of an unknown user: %s", r)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		p, ok, err := n.interest.Profile("carol")
		if err != nil || !ok || p.Reads != 1 || len(p.History) != 1 || p.History[0].ArticleID != lateID {
			return fmt.Errorf("carol's profile %+v (%v)", p, err)
		}
		return nil
	})
}

type urlID struct{ url, id string }

// assignmentsByID lists the articles of every story with their ids.
func assignmentsByID(t testing.TB, n *testNode) []urlID {
	t.Helper()
	var out []urlID
	for _, st := range allStories(t, n) {
		var d storyJSON
		if err := json.Unmarshal(n.get(t, "/api/v1/stories/"+st.ID).body, &d); err != nil {
			t.Fatal(err)
		}
		for _, a := range d.Articles {
			out = append(out, urlID{a.URL, a.ID})
		}
	}
	return out
}

// articleIDsByURL returns the id of every article of the stories, by URL.
func articleIDsByURL(t testing.TB, n *testNode) map[string]string {
	t.Helper()
	idOf := map[string]string{}
	for _, a := range assignmentsByID(t, n) {
		idOf[a.url] = a.id
	}
	return idOf
}

func canonID(t testing.TB, raw string) string {
	t.Helper()
	c, err := canon.Canonical(raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	return canon.ArticleID(c)
}
