// Package enginetest runs operators on a real engine over an embedded log
// and a state store that outlive a run, so that an operator's test can
// stop the engine and start another over the same state, as a restart
// does.
package enginetest

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/engine/eventlog/embedded"
	"github.com/newsflow/newsflow/state"
)

// Rig is a log and a state store in a test's temporary directory, and the
// engine running on them, if any. It is closed in t.Cleanup.
type Rig struct {
	t    testing.TB
	Log  eventlog.Log
	DB   *state.DB
	stop func()
}

// New opens a rig; each of topics is made with its partition count
// first. Its log leaves syncing to the operating system.
func New(t testing.TB, topics map[string]int32) *Rig {
	t.Helper()
	return open(t, topics, embedded.FsyncNever)
}

// NewDurable is New with a log that syncs every append before it returns,
// as a node's embedded log does by default: for benchmarks of what a
// write costs.
func NewDurable(t testing.TB, topics map[string]int32) *Rig {
	t.Helper()
	return open(t, topics, embedded.FsyncAlways)
}

func open(t testing.TB, topics map[string]int32, fsync embedded.FsyncPolicy) *Rig {
	t.Helper()
	dir := t.TempDir()
	l, err := embedded.Open(embedded.Options{Dir: filepath.Join(dir, "log"), Fsync: fsync, RetentionAge: embedded.KeepForever})
	if err != nil {
		t.Fatal(err)
	}
	db, err := state.Open(filepath.Join(dir, "state"), state.Options{})
	if err != nil {
		l.Close()
		t.Fatal(err)
	}
	r := &Rig{t: t, Log: l, DB: db}
	t.Cleanup(func() {
		r.Halt()
		db.Close()
		l.Close()
	})
	for topic, n := range topics {
		if _, err := eventlog.EnsureTopic(context.Background(), l, topic, n); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// Start runs ops on an engine with opts (short restart backoffs unless
// set) until Halt, and returns once every task has restored.
func (r *Rig) Start(opts engine.Options, ops ...engine.Operator) *engine.Engine {
	r.t.Helper()
	if opts.RestartBackoff == 0 {
		opts.RestartBackoff, opts.MaxRestartBackoff = time.Millisecond, 5*time.Millisecond
	}
	e, err := engine.New(r.Log, r.DB, opts)
	if err != nil {
		r.t.Fatal(err)
	}
	for _, op := range ops {
		if err := e.Register(op); err != nil {
			r.t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	r.stop = func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			r.t.Errorf("engine: %v", err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); !e.Ready(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			r.t.Fatal("the engine's tasks did not restore within 10s")
		}
	}
	return e
}

// Halt stops the running engine, if any, once its tasks committed.
func (r *Rig) Halt() {
	if r.stop != nil {
		r.stop()
		r.stop = nil
	}
}

// Append appends recs to the log.
func (r *Rig) Append(recs ...*eventlog.Record) {
	r.t.Helper()
	if err := r.Log.Append(context.Background(), recs); err != nil {
		r.t.Fatal(err)
	}
}
