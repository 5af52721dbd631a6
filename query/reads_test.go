package query_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/operators/events"
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
	if r.status != fasthttp.StatusBadRequest || res.Accepted == nil || *res.Accepted != 2 || res.Rejected == nil || *res.Rejected != 1 || len(res.Errors) != 1 || res.Errors[0].Line != 2 {
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
		for _, rec := range readAll(t, n, eventlog.TopicPartition{Topic: events.TopicReads, Partition: p}) {
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
