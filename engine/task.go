package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/state"
)

// stage is a runnable node: an operator or a repartition stage.
type stage struct {
	name       string
	partitions int32
	newTask    func(TaskContext) (Task, error)
	inputs     map[int32][]stageInput
	minCommit  time.Duration // Spec.MinCommitInterval
	localState bool          // Spec.LocalState
}

type inputMode uint8

const (
	modeAll       inputMode = iota // apply every record
	modeLocal                      // apply records whose route key belongs to this partition
	modeForwarded                  // records from a repartition topic, deduplicated by source offset
)

type stageInput struct {
	tp    eventlog.TopicPartition
	mode  inputMode
	route func(*eventlog.Record) ([]byte, bool)
}

// Headers the repartition stage adds to forwarded records.
const (
	HeaderSourcePartition = "nf-src-partition"
	HeaderSourceOffset    = "nf-src-offset"
)

// Headers on dead-letter records.
const (
	HeaderDLQReason    = "nf-dlq-reason"
	HeaderDLQStage     = "nf-dlq-stage"
	HeaderDLQTopic     = "nf-dlq-topic"
	HeaderDLQPartition = "nf-dlq-partition"
	HeaderDLQOffset    = "nf-dlq-offset"
)

// Engine-reserved state keys (all start with 0xff).
var (
	keyOffsetPrefix = []byte{0xff, 'o'} // + topic + 0 + partition u32: next offset u64
	keySourcePrefix = []byte{0xff, 's'} // + source partition u32: highest applied source offset i64
)

func offsetKey(tp eventlog.TopicPartition) []byte {
	k := append([]byte(nil), keyOffsetPrefix...)
	k = append(k, tp.Topic...)
	k = append(k, 0)
	return binary.BigEndian.AppendUint32(k, uint32(tp.Partition))
}

func sourceKey(p int32) []byte {
	return binary.BigEndian.AppendUint32(append([]byte(nil), keySourcePrefix...), uint32(p))
}

func namespaceName(stage string, p int32) string { return "task/" + stage + "/" + strconv.Itoa(int(p)) }

type taskRunner struct {
	e     *Engine
	st    *stage
	p     int32
	epoch uint64 // cluster mode: the assignment's epoch

	restored atomic.Bool // restored its state at least once
}

