package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/state"
	"github.com/prometheus/client_golang/prometheus"
)

// The task loop implements the guarantee (see doc.go): a task's state, the
// next offset of each input and the highest source offset applied from
// each forwarded partition are committed in one batch, after the outputs
// and dead letters of the records they cover are durable. A run of a task
// is:
//
//   - open: the task restored from its committed state (in a cluster, after
//     the changelog brought the local state up to its claim), a reader at
//     the committed offsets;
//   - poll and apply: records routed away (modeLocal) or forwarded again
//     (modeForwarded, at or below the source offset applied) are skipped,
//     the others go to Task.Process; invalid ones become dead letters;
//   - commit, by the commit policy (commitDue): once caught up and at least
//     Spec.MinCommitInterval after the last commit, after MaxBatch records,
//     or CommitInterval after the last commit; on shutdown, what was
//     applied.
//
// Whatever fails between two commits is applied again from the last one.

// taskLoop is one run of a task: what it restored, what it applied since
// the last commit and when it committed. It is owned by the task's
// goroutine.
type taskLoop struct {
	tr *taskRunner
	e  *Engine

	task   Task
	ns     state.Namespace
	cl     eventlog.Changelog // cluster mode; nil on a single node
	reader eventlog.Reader

	inputs     map[eventlog.TopicPartition]stageInput
	next       map[eventlog.TopicPartition]int64 // next offset per input
	srcApplied map[int32]int64                   // highest source offset applied, per source partition
	dirtySrc   map[int32]bool                    // srcApplied entries changed since the last commit

	pc  ProcessContext
	dlq []*eventlog.Record
	vis visibility // origins and spans of the records applied since the last commit

	pending, applied int // records read and applied since the last commit
	lastCommit       time.Time
	interval         time.Duration // max(CommitInterval, Spec.MinCommitInterval)
	recordsIn        prometheus.Counter
	busy             prometheus.Counter // seconds applying and committing
	fresh            *freshness         // set once restored

	// gc copies committed offsets to the consumer group (Kafka); nil when
	// the log has no groups. groupDirty: committed offsets not copied yet.
	gc              eventlog.GroupCommitter
	groupDirty      bool
	lastGroupCommit time.Time
}

// runOnce restores the task and processes batches until ctx is done (then it
// returns nil after committing what it applied) or an error occurs. A panic
// in the operator's code is an error too: the task restarts from its
// committed state, and the rest of the node keeps running.
func (tr *taskRunner) runOnce(ctx context.Context) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
		}
	}()
	l := &taskLoop{tr: tr, e: tr.e}
	defer func() {
		if cerr := l.close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	if err := l.open(ctx); err != nil {
		return err
	}
	return l.run(ctx)
}

// open creates and restores the task and opens its reader at the
// committed offsets. What it opened, close closes, also after an error.
func (l *taskLoop) open(ctx context.Context) error {
	e, tr, p := l.e, l.tr, l.tr.p
	// A task restoring again after a failure keeps counting from its first
	// attempt: a task that keeps failing restores for long.
	if !tr.restoring.Swap(true) {
		tr.opened.Store(time.Now().UnixMilli())
	}
	l.ns = e.db.Namespace(namespaceName(tr.st.name, p))
	task, err := tr.st.newTask(TaskContext{
		Operator: tr.st.name, Partition: p, Partitions: e.opts.Partitions,
		Logger: e.opts.Logger.With("stage", tr.st.name, "partition", p), Registerer: e.opts.Registerer,
	})
	if err != nil {
		return fmt.Errorf("new task: %w", err)
	}
	l.task = task
	if e.opts.Cluster && !tr.st.localState {
		if l.cl, err = tr.restoreChangelog(ctx, l.ns); err != nil {
			return err
		}
	}
	if err := task.Restore(l.ns); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if err := l.readPositions(); err != nil {
		return err
	}
	if l.reader, err = e.log.NewReader(maps.Clone(l.next)); err != nil {
		return fmt.Errorf("open reader: %w", err)
	}
	l.showLag(ctx)
	tr.restored.Store(true)
	tr.restoring.Store(false)
	l.fresh = tr.st.fresh[p]
	l.fresh.set(&sourceTask, time.Now(), false)

	l.recordsIn = e.m.recordsIn.WithLabelValues(tr.st.name)
	l.busy = e.m.busySeconds.WithLabelValues(tr.st.name)
	l.interval = max(e.opts.CommitInterval, tr.st.minCommit)
	l.lastCommit = time.Now()
	l.dirtySrc = map[int32]bool{}
	l.gc, _ = e.log.(eventlog.GroupCommitter)
	// A restored task copies its committed offsets to the group once: its
	// previous instance may have died between its last state commit and
	// the group commit.
	l.groupDirty = l.gc != nil
	return nil
}

