package engine

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/state"
	"github.com/prometheus/client_golang/prometheus"
)

// Spec declares an operator so the topology can be listed and validated.
type Spec struct {
	// Name identifies the operator; it names its state namespaces, its
	// consumer group and its repartition topics, so it must not change.
	Name        string
	Description string
	Inputs      []Input
	// Outputs lists the topics the operator writes with Emit.
	Outputs []string
	// Stores describes the state the operator keeps, for the topology listing.
	Stores []string
	// Options is the operator's configuration, shown by the topology listing.
	Options any
	// MinCommitInterval, if set, is the least time between two commits of
	// a task, also when it has caught up: for operators whose commits are
	// expensive (an external index that must be made durable first), so
	// that they apply larger batches. Their outputs and query views lag by
	// up to this much.
	MinCommitInterval time.Duration
	// LocalState marks an operator whose state is derived from its inputs
	// alone and kept only on the node (an external index). In a cluster it
	// has no changelog: a node that gains one of its partitions without the
	// state rebuilds it by reading the inputs again from its local offsets,
	// or from the start.
	LocalState bool
	// Singleton marks an operator that needs one total order of all its
	// input: the engine runs one task, the task of partition 0
	// ([SingletonPartition]), reading partition 0 of each input (its
	// producers write every record there), with one changelog partition.
	// In a cluster it runs on the owner of partition 0, whose share of
	// the assignment weighs it ([Engine.PartitionWeights]). A singleton's
	// inputs may not declare a Route.
	Singleton bool
	// Standby asks for a standby copy of the state on every node of a
	// cluster that does not run a partition's task, applied from the
	// changelog commit by commit (see standby.go): a node that gains the
	// partition restores only the changelog's tail, and an operator that
	// is a [Follower] answers queries from the copy on every node. Not
	// with LocalState.
	Standby bool
}

// SingletonPartition is the partition whose owner runs the task of every
// singleton operator (Spec.Singleton).
const SingletonPartition int32 = 0

// Input is one input topic of an operator.
type Input struct {
	Topic string
	// Key describes the co-location key, e.g. "article_id".
	Key string
	// Route, if set, returns the co-location key of a record. All records
	// with the same key are then processed by the same task, whatever
	// partitioner produced them. ok is false for records whose key cannot be
	// determined; they go to the task of the partition they were read from,
	// whose Process rejects them. Route must be deterministic and safe for
	// concurrent use.
	Route func(rec *eventlog.Record) (key []byte, ok bool)
}

// Operator is a registered dataflow component.
type Operator interface {
	Spec() Spec
	// NewTask creates the task for one partition. It is called each time the
	// task (re)starts; the previous instance has been closed by then.
	NewTask(tc TaskContext) (Task, error)
}

// TaskContext is what the engine gives a task.
type TaskContext struct {
	Operator  string
	Partition int32
	// Partitions is the operator's partition count.
	Partitions int32
	Logger     *slog.Logger
	// Registerer registers the operator's own metrics; it is shared by all
	// partitions, so register once per operator (see Metrics helpers).
	Registerer prometheus.Registerer
}

// Task processes one partition of an operator.
//
// All methods are called from the task's goroutine, never concurrently.
// State keys that begin with 0xff are reserved for the engine.
type Task interface {
	// Restore loads the state committed by earlier instances. r stays valid
	// until Close and always reads the latest committed state (never the
	// batch being applied), so a task may keep it to look up state it does
	// not hold in memory, and queries may read through it concurrently.
	Restore(r state.Reader) error
	// Process applies one record to the task's in-memory state. An error
	// made with Invalid sends the record to the dead-letter topic; any other
	// error, or a panic, restarts the task from its committed state.
	Process(pc *ProcessContext, rec *eventlog.Record) error
	// Flush stages every state change since the last Flush into w. The
	// engine adds the input offsets and commits the batch atomically.
	Flush(w state.Writer) error
	// Committed is called after a batch has been committed.
	Committed(info CommitInfo)
	// Close releases the task. It is called once, also after errors.
	Close() error
}

// BatchEnder is a Task that emits at the end of each batch: what a batch
// changed as a whole (a partition's top K after all its shares, say)
// rather than per record. EndBatch is called on the task's goroutine after
// the batch's last Process and before its outputs are appended, so what it
// emits commits with the batch (at least once, like every output). It is
// called only for a batch that applied records; an error restarts the
// task from its committed state, as an error of Process does.
type BatchEnder interface {
	EndBatch(pc *ProcessContext) error
}

// CommitInfo describes a committed batch.
type CommitInfo struct {
	// Records is the number of records the batch applied.
	Records int
	// CaughtUp is true when the task had read everything its inputs held as
	// far as it knew: a good moment to publish query views.
	CaughtUp bool
}

// ProcessContext carries what the engine knows about the current record and
// collects the task's outputs for the current batch.
type ProcessContext struct {
	out    []*eventlog.Record
	source int32
	ln     lineage // of the current record
	// next is the task loop's next offset of each input.
	next map[eventlog.TopicPartition]int64
}

// Position is the sum of the task's next offsets in its inputs: it grows
// with every record the task passes, and a task restarted from its
// committed state passes the same positions again while it applies again
// what it had applied. A task that puts its position into what it emits
// lets a consumer tell progress from a repeat (a past state emitted again).
func (pc *ProcessContext) Position() int64 {
	var n int64
	for _, o := range pc.next {
		n += o
	}
	return n
}

// Source is the partition of the source topic the current record was first
// written to: the partition it was read from, or, for a record forwarded by
// a repartition stage, the partition it was forwarded from. Records of one
// source partition reach a task in their log order, so per-source event
// time is the order a task can rely on.
func (pc *ProcessContext) Source() int32 { return pc.source }

// TraceParent is the trace context of the current record's application,
// the HeaderTraceParent its emitted records get: the span the engine's
// Tracer started for it, else the record's own header; nil when the record
// is not traced. The bytes are shared: copy them to keep them.
func (pc *ProcessContext) TraceParent() []byte { return pc.ln.trace }

// Emit queues a record for an output topic declared in the Spec. Partition
// must be set (use eventlog.PartitionFor). Outputs are appended before the
// batch commits, so they are at least once: give them deterministic ids.
// The record gets the current record's origin and trace headers
// (HeaderOrigin, HeaderTraceParent) unless it has its own.
func (pc *ProcessContext) Emit(rec *eventlog.Record) {
	pc.ln.stamp(rec)
	pc.out = append(pc.out, rec)
}

// InvalidError marks input that can never be processed.
type InvalidError struct {
	Reason string
}

func (e *InvalidError) Error() string { return "invalid input: " + e.Reason }

// Invalid returns an error that sends the current record to the dead-letter
// topic with the given reason.
func Invalid(format string, args ...any) error {
	return &InvalidError{Reason: fmt.Sprintf(format, args...)}
}

// IsInvalid reports whether err marks invalid input, and its reason.
func IsInvalid(err error) (string, bool) {
	var ie *InvalidError
	if errors.As(err, &ie) {
		return ie.Reason, true
	}
	return "", false
}
