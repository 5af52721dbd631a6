package engine

import (
	"strconv"

	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/state"
)

// repartitionTask forwards the records of one source partition whose route
// key belongs to another partition to the repartition topic. It keeps no
// state besides its input offset, which the engine commits after the
// forwarded records are appended.
type repartitionTask struct {
	stage      string
	topic      string
	route      func(*eventlog.Record) ([]byte, bool)
	partitions int32
	source     int32
	srcPart    []byte
}

func newRepartitionTask(stage, topic string, route func(*eventlog.Record) ([]byte, bool), partitions int32) func(TaskContext) (Task, error) {
	return func(tc TaskContext) (Task, error) {
		return &repartitionTask{stage: stage, topic: topic, route: route, partitions: partitions,
			source: tc.Partition, srcPart: []byte(strconv.Itoa(int(tc.Partition)))}, nil
	}
}

func (t *repartitionTask) Restore(state.Reader) error { return nil }

func (t *repartitionTask) Process(pc *ProcessContext, rec *eventlog.Record) error {
	key, ok := t.route(rec)
	if !ok {
		if t.source >= t.partitions {
			// No operator task reads this source partition directly.
			return Invalid("no co-location key")
		}
		return nil // the operator task of this partition rejects it
	}
	target := eventlog.PartitionFor(key, t.partitions)
	if target == t.source {
		return nil // the operator task reads it from the source directly
	}
	hs := make([]eventlog.Header, 0, len(rec.Headers)+2)
	hs = append(hs, rec.Headers...)
	hs = append(hs,
		eventlog.Header{Key: HeaderSourcePartition, Value: t.srcPart},
		eventlog.Header{Key: HeaderSourceOffset, Value: []byte(strconv.FormatInt(rec.Offset, 10))})
	pc.Emit(&eventlog.Record{Topic: t.topic, Partition: target, Key: key, Value: rec.Value, Timestamp: rec.Timestamp, Headers: hs})
	return nil
}

func (t *repartitionTask) Flush(state.Writer) error { return nil }
func (t *repartitionTask) Committed(CommitInfo)     {}
func (t *repartitionTask) Close() error             { return nil }
