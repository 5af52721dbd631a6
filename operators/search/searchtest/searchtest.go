// Package searchtest runs the tasks of a search operator in a test:
// every partition over the test's state DB, records applied and committed
// by hand, as the engine would.
package searchtest

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/operators/search"
	"github.com/newsflow/newsflow/state"
	"github.com/newsflow/newsflow/state/statetest"
)

// Tasks are the tasks of every partition of one search operator, whose
// indexes live in a temporary folder of the test.
type Tasks struct {
	Op    *search.Operator
	tb    testing.TB
	db    *state.DB
	tasks []engine.Task
}

// New opens the operator's tasks over db, restored from it, and closes
// them when the test ends.
func New(tb testing.TB, db *state.DB, opts search.Options, partitions int32) *Tasks {
	tb.Helper()
	op, err := search.New(tb.TempDir(), opts, partitions)
	if err != nil {
		tb.Fatal(err)
	}
	s := &Tasks{Op: op, tb: tb, db: db}
	for p := range partitions {
		tk, err := op.NewTask(engine.TaskContext{Operator: search.Name, Partition: p})
		if err != nil {
			tb.Fatal(err)
		}
		if err := tk.Restore(s.ns(p)); err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { _ = tk.Close() })
		s.tasks = append(s.tasks, tk)
	}
	return s
}

func (s *Tasks) ns(p int32) state.Namespace { return s.db.Namespace(fmt.Sprint("search/", p)) }

// Index applies article a of story to partition p, as a record of
// articles.indexed.
func (s *Tasks) Index(p int32, a schema.Article, story string) {
	s.tb.Helper()
	v, err := json.Marshal(a)
	if err != nil {
		s.tb.Fatal(err)
	}
	rec := &eventlog.Record{Key: []byte(a.ID), Value: v, Headers: []eventlog.Header{{Key: schema.HeaderStoryID, Value: []byte(story)}}}
	if err := s.tasks[p].Process(&engine.ProcessContext{}, rec); err != nil {
		s.tb.Fatal(err)
	}
}

// Commit commits what every partition applied.
func (s *Tasks) Commit() {
	s.tb.Helper()
	for p, tk := range s.tasks {
		statetest.Commit(s.tb, tk, s.ns(int32(p)))
	}
}

// Count returns the documents of every partition's index.
func (s *Tasks) Count() uint64 {
	s.tb.Helper()
	n, err := s.Op.Count()
	if err != nil {
		s.tb.Fatal(err)
	}
	return n
}