// showLag sets the progress and lag of every input from the log's end
// offsets as the task opens, before its first commit: a task stuck from
// the start has a lag series (that grows) for the alerts, and the lag
// watcher knows its inputs.
func (l *taskLoop) showLag(ctx context.Context) {
	e, name := l.e, l.tr.st.name
	for tp, o := range l.next {
		octx, cancel := context.WithTimeout(ctx, 5*time.Second)
		off, err := e.log.Offsets(octx, tp)
		cancel()
		hw := int64(-1)
		if err == nil {
			hw = off.End
		}
		e.setProgress(name, tp, o, hw)
		if err == nil {
			e.m.lag.WithLabelValues(name, tp.Topic, strconv.Itoa(int(tp.Partition))).Set(float64(max(0, hw-o)))
		}
	}
}

// readPositions reads the committed input offsets and source offsets.
func (l *taskLoop) readPositions() error {
	tr := l.tr
	l.inputs = map[eventlog.TopicPartition]stageInput{}
	l.next = map[eventlog.TopicPartition]int64{}
	l.pc.next = l.next
	ins := tr.st.inputs[tr.p]
	l.vis.obs, l.vis.origins = make([]prometheus.Observer, len(ins)), make([][]int64, len(ins))
	for i, in := range ins {
		in.idx = i
		if !tr.st.repartition {
			l.vis.obs[i] = l.e.m.visible.WithLabelValues(tr.st.name, sourceTopic(tr.st, in))
		}
		l.inputs[in.tp] = in
		off, err := readInt64(l.ns, offsetKey(in.tp), 0)
		if err != nil {
			return fmt.Errorf("read offset %s: %w", in.tp, err)
		}
		l.next[in.tp] = off
		l.e.setProgress(tr.st.name, in.tp, off, -1)
	}
	l.srcApplied = map[int32]int64{}
	err := l.ns.Scan(keySourcePrefix, state.PrefixEnd(keySourcePrefix), func(k, v []byte) error {
		if len(k) != len(keySourcePrefix)+4 || len(v) != 8 {
			return fmt.Errorf("corrupt source offset key %x", k)
		}
		l.srcApplied[int32(binary.BigEndian.Uint32(k[len(keySourcePrefix):]))] = int64(binary.BigEndian.Uint64(v))
		return nil
	})
	if err != nil {
		return fmt.Errorf("read source offsets: %w", err)
	}
	return nil
}

// close closes what open opened: the reader, the changelog, the task. It
// returns the task's Close error.
func (l *taskLoop) close() error {
	l.vis.endSpans(errUncommitted)
	if l.fresh != nil {
		l.fresh.source.Store(nil)
	}
	if l.reader != nil {
		l.reader.Close()
	}
	if l.cl != nil {
		l.cl.Close()
	}
	if l.task != nil {
		if err := l.task.Close(); err != nil {
			return fmt.Errorf("close task: %w", err)
		}
	}
	return nil
}

// errDue is poll's answer when a commit or a group commit fell due before
// any record came.
var errDue = errors.New("commit due")

func (l *taskLoop) run(ctx context.Context) error {
	for {
		if stop, err := l.waitPaused(ctx); err != nil || stop {
			return err
		}
		recs, err := l.poll(ctx)
		switch {
		case err == nil:
		case ctx.Err() != nil:
			// Shutting down: commit what was applied, then stop.
			if l.pending > 0 {
				return l.commit(false)
			}
			return nil
		case errors.Is(err, errDue) && l.pending > 0:
			if err := l.commit(false); err != nil {
				return err
			}
			continue
		case errors.Is(err, errDue):
			l.groupCommit()
			continue
		default:
			return fmt.Errorf("poll: %w", err)
		}
		// Records that came while the stage was paused wait with it; they
		// are read again after a restart, their offsets uncommitted.
		if stop, err := l.waitPaused(ctx); err != nil || stop {
			return err
		}
		l.pending += len(recs)
		if err := l.apply(recs); err != nil {
			return err
		}
		if caughtUp, due := l.commitDue(); due {
			if err := l.commit(caughtUp); err != nil {
				return err
			}
		}
	}
}

