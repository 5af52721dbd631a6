// Package kafkalog implements [eventlog.Log] on a Kafka-compatible cluster
// with franz-go.
//
// A [Log] owns one client that produces and administers (topics, offsets,
// group commits); each [Reader] owns a consumer client of its own that reads
// fixed partitions at exact offsets, outside any consumer group. The engine
// picks partitions itself ([eventlog.PartitionFor], Kafka's murmur2), so the
// producer uses a manual partitioner and never re-partitions a record.
//
// Offsets of a consumer group are committed with [Log.CommitGroupOffsets]
// without joining the group, only so that standard Kafka tools show lag; the
// engine resumes from its own state, never from Kafka's commits.
package kafkalog

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/newsflow/newsflow/engine/eventlog"
)

var (
	_ eventlog.Log            = (*Log)(nil)
	_ eventlog.GroupCommitter = (*Log)(nil)
	_ eventlog.Reader         = (*Reader)(nil)
)

const (
	// topicWaitTimeout bounds how long CreateTopic waits for a new topic
	// to show up in metadata with a leader for every partition.
	topicWaitTimeout = 10 * time.Second
	// lookupTimeout bounds the metadata lookup NewReader may need, since
	// NewReader has no context of its own.
	lookupTimeout = 15 * time.Second
)

// Log is an [eventlog.Log] on a Kafka cluster. It is safe for concurrent
// use.
//
// produceMu and mu are never held together. mu is never held across a
// network call; produceMu is held while records are handed to the client,
// not while waiting for them to be acknowledged.
type Log struct {
	opts Options
	cl   *kgo.Client
	adm  *kadm.Client

	// ctx is cancelled by Close; it bounds lookups made without a caller
	// context.
	ctx    context.Context
	cancel context.CancelFunc
	closed atomic.Bool
	once   sync.Once

	// produceMu makes the records of one Append contiguous in each
	// partition's produce buffer, so they get consecutive offsets even
	// when Appends run concurrently.
	produceMu sync.Mutex

	mu struct {
		sync.Mutex
		// partitions caches partition counts of known topics. Kafka
		// partition counts only grow, so a hit is never wrong about
		// validity; a miss refreshes from metadata.
		partitions map[string]int32
	}
}

// Open connects to the cluster and returns a log. It fails if no broker
// answers before ctx is done.
func Open(ctx context.Context, opts Options) (*Log, error) {
	opts = opts.withDefaults()
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("kafka: options: %w", err)
	}
	sec, err := opts.securityOpts()
	if err != nil {
		return nil, fmt.Errorf("kafka: %w", err)
	}
	opts.security = sec
	var auth saslWatch
	cl, err := kgo.NewClient(opts.clientOpts(
		kgo.WithHooks(&auth),
		// The engine chooses partitions with eventlog.PartitionFor.
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		// Append waits for its records; lingering would only add
		// latency. Records buffered while a request is in flight are
		// still batched.
		kgo.ProducerLinger(0),
		kgo.ProducerBatchMaxBytes(opts.MaxMessageBytes),
	)...)
	if err != nil {
		return nil, fmt.Errorf("kafka: new client: %w", err)
	}
	if err := cl.Ping(ctx); err != nil {
		cl.Close()
		if opts.SASL.On() && (auth.failed.Load() || errors.Is(err, kerr.SaslAuthenticationFailed)) {
			return nil, fmt.Errorf("%w: brokers %v refused the %s login of user %q: %w",
				ErrAuthentication, opts.Brokers, strings.ToUpper(opts.SASL.Mechanism), opts.SASL.User, err)
		}
		return nil, fmt.Errorf("kafka: connect to brokers %v: %w", opts.Brokers, err)
	}
	l := &Log{opts: opts, cl: cl, adm: kadm.NewClient(cl)}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.mu.partitions = make(map[string]int32)
	return l, nil
}

// Close closes the log's client. Records of an Append still in flight fail
// with an error wrapping [eventlog.ErrClosed]. Close is idempotent.
func (l *Log) Close() error {
	l.once.Do(func() {
		l.closed.Store(true)
		l.cancel()
		l.cl.Close()
	})
	return nil
}

