// Package idempotency keeps the Idempotency-Keys of ingestion requests as
// an operator's state, so that a retry of a request gets its first
// response on any node and appends nothing.
//
// The HTTP layer appends a request's events together with one marker
// record on Topic: key = the key's scope (a 32-byte digest of the path,
// the caller and the key), value = the Response it gave, in the partition
// of the key (eventlog.PartitionFor over the engine's partitions). The
// idempotency-keys operator, partitioned like the topic, applies the
// markers to its state (Pebble, changelogged, exactly once like every
// task) and forgets them a TTL of event time after they were made. In a
// cluster every node keeps a standby copy of every partition, so any node
// answers a lookup from its own store.
//
// Lookup waits until the node's copy of the key's partition holds every
// marker the topic held when Lookup was called: a retry sent after the
// first answer came back always finds the key, whichever node answered.
// Two copies of one request sent at the same instant can both be appended;
// the operators' event-id deduplication still applies their events once.
package idempotency

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/operators/internal/timeindex"
	"github.com/newsflow/newsflow/state"
)

// Name is the operator's name.
const Name = "idempotency-keys"

// Topic holds one marker per ingestion request that carried an
// Idempotency-Key, partitioned by the key's scope.
const Topic = "newsflow-ingest-keys"

// ScopeBytes is the length of a key's scope.
const ScopeBytes = 32

// DefaultTTL is how long a key is remembered by default.
const DefaultTTL = 24 * time.Hour

// Response is what a request with a key was answered: a retry with the
// same request gets it again.
type Response struct {
	Status int             `json:"status"`
	Body   json.RawMessage `json:"body"`
	// At is when the request was answered, ms since the epoch (the
	// marker's event time).
	At int64 `json:"at"`
	// Sum is the digest of the request's path and body: a retry must
	// repeat the request.
	Sum []byte `json:"sum"`
}

// ErrUnavailable is returned while this node has no copy of a key's
// partition (the task restores, or moves here).
var ErrUnavailable = errors.New("idempotency keys: partition not available on this node")

// Options configures the operator. The zero value is valid.
type Options struct {
	// TTL is how long, in event time behind the newest marker of a
	// partition, a key is kept (default DefaultTTL).
	TTL time.Duration
}

// Operator is the idempotency-keys operator. Its query methods are safe
// for concurrent use with the running tasks and followers.
type Operator struct {
	ttl        time.Duration
	partitions int32
	log        eventlog.Log
	parts      []partition
}

// partition is what queries read of one partition: a reader of this
// node's copy (the task's or the standby's) and the offset of Topic it
// has applied up to, with a channel closed whenever either changes.
type partition struct {
	reader  atomic.Pointer[state.Reader]
	applied atomic.Int64
	mu      sync.Mutex
	changed chan struct{}
}

// set publishes r (nil: no copy) and the offset it holds.
func (pt *partition) set(r state.Reader, applied int64) {
	if r == nil {
		pt.reader.Store(nil)
	} else {
		pt.reader.Store(&r)
	}
	pt.applied.Store(applied)
	pt.mu.Lock()
	close(pt.changed)
	pt.changed = make(chan struct{})
	pt.mu.Unlock()
}

func (pt *partition) wait() <-chan struct{} {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	return pt.changed
}

// New returns the operator for an engine with the given partition count,
// reading Topic's end offsets from l for Lookup.
func New(opts Options, partitions int32, l eventlog.Log) (*Operator, error) {
	if opts.TTL < 0 {
		return nil, errors.New("idempotency: ttl must not be negative")
	}
	if opts.TTL == 0 {
		opts.TTL = DefaultTTL
	}
	o := &Operator{ttl: opts.TTL, partitions: partitions, log: l, parts: make([]partition, partitions)}
	for i := range o.parts {
		o.parts[i].changed = make(chan struct{})
	}
	return o, nil
}

// Spec implements engine.Operator.
func (o *Operator) Spec() engine.Spec {
	return engine.Spec{
		Name:        Name,
		Description: "the Idempotency-Keys of ingestion requests and their responses, for a TTL of event time",
		Inputs:      []engine.Input{{Topic: Topic, Key: "key scope (a digest of path, caller and key)"}},
		Stores: []string{"keys: each key's request digest and response",
			"expiry: the keys by the time they were answered", "position: the next offset of the topic applied"},
		Options: map[string]string{"ttl": o.ttl.String()},
		Standby: true,
	}
}

// Marker returns the record that persists key's response r; it is
// appended in the same call as the request's events.
func (o *Operator) Marker(key string, r Response) (*eventlog.Record, error) {
	if len(key) != ScopeBytes {
		return nil, fmt.Errorf("idempotency: key scope of %d bytes, want %d", len(key), ScopeBytes)
	}
	v, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("idempotency: encode response: %w", err)
	}
	return &eventlog.Record{Topic: Topic, Partition: eventlog.PartitionFor([]byte(key), o.partitions), Key: []byte(key), Value: v, Timestamp: r.At}, nil
}