// waitPaused, while the stage is paused or the engine held, commits what
// was applied and waits until both end or ctx is done.
// It reports whether ctx ended the wait.
func (l *taskLoop) waitPaused(ctx context.Context) (stop bool, err error) {
	for {
		paused, held := l.tr.st.pause.ch.Load() != nil, l.e.hold.ch.Load() != nil
		if !paused && !held {
			return false, nil
		}
		if l.pending > 0 {
			if err := l.commit(false); err != nil {
				return false, err
			}
		}
		if paused {
			l.tr.st.pause.wait(ctx)
		} else {
			l.e.hold.wait(ctx)
		}
		if ctx.Err() != nil {
			return true, nil
		}
		if !l.e.owns(l.tr.p, l.tr.epoch) {
			// Moved away while it waited (a hold for lost contact):
			// nothing more of it commits here.
			return true, nil
		}
	}
}

// poll waits for records. With applied but uncommitted records it waits no
// longer than until the commit is due, and with committed offsets not yet
// copied to the consumer group no longer than until that is due: then it
// returns errDue.
func (l *taskLoop) poll(ctx context.Context) ([]*eventlog.Record, error) {
	pctx, cancel := ctx, context.CancelFunc(func() {})
	switch {
	case l.pending > 0:
		pctx, cancel = context.WithDeadline(ctx, l.lastCommit.Add(l.interval))
	case l.groupDirty:
		pctx, cancel = context.WithDeadline(ctx, l.lastGroupCommit.Add(l.e.opts.GroupCommitInterval))
	}
	defer cancel()
	recs, err := l.reader.Poll(pctx, min(maxPoll, l.e.opts.MaxBatch-l.pending))
	if err != nil && ctx.Err() == nil && pctx.Err() != nil {
		return nil, errDue
	}
	return recs, err
}

// apply applies records to the task, skipping those another partition
// applies and those forwarded again, and turning invalid ones into dead
// letters.
func (l *taskLoop) apply(recs []*eventlog.Record) error {
	defer l.busyFrom(time.Now())
	l.fresh.current.Store(false)
	e, st := l.e, l.tr.st
	for _, rec := range recs {
		tp := eventlog.TopicPartition{Topic: rec.Topic, Partition: rec.Partition}
		in, ok := l.inputs[tp]
		if !ok {
			return fmt.Errorf("reader returned record of unassigned partition %s", tp)
		}
		l.next[tp] = rec.Offset + 1
		l.pc.source = rec.Partition
		switch in.mode {
		case modeLocal:
			if key, ok := in.route(rec); ok && eventlog.PartitionFor(key, e.opts.Partitions) != l.tr.p {
				continue // the repartition stage forwards it to its partition
			}
		case modeForwarded:
			sp, so, err := sourceOf(rec)
			if err != nil {
				l.dlq = append(l.dlq, deadLetter(e.opts.DeadLetterTopic, st.name, rec, err.Error()))
				continue
			}
			if last, ok := l.srcApplied[sp]; ok && so <= last {
				e.m.duplicates.WithLabelValues(st.name).Inc()
				continue // forwarded again after a restart of the repartition stage
			}
			l.srcApplied[sp] = so
			l.dirtySrc[sp] = true
			l.pc.source = sp
		}
		l.recordsIn.Inc()
		l.applied++
		if reason, bad := l.tr.poisoned(tp, rec.Offset); bad {
			// A poison pill: dead-lettered, and the task moves on.
			l.dlq = append(l.dlq, deadLetter(e.opts.DeadLetterTopic, st.name, rec, reason))
			e.m.poison.WithLabelValues(st.name).Inc()
			e.opts.Logger.Warn("record dead-lettered after repeated failures", "stage", st.name, "partition", l.tr.p,
				"topic", tp.Topic, "topic_partition", tp.Partition, "offset", rec.Offset, "reason", reason)
			l.tr.applied(tp, rec.Offset)
			continue
		}
		counted := l.trace(in, rec)
		if err := l.process(rec); err != nil {
			reason, invalid := IsInvalid(err)
			if !invalid {
				l.tr.failed(tp, rec.Offset, err)
				return fmt.Errorf("process %s@%d: %w", tp, rec.Offset, err)
			}
			l.dlq = append(l.dlq, deadLetter(e.opts.DeadLetterTopic, st.name, rec, reason))
			if counted {
				l.vis.drop(in.idx) // a dead letter is not an event made visible
			}
		}
		l.tr.applied(tp, rec.Offset)
	}
	return nil
}

