// Package copies publishes, for an operator whose queries read its state
// on any node, each partition's copy on this node (the task's or a standby
// copy) with the offset of its input it has applied up to, and lets a
// query wait until a copy holds a given offset: a read that asks for what
// the log held when it began sees every write acknowledged before it,
// whichever node took the write.
package copies

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/newsflow/newsflow/state"
)

// ErrUnavailable is returned while this node has no copy of a partition
// (its task restores, or moves here).
var ErrUnavailable = errors.New("partition not available on this node")

// Set holds one entry per partition. Its methods are safe for concurrent
// use.
type Set struct {
	parts []partition
}

type partition struct {
	reader  atomic.Pointer[state.Reader]
	applied atomic.Int64
	mu      sync.Mutex
	changed chan struct{}
}

// New returns a set of n partitions, none available.
func New(n int32) *Set {
	s := &Set{parts: make([]partition, n)}
	for i := range s.parts {
		s.parts[i].changed = make(chan struct{})
	}
	return s
}

// Len is the number of partitions.
func (s *Set) Len() int32 { return int32(len(s.parts)) }

// Publish makes r (nil: no copy) partition p's copy, holding its input up
// to offset applied (exclusive).
func (s *Set) Publish(p int32, r state.Reader, applied int64) error {
	if p < 0 || int(p) >= len(s.parts) {
		return fmt.Errorf("partition %d beyond %d", p, len(s.parts))
	}
	pt := &s.parts[p]
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
	return nil
}

// Await returns partition p's copy once it has applied its input up to
// offset (exclusive), waiting until ctx is done; ErrUnavailable when this
// node has no copy.
func (s *Set) Await(ctx context.Context, p int32, offset int64) (state.Reader, error) {
	if p < 0 || int(p) >= len(s.parts) {
		return nil, fmt.Errorf("partition %d beyond %d", p, len(s.parts))
	}
	pt := &s.parts[p]
	for {
		pt.mu.Lock()
		changed := pt.changed
		pt.mu.Unlock()
		r := pt.reader.Load()
		if r == nil {
			return nil, ErrUnavailable
		}
		if pt.applied.Load() >= offset {
			return *r, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, fmt.Errorf("partition %d not applied up to offset %d: %w", p, offset, ctx.Err())
		}
	}
}

// ReadPosition reads the 8-byte next offset stored under key (0 when
// absent).
func ReadPosition(r state.Reader, key []byte) (int64, error) {
	v, ok, err := r.Get(key)
	if err != nil || !ok {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("position of %d bytes", len(v))
	}
	return int64(binary.BigEndian.Uint64(v)), nil
}

// WritePosition stores next under key.
func WritePosition(w state.Writer, key []byte, next int64) error {
	return w.Set(key, binary.BigEndian.AppendUint64(nil, uint64(next)))
}

// PublishStored makes r partition p's copy at the next offset stored in
// r under key (as WritePosition wrote it), and returns that offset: what
// a task's Restore and a standby's Follow publish.
func (s *Set) PublishStored(p int32, r state.Reader, key []byte) (int64, error) {
	pos, err := ReadPosition(r, key)
	if err != nil {
		return 0, err
	}
	return pos, s.Publish(p, r, pos)
}

// Check reports an error for a partition beyond the set.
func (s *Set) Check(p int32) error {
	if p < 0 || int(p) >= len(s.parts) {
		return fmt.Errorf("partition %d beyond %d", p, len(s.parts))
	}
	return nil
}
