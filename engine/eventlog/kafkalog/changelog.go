package kafkalog

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Changelog topics are compacted: Kafka keeps the latest record of every
// key, so a restore reads about as many records as the state has keys.
// Tombstones (deletes) are kept for ChangelogDeleteRetention; a node whose
// local copy of a task's state is older than that restores the task from
// the beginning instead of from its last position (see engine).
const ChangelogDeleteRetention = 24 * time.Hour

// fenceKey is the key of the record a writer appends when it claims a
// changelog partition. Task state keys never start with 0xff 0xfe.
var fenceKey = []byte("\xff\xfenewsflow-claim")

// markKey is the key of the record that ends every commit; its value is
// the commit's wall time (ms since the epoch, 8 bytes big-endian). A
// follower applies what it read when it reaches one: records of a
// transaction may come in separate fetches, and Kafka's own commit markers
// never reach consumers. Compaction keeps only the last mark, which is the
// end of the last commit.
var markKey = []byte("\xff\xfdnewsflow-commit")

// boundary reports whether r ends a commit (a mark) or is a claim (a
// transaction of its own), and the commit's wall time for a mark.
func boundary(r *kgo.Record) (time.Time, bool) {
	switch {
	case bytes.Equal(r.Key, markKey):
		if len(r.Value) == 8 {
			return time.UnixMilli(int64(binary.BigEndian.Uint64(r.Value))), true
		}
		return time.Time{}, true
	case bytes.Equal(r.Key, fenceKey):
		return time.Time{}, true
	}
	return time.Time{}, false
}

// changelogTxnTimeout bounds how long a transaction may stay open. A writer
// that dies mid-commit blocks readers of the partition (read_committed)
// until the next writer claims it, which aborts the transaction, or until
// this timeout.
const changelogTxnTimeout = time.Minute

// EnsureChangelogTopic implements [eventlog.Changelogs]: it creates a
// compacted topic unless it exists.
func (l *Log) EnsureChangelogTopic(ctx context.Context, topic string, partitions int32) (int32, error) {
	n, err := l.Partitions(ctx, topic)
	if err == nil {
		return n, nil
	}
	if !errors.Is(err, eventlog.ErrUnknownTopic) {
		return 0, err
	}
	err = l.createTopic(ctx, topic, partitions, map[string]string{
		"cleanup.policy":      "compact",
		"delete.retention.ms": strconv.FormatInt(ChangelogDeleteRetention.Milliseconds(), 10),
	})
	if err != nil && !errors.Is(err, eventlog.ErrTopicExists) {
		return 0, err
	}
	return l.Partitions(ctx, topic)
}

// OpenChangelog implements [eventlog.Changelogs]. The writer name is the
// Kafka transactional id: the broker gives each new producer of that id a
// higher epoch and refuses commits of older ones. Opening writes a claim
// record in a transaction of its own; Restore reads up to it.
func (l *Log) OpenChangelog(ctx context.Context, tp eventlog.TopicPartition, writer string) (eventlog.Changelog, error) {
	if err := l.check(ctx); err != nil {
		return nil, err
	}
	if err := l.validate(ctx, tp); err != nil {
		return nil, fmt.Errorf("changelog %s: %w", tp, err)
	}
	cl, err := kgo.NewClient(l.opts.clientOpts(
		kgo.TransactionalID(writer),
		kgo.TransactionTimeout(changelogTxnTimeout),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0),
		kgo.ProducerBatchMaxBytes(l.opts.MaxMessageBytes),
	)...)
	if err != nil {
		return nil, fmt.Errorf("changelog %s: %w", tp, err)
	}
	c := &changelog{l: l, tp: tp, cl: cl}
	claim := eventlog.Change{Key: fenceKey, Value: []byte(writer + " " + strconv.FormatInt(time.Now().UnixNano(), 10))}
	if _, err := c.Commit(ctx, []eventlog.Change{claim}); err != nil {
		cl.Close()
		return nil, fmt.Errorf("claim changelog %s: %w", tp, err)
	}
	c.claim = c.last
	return c, nil
}

type changelog struct {
	l     *Log
	tp    eventlog.TopicPartition
	cl    *kgo.Client
	last  int64 // offset of the last record committed
	claim int64 // offset of the claim record
}

// Commit implements [eventlog.Changelog].
func (c *changelog) Commit(ctx context.Context, changes []eventlog.Change) (int64, error) {
	if len(changes) == 0 {
		return c.last + 1, nil
	}
	if err := c.cl.BeginTransaction(); err != nil {
		return 0, c.mapErr(err)
	}
	recs := make([]*kgo.Record, len(changes), len(changes)+1)
	for i, ch := range changes {
		r := &kgo.Record{Topic: c.tp.Topic, Partition: c.tp.Partition, Key: ch.Key}
		if !ch.Delete {
			// A nil value is a tombstone; an empty value must stay a value.
			r.Value = ch.Value
			if r.Value == nil {
				r.Value = []byte{}
			}
		}
		recs[i] = r
	}
	if !bytes.Equal(changes[0].Key, fenceKey) {
		recs = append(recs, &kgo.Record{Topic: c.tp.Topic, Partition: c.tp.Partition, Key: markKey,
			Value: binary.BigEndian.AppendUint64(nil, uint64(time.Now().UnixMilli()))})
	}
	if err := c.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		c.abort()
		return 0, c.mapErr(err)
	}
	if err := c.cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		c.abort()
		return 0, c.mapErr(err)
	}
	c.last = recs[len(recs)-1].Offset
	return c.last + 1, nil
}

