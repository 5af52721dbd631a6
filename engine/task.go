package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
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
	standby    bool          // Spec.Standby
	follower   Follower      // the operator, when standby and a Follower
	fresh      []*freshness  // per partition: how current this node's state is
	// repartition marks a repartition stage; forwardedFrom maps an
	// operator's repartition topics to the input topics they forward.
	repartition   bool
	forwardedFrom map[string]string
	pause         pause
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
	idx   int // the input's place in its task's inputs (set by the task loop)
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

	// suspect is the record whose apply failed last and how many times in
	// a row; it belongs to run's goroutine (runOnce runs on it).
	suspect suspect

	restored  atomic.Bool  // restored its state at least once (Ready)
	restoring atomic.Bool  // opening: restoring its state, or about to again after a failure
	opened    atomic.Int64 // ms since the epoch when the current restoring began
}

// suspect is a record whose apply failed.
type suspect struct {
	tp       eventlog.TopicPartition
	offset   int64
	failures int
	reason   string
}

// failed notes that applying the record at tp/offset failed with err.
func (tr *taskRunner) failed(tp eventlog.TopicPartition, offset int64, err error) {
	s := &tr.suspect
	if s.failures == 0 || s.tp != tp || s.offset != offset {
		*s = suspect{tp: tp, offset: offset}
	}
	s.failures++
	s.reason = firstLine(err.Error())
}

// poisoned reports whether the record at tp/offset has failed too often
// to be applied again, and why.
func (tr *taskRunner) poisoned(tp eventlog.TopicPartition, offset int64) (string, bool) {
	s, limit := &tr.suspect, tr.e.opts.MaxRecordFailures
	if limit < 0 || s.failures < limit || s.tp != tp || s.offset != offset {
		return "", false
	}
	return fmt.Sprintf("applying it failed %d times in a row: %s", s.failures, s.reason), true
}

// applied notes that the record at tp/offset was applied, or dead-lettered.
func (tr *taskRunner) applied(tp eventlog.TopicPartition, offset int64) {
	if tr.suspect.failures > 0 && tr.suspect.tp == tp && tr.suspect.offset == offset {
		tr.suspect = suspect{}
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	const max = 1024
	if len(s) > max {
		s = s[:max] + "…"
	}
	return s
}

// panicError is a panic in an operator's Process, with its stack.
type panicError struct {
	value any
	stack []byte
}

func (e *panicError) Error() string { return fmt.Sprintf("panic: %v\n%s", e.value, e.stack) }

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
		// Until it has restored again, the task is not running.
		if !tr.restoring.Swap(true) {
			tr.opened.Store(time.Now().UnixMilli())
		}
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

// maxPoll caps the records one Poll returns.
const maxPoll = 8192

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