// CreateTopic creates topic with the given number of partitions, the
// configured replication factor and max.message.bytes.
func (l *Log) CreateTopic(ctx context.Context, topic string, partitions int32) error {
	if err := l.check(ctx); err != nil {
		return err
	}
	return l.createTopic(ctx, topic, partitions, nil)
}

// createTopic creates a topic with max.message.bytes and the given extra
// configs.
func (l *Log) createTopic(ctx context.Context, topic string, partitions int32, extra map[string]string) error {
	if partitions <= 0 {
		return fmt.Errorf("create topic %s: partition count %d must be positive", topic, partitions)
	}
	configs := map[string]*string{
		"max.message.bytes": kadm.StringPtr(strconv.Itoa(int(l.opts.MaxMessageBytes))),
	}
	for k, v := range extra {
		configs[k] = kadm.StringPtr(v)
	}
	_, err := l.adm.CreateTopic(ctx, partitions, l.opts.ReplicationFactor, configs, topic)
	switch {
	case errors.Is(err, kerr.TopicAlreadyExists):
		return fmt.Errorf("create topic %s: %w", topic, eventlog.ErrTopicExists)
	case err != nil:
		return fmt.Errorf("create topic %s: %w", topic, l.mapErr(err))
	}
	// Brokers learn of a new topic asynchronously. Wait until metadata
	// shows it, which also replaces any "unknown topic" the client may
	// have cached for it.
	if err := l.waitTopic(ctx, topic, partitions); err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	return nil
}

// waitTopic polls metadata until topic has n partitions, each with a leader.
func (l *Log) waitTopic(ctx context.Context, topic string, n int32) error {
	ctx, cancel := context.WithTimeout(ctx, topicWaitTimeout)
	defer cancel()
	backoff := 10 * time.Millisecond
	for {
		t, err := l.metadata(ctx, topic)
		if err == nil && int32(len(t.Partitions)) >= n && allLed(t) {
			return nil
		}
		if err != nil && !errors.Is(err, eventlog.ErrUnknownTopic) && !kerr.IsRetriable(err) {
			return err
		}
		timer := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			timer.Stop()
			if err == nil {
				err = errors.New("partitions without a leader")
			}
			return fmt.Errorf("wait for metadata: %w (last: %w)", ctx.Err(), err)
		case <-timer.C:
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

func allLed(t *kmsg.MetadataResponseTopic) bool {
	for _, p := range t.Partitions {
		if p.Leader < 0 || p.ErrorCode != 0 {
			return false
		}
	}
	return true
}

// Partitions returns the partition count of topic, asking the cluster each
// time.
func (l *Log) Partitions(ctx context.Context, topic string) (int32, error) {
	if err := l.check(ctx); err != nil {
		return 0, err
	}
	t, err := l.metadata(ctx, topic)
	if err != nil {
		return 0, fmt.Errorf("partitions of %s: %w", topic, err)
	}
	return int32(len(t.Partitions)), nil
}

// metadata asks the cluster (never the client's cache) about one topic and
// records its partition count. The request also refreshes the client's
// metadata cache, which kadm's requests use.
func (l *Log) metadata(ctx context.Context, topic string) (*kmsg.MetadataResponseTopic, error) {
	if topic == "" {
		return nil, eventlog.ErrUnknownTopic
	}
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = false
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, l.cl)
	if err != nil {
		return nil, l.mapErr(err)
	}
	for i := range resp.Topics {
		t := &resp.Topics[i]
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return nil, l.mapErr(err)
		}
		l.mu.Lock()
		l.mu.partitions[topic] = int32(len(t.Partitions))
		l.mu.Unlock()
		return t, nil
	}
	return nil, eventlog.ErrUnknownTopic
}

