package readstate

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/internal/meta"
	"github.com/newsflow/newsflow/operators/internal/copies"
	"github.com/newsflow/newsflow/state"
)

// Name is the readstate operator's name.
const Name = "readstate"

// Topic carries readers' actions: one record per request that changes a
// reader's state, keyed by user id and partitioned by it over the
// engine's partitions; the value is an Action.
const Topic = "reader.actions"

// Action is the value of a record on Topic: what one request changed in
// one reader's state (a mark of 1,000 articles is one action).
type Action struct {
	Ops []Op `json:"ops"`
	// At is when it was made, ms since the epoch (the record's time).
	At int64 `json:"at"`
}

// ErrUnavailable is returned while this node has no copy of a reader's
// partition (its task restores, or moves here).
var ErrUnavailable = fmt.Errorf("readstate: %w", copies.ErrUnavailable)

// Operator is the readstate operator: readers' marks, watermarks, stars,
// subscriptions and folders, applied from Topic into Pebble, partitioned
// by user, changelogged and restored like every task. Every node keeps a
// standby copy of every partition, so any node answers from its own store:
// a read waits until its copy holds every action the topic held when the
// read began, and a write until its own action is applied, so that a
// reader sees what they did, through whichever node. Its methods are safe
// for concurrent use.
type Operator struct {
	partitions int32
	log        eventlog.Log
	copies     *copies.Set
}

// NewOperator returns the operator for an engine of the given partition
// count, appending actions to l.
func NewOperator(partitions int32, l eventlog.Log) *Operator {
	return &Operator{partitions: partitions, log: l, copies: copies.New(partitions)}
}

// Store returns a readers' state store over the operator; m numbers
// feeds (FeedNum), now is the clock (time.Now when nil).
func (o *Operator) Store(m meta.Store, now func() time.Time) *Store {
	s := New(m, now)
	s.b = engineBackend{o}
	return s
}

// Spec implements engine.Operator.
func (o *Operator) Spec() engine.Spec {
	return engine.Spec{
		Name:        Name,
		Description: "readers' read marks, watermarks, stars, subscriptions and folders",
		Inputs:      []engine.Input{{Topic: Topic, Key: "user id"}},
		Stores:      []string{"state: each user's collections (reads, stars, subs) by key", "position: the next offset of the topic applied"},
		Standby:     true,
	}
}

// Follow implements engine.Follower: the standby copy answers reads.
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
	return &task{op: o, p: tc.Partition, pending: map[string][]byte{}}, nil
}

// State keys: 'u' uvarint(len(user)) user coll-byte key → value, where
// coll-byte is 'r' for reads, 's' for stars and 'f' for subs; 'o' → the
// next offset of the task's partition of Topic (8 bytes).
var positionKey = []byte{'o'}

var collByte = map[string]byte{collReads: 'r', collStars: 's', collSubs: 'f'}

func userPrefix(user string) []byte {
	b := binary.AppendUvarint([]byte{'u'}, uint64(len(user)))
	return append(b, user...)
}

func stateKey(user, coll, key string) []byte {
	return append(append(userPrefix(user), collByte[coll]), key...)
}