// run runs the task until ctx is done, restarting it from its committed
// state after errors.
func (tr *taskRunner) run(ctx context.Context) error {
	log := tr.e.opts.Logger.With("stage", tr.st.name, "partition", tr.p)
	backoff := tr.e.opts.RestartBackoff
	for {
		start := time.Now()
		err := tr.runOnce(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if !tr.e.owns(tr.p, tr.epoch) {
			// Revoked: the engine cancels ctx; never claim the changelog
			// again in the meantime.
			log.Info("task stopped: partition revoked", "err", err)
			<-ctx.Done()
			return nil
		}
		tr.e.m.taskRestarts.WithLabelValues(tr.st.name).Inc()
		if time.Since(start) > time.Minute {
			backoff = tr.e.opts.RestartBackoff
		}
		delay := backoff/2 + rand.N(backoff/2+1)
		log.Error("task failed; restarting from committed state", "err", err, "in", delay)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(delay):
		}
		backoff = min(2*backoff, tr.e.opts.MaxRestartBackoff)
	}
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
	e, p := tr.e, tr.p
	ns := e.db.Namespace(namespaceName(tr.st.name, p))
	task, err := tr.st.newTask(TaskContext{
		Operator: tr.st.name, Partition: p, Partitions: e.opts.Partitions,
		Logger: e.opts.Logger.With("stage", tr.st.name, "partition", p), Registerer: e.opts.Registerer,
	})
	if err != nil {
		return fmt.Errorf("new task: %w", err)
	}
	defer func() {
		if cerr := task.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close task: %w", cerr)
		}
	}()
	var cl eventlog.Changelog
	if e.opts.Cluster && !tr.st.localState {
		if cl, err = tr.restoreChangelog(ctx, ns); err != nil {
			return err
		}
		defer cl.Close()
	}
	if err := task.Restore(ns); err != nil {
		return fmt.Errorf("restore: %w", err)
	}

	inputs := map[eventlog.TopicPartition]stageInput{}
	next := map[eventlog.TopicPartition]int64{}
	for _, in := range tr.st.inputs[p] {
		inputs[in.tp] = in
		off, err := readInt64(ns, offsetKey(in.tp), 0)
		if err != nil {
			return fmt.Errorf("read offset %s: %w", in.tp, err)
		}
		next[in.tp] = off
		e.setProgress(tr.st.name, in.tp, off, -1)
	}
	srcApplied := map[int32]int64{} // highest source offset applied, per source partition
	if err := ns.Scan(keySourcePrefix, state.PrefixEnd(keySourcePrefix), func(k, v []byte) error {
		if len(k) != len(keySourcePrefix)+4 || len(v) != 8 {
			return fmt.Errorf("corrupt source offset key %x", k)
		}
		srcApplied[int32(binary.BigEndian.Uint32(k[len(keySourcePrefix):]))] = int64(binary.BigEndian.Uint64(v))
		return nil
	}); err != nil {
		return fmt.Errorf("read source offsets: %w", err)
	}

	pos := make(map[eventlog.TopicPartition]int64, len(next))
	for tp, o := range next {
		pos[tp] = o
	}
	reader, err := e.log.NewReader(pos)
	if err != nil {
		return fmt.Errorf("open reader: %w", err)
	}
	defer reader.Close()

	tr.restored.Store(true)

	gc, _ := e.log.(eventlog.GroupCommitter)
	var lastGroupCommit time.Time
	dirtySrc := map[int32]bool{}
	pc := &ProcessContext{}
	var dlq []*eventlog.Record
	m := e.m
	recordsIn := m.recordsIn.WithLabelValues(tr.st.name)
	pending, applied := 0, 0 // records read and applied since the last commit
	lastCommit := time.Now()
	// Committed offsets not yet copied to the consumer group. A restored
	// task copies them once: its previous instance may have died between
	// its last state commit and the group commit.
	groupDirty := gc != nil
	groupCommit := func() {
		lastGroupCommit, groupDirty = time.Now(), false
		gctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := gc.CommitGroupOffsets(gctx, "newsflow-"+tr.st.name, next); err != nil {
			e.opts.Logger.Warn("commit consumer group offsets", "stage", tr.st.name, "err", err)
		}
	}
	commit := func(caughtUp bool) error {
		if err := tr.commit(task, ns, cl, pc.out, dlq, next, srcApplied, dirtySrc); err != nil {
			return err
		}
		task.Committed(CommitInfo{Records: applied, CaughtUp: caughtUp})
		hws := reader.HighWatermarks()
		for tp, o := range next {
			hw, ok := hws[tp]
			if !ok {
				hw = -1
			}
			e.setProgress(tr.st.name, tp, o, hw)
			if ok {
				m.lag.WithLabelValues(tr.st.name, tp.Topic, strconv.Itoa(int(tp.Partition))).Set(float64(max(0, hw-o)))
			}
		}
		pc.out, dlq = pc.out[:0], dlq[:0]
		clear(dirtySrc)
		pending, applied, lastCommit = 0, 0, time.Now()
		groupDirty = gc != nil
		if groupDirty && time.Since(lastGroupCommit) >= e.opts.GroupCommitInterval {
			groupCommit()
		}
		return nil
	}
	interval := max(e.opts.CommitInterval, tr.st.minCommit)
	for {
		// With applied but uncommitted records, wait for more input no
		// longer than until the commit is due; with committed offsets not
		// yet copied to the consumer group, until that is due.
		pctx, cancel := ctx, context.CancelFunc(func() {})
		switch {
		case pending > 0:
			pctx, cancel = context.WithDeadline(ctx, lastCommit.Add(interval))
		case groupDirty:
			pctx, cancel = context.WithDeadline(ctx, lastGroupCommit.Add(e.opts.GroupCommitInterval))
		}
		recs, err := reader.Poll(pctx, min(maxPoll, e.opts.MaxBatch-pending))
		cancel()
		if err != nil {
			switch {
			case ctx.Err() != nil:
				// Shutting down: commit what was applied, then stop.
				if pending > 0 {
					return commit(false)
				}
				return nil
			case pctx.Err() != nil && pending > 0:
				if err := commit(false); err != nil {
					return err
				}
				continue
			case pctx.Err() != nil:
				groupCommit()
				continue
			}
			return fmt.Errorf("poll: %w", err)
		}
		pending += len(recs)
		for _, rec := range recs {
			tp := eventlog.TopicPartition{Topic: rec.Topic, Partition: rec.Partition}
			in, ok := inputs[tp]
			if !ok {
				return fmt.Errorf("reader returned record of unassigned partition %s", tp)
			}
			next[tp] = rec.Offset + 1
			pc.source = rec.Partition
			switch in.mode {
			case modeLocal:
				if key, ok := in.route(rec); ok && eventlog.PartitionFor(key, e.opts.Partitions) != p {
					continue // the repartition stage forwards it to its partition
				}
			case modeForwarded:
				sp, so, err := sourceOf(rec)
				if err != nil {
					dlq = append(dlq, deadLetter(e.opts.DeadLetterTopic, tr.st.name, rec, err.Error()))
					continue
				}
				if last, ok := srcApplied[sp]; ok && so <= last {
					m.duplicates.WithLabelValues(tr.st.name).Inc()
					continue // forwarded again after a restart of the repartition stage
				}
				srcApplied[sp] = so
				dirtySrc[sp] = true
				pc.source = sp
			}
			recordsIn.Inc()
			applied++
			if err := task.Process(pc, rec); err != nil {
				reason, invalid := IsInvalid(err)
				if !invalid {
					return fmt.Errorf("process %s@%d: %w", tp, rec.Offset, err)
				}
				dlq = append(dlq, deadLetter(e.opts.DeadLetterTopic, tr.st.name, rec, reason))
			}
		}
		hws := reader.HighWatermarks()
		caughtUp := true
		for tp, o := range next {
			if hw, ok := hws[tp]; !ok || o < hw {
				caughtUp = false
			}
		}
		since := time.Since(lastCommit)
		if (caughtUp && since >= tr.st.minCommit) || pending >= e.opts.MaxBatch || since >= interval {
			if err := commit(caughtUp); err != nil {
				return err
			}
		}
	}
}

