package eventlog

import (
	"context"
	"errors"
	"fmt"
)

// Header is a record header. Keys need not be unique.
type Header struct {
	Key   string
	Value []byte
}

// Record is one entry of a partition.
//
// On append, Topic, Partition, Key, Value, Timestamp and Headers are read
// and Offset is ignored; the log fills Offset in. Records returned by a
// [Reader] are owned by the caller: the log does not reuse their slices.
type Record struct {
	Topic     string
	Partition int32
	Offset    int64
	Key       []byte
	Value     []byte
	Timestamp int64 // milliseconds since the Unix epoch
	Headers   []Header
}

// Header returns the value of the first header named key, if any.
func (r *Record) Header(key string) ([]byte, bool) {
	for _, h := range r.Headers {
		if h.Key == key {
			return h.Value, true
		}
	}
	return nil, false
}

// TopicPartition names one partition of a topic.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func (tp TopicPartition) String() string { return fmt.Sprintf("%s/%d", tp.Topic, tp.Partition) }

// Offsets describes the retained range of a partition: records with
// Start <= offset < End are readable. End is the offset the next appended
// record will get (Kafka's high watermark).
type Offsets struct {
	Start int64
	End   int64
}

// Log is a partitioned, durable record log.
//
// All methods are safe for concurrent use. Append returns only once the
// records are durable according to the backend's durability setting, and a
// record becomes visible to readers no earlier than that. Within one
// partition, records appended by one Append call keep their order and get
// consecutive offsets.
type Log interface {
	// CreateTopic creates a topic with the given number of partitions. It
	// returns an error wrapping ErrTopicExists if the topic already exists.
	CreateTopic(ctx context.Context, topic string, partitions int32) error

	// Partitions returns the partition count of a topic, or an error wrapping
	// ErrUnknownTopic.
	Partitions(ctx context.Context, topic string) (int32, error)

	// Append writes records to the partitions they name. Each record's
	// Partition must be valid for its topic; use PartitionFor to choose it.
	// On success every record's Offset is set. On error, some records may
	// have been written (the append is at least once, never reordered).
	Append(ctx context.Context, recs []*Record) error

	// Offsets returns the readable range of a partition.
	Offsets(ctx context.Context, tp TopicPartition) (Offsets, error)

	// OffsetForTime returns the offset of the first record of the partition
	// whose timestamp is >= ts, or the end offset if there is none (Kafka's
	// ListOffsets by timestamp).
	OffsetForTime(ctx context.Context, tp TopicPartition, ts int64) (int64, error)

	// NewReader returns a reader positioned at the given offsets. An offset
	// below the partition's start reads from the start.
	NewReader(positions map[TopicPartition]int64) (Reader, error)

	// Close releases the log. Readers must be closed first.
	Close() error
}

// Reader reads records from a fixed set of partitions, in offset order
// within each partition. A Reader is used by one goroutine at a time.
type Reader interface {
	// Poll returns the next records, at most max of them, blocking until at
	// least one is available or ctx is done (then it returns ctx.Err()).
	// Records of one partition come in offset order with no gaps other than
	// those left by retention.
	Poll(ctx context.Context, max int) ([]*Record, error)

	// HighWatermarks returns the end offset of each partition as last seen
	// by the reader, for lag reporting. It may lag behind the log.
	HighWatermarks() map[TopicPartition]int64

	// Close stops the reader and releases its resources.
	Close() error
}

// Sentinel errors callers branch on.
var (
	ErrTopicExists      = errors.New("topic already exists")
	ErrUnknownTopic     = errors.New("unknown topic")
	ErrInvalidPartition = errors.New("invalid partition")
	ErrClosed           = errors.New("log closed")
)

// EnsureTopic creates topic with the given partition count unless it exists.
// It returns the partition count the topic has, which may differ from
// partitions when the topic was created elsewhere.
func EnsureTopic(ctx context.Context, l Log, topic string, partitions int32) (int32, error) {
	n, err := l.Partitions(ctx, topic)
	if err == nil {
		return n, nil
	}
	if !errors.Is(err, ErrUnknownTopic) {
		return 0, err
	}
	if err := l.CreateTopic(ctx, topic, partitions); err != nil && !errors.Is(err, ErrTopicExists) {
		return 0, fmt.Errorf("create topic %s: %w", topic, err)
	}
	return l.Partitions(ctx, topic)
}

// GroupCommitter is implemented by backends whose consumer-group offsets
// outside tools read (Kafka). The engine commits the offsets it has made
// durable in its own state after each state commit, purely so that standard
// tools show lag; the engine itself resumes from its state, never from here.
type GroupCommitter interface {
	CommitGroupOffsets(ctx context.Context, group string, offsets map[TopicPartition]int64) error
}
