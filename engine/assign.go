package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"time"

	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/state"
)

// In a cluster (Options.Cluster) a node runs only the partitions it is
// assigned, and every task keeps its state in a changelog partition of the
// log as well as in the local store, so that the partition can move:
//
//   - A task's commit appends its outputs, then writes the batch's state
//     changes and input offsets to its changelog in one transaction, then
//     commits the same batch locally. The changelog is the authority; the
//     local store is a cache of it, marked with the changelog position it
//     reflects.
//   - A task that starts claims its changelog partition (which fences any
//     earlier writer, on this node or another), brings the local store up
//     to date from the changelog (from the local position, or from the
//     beginning when the local copy is missing or too old), and resumes from
//     the input offsets the state holds. Every input record changes the
//     state exactly once, whichever node applied it.
//   - A task commits only while its partition is assigned to the node with
//     the epoch it started with. A node that lost its partitions without
//     knowing it is stopped by the fence: the next owner's claim makes its
//     commits fail.
//
// Stages whose Spec sets LocalState keep no changelog: a node that gains
// them rebuilds their state from their inputs.

// keyChangelogPos is the local store's changelog position and the wall
// time it was written: two int64s.
var keyChangelogPos = []byte{0xff, 'c'}

// ChangelogTopic names the changelog topic of a stage.
func ChangelogTopic(stage string) string { return "newsflow-" + stage + "-changelog" }

// changelogWriter names the writer of a task's changelog partition; it is
// the same on every node, so that a claim fences the previous owner.
func changelogWriter(stage string, p int32) string {
	return "newsflow-" + stage + "-" + strconv.Itoa(int(p))
}

// errRevoked stops a task whose partition is no longer assigned to this
// node with the task's epoch.
var errRevoked = errors.New("partition no longer assigned to this node")

// Assign sets the partitions this node runs, each with the epoch of its
// assignment (cluster mode only; a partition's tasks also run the
// repartition stages' source partitions of the same number). Tasks of
// partitions that are no longer assigned, or assigned with another epoch,
// stop without committing further; tasks of newly assigned ones claim
// their changelogs, restore and start. Assign may be called before Run.
func (e *Engine) Assign(parts map[int32]uint64) {
	e.assign.Lock()
	e.assign.parts = maps.Clone(parts)
	e.assign.version++
	e.assign.Unlock()
	select {
	case e.assign.changed <- struct{}{}:
	default:
	}
}

// Assigned returns the partitions and epochs set by the last Assign.
func (e *Engine) Assigned() map[int32]uint64 {
	parts, _ := e.assigned()
	return parts
}

func (e *Engine) assigned() (map[int32]uint64, uint64) {
	e.assign.Lock()
	defer e.assign.Unlock()
	return maps.Clone(e.assign.parts), e.assign.version
}

// owns reports whether partition p (of any stage) is assigned to this node
// with epoch.
func (e *Engine) owns(p int32, epoch uint64) bool {
	if !e.opts.Cluster {
		return true
	}
	e.assign.Lock()
	defer e.assign.Unlock()
	got, ok := e.assign.parts[p%e.opts.Partitions]
	return ok && got == epoch
}

// PartitionStateBytes estimates the bytes partition p's tasks keep in the
// local store (every stage's namespace of that partition number).
func (e *Engine) PartitionStateBytes(p int32) (uint64, error) {
	var total uint64
	for _, st := range e.stages {
		for sp := p; sp < st.partitions; sp += e.opts.Partitions {
			n, err := e.db.Namespace(namespaceName(st.name, sp)).DiskUsage()
			if err != nil {
				return 0, err
			}
			total += n
		}
	}
	return total, nil
}

// partitionGroup is the running tasks of one assigned partition.
type partitionGroup struct {
	epoch   uint64
	cancel  context.CancelFunc
	done    chan struct{}
	runners []*taskRunner
}

