package embedded

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/newsflow/newsflow/state"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/newsflow/newsflow/engine/eventlog"
)

// appendQueueLen bounds the number of Append calls waiting for the appender;
// further callers block (backpressure).
const appendQueueLen = 256

// maxPartitions bounds a topic's partition count.
const maxPartitions = 1 << 16

// Log is the embedded log. It implements [eventlog.Log].
type Log struct {
	opts    Options
	log     *slog.Logger
	db      *pebble.DB
	syncOpt *pebble.WriteOptions

	// topics maps a topic name to its topic. It is copied on write (under
	// topicMu) and read without locks.
	topics atomic.Pointer[map[string]*topic]
	// topicMu serializes CreateTopic.
	topicMu     sync.Mutex
	nextTopicID uint32 // guarded by topicMu

	// closeMu is held for reading around every use of db outside the
	// appender and the syncer, and for writing by Close while it marks the
	// log closed, so that db is never used after it is closed.
	closeMu   sync.RWMutex
	closed    bool          // guarded by closeMu
	isClosed  atomic.Bool   // mirrors closed for lock-free fast paths
	closedCh  chan struct{} // closed by Close; wakes blocked Polls
	reqs      chan *appendReq
	retention chan chan error // runs a retention pass now (tests)

	appenderDone chan struct{}
	syncerStop   chan struct{}
	syncerDone   chan struct{}

	// unsynced counts commits not yet fsynced (FsyncInterval).
	unsynced atomic.Int64

	// Owned by the appender goroutine.
	app struct {
		failed  error // sticky: a commit failed, so memory and disk may disagree
		gen     uint64
		touched []*partition
		key     []byte
	}
}

var _ eventlog.Log = (*Log)(nil)

type topic struct {
	name  string
	id    uint32
	parts []*partition
}

// partition is the state of one partition.
type partition struct {
	tp          eventlog.TopicPartition
	tid, index  uint32
	lower, over []byte // record key bounds of the whole partition

	// start and end are the published readable range. end only grows; it is
	// stored (under mu) after the records below it are committed.
	start atomic.Int64
	end   atomic.Int64

	// Owned by the appender goroutine (and by Open before it starts).
	next int64      // offset of the next record
	ivs  []interval // closed intervals, oldest first
	open interval   // the open interval, [open.start, next)
	size int64      // bytes of all retained records
	gen  uint64     // last batch that touched the partition

	// mu guards the published copy of the index, for OffsetForTime.
	mu struct {
		sync.RWMutex
		ivs  []interval
		open interval
	}

	// waiters are the kick channels of the readers of the partition.
	waiters struct {
		sync.Mutex
		kicks map[chan struct{}]struct{}
	}
}

func newPartition(t *topic, index int32) *partition {
	p := &partition{
		tp:    eventlog.TopicPartition{Topic: t.name, Partition: index},
		tid:   t.id,
		index: uint32(index),
	}
	p.lower = p.recordKey(nil, 0)
	p.over = appendPartKey(nil, prefixRecord, p.tid, p.index, 1<<63) // above every int64 offset
	p.open.maxTS = math.MinInt64
	p.waiters.kicks = make(map[chan struct{}]struct{})
	return p
}

func (p *partition) recordKey(dst []byte, off int64) []byte {
	return appendPartKey(dst, prefixRecord, p.tid, p.index, uint64(off))
}

func (p *partition) indexKey(dst []byte, off int64) []byte {
	return appendPartKey(dst, prefixIndex, p.tid, p.index, uint64(off))
}

// publish makes the appender's state of p visible to readers.
func (p *partition) publish() {
	p.mu.Lock()
	p.mu.ivs = p.ivs
	p.mu.open = p.open
	p.end.Store(p.next)
	p.mu.Unlock()
	p.kick()
}

// kick wakes the readers of p.
func (p *partition) kick() {
	p.waiters.Lock()
	defer p.waiters.Unlock()
	for k := range p.waiters.kicks {
		select {
		case k <- struct{}{}:
		default:
		}
	}
}

