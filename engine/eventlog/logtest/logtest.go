// Package logtest is the conformance suite every eventlog backend passes.
package logtest

import (
	"testing"

	"github.com/newsflow/newsflow/engine/eventlog"
)

// Options tells the suite what a backend can do.
type Options struct {
	// Reopen closes l and opens the same log again (same directory or same
	// cluster), for the durability tests. Nil skips them.
	Reopen func(t *testing.T, l eventlog.Log) eventlog.Log
}

// Open returns a new, empty log. It registers its own cleanup with t.
type Open func(t *testing.T) eventlog.Log

// Run runs the conformance suite against the backend that open creates.
func Run(t *testing.T, open Open, opts Options) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open, opts) })
	}
}

type testCase struct {
	name string
	fn   func(t *testing.T, open Open, opts Options)
}

var cases []testCase