// runAssigned runs the assigned partitions until ctx is done.
func (e *Engine) runAssigned(ctx context.Context) error {
	cls, ok := e.log.(eventlog.Changelogs)
	if !ok {
		return errors.New("engine: cluster mode needs a log with changelogs (Kafka)")
	}
	for _, st := range e.stages {
		if st.localState {
			continue
		}
		n, err := cls.EnsureChangelogTopic(ctx, ChangelogTopic(st.name), st.partitions)
		if err != nil {
			return fmt.Errorf("engine: changelog topic of %s: %w", st.name, err)
		}
		if n < st.partitions {
			return fmt.Errorf("engine: changelog topic %s has %d partitions, want %d", ChangelogTopic(st.name), n, st.partitions)
		}
	}
	running := map[int32]*partitionGroup{}
	defer func() {
		e.stopStandbys()
		for _, g := range running {
			g.cancel()
		}
		for _, g := range running {
			<-g.done
		}
		e.setRunners(nil, 0)
	}()
	for {
		want, version := e.assigned()
		var stopping []*partitionGroup
		for p, g := range running {
			if epoch, ok := want[p]; !ok || epoch != g.epoch {
				g.cancel()
				stopping = append(stopping, g)
				delete(running, p)
				e.opts.Logger.Info("partition revoked", "partition", p, "epoch", g.epoch)
			}
		}
		for _, g := range stopping {
			<-g.done
		}
		// A standby copy stops before its partition's task starts (they
		// share the local store), and starts once the task has stopped.
		run := map[int32]bool{}
		for p := range want {
			run[p] = true
		}
		e.syncStandbys(ctx, run)
		for p, epoch := range want {
			if _, ok := running[p]; ok || p < 0 || p >= e.opts.Partitions {
				continue
			}
			running[p] = e.startPartition(ctx, p, epoch)
			e.opts.Logger.Info("partition assigned", "partition", p, "epoch", epoch)
		}
		var all []*taskRunner
		for _, g := range running {
			all = append(all, g.runners...)
		}
		e.setRunners(all, version)
		select {
		case <-ctx.Done():
			return nil
		case <-e.assign.changed:
		}
	}
}

// startPartition starts every task of partition p: task p of each stage,
// and the tasks of source partitions p, p+n, ... of repartition stages
// whose source topic has more partitions than the engine.
func (e *Engine) startPartition(ctx context.Context, p int32, epoch uint64) *partitionGroup {
	gctx, cancel := context.WithCancel(ctx)
	g := &partitionGroup{epoch: epoch, cancel: cancel, done: make(chan struct{})}
	var wg sync.WaitGroup
	for _, st := range e.stages {
		for sp := p; sp < st.partitions; sp += e.opts.Partitions {
			tr := &taskRunner{e: e, st: st, p: sp, epoch: epoch}
			g.runners = append(g.runners, tr)
			wg.Go(func() { _ = tr.run(gctx) })
		}
	}
	go func() {
		wg.Wait()
		close(g.done)
	}()
	return g
}

// Stopped reports, in cluster mode, whether no task of partition p runs
// on this node, nor will until an Assign gives p again: the last Assign
// did not give it, and the engine has stopped whatever of it ran before
// (a task being revoked runs until it has returned). It also returns a
// channel closed when the running tasks next change, to ask again then.
func (e *Engine) Stopped(p int32) (bool, <-chan struct{}) {
	parts, version := e.assigned()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.mu.runnersChanged == nil {
		e.mu.runnersChanged = make(chan struct{})
	}
	if _, ok := parts[p]; ok || e.mu.applied < version {
		return false, e.mu.runnersChanged
	}
	for _, tr := range e.mu.runners {
		if tr.p%e.opts.Partitions == p {
			return false, e.mu.runnersChanged
		}
	}
	return true, e.mu.runnersChanged
}

// setRunners records the running tasks and, in cluster mode, the
// assignment version they run.
func (e *Engine) setRunners(rs []*taskRunner, version uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.mu.runners, e.mu.applied = rs, version
	if e.mu.runnersChanged != nil {
		close(e.mu.runnersChanged)
		e.mu.runnersChanged = nil
	}
	if e.opts.Cluster {
		// Progress of partitions this node no longer runs is not its to
		// report.
		running := map[progressKey]bool{}
		for _, tr := range rs {
			for _, in := range tr.st.inputs[tr.p] {
				running[progressKey{tr.st.name, in.tp}] = true
			}
		}
		for k := range e.mu.progress {
			if !running[k] {
				delete(e.mu.progress, k)
			}
		}
	}
}

// restoreChangelog claims the task's changelog partition and brings the
// local store up to date from it. The caller closes the changelog.
func (tr *taskRunner) restoreChangelog(ctx context.Context, ns state.Namespace) (eventlog.Changelog, error) {
	e := tr.e
	if !e.owns(tr.p, tr.epoch) {
		return nil, errRevoked
	}
	cls := e.log.(eventlog.Changelogs)
	tp := eventlog.TopicPartition{Topic: ChangelogTopic(tr.st.name), Partition: tr.p}
	cl, err := cls.OpenChangelog(ctx, tp, changelogWriter(tr.st.name, tr.p))
	if err != nil {
		return nil, err
	}
	from, _, fresh, err := readChangelogPos(ns, e.opts.ChangelogMaxAge)
	if err == nil && !fresh {
		err = ns.Clear()
		from = 0
	}
	if err != nil {
		cl.Close()
		return nil, err
	}
	start := time.Now()
	pos, applied, err := applyChangelog(ctx, ns, cl, from)
	if errors.Is(err, eventlog.ErrChangelogTruncated) {
		e.opts.Logger.Warn("changelog truncated below the local position; restoring from the beginning", "stage", tr.st.name, "partition", tr.p)
		if err = ns.Clear(); err == nil {
			pos, applied, err = applyChangelog(ctx, ns, cl, 0)
		}
	}
	if err != nil {
		cl.Close()
		return nil, fmt.Errorf("restore from changelog %s: %w", tp, err)
	}
	e.m.restoreSeconds.WithLabelValues(tr.st.name).Observe(time.Since(start).Seconds())
	e.m.restoreChanges.WithLabelValues(tr.st.name).Add(float64(applied))
	if applied > 0 {
		e.opts.Logger.Info("restored from changelog", "stage", tr.st.name, "partition", tr.p, "from", from, "changes", applied, "took", time.Since(start).Round(time.Millisecond))
	}
	b := ns.NewBatch()
	if err := setChangelogPos(b, pos); err != nil {
		b.Discard()
		cl.Close()
		return nil, err
	}
	if err := b.Commit(); err != nil {
		cl.Close()
		return nil, err
	}
	return cl, nil
}