// validate checks that tp names an existing partition, from the cache when
// it can and from metadata when it must.
func (l *Log) validate(ctx context.Context, tp eventlog.TopicPartition) error {
	l.mu.Lock()
	n, ok := l.mu.partitions[tp.Topic]
	l.mu.Unlock()
	if !ok || tp.Partition >= n {
		t, err := l.metadata(ctx, tp.Topic)
		if err != nil {
			return err
		}
		n = int32(len(t.Partitions))
	}
	if tp.Partition < 0 || tp.Partition >= n {
		return fmt.Errorf("%w: %d not in [0, %d)", eventlog.ErrInvalidPartition, tp.Partition, n)
	}
	return nil
}

// Append produces recs and waits until every one is acknowledged by all
// in-sync replicas (the idempotent producer's default acks).
func (l *Log) Append(ctx context.Context, recs []*eventlog.Record) error {
	if err := l.check(ctx); err != nil {
		return err
	}
	if len(recs) == 0 {
		return nil
	}
	krs := make([]*kgo.Record, len(recs))
	seen := make(map[eventlog.TopicPartition]bool)
	for i, r := range recs {
		tp := eventlog.TopicPartition{Topic: r.Topic, Partition: r.Partition}
		if !seen[tp] {
			if err := l.validate(ctx, tp); err != nil {
				return fmt.Errorf("append to %s: %w", tp, err)
			}
			seen[tp] = true
		}
		krs[i] = toKgo(r)
	}

	var (
		wg   sync.WaitGroup
		errs = make([]error, len(krs))
	)
	wg.Add(len(krs))
	l.produceMu.Lock()
	for i, kr := range krs {
		l.cl.Produce(ctx, kr, func(_ *kgo.Record, err error) {
			errs[i] = err
			wg.Done()
		})
	}
	l.produceMu.Unlock()
	wg.Wait()

	for i, err := range errs {
		if err != nil {
			tp := eventlog.TopicPartition{Topic: recs[i].Topic, Partition: recs[i].Partition}
			return fmt.Errorf("append to %s: %w", tp, l.mapErr(err))
		}
	}
	for i, kr := range krs {
		recs[i].Offset = kr.Offset
	}
	return nil
}

func toKgo(r *eventlog.Record) *kgo.Record {
	kr := &kgo.Record{
		Topic:     r.Topic,
		Partition: r.Partition,
		Key:       r.Key,
		Value:     r.Value,
		Timestamp: time.UnixMilli(r.Timestamp),
	}
	if len(r.Headers) > 0 {
		kr.Headers = make([]kgo.RecordHeader, len(r.Headers))
		for i, h := range r.Headers {
			kr.Headers[i] = kgo.RecordHeader{Key: h.Key, Value: h.Value}
		}
	}
	return kr
}

// Offsets returns the log start offset and high watermark of tp.
func (l *Log) Offsets(ctx context.Context, tp eventlog.TopicPartition) (eventlog.Offsets, error) {
	if err := l.check(ctx); err != nil {
		return eventlog.Offsets{}, err
	}
	if err := l.validate(ctx, tp); err != nil {
		return eventlog.Offsets{}, fmt.Errorf("offsets of %s: %w", tp, err)
	}
	lo, err := l.adm.ListStartOffsets(ctx, tp.Topic)
	start, err := offsetIn(lo, err, tp)
	if err != nil {
		return eventlog.Offsets{}, fmt.Errorf("start offset of %s: %w", tp, l.mapErr(err))
	}
	lo, err = l.adm.ListEndOffsets(ctx, tp.Topic)
	end, err := offsetIn(lo, err, tp)
	if err != nil {
		return eventlog.Offsets{}, fmt.Errorf("end offset of %s: %w", tp, l.mapErr(err))
	}
	return eventlog.Offsets{Start: start, End: end}, nil
}

// OffsetForTime returns the first offset of tp whose record's timestamp is
// at or after ts, or the end offset if there is none.
func (l *Log) OffsetForTime(ctx context.Context, tp eventlog.TopicPartition, ts int64) (int64, error) {
	if err := l.check(ctx); err != nil {
		return 0, err
	}
	if err := l.validate(ctx, tp); err != nil {
		return 0, fmt.Errorf("offset for time of %s: %w", tp, err)
	}
	// Negative timestamps are Kafka's special requests (-1 latest, -2
	// earliest, ...). Every record is at or after a negative time, and no
	// record has a negative timestamp, so 0 gives the same answer.
	ts = max(ts, 0)
	lo, err := l.adm.ListOffsetsAfterMilli(ctx, ts, tp.Topic)
	off, err := offsetIn(lo, err, tp)
	if err != nil {
		return 0, fmt.Errorf("offset for time %d of %s: %w", ts, tp, l.mapErr(err))
	}
	return off, nil
}