// Open opens or creates the log in opts.Dir.
func Open(opts Options) (*Log, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	l := &Log{
		opts:         opts,
		log:          opts.Logger.With("component", "eventlog", "dir", opts.Dir),
		syncOpt:      pebble.NoSync,
		closedCh:     make(chan struct{}),
		reqs:         make(chan *appendReq, appendQueueLen),
		retention:    make(chan chan error),
		appenderDone: make(chan struct{}),
	}
	if opts.Fsync == FsyncAlways {
		l.syncOpt = pebble.Sync
	}
	// A log is written once, read mostly at its tail and deleted in whole
	// intervals, so compacting it early only rewrites data that retention
	// will delete: let L0 grow before compacting, into a large base level.
	cache := pebble.NewCache(opts.CacheSize)
	defer cache.Unref() // the database holds its own reference
	db, err := pebble.Open(opts.Dir, &pebble.Options{
		Logger:                pebbleLogger{l.log},
		Cache:                 cache,
		MemTableSize:          uint64(opts.MemTableSize),
		L0CompactionThreshold: 16,
		L0StopWritesThreshold: 64,
		LBaseMaxBytes:         1 << 30,
		FormatMajorVersion:    pebble.FormatNewest,
	})
	if err != nil {
		return nil, fmt.Errorf("open embedded log %s: %w", opts.Dir, err)
	}
	l.db = db
	if err := l.recover(); err != nil {
		return nil, errors.Join(fmt.Errorf("open embedded log %s: %w", opts.Dir, err), db.Close())
	}

	var retentionTick *time.Ticker
	if opts.retentionEnabled() {
		retentionTick = time.NewTicker(opts.RetentionCheckInterval)
	}
	go l.runAppender(retentionTick)
	if opts.Fsync == FsyncInterval {
		l.syncerStop = make(chan struct{})
		l.syncerDone = make(chan struct{})
		go l.runSyncer()
	}
	return l, nil
}

// recover loads topics and rebuilds every partition's offsets and index.
func (l *Log) recover() error {
	v, closer, err := l.db.Get(versionKey)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		if err := l.db.Set(versionKey, []byte{formatVersion}, pebble.Sync); err != nil {
			return fmt.Errorf("write format version: %w", err)
		}
	case err != nil:
		return fmt.Errorf("read format version: %w", err)
	default:
		ok := len(v) == 1 && v[0] == formatVersion
		_ = closer.Close()
		if !ok {
			return fmt.Errorf("unsupported format version %x", v)
		}
	}

	topics := map[string]*topic{}
	it, err := l.db.NewIter(&pebble.IterOptions{
		LowerBound: topicKeyPrefix,
		UpperBound: []byte{prefixMeta, metaTopic + 1},
	})
	if err != nil {
		return err
	}
	for valid := it.First(); valid; valid = it.Next() {
		name := string(it.Key()[len(topicKeyPrefix):])
		id, n, err := decodeTopic(it.Value())
		if err != nil {
			_ = it.Close()
			return fmt.Errorf("topic %s: %w", name, err)
		}
		topics[name] = &topic{name: name, id: id, parts: make([]*partition, n)}
		l.nextTopicID = max(l.nextTopicID, id+1)
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("read topics: %w", err)
	}
	for _, t := range topics {
		for i := range t.parts {
			p := newPartition(t, int32(i))
			if err := l.recoverPartition(p); err != nil {
				return fmt.Errorf("recover %s: %w", p.tp, err)
			}
			t.parts[i] = p
		}
	}
	l.topics.Store(&topics)
	return nil
}