// applyChangelog applies the changelog from offset from into ns, in batches.
func applyChangelog(ctx context.Context, ns state.Namespace, cl eventlog.Changelog, from int64) (int64, int, error) {
	const maxBatch = 4096
	b := ns.NewBatch()
	n, applied := 0, 0
	pos, err := cl.Restore(ctx, from, func(ch eventlog.Change) error {
		var err error
		if ch.Delete {
			err = b.Delete(ch.Key)
		} else {
			err = b.Set(ch.Key, ch.Value)
		}
		if err != nil {
			return err
		}
		n++
		applied++
		if n < maxBatch {
			return nil
		}
		// The local position is written only after the whole restore, so
		// a restore cut short starts again from the old position.
		if err := b.Commit(); err != nil {
			return err
		}
		b, n = ns.NewBatch(), 0
		return nil
	})
	if err != nil {
		b.Discard()
		return 0, applied, err
	}
	return pos, applied, b.Commit()
}

// readChangelogPos returns the local store's changelog position, when it
// was written, and whether the local store may be brought up to date from
// it: it exists and is younger than maxAge (older ones may have missed
// deletes that compaction has since dropped from the changelog).
func readChangelogPos(r state.Reader, maxAge time.Duration) (pos int64, written time.Time, fresh bool, err error) {
	v, ok, err := r.Get(keyChangelogPos)
	if err != nil || !ok {
		return 0, time.Time{}, false, err
	}
	if len(v) != 16 {
		return 0, time.Time{}, false, fmt.Errorf("corrupt changelog position %x", v)
	}
	written = time.UnixMilli(int64(binary.BigEndian.Uint64(v[8:])))
	return int64(binary.BigEndian.Uint64(v[:8])), written, time.Since(written) < maxAge, nil
}

func setChangelogPos(w state.Writer, pos int64) error {
	var v [16]byte
	binary.BigEndian.PutUint64(v[:8], uint64(pos))
	binary.BigEndian.PutUint64(v[8:], uint64(time.Now().UnixMilli()))
	return w.Set(keyChangelogPos, v[:])
}

// captureWriter stages changes into a batch and records them for the
// changelog, in order. Keys and values are copied: callers may reuse them.
type captureWriter struct {
	b       *state.Batch
	ns      state.Namespace
	changes []eventlog.Change
}

func (w *captureWriter) Set(key, value []byte) error {
	if err := w.b.Set(key, value); err != nil {
		return err
	}
	w.changes = append(w.changes, eventlog.Change{Key: clone(key), Value: clone(value)})
	return nil
}

func (w *captureWriter) Delete(key []byte) error {
	if err := w.b.Delete(key); err != nil {
		return err
	}
	w.changes = append(w.changes, eventlog.Change{Key: clone(key), Delete: true})
	return nil
}

// DeleteRange becomes one tombstone per key the range removes: the
// committed keys in the range, and keys set earlier in this batch.
func (w *captureWriter) DeleteRange(start, end []byte) error {
	if err := w.b.DeleteRange(start, end); err != nil {
		return err
	}
	seen := map[string]bool{}
	if err := w.ns.Scan(start, end, func(k, _ []byte) error {
		seen[string(k)] = true
		w.changes = append(w.changes, eventlog.Change{Key: clone(k), Delete: true})
		return nil
	}); err != nil {
		return err
	}
	for _, ch := range w.changes {
		k := string(ch.Key)
		if !ch.Delete && !seen[k] && k >= string(start) && k < string(end) {
			seen[k] = true
			w.changes = append(w.changes, eventlog.Change{Key: clone(ch.Key), Delete: true})
		}
	}
	return nil
}

func clone(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return append(make([]byte, 0, len(b)), b...)
}