// endBatch lets a BatchEnder emit what the batch changed as a whole, with
// no record's lineage; a panic becomes an error, as in process.
func (l *taskLoop) endBatch() (err error) {
	be, ok := l.task.(BatchEnder)
	if !ok || l.applied == 0 {
		return nil
	}
	defer func() {
		if r := recover(); r != nil {
			err = &panicError{value: r, stack: debug.Stack()}
		}
	}()
	l.pc.ln.reset(0, nil)
	if err := be.EndBatch(&l.pc); err != nil {
		return fmt.Errorf("end batch: %w", err)
	}
	return nil
}

// process applies one record, turning a panic in the operator's code into
// an error (a panicError) that names the record.
func (l *taskLoop) process(rec *eventlog.Record) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &panicError{value: r, stack: debug.Stack()}
		}
	}()
	return l.task.Process(&l.pc, rec)
}

// trace notes the lineage of a record about to be applied: its origin, for
// the records it emits and the visibility latency of the commit, and its
// trace context, starting its span when the engine has a Tracer.
// It reports whether the record's origin was noted for the commit.
func (l *taskLoop) trace(in stageInput, rec *eventlog.Record) (counted bool) {
	origin := OriginOf(rec)
	counted = l.vis.add(in.idx, origin)
	parent, traced := rec.Header(HeaderTraceParent)
	if !traced {
		l.pc.ln.reset(origin, nil)
		return counted
	}
	child := parent
	if t := l.e.opts.Tracer; t != nil {
		var end func(error)
		child, end = t.Start(l.tr.st.name, l.tr.p, rec, parent)
		if end != nil {
			l.vis.spans = append(l.vis.spans, end)
		}
		if child == nil {
			child = parent
		}
	}
	l.pc.ln.reset(origin, child)
	return counted
}

// busyFrom counts the time since start as busy: the task's utilisation is
// the rate of newsflow_task_busy_seconds_total.
func (l *taskLoop) busyFrom(start time.Time) { l.busy.Add(time.Since(start).Seconds()) }

// commitDue is the commit policy after a batch: commit once caught up
// with every input and at least Spec.MinCommitInterval after the last
// commit, after MaxBatch records, or CommitInterval after the last commit.
func (l *taskLoop) commitDue() (caughtUp, due bool) {
	hws := l.reader.HighWatermarks()
	caughtUp = true
	for tp, o := range l.next {
		if hw, ok := hws[tp]; !ok || o < hw {
			caughtUp = false
		}
	}
	since := time.Since(l.lastCommit)
	return caughtUp, (caughtUp && since >= l.tr.st.minCommit) || l.pending >= l.e.opts.MaxBatch || since >= l.interval
}

// commit commits what was applied since the last commit (commitBatch),
// then tells the task, publishes progress and lag, and copies the offsets
// to the consumer group when that is due.
func (l *taskLoop) commit(caughtUp bool) error {
	defer l.busyFrom(time.Now())
	e, name := l.e, l.tr.st.name
	if err := l.commitBatch(); err != nil {
		return err
	}
	l.vis.committed(time.Now())
	l.task.Committed(CommitInfo{Records: l.applied, CaughtUp: caughtUp})
	hws := l.reader.HighWatermarks()
	current := true
	for tp, o := range l.next {
		hw, ok := hws[tp]
		if !ok {
			hw = -1
		}
		current = current && o >= hw
		e.setProgress(name, tp, o, hw)
		if ok {
			e.m.lag.WithLabelValues(name, tp.Topic, strconv.Itoa(int(tp.Partition))).Set(float64(max(0, hw-o)))
		}
	}
	l.pc.out, l.dlq = l.pc.out[:0], l.dlq[:0]
	clear(l.dirtySrc)
	l.pending, l.applied, l.lastCommit = 0, 0, time.Now()
	l.fresh.set(&sourceTask, l.lastCommit, current)
	l.groupDirty = l.gc != nil
	if l.groupDirty && time.Since(l.lastGroupCommit) >= e.opts.GroupCommitInterval {
		l.groupCommit()
	}
	return nil
}