// recoverPartition rebuilds p's offsets, index and open interval from disk.
func (l *Log) recoverPartition(p *partition) error {
	var start int64
	v, closer, err := l.db.Get(startKey(p.tid, p.index))
	switch {
	case errors.Is(err, pebble.ErrNotFound):
	case err != nil:
		return fmt.Errorf("read start offset: %w", err)
	default:
		if len(v) == 8 {
			start = int64(binary.BigEndian.Uint64(v))
		}
		_ = closer.Close()
		if len(v) != 8 || start < 0 {
			return fmt.Errorf("bad start offset %x", v)
		}
	}
	end := start

	it, err := l.db.NewIter(&pebble.IterOptions{LowerBound: p.lower, UpperBound: p.over})
	if err != nil {
		return err
	}
	defer func() { _ = it.Close() }()
	if it.First() {
		if start, err = keyOffset(it.Key()); err != nil {
			return err
		}
		if !it.Last() {
			return fmt.Errorf("last record: %w", it.Error())
		}
		last, err := keyOffset(it.Key())
		if err != nil {
			return err
		}
		end = last + 1
	} else if err := it.Error(); err != nil {
		return err
	}

	// Closed intervals.
	it.SetBounds(p.indexKey(nil, 0), appendPartKey(nil, prefixIndex, p.tid, p.index, 1<<63))
	openStart := start
	for valid := it.First(); valid; valid = it.Next() {
		ivEnd, err := keyOffset(it.Key())
		if err != nil {
			return err
		}
		iv, err := decodeInterval(ivEnd, it.Value())
		if err != nil {
			return err
		}
		if iv.end <= start || iv.end > end || iv.start < openStart {
			return fmt.Errorf("index entry [%d, %d) outside records [%d, %d)", iv.start, iv.end, start, end)
		}
		p.ivs = append(p.ivs, iv)
		p.size += iv.bytes
		openStart = iv.end
	}
	if err := it.Error(); err != nil {
		return err
	}

	// The open interval.
	p.open = interval{start: openStart, maxTS: math.MinInt64}
	it.SetBounds(p.recordKey(nil, openStart), p.recordKey(nil, end))
	for valid := it.First(); valid; valid = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return err
		}
		ts, err := decodeTimestamp(v)
		if err != nil {
			return fmt.Errorf("record %x: %w", it.Key(), err)
		}
		p.open.maxTS = max(p.open.maxTS, ts)
		p.open.bytes += int64(len(it.Key()) + len(v))
	}
	if err := it.Error(); err != nil {
		return err
	}
	p.size += p.open.bytes
	p.next = end
	p.start.Store(start)
	p.publish()
	return nil
}

func (l *Log) topicMap() map[string]*topic { return *l.topics.Load() }

// partition returns the partition tp names.
func (l *Log) partition(tp eventlog.TopicPartition) (*partition, error) {
	t := l.topicMap()[tp.Topic]
	if t == nil {
		return nil, fmt.Errorf("topic %s: %w", tp.Topic, eventlog.ErrUnknownTopic)
	}
	if tp.Partition < 0 || int(tp.Partition) >= len(t.parts) {
		return nil, fmt.Errorf("%s (topic has %d partitions): %w", tp, len(t.parts), eventlog.ErrInvalidPartition)
	}
	return t.parts[tp.Partition], nil
}

// CreateTopic implements [eventlog.Log]. The topic is durable when it
// returns, whatever the fsync policy.
func (l *Log) CreateTopic(ctx context.Context, name string, partitions int32) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if name == "" {
		return errors.New("create topic: empty name")
	}
	if partitions <= 0 || partitions > maxPartitions {
		return fmt.Errorf("create topic %s: partition count %d out of range [1, %d]", name, partitions, maxPartitions)
	}
	l.topicMu.Lock()
	defer l.topicMu.Unlock()
	l.closeMu.RLock()
	defer l.closeMu.RUnlock()
	if l.closed {
		return eventlog.ErrClosed
	}
	old := l.topicMap()
	if _, ok := old[name]; ok {
		return fmt.Errorf("create topic %s: %w", name, eventlog.ErrTopicExists)
	}
	t := &topic{name: name, id: l.nextTopicID, parts: make([]*partition, partitions)}
	for i := range t.parts {
		p := newPartition(t, int32(i))
		p.mu.open = p.open
		t.parts[i] = p
	}
	if err := l.db.Set(topicKey(name), encodeTopic(t.id, partitions), pebble.Sync); err != nil {
		return fmt.Errorf("create topic %s: %w", name, err)
	}
	l.nextTopicID++
	topics := make(map[string]*topic, len(old)+1)
	for k, v := range old {
		topics[k] = v
	}
	topics[name] = t
	l.topics.Store(&topics)
	return nil
}

// Partitions implements [eventlog.Log].
func (l *Log) Partitions(ctx context.Context, name string) (int32, error) {
	if err := l.check(ctx); err != nil {
		return 0, err
	}
	t := l.topicMap()[name]
	if t == nil {
		return 0, fmt.Errorf("topic %s: %w", name, eventlog.ErrUnknownTopic)
	}
	return int32(len(t.parts)), nil
}

// Offsets implements [eventlog.Log].
func (l *Log) Offsets(ctx context.Context, tp eventlog.TopicPartition) (eventlog.Offsets, error) {
	if err := l.check(ctx); err != nil {
		return eventlog.Offsets{}, err
	}
	p, err := l.partition(tp)
	if err != nil {
		return eventlog.Offsets{}, err
	}
	// Load start first: end only grows, so start <= end.
	start := p.start.Load()
	return eventlog.Offsets{Start: start, End: p.end.Load()}, nil
}

