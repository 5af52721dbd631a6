package webhook

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/operators/story"
)

// appendBurst appends n articles about one event from six sources over
// the half hour before now to the articles topic, as the articles
// operator writes them: enough to make their story breaking.
func appendBurst(t *testing.T, s *stage, prefix, title string, n int) {
	t.Helper()
	now := time.Now().UnixMilli()
	recs := make([]*eventlog.Record, n)
	for i := range recs {
		id := fmt.Sprintf("%s-%d", prefix, i)
		pa := schema.ProcessedArticle{Article: schema.Article{ID: id, URL: "https://example.com/" + id, SourceID: fmt.Sprintf("s%d", i%6),
			Title: fmt.Sprintf("%s report %d", title, i), PublishedAt: now - 30*60_000 + int64(i)*30*60_000/int64(n),
			FetchedAt: now, FirstSeen: now, Version: 1}}
		v, err := json.Marshal(pa)
		if err != nil {
			t.Fatal(err)
		}
		recs[i] = &eventlog.Record{Topic: schema.TopicArticles, Partition: 0, Key: []byte(id), Value: v, Timestamp: now}
	}
	if err := s.log.Append(t.Context(), recs); err != nil {
		t.Fatal(err)
	}
}

// TestStoriesToWebhooks runs the stories and the webhooks stages on one
// engine: a story that becomes breaking is delivered once, however many
// more articles keep it breaking; rebuilding the stories stage from the
// start of the log (newsflow replay --operator stories) emits its episode
// again, and delivers nothing again; a story that becomes breaking after
// is delivered.
func TestStoriesToWebhooks(t *testing.T) {
	s := newStage(t)
	if _, err := eventlog.EnsureTopic(t.Context(), s.log, schema.TopicArticles, 2); err != nil {
		t.Fatal(err)
	}
	rcv := &receiver{t: t}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	h := addHook(t, s.store, "u-ann", srv.URL, rcv)
	stories := func() engine.Operator {
		op, err := story.New(story.OperatorOptions{}, 2, nil)
		if err != nil {
			t.Fatal(err)
		}
		return op
	}
	opts := Options{Attempts: 5, Backoff: time.Second, Timeout: time.Second}
	stop := s.run(opts, runOptions{also: []engine.Operator{stories()}})
	appendBurst(t, s, "q", "Earthquake of magnitude 7 strikes Lisbon region", 70)
	waitFor(t, 10*time.Second, func() bool { return len(rcv.deliveries()) == 1 }, "the breaking story delivered")
	first := rcv.deliveries()[0]
	if first.Story.Story == nil || !first.Story.Breaking || first.Story.BreakingSince == 0 ||
		first.Delivery != DeliveryID(h.ID, first.Story.ID, first.Story.BreakingSince) {
		t.Fatalf("delivery %+v", first)
	}
	appendBurst(t, s, "q2", "Earthquake of magnitude 7 strikes Lisbon region", 30) // still breaking
	time.Sleep(500 * time.Millisecond)
	stop()

	s.run(opts, runOptions{also: []engine.Operator{stories()}, replay: []string{story.Name}})
	appendBurst(t, s, "f", "Floods cut off villages across northern Vietnam", 70)
	waitFor(t, 10*time.Second, func() bool { return len(rcv.deliveries()) >= 2 }, "the next breaking story delivered")
	time.Sleep(500 * time.Millisecond)
	got := rcv.deliveries()
	if len(got) != 2 || got[1].Story.ID == first.Story.ID || got[1].Delivery == first.Delivery {
		var ids []string
		for _, p := range got {
			ids = append(ids, p.Story.ID+" "+p.Story.Title)
		}
		t.Fatalf("deliveries %v, want the earthquake once, then the floods", ids)
	}
}