func (c *changelog) abort() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = c.cl.AbortBufferedRecords(ctx)
	_ = c.cl.EndTransaction(ctx, kgo.TryAbort)
}

func (c *changelog) mapErr(err error) error {
	if errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) ||
		errors.Is(err, kerr.TransactionalIDAuthorizationFailed) || errors.Is(err, kerr.InvalidProducerIDMapping) {
		return fmt.Errorf("changelog %s: %w: %w", c.tp, eventlog.ErrFenced, err)
	}
	return fmt.Errorf("changelog %s: %w", c.tp, mapErr(err, c.l.closed.Load()))
}

// Restore implements [eventlog.Changelog]. It reads committed records only
// (read_committed), so a commit cut short by a crash is never applied.
func (c *changelog) Restore(ctx context.Context, from int64, apply func(eventlog.Change) error) (int64, error) {
	if from < 0 {
		from = 0
	}
	if from > c.claim {
		return c.claim + 1, nil
	}
	starts, err := c.l.adm.ListStartOffsets(ctx, c.tp.Topic)
	start, err := offsetIn(starts, err, c.tp)
	if err != nil {
		return 0, fmt.Errorf("changelog %s: start offset: %w", c.tp, err)
	}
	if from > 0 && from < start {
		return 0, fmt.Errorf("changelog %s: position %d, start %d: %w", c.tp, from, start, eventlog.ErrChangelogTruncated)
	}
	rcl, err := kgo.NewClient(c.l.opts.clientOpts(
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{c.tp.Topic: {c.tp.Partition: kgo.NewOffset().At(from)}}),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(100*time.Millisecond),
	)...)
	if err != nil {
		return 0, fmt.Errorf("changelog %s: %w", c.tp, err)
	}
	defer rcl.Close()
	for {
		fs := rcl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		for _, fe := range fs.Errors() {
			if !kerr.IsRetriable(fe.Err) {
				return 0, fmt.Errorf("changelog %s: restore: %w", c.tp, mapErr(fe.Err, c.l.closed.Load()))
			}
		}
		done := false
		var aerr error
		fs.EachRecord(func(r *kgo.Record) {
			if done || aerr != nil {
				return
			}
			if r.Offset >= c.claim {
				// The claim record, or (if compaction removed it) the first
				// record after it: everything committed before the claim
				// has been read.
				done = true
				return
			}
			if _, ok := boundary(r); ok {
				return
			}
			aerr = apply(eventlog.Change{Key: r.Key, Value: r.Value, Delete: r.Value == nil})
		})
		if aerr != nil {
			return 0, aerr
		}
		if done {
			return c.claim + 1, nil
		}
	}
}

// Close implements [eventlog.Changelog].
func (c *changelog) Close() error {
	c.cl.Close()
	return nil
}

// FollowChangelog implements [eventlog.Changelogs]. It reads committed
// records only (read_committed) and hands them on at commit boundaries.
func (l *Log) FollowChangelog(ctx context.Context, tp eventlog.TopicPartition, from int64, apply func(eventlog.ChangelogBatch) error) error {
	if err := l.check(ctx); err != nil {
		return err
	}
	from = max(from, 0)
	starts, err := l.adm.ListStartOffsets(ctx, tp.Topic)
	start, err := offsetIn(starts, err, tp)
	if err != nil {
		return fmt.Errorf("changelog %s: start offset: %w", tp, err)
	}
	if from > 0 && from < start {
		return fmt.Errorf("changelog %s: position %d, start %d: %w", tp, from, start, eventlog.ErrChangelogTruncated)
	}
	stables, err := l.adm.ListCommittedOffsets(ctx, tp.Topic)
	stable, err := offsetIn(stables, err, tp)
	if err != nil {
		return fmt.Errorf("changelog %s: stable offset: %w", tp, err)
	}
	if caughtUp(from, stable) {
		if err := apply(eventlog.ChangelogBatch{Next: from, CaughtUp: true}); err != nil {
			return err
		}
	}
	rcl, err := kgo.NewClient(l.opts.clientOpts(
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{tp.Topic: {tp.Partition: kgo.NewOffset().At(from)}}),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(100*time.Millisecond),
	)...)
	if err != nil {
		return fmt.Errorf("changelog %s: %w", tp, err)
	}
	defer rcl.Close()
	var pending []eventlog.Change // read since the last boundary
	for {
		fs := rcl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil
		}
		for _, fe := range fs.Errors() {
			if !kerr.IsRetriable(fe.Err) {
				return fmt.Errorf("changelog %s: follow: %w", tp, mapErr(fe.Err, l.closed.Load()))
			}
		}
		var ferr error
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			if ferr != nil || len(p.Records) == 0 {
				return
			}
			var batch eventlog.ChangelogBatch
			for _, r := range p.Records {
				at, ok := boundary(r)
				if !ok {
					pending = append(pending, eventlog.Change{Key: r.Key, Value: r.Value, Delete: r.Value == nil})
					continue
				}
				batch.Changes = append(batch.Changes, pending...)
				pending = pending[:0]
				batch.Next = r.Offset + 1
				if !at.IsZero() {
					batch.Committed = at
				}
			}
			if batch.Next == 0 {
				return // no boundary yet: the rest of a commit comes in a later fetch
			}
			batch.CaughtUp = caughtUp(batch.Next, p.LastStableOffset)
			ferr = apply(batch)
		})
		if ferr != nil {
			return ferr
		}
	}
}

// caughtUp reports whether a follower at position next has read every
// committed record below the partition's last stable offset: Kafka puts
// the marker that ends a transaction after its last record, so the marker
// of the commit that ends at next-1 is at next.
func caughtUp(next, stable int64) bool { return next+1 >= stable }