// Lookup returns key's response (nil when the key is not known), once
// this node's copy of the key's partition holds every marker the topic
// held at the call; it waits for that until ctx is done. It returns
// ErrUnavailable while the node has no copy of the partition.
func (o *Operator) Lookup(ctx context.Context, key string) (*Response, error) {
	p := eventlog.PartitionFor([]byte(key), o.partitions)
	tp := eventlog.TopicPartition{Topic: Topic, Partition: p}
	end, err := o.log.Offsets(ctx, tp)
	if err != nil {
		return nil, fmt.Errorf("idempotency: read %s: %w", tp, err)
	}
	pt := &o.parts[p]
	for {
		changed := pt.wait()
		r := pt.reader.Load()
		if r == nil {
			return nil, ErrUnavailable
		}
		if pt.applied.Load() >= end.End {
			return lookup(*r, key)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, fmt.Errorf("idempotency: keys of partition %d not applied up to offset %d: %w", p, end.End, ctx.Err())
		}
	}
}

// State keys: 'k' scope → Response; timeindex 'x' (at, scope); 'o' → the
// next offset of the task's partition of Topic (8 bytes).
var positionKey = []byte{'o'}

const (
	keyPrefix   = 'k'
	expiryIndex = 'x'
)

func responseKey(scope string) []byte { return append([]byte{keyPrefix}, scope...) }

func lookup(r state.Reader, key string) (*Response, error) {
	v, ok, err := r.Get(responseKey(key))
	if err != nil || !ok {
		return nil, err
	}
	var resp Response
	if err := json.Unmarshal(v, &resp); err != nil {
		return nil, fmt.Errorf("idempotency: stored response: %w", err)
	}
	return &resp, nil
}

func readPosition(r state.Reader) (int64, error) {
	v, ok, err := r.Get(positionKey)
	if err != nil || !ok {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("idempotency: position of %d bytes", len(v))
	}
	return int64(binary.BigEndian.Uint64(v)), nil
}

// Follow implements engine.Follower: the standby copy answers lookups.
func (o *Operator) Follow(p int32, r state.Reader, _ []eventlog.Change) error {
	if int(p) >= len(o.parts) {
		return fmt.Errorf("idempotency: partition %d beyond %d", p, len(o.parts))
	}
	pos, err := readPosition(r)
	if err != nil {
		return err
	}
	o.parts[p].set(r, pos)
	return nil
}

// NewTask implements engine.Operator.
func (o *Operator) NewTask(tc engine.TaskContext) (engine.Task, error) {
	if int(tc.Partition) >= len(o.parts) {
		return nil, fmt.Errorf("idempotency: partition %d beyond %d", tc.Partition, len(o.parts))
	}
	return &task{op: o, p: tc.Partition, pending: map[string]Response{}}, nil
}

type task struct {
	op *Operator
	p  int32
	r  state.Reader
	// pending are the markers applied since the last Flush; next is the
	// offset after the last one read, wm the newest marker time.
	pending map[string]Response
	next    int64
	wm      int64
}

func (t *task) Restore(r state.Reader) error {
	pos, err := readPosition(r)
	if err != nil {
		return err
	}
	t.r, t.next = r, pos
	// The newest marker time: the last key of the expiry index.
	err = r.Scan([]byte{expiryIndex}, []byte{expiryIndex + 1}, func(k, _ []byte) error {
		if len(k) >= 9 {
			at, _ := timeindex.Parse(k)
			t.wm = max(t.wm, at)
		}
		return nil
	})
	if err != nil {
		return err
	}
	t.op.parts[t.p].set(r, pos)
	return nil
}

func (t *task) Process(_ *engine.ProcessContext, rec *eventlog.Record) error {
	t.next = max(t.next, rec.Offset+1)
	if len(rec.Key) != ScopeBytes {
		return engine.Invalid("idempotency marker: key of %d bytes, want %d", len(rec.Key), ScopeBytes)
	}
	if p := eventlog.PartitionFor(rec.Key, t.op.partitions); p != rec.Partition {
		return engine.Invalid("idempotency marker: key of partition %d in partition %d", p, rec.Partition)
	}
	var resp Response
	if err := json.Unmarshal(rec.Value, &resp); err != nil || len(resp.Sum) != 32 {
		return engine.Invalid("idempotency marker: not a response with a 32-byte sum")
	}
	t.pending[string(rec.Key)] = resp
	t.wm = max(t.wm, resp.At)
	return nil
}

func (t *task) Flush(w state.Writer) error {
	for key, resp := range t.pending {
		v, err := json.Marshal(resp)
		if err != nil {
			return err
		}
		if err := w.Set(responseKey(key), v); err != nil {
			return err
		}
		if err := w.Set(timeindex.Key(expiryIndex, resp.At, key), nil); err != nil {
			return err
		}
	}
	// Forget what is older than the TTL: the index entry, and the
	// response unless the key was answered again since.
	err := timeindex.Expired(t.r, expiryIndex, t.wm-t.op.ttl.Milliseconds(), func(k []byte, at int64, key string) error {
		if err := w.Delete(k); err != nil {
			return err
		}
		if _, ok := t.pending[key]; ok {
			return nil // answered again in this batch
		}
		stored, err := lookup(t.r, key)
		if err != nil || stored == nil || stored.At != at {
			return err
		}
		return w.Delete(responseKey(key))
	})
	if err != nil {
		return err
	}
	clear(t.pending)
	return w.Set(positionKey, binary.BigEndian.AppendUint64(nil, uint64(t.next)))
}

// Committed publishes the position the committed state holds.
func (t *task) Committed(engine.CommitInfo) { t.op.parts[t.p].set(t.r, t.next) }

func (t *task) Close() error {
	t.op.parts[t.p].set(nil, 0)
	return nil
}