// maxPoll caps the records one Poll returns.
const maxPoll = 8192

// commit appends outputs and dead letters, then commits state, input offsets
// and source positions in one batch. Outputs go first so that a crash
// between the two repeats them (at least once) instead of losing them.
//
// In a cluster the batch goes to the task's changelog (cl) before the local
// commit, and only while the partition is still assigned to this node.
func (tr *taskRunner) commit(task Task, ns state.Namespace, cl eventlog.Changelog, out, dlq []*eventlog.Record,
	next map[eventlog.TopicPartition]int64, srcApplied map[int32]int64, dirtySrc map[int32]bool) error {
	e, m := tr.e, tr.e.m
	if !e.owns(tr.p, tr.epoch) {
		return errRevoked
	}
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

func mustHeader(r *eventlog.Record, k string) []byte { v, _ := r.Header(k); return v }

// maxDeadLetterValue bounds the copy of a bad record kept in the dead-letter
// topic; the source topic, partition and offset headers locate the original.
const maxDeadLetterValue = 512 << 10

func deadLetter(topic, stage string, rec *eventlog.Record, reason string) *eventlog.Record {
	v := rec.Value
	hs := make([]eventlog.Header, 0, len(rec.Headers)+6)
	hs = append(hs, rec.Headers...)
	if len(v) > maxDeadLetterValue {
		v = v[:maxDeadLetterValue]
		hs = append(hs, eventlog.Header{Key: "nf-dlq-truncated", Value: []byte(strconv.Itoa(len(rec.Value)))})
	}
	hs = append(hs,
		eventlog.Header{Key: HeaderDLQReason, Value: []byte(reason)},
		eventlog.Header{Key: HeaderDLQStage, Value: []byte(stage)},
		eventlog.Header{Key: HeaderDLQTopic, Value: []byte(rec.Topic)},
		eventlog.Header{Key: HeaderDLQPartition, Value: []byte(strconv.Itoa(int(rec.Partition)))},
		eventlog.Header{Key: HeaderDLQOffset, Value: []byte(strconv.FormatInt(rec.Offset, 10))},
	)
	return &eventlog.Record{Topic: topic, Key: rec.Key, Value: v, Timestamp: rec.Timestamp, Headers: hs}
}

func sourceOf(rec *eventlog.Record) (int32, int64, error) {
	ps, ok1 := rec.Header(HeaderSourcePartition)
	os, ok2 := rec.Header(HeaderSourceOffset)
	if !ok1 || !ok2 {
		return 0, 0, errors.New("repartition record without source headers")
	}
	p, err1 := strconv.ParseInt(string(ps), 10, 32)
	o, err2 := strconv.ParseInt(string(os), 10, 64)
	if err1 != nil || err2 != nil || p < 0 || o < 0 {
		return 0, 0, errors.New("repartition record with malformed source headers")
	}
	return int32(p), o, nil
}

func readInt64(r state.Reader, key []byte, def int64) (int64, error) {
	v, ok, err := r.Get(key)
	if err != nil || !ok {
		return def, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("corrupt value for key %x", key)
	}
	return int64(binary.BigEndian.Uint64(v)), nil
}