func prefixEnd(p []byte) []byte {
	end := bytes.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// engineBackend reads this node's copy of a user's partition and appends
// actions to Topic.
type engineBackend struct{ o *Operator }

// copyOf returns this node's copy of user's partition once it holds what
// the topic held at the call.
func (b engineBackend) copyOf(ctx context.Context, user string) (state.Reader, error) {
	p := eventlog.PartitionFor([]byte(user), b.o.partitions)
	tp := eventlog.TopicPartition{Topic: Topic, Partition: p}
	off, err := b.o.log.Offsets(ctx, tp)
	if err != nil {
		return nil, fmt.Errorf("readstate: read %s: %w", tp, err)
	}
	return b.await(ctx, p, off.End)
}

func (b engineBackend) await(ctx context.Context, p int32, offset int64) (state.Reader, error) {
	r, err := b.o.copies.Await(ctx, p, offset)
	switch {
	case errors.Is(err, copies.ErrUnavailable):
		return nil, ErrUnavailable
	case err != nil:
		return nil, fmt.Errorf("readstate: %w", err)
	}
	return r, nil
}

func (b engineBackend) get(ctx context.Context, user, coll, key string) ([]byte, bool, error) {
	r, err := b.copyOf(ctx, user)
	if err != nil {
		return nil, false, err
	}
	return r.Get(stateKey(user, coll, key))
}

func (b engineBackend) scan(ctx context.Context, user, coll string, fn func(string, []byte) error) error {
	r, err := b.copyOf(ctx, user)
	if err != nil {
		return err
	}
	lo := stateKey(user, coll, "")
	return r.Scan(lo, prefixEnd(lo), func(k, v []byte) error { return fn(string(k[len(lo):]), v) })
}

func (b engineBackend) apply(ctx context.Context, user string, ops []Op) error {
	if len(ops) == 0 {
		return nil
	}
	rec, err := b.o.Record(user, Action{Ops: ops, At: time.Now().UnixMilli()})
	if err != nil {
		return err
	}
	if err := b.o.log.Append(ctx, []*eventlog.Record{rec}); err != nil {
		return fmt.Errorf("readstate: append to %s: %w", Topic, err)
	}
	_, err = b.await(ctx, rec.Partition, rec.Offset+1)
	return err
}

// Record returns the record of user's action a.
func (o *Operator) Record(user string, a Action) (*eventlog.Record, error) {
	if user == "" {
		return nil, errors.New("readstate: action without a user")
	}
	for _, op := range a.Ops {
		if err := op.check(); err != nil {
			return nil, err
		}
	}
	v, err := json.Marshal(a)
	if err != nil {
		return nil, fmt.Errorf("readstate: encode action: %w", err)
	}
	return &eventlog.Record{Topic: Topic, Partition: eventlog.PartitionFor([]byte(user), o.partitions), Key: []byte(user), Value: v, Timestamp: a.At}, nil
}

type task struct {
	op *Operator
	p  int32
	r  state.Reader
	// pending holds the values set (nil: deleted) since the last Flush by
	// state key; next is the offset after the last record read.
	pending map[string][]byte
	next    int64
}

func (t *task) Restore(r state.Reader) error {
	pos, err := t.op.copies.PublishStored(t.p, r, positionKey)
	if err != nil {
		return fmt.Errorf("%s: %w", Name, err)
	}
	t.r, t.next = r, pos
	return nil
}

// value reads a key as this batch left it.
func (t *task) value(k []byte) ([]byte, bool, error) {
	if v, ok := t.pending[string(k)]; ok {
		return v, v != nil, nil
	}
	return t.r.Get(k)
}

func (t *task) Process(_ *engine.ProcessContext, rec *eventlog.Record) error {
	t.next = max(t.next, rec.Offset+1)
	user := string(rec.Key)
	if user == "" {
		return engine.Invalid("reader action without a user")
	}
	if p := eventlog.PartitionFor(rec.Key, t.op.partitions); p != rec.Partition {
		return engine.Invalid("reader action: user of partition %d in partition %d", p, rec.Partition)
	}
	var a Action
	if err := json.Unmarshal(rec.Value, &a); err != nil {
		return engine.Invalid("reader action: %v", err)
	}
	for _, op := range a.Ops {
		if err := op.check(); err != nil {
			return engine.Invalid("reader action: %v", err)
		}
	}
	for _, op := range a.Ops {
		if err := t.applyOp(user, op); err != nil {
			return err
		}
	}
	return nil
}

func (t *task) applyOp(user string, op Op) error {
	if op.Op == OpClear {
		lo := userPrefix(user)
		hi := prefixEnd(lo)
		for k, v := range t.pending {
			if k >= string(lo) && k < string(hi) && v != nil {
				t.pending[k] = nil
			}
		}
		return t.r.Scan(lo, hi, func(k, _ []byte) error {
			t.pending[string(k)] = nil
			return nil
		})
	}
	k := stateKey(user, op.Coll, op.Key)
	switch op.Op {
	case OpPut:
		t.pending[string(k)] = bytes.Clone(op.Value)
	case OpCreate:
		_, ok, err := t.value(k)
		if err != nil {
			return err
		}
		if !ok {
			t.pending[string(k)] = bytes.Clone(op.Value)
		}
	case OpDelete:
		t.pending[string(k)] = nil
	}
	return nil
}

func (t *task) Flush(w state.Writer) error {
	for k, v := range t.pending {
		var err error
		if v == nil {
			err = w.Delete([]byte(k))
		} else {
			err = w.Set([]byte(k), v)
		}
		if err != nil {
			return err
		}
	}
	clear(t.pending)
	return copies.WritePosition(w, positionKey, t.next)
}

// Committed publishes the position the committed state holds.
func (t *task) Committed(engine.CommitInfo) { _ = t.op.copies.Publish(t.p, t.r, t.next) }

func (t *task) Close() error { return t.op.copies.Publish(t.p, nil, 0) }
