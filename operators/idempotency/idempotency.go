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
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/operators/internal/copies"
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
var ErrUnavailable = fmt.Errorf("idempotency keys: %w", copies.ErrUnavailable)

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
	copies     *copies.Set
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
	return &Operator{ttl: opts.TTL, partitions: partitions, log: l, copies: copies.New(partitions)}, nil
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
	r, err := o.copies.Await(ctx, p, end.End)
	switch {
	case errors.Is(err, copies.ErrUnavailable):
		return nil, ErrUnavailable
	case err != nil:
		return nil, fmt.Errorf("idempotency: keys: %w", err)
	}
	return lookup(r, key)
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
	pos, err := copies.ReadPosition(r, positionKey)
	if err != nil {
		return 0, fmt.Errorf("idempotency: %w", err)
	}
	return pos, nil
}

// Follow implements engine.Follower: the standby copy answers lookups.
func (o *Operator) Follow(p int32, r state.Reader, _ []eventlog.Change) error {
	if _, err := o.copies.PublishStored(p, r, positionKey); err != nil {
		return fmt.Errorf("%s: %w", Name, err)
	}
	return nil
}

// NewTask implements engine.Operator.
func (o *Operator) NewTask(tc engine.TaskContext) (engine.Task, error) {
	if err := o.copies.Check(tc.Partition); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
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
	return t.op.copies.Publish(t.p, r, pos)
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
	return copies.WritePosition(w, positionKey, t.next)
}

// Committed publishes the position the committed state holds.
func (t *task) Committed(engine.CommitInfo) { _ = t.op.copies.Publish(t.p, t.r, t.next) }

func (t *task) Close() error {
	return t.op.copies.Publish(t.p, nil, 0)
}
