// Package statetest opens state databases for tests and commits what
// operators' state flushes into them.
package statetest

import (
	"log/slog"
	"testing"

	"github.com/newsflow/newsflow/state"
)

// Open opens a state DB in a temporary folder of tb, logging nothing, and
// closes it when the test ends.
func Open(tb testing.TB) *state.DB {
	tb.Helper()
	db, err := state.Open(tb.TempDir(), state.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := db.Close(); err != nil {
			tb.Error(err)
		}
	})
	return db
}

// Flusher writes its changes since the last flush: counts, sets, tasks.
type Flusher interface {
	Flush(w state.Writer) error
}

// Commit flushes f into one batch of ns, commits it and returns how many
// operations the batch held.
func Commit(tb testing.TB, f Flusher, ns state.Namespace) int {
	tb.Helper()
	b := ns.NewBatch()
	if err := f.Flush(b); err != nil {
		b.Discard()
		tb.Fatal(err)
	}
	n := b.Len()
	if err := b.Commit(); err != nil {
		tb.Fatal(err)
	}
	return n
}