// check returns ctx's error or ErrClosed.
func (l *Log) check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if l.isClosed.Load() {
		return eventlog.ErrClosed
	}
	return nil
}

// OffsetForTime implements [eventlog.Log].
func (l *Log) OffsetForTime(ctx context.Context, tp eventlog.TopicPartition, ts int64) (int64, error) {
	if err := l.check(ctx); err != nil {
		return 0, err
	}
	p, err := l.partition(tp)
	if err != nil {
		return 0, err
	}
	// Every record before the first interval whose largest timestamp is
	// >= ts is older than ts, and that interval holds a match.
	from := int64(-1)
	p.mu.RLock()
	for _, iv := range p.mu.ivs {
		if iv.maxTS >= ts {
			from = iv.start
			break
		}
	}
	if from < 0 && p.mu.open.maxTS >= ts {
		from = p.mu.open.start
	}
	end := p.end.Load()
	p.mu.RUnlock()
	if from < 0 {
		return end, nil
	}

	l.closeMu.RLock()
	defer l.closeMu.RUnlock()
	if l.closed {
		return 0, eventlog.ErrClosed
	}
	// Scan to end, not to the interval's end: retention may have deleted
	// the interval meanwhile, and then the answer lies beyond it.
	it, err := l.db.NewIterWithContext(ctx, &pebble.IterOptions{
		LowerBound: p.recordKey(nil, from),
		UpperBound: p.recordKey(nil, end),
	})
	if err != nil {
		return 0, fmt.Errorf("offset for time %s: %w", tp, err)
	}
	defer func() { _ = it.Close() }()
	for valid := it.First(); valid; valid = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return 0, fmt.Errorf("offset for time %s: %w", tp, err)
		}
		rts, err := decodeTimestamp(v)
		if err != nil {
			return 0, fmt.Errorf("offset for time %s: record %x: %w", tp, it.Key(), err)
		}
		if rts >= ts {
			return keyOffset(it.Key())
		}
	}
	if err := it.Error(); err != nil {
		return 0, fmt.Errorf("offset for time %s: %w", tp, err)
	}
	return end, nil
}

// Close implements [eventlog.Log]. It stops accepting appends, commits the
// ones already queued, stops the log's goroutines and closes Pebble. Polls
// blocked on the log return ErrClosed. Closing twice is a no-op.
func (l *Log) Close() error {
	l.closeMu.Lock()
	if l.closed {
		l.closeMu.Unlock()
		return nil
	}
	l.closed = true
	l.isClosed.Store(true)
	close(l.closedCh)
	close(l.reqs)
	l.closeMu.Unlock()

	<-l.appenderDone
	if l.syncerStop != nil {
		close(l.syncerStop)
		<-l.syncerDone
	}
	// Pebble syncs the write-ahead log when it closes.
	if err := l.db.Close(); err != nil {
		return fmt.Errorf("close embedded log %s: %w", l.opts.Dir, err)
	}
	return nil
}

// runSyncer fsyncs the write-ahead log every SyncInterval (FsyncInterval).
func (l *Log) runSyncer() {
	defer close(l.syncerDone)
	t := time.NewTicker(l.opts.SyncInterval)
	defer t.Stop()
	for {
		select {
		case <-l.syncerStop:
			return
		case <-t.C:
			if l.unsynced.Swap(0) == 0 {
				continue
			}
			// An empty LogData record with Sync syncs everything before it.
			if err := l.db.LogData(nil, pebble.Sync); err != nil {
				l.log.Error("sync write-ahead log", "err", err)
			}
		}
	}
}

// pebbleLogger sends Pebble's messages to slog.
type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	if p.l.Enabled(context.Background(), slog.LevelDebug) {
		p.l.Debug(fmt.Sprintf(format, args...), "source", "pebble")
	}
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error(fmt.Sprintf(format, args...), "source", "pebble")
}

// Fatalf is called by Pebble on unrecoverable errors and must not return.
func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.l.Error(msg, "source", "pebble")
	panic(msg)
}

// Memory returns what the log's Pebble database holds outside the Go heap
// (zero once the log is closed).
func (l *Log) Memory() state.Memory {
	l.closeMu.RLock()
	defer l.closeMu.RUnlock()
	if l.closed {
		return state.Memory{}
	}
	return state.PebbleMemory(l.db)
}
