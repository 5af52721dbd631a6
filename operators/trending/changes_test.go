package trending_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/enginetest"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/internal/testutil"
	"github.com/newsflow/newsflow/operators/trending"
	"github.com/prometheus/client_golang/prometheus"
)

// changesRig runs operators on an engine over a log and a state store
// that outlive a run, so a run may stop and another restore.
type changesRig struct {
	*enginetest.Rig
	t   *testing.T
	reg *prometheus.Registry
}

func newChangesRig(t *testing.T) *changesRig {
	t.Helper()
	// One partition, as the node makes it: one order for every consumer.
	return &changesRig{Rig: enginetest.New(t, map[string]int32{schema.TopicTrendingChanges: 1}), t: t}
}

// start runs the operators that ops(reg) returns until Halt.
func (r *changesRig) start(parts int32, ops func(reg prometheus.Registerer) []engine.Operator) {
	r.t.Helper()
	r.reg = prometheus.NewRegistry()
	r.Start(engine.Options{Partitions: parts, MaxBatch: 7, CommitInterval: 20 * time.Millisecond}, ops(r.reg)...)
}

// changes waits until trending.changes holds n records, then checks that
// no more come for a moment and returns them as "window/article@rank",
// checking that each is well formed.
func (r *changesRig) changes(n int) []string {
	r.t.Helper()
	var recs []*eventlog.Record
	read := func() error {
		recs = testutil.ReadTopic(r.t, r.Log, schema.TopicTrendingChanges)
		if len(recs) < n {
			return fmt.Errorf("%d of %d records", len(recs), n)
		}
		return nil
	}
	testutil.Eventually(r.t, 20*time.Second, read)
	time.Sleep(300 * time.Millisecond)
	_ = read()
	var out []string
	for _, rec := range recs {
		var c trending.Change
		if err := json.Unmarshal(rec.Value, &c); err != nil {
			r.t.Fatalf("record %d: %v: %s", rec.Offset, err, rec.Value)
		}
		id, _ := rec.Header(trending.HeaderChangeID)
		if string(rec.Key) != c.ArticleID || rec.Timestamp != c.EnteredAt || string(id) != c.ID() ||
			c.ID() != fmt.Sprintf("%s/%s/%d", c.Window, c.ArticleID, c.EnteredAt) {
			r.t.Fatalf("record %d: key %q, time %d, id %q, value %s", rec.Offset, rec.Key, rec.Timestamp, id, rec.Value)
		}
		out = append(out, fmt.Sprintf("%s/%s@%d", c.Window, c.ArticleID, c.Rank))
	}
	if len(out) != n {
		r.t.Fatalf("%d records, want %d: %v", len(out), n, out)
	}
	return out
}

func wantChanges(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: %v, want %v", what, got, want)
	}
}

// top is a trending partition's top as the trending tasks publish it.
func top(p int32, window string, wm int64, entries ...any) *eventlog.Record {
	type entry struct {
		A string `json:"a"`
		N uint64 `json:"n"`
		B uint64 `json:"b,omitempty"`
	}
	var es []entry
	for i := 0; i+1 < len(entries); i += 2 {
		es = append(es, entry{A: entries[i].(string), N: uint64(entries[i+1].(int)), B: uint64(entries[i+1].(int)) / 10})
	}
	// The position grows with the watermark here, as a task's does while
	// it applies shares in time order.
	v, _ := json.Marshal(map[string]any{"partition": p, "window": window, "position": wm, "watermark": wm, "top": es})
	return &eventlog.Record{Topic: trending.TopicTops, Partition: engine.SingletonPartition, Key: []byte(window), Value: v, Timestamp: wm}
}