// groupCommit copies the committed offsets to the consumer group, for lag
// monitoring; a failure is logged and retried at the next one.
func (l *taskLoop) groupCommit() {
	l.lastGroupCommit, l.groupDirty = time.Now(), false
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := l.gc.CommitGroupOffsets(ctx, "newsflow-"+l.tr.st.name, l.next); err != nil {
		l.e.opts.Logger.Warn("commit consumer group offsets", "stage", l.tr.st.name, "err", err)
	}
}

// commitBatch appends outputs and dead letters, then commits state, input
// offsets and source positions in one batch. Outputs go first so that a crash
// between the two repeats them (at least once) instead of losing them.
//
// In a cluster the batch goes to the task's changelog (cl) before the local
// commit, and only while the partition is still assigned to this node.
func (l *taskLoop) commitBatch() error {
	tr, e, m := l.tr, l.e, l.e.m
	if !e.owns(tr.p, tr.epoch) {
		return errRevoked
	}
	if err := l.endBatch(); err != nil {
		return err
	}
	task, ns, cl, out, dlq := l.task, l.ns, l.cl, l.pc.out, l.dlq
	next, srcApplied, dirtySrc := l.next, l.srcApplied, l.dirtySrc
	start := time.Now()
	// Appends use their own context: a batch that was applied is committed
	// even while shutting down.
	actx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if len(dlq) > 0 {
		dlqParts, err := e.log.Partitions(actx, e.opts.DeadLetterTopic)
		if err != nil {
			return fmt.Errorf("dead-letter topic: %w", err)
		}
		for _, r := range dlq {
			r.Partition = tr.p % dlqParts
		}
		if err := e.log.Append(actx, dlq); err != nil {
			return fmt.Errorf("append dead letters: %w", err)
		}
		for _, r := range dlq {
			reason, _ := r.Header(HeaderDLQReason)
			e.opts.Logger.Warn("record sent to dead-letter topic", "stage", tr.st.name, "reason", string(reason),
				"topic", string(mustHeader(r, HeaderDLQTopic)), "offset", string(mustHeader(r, HeaderDLQOffset)))
		}
		m.deadLetters.WithLabelValues(tr.st.name).Add(float64(len(dlq)))
	}
	if len(out) > 0 {
		if err := e.log.Append(actx, out); err != nil {
			return fmt.Errorf("append outputs: %w", err)
		}
		for _, r := range out {
			m.recordsOut.WithLabelValues(tr.st.name, r.Topic).Inc()
		}
	}
	b := ns.NewBatch()
	var w state.Writer = b
	var cw *captureWriter
	if cl != nil {
		cw = &captureWriter{b: b, ns: ns}
		w = cw
	}
	if err := task.Flush(w); err != nil {
		b.Discard()
		return fmt.Errorf("flush state: %w", err)
	}
	var buf [8]byte
	for tp, o := range next {
		binary.BigEndian.PutUint64(buf[:], uint64(o))
		if err := w.Set(offsetKey(tp), buf[:]); err != nil {
			b.Discard()
			return err
		}
	}
	for sp := range dirtySrc {
		binary.BigEndian.PutUint64(buf[:], uint64(srcApplied[sp]))
		if err := w.Set(sourceKey(sp), buf[:]); err != nil {
			b.Discard()
			return err
		}
	}
	if cw != nil {
		pos, err := cl.Commit(actx, cw.changes)
		if err != nil {
			b.Discard()
			return fmt.Errorf("commit changelog: %w", err)
		}
		if err := setChangelogPos(b, pos); err != nil {
			b.Discard()
			return err
		}
	}
	if err := b.Commit(); err != nil {
		return fmt.Errorf("commit state: %w", err)
	}
	m.commitSeconds.WithLabelValues(tr.st.name).Observe(time.Since(start).Seconds())
	return nil
}