// offsetIn returns the offset of tp in a kadm listing, or the listing's
// error (err, or the error of the topic or of the partition).
func offsetIn(lo kadm.ListedOffsets, err error, tp eventlog.TopicPartition) (int64, error) {
	if err != nil {
		return 0, err
	}
	if o, ok := lo.Lookup(tp.Topic, -1); ok && o.Err != nil {
		return 0, o.Err // the whole topic failed
	}
	o, ok := lo.Lookup(tp.Topic, tp.Partition)
	switch {
	case !ok:
		return 0, eventlog.ErrInvalidPartition
	case o.Err != nil:
		return 0, o.Err
	case o.Offset < 0:
		return 0, fmt.Errorf("broker listed offset %d", o.Offset)
	}
	return o.Offset, nil
}

// NewReader returns a reader of the given partitions, each starting at its
// offset. It checks that every partition exists, which may ask the cluster
// (bounded by a timeout, since NewReader has no context).
func (l *Log) NewReader(positions map[eventlog.TopicPartition]int64) (eventlog.Reader, error) {
	if l.closed.Load() {
		return nil, eventlog.ErrClosed
	}
	ctx, cancel := context.WithTimeout(l.ctx, lookupTimeout)
	defer cancel()
	for tp := range positions {
		if err := l.validate(ctx, tp); err != nil {
			if l.closed.Load() {
				return nil, eventlog.ErrClosed
			}
			return nil, fmt.Errorf("new reader of %s: %w", tp, err)
		}
	}
	return newReader(l.opts, positions)
}

// CommitGroupOffsets commits offsets (the next offset to read in each
// partition) for group without joining it, as a simple consumer would, so
// that kafka-consumer-groups and other tools show the group's lag.
func (l *Log) CommitGroupOffsets(ctx context.Context, group string, offsets map[eventlog.TopicPartition]int64) error {
	if err := l.check(ctx); err != nil {
		return err
	}
	if group == "" {
		return errors.New("commit group offsets: empty group")
	}
	if len(offsets) == 0 {
		return nil
	}
	var commits kadm.Offsets
	for tp, off := range offsets {
		if err := l.validate(ctx, tp); err != nil {
			return fmt.Errorf("commit group %s offset of %s: %w", group, tp, err)
		}
		commits.Add(kadm.Offset{Topic: tp.Topic, Partition: tp.Partition, At: off, LeaderEpoch: -1})
	}
	if err := l.adm.CommitAllOffsets(ctx, group, commits); err != nil {
		return fmt.Errorf("commit group %s offsets: %w", group, l.mapErr(err))
	}
	return nil
}

// check returns ErrClosed after Close and ctx's error if it is done.
func (l *Log) check(ctx context.Context) error {
	if l.closed.Load() {
		return eventlog.ErrClosed
	}
	return ctx.Err()
}

// mapErr adds the eventlog sentinel that callers branch on to a franz-go
// error, keeping the original in the chain.
func (l *Log) mapErr(err error) error {
	return mapErr(err, l.closed.Load())
}

func mapErr(err error, closed bool) error {
	switch {
	case errors.Is(err, kgo.ErrClientClosed),
		closed && errors.Is(err, context.Canceled):
		return fmt.Errorf("%w: %w", eventlog.ErrClosed, err)
	case errors.Is(err, kerr.UnknownTopicOrPartition),
		errors.Is(err, kerr.InvalidTopicException),
		errors.Is(err, kerr.UnknownTopicID):
		return fmt.Errorf("%w: %w", eventlog.ErrUnknownTopic, err)
	}
	return err
}