// TestChangesFromTops drives the trending-changes operator with the tops
// of two partitions: an article that enters a window's merged top K is
// announced once (key, value, time and id header as documented), with its
// merged rank; not again while remembered; again once the span passed; a
// past top (a task replaying) and a top whose shares have all left the
// window change nothing; the memory survives a restart; a malformed top
// goes to the dead-letter topic and an unknown window is ignored.
func TestChangesFromTops(t *testing.T) {
	r := newChangesRig(t)
	ops := func(reg prometheus.Registerer) []engine.Operator {
		c, err := trending.NewChanges(trending.OperatorOptions{}, 3, reg)
		if err != nil {
			t.Fatal(err)
		}
		return []engine.Operator{c}
	}
	t0 := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC).UnixMilli()
	r.start(2, ops)

	r.Append(top(0, "1h", t0, "a", 10, "c", 5), top(1, "1h", t0, "b", 8, "d", 1))
	wantChanges(t, "two partitions", r.changes(3), "1h/a@1", "1h/c@2", "1h/b@2")
	var first trending.Change
	if err := json.Unmarshal(testutil.ReadTopic(t, r.Log, schema.TopicTrendingChanges)[0].Value, &first); err != nil {
		t.Fatal(err)
	}
	if first != (trending.Change{Window: "1h", ArticleID: "a", Rank: 1, Count: 10, EnteredAt: t0}) {
		t.Fatalf("first change %+v (exact mode: no error_bound)", first)
	}

	// Counts change, no new article: nothing. A past top of partition 1
	// naming e is ignored.
	r.Append(top(1, "1h", t0+10_000, "b", 12, "d", 1), top(1, "1h", t0+5_000, "e", 99))
	r.changes(3)

	// e enters through partition 0, ahead of c.
	r.Append(top(0, "1h", t0+20_000, "a", 10, "e", 9, "c", 5))
	wantChanges(t, "e enters", r.changes(4)[3:], "1h/e@3")

	// A malformed top and one of an unknown window.
	r.Append(&eventlog.Record{Topic: trending.TopicTops, Key: []byte("1h"), Value: []byte("{not json")}, top(0, "5m", t0+20_000, "z", 50))
	r.changes(4)
	testutil.Eventually(t, 10*time.Second, func() error {
		for _, rec := range testutil.ReadTopic(t, r.Log, engine.DefaultOptions().DeadLetterTopic) {
			if reason, _ := rec.Header(engine.HeaderDLQReason); strings.Contains(string(reason), "trending top") {
				return nil
			}
		}
		return errors.New("no dead letter for the malformed top")
	})
	if n := testutil.Counter(t, r.reg, "newsflow_trending_changes_total", "window", "1h"); n != 4 {
		t.Fatalf("newsflow_trending_changes_total{window=1h} = %v, want 4", n)
	}

	// A restart remembers: the same tops again announce nothing.
	r.Halt()
	r.start(2, ops)
	r.Append(top(0, "1h", t0+30_000, "a", 10, "e", 9, "c", 5))
	r.changes(4)

	// An hour on, partition 0's top of t0+30s has left the window; what
	// partition 1 holds is announced again, its memory forgotten.
	r.Append(top(1, "1h", t0+time.Hour.Milliseconds()+31_000, "b", 3, "f", 2))
	wantChanges(t, "an hour on", r.changes(6)[4:], "1h/b@1", "1h/f@2")
}

// TestChangesFromShares: trending tasks publish their tops as they apply
// shares and the trending-changes operator announces what entered each
// window's global top K, in cms mode with the error bound; the 1m window
// announces again after a minute what the 1h window still remembers.
func TestChangesFromShares(t *testing.T) {
	r := newChangesRig(t)
	topts := trending.OperatorOptions{Counter: trending.CounterCMS, PublishTops: 2}
	ops := func(reg prometheus.Registerer) []engine.Operator {
		tr, err := trending.New(topts, 1, reg)
		if err != nil {
			t.Fatal(err)
		}
		c, err := trending.NewChanges(topts, 2, reg)
		if err != nil {
			t.Fatal(err)
		}
		return []engine.Operator{tr, c}
	}
	t0 := time.Now().Add(-time.Hour).Truncate(time.Minute).UnixMilli()
	n := 0
	shares := func(at int64, article string, count int) (recs []*eventlog.Record) {
		for range count {
			n++
			v, _ := json.Marshal(schema.Share{EventID: fmt.Sprintf("e%d", n), ArticleID: article, UserID: fmt.Sprintf("u%d", n), Timestamp: at})
			recs = append(recs, &eventlog.Record{Topic: schema.TopicShares, Key: []byte(article), Value: v, Timestamp: at})
		}
		return recs
	}
	r.start(1, ops)
	// Most shared first, so that every batch's top is a prefix of the
	// final one.
	r.Append(slices.Concat(shares(t0, "a", 6), shares(t0, "b", 4), shares(t0, "c", 1))...)
	got := r.changes(6)
	slices.Sort(got) // batches may split the shares anywhere
	wantChanges(t, "first shares", got, "1h/a@1", "1h/b@2", "1m/a@1", "1m/b@2", "24h/a@1", "24h/b@2")
	recs := testutil.ReadTopic(t, r.Log, schema.TopicTrendingChanges)
	if !strings.Contains(string(recs[0].Value), `"error_bound":`) {
		t.Fatalf("cms change without its error bound: %s", recs[0].Value)
	}
	r.Append(shares(t0+61_000, "c", 3)...)
	wantChanges(t, "a minute on", r.changes(7)[6:], "1m/c@1")
}
