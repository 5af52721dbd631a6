package search

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/internal/searchindex"
	"github.com/newsflow/newsflow/state"
	"github.com/newsflow/newsflow/state/statetest"
)

var day0 = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

// searchTasks runs the tasks of every partition of a search operator over
// fresh state.
type searchTasks struct {
	t     *testing.T
	op    *Operator
	db    *state.DB
	tasks []engine.Task
}

func newSearchTasks(t *testing.T, opts Options, partitions int32) *searchTasks {
	op, err := New(t.TempDir(), opts, partitions)
	if err != nil {
		t.Fatal(err)
	}
	st := &searchTasks{t: t, op: op, db: statetest.Open(t)}
	for p := range partitions {
		tk, err := op.NewTask(engine.TaskContext{Operator: Name, Partition: p})
		if err != nil {
			t.Fatal(err)
		}
		if err := tk.Restore(st.ns(p)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tk.Close() })
		st.tasks = append(st.tasks, tk)
	}
	return st
}

func (st *searchTasks) ns(p int32) state.Namespace { return st.db.Namespace(fmt.Sprint("search/", p)) }

// index applies an article published h hours after day0 to partition p.
func (st *searchTasks) index(p int32, id string, h int) {
	st.t.Helper()
	v, err := json.Marshal(schema.Article{ID: id, Title: "Report " + id, PublishedAt: day0.Add(time.Duration(h) * time.Hour).UnixMilli()})
	if err != nil {
		st.t.Fatal(err)
	}
	rec := &eventlog.Record{Key: []byte(id), Value: v, Headers: []eventlog.Header{{Key: schema.HeaderStoryID, Value: []byte("s" + id)}}}
	if err := st.tasks[p].Process(&engine.ProcessContext{}, rec); err != nil {
		st.t.Fatal(err)
	}
}

func (st *searchTasks) commit(p int32) { statetest.Commit(st.t, st.tasks[p], st.ns(p)) }

func (st *searchTasks) count(p int32) uint64 {
	n, err := st.op.parts[p].Load().Count()
	if err != nil {
		st.t.Fatal(err)
	}
	return n
}

// TestRetentionSearchFlat: 14 days of a document an hour with 48h
// retention: the index holds the last 48h, all of them, whatever the
// commits, and the count stays flat.
func TestRetentionSearchFlat(t *testing.T) {
	st := newSearchTasks(t, Options{Retention: 48 * time.Hour}, 1)
	const hours = 14 * 24
	var counts []uint64
	for h := range hours {
		st.index(0, fmt.Sprint("a", h), h)
		if h%7 == 6 {
			st.commit(0)
		}
		if h%24 == 23 {
			st.commit(0)
			counts = append(counts, st.count(0))
		}
	}
	for d := 2; d < len(counts); d++ {
		if counts[d] != 49 {
			t.Errorf("day %d: %d documents, want 49 (the last 48h and the newest)", d+1, counts[d])
		}
	}
	res, err := st.op.Search(context.Background(), searchindex.Request{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var got, want []string
	for _, h := range res.Hits {
		got = append(got, h.ID)
	}
	for h := hours - 49; h < hours; h++ {
		want = append(want, fmt.Sprint("a", h))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("search finds %v, want %v", got, want)
	}
	// A document already older than the retention age is not indexed.
	st.index(0, "late", hours-60)
	st.commit(0)
	if n := st.count(0); n != 49 {
		t.Errorf("%d documents after a late one, want 49", n)
	}
}

// TestRetentionSearchHides: a partition that has not deleted its old
// documents yet (no newer document reached it) does not show them.
func TestRetentionSearchHides(t *testing.T) {
	st := newSearchTasks(t, Options{Retention: 48 * time.Hour}, 2)
	st.index(1, "old", 0)
	st.commit(1)
	st.index(0, "new", 72)
	st.commit(0)
	if st.count(1) != 1 {
		t.Fatal("partition 1 deleted its document without a newer one")
	}
	res, err := st.op.Search(context.Background(), searchindex.Request{Query: "report"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Hits) != 1 || res.Hits[0].ID != "new" {
		t.Errorf("hits %+v, want only the new document", res.Hits)
	}
	res, err = st.op.Search(context.Background(), searchindex.Request{To: day0.Add(time.Hour)})
	if err != nil || len(res.Hits) != 0 {
		t.Errorf("search up to an expired time: %+v, %v", res, err)
	}
}
