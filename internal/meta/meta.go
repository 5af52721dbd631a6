// Package meta stores the small metadata that must agree on every node:
// sources, users, preferences. [Store] is the seam: [Local] keeps it in the
// node's state database; a cluster replicates the same operations through
// Raft.
package meta

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/newsflow/newsflow/state"
)

// Store is a durable map of collections of keyed values.
//
// Implementations are safe for concurrent use. A write is durable when it
// returns. Scan sees a consistent snapshot of one collection. Collection
// names must not contain a NUL byte.
type Store interface {
	Get(ctx context.Context, collection, key string) ([]byte, bool, error)
	Put(ctx context.Context, collection, key string, value []byte) error
	// PutLazy is Put for values that the system rebuilds if they are lost
	// (crawl state): it may return before the write is on disk, so a crash
	// can lose the latest writes, never tear one.
	PutLazy(ctx context.Context, collection, key string, value []byte) error
	Delete(ctx context.Context, collection, key string) error
	// Scan calls fn for every key of the collection in key order; the value
	// is only valid during the call. It stops at fn's first error.
	Scan(ctx context.Context, collection string, fn func(key string, value []byte) error) error
}

// Local is a Store in the node's state database.
type Local struct {
	ns state.Namespace
	mu sync.Mutex // serializes Create and Swap
}

var _ Store = (*Local)(nil)

// NewLocal returns a store in db's "meta" namespace.
func NewLocal(db *state.DB) *Local { return &Local{ns: db.Namespace("meta")} }

// ErrBadName is returned for collection names with a NUL byte.
var ErrBadName = errors.New("meta: collection name contains NUL")

func key(collection, k string) ([]byte, error) {
	if strings.IndexByte(collection, 0) >= 0 {
		return nil, ErrBadName
	}
	return []byte(collection + "\x00" + k), nil
}

// Get returns a copy of the value stored under key.
func (l *Local) Get(_ context.Context, collection, k string) ([]byte, bool, error) {
	kk, err := key(collection, k)
	if err != nil {
		return nil, false, err
	}
	return l.ns.Get(kk)
}

// Put stores value under key, durably.
func (l *Local) Put(_ context.Context, collection, k string, value []byte) error {
	return l.put(collection, k, value, true)
}

// PutLazy stores value under key without waiting for the disk.
func (l *Local) PutLazy(_ context.Context, collection, k string, value []byte) error {
	return l.put(collection, k, value, false)
}

func (l *Local) put(collection, k string, value []byte, sync bool) error {
	kk, err := key(collection, k)
	if err != nil {
		return err
	}
	b := l.ns.NewBatch()
	if err := b.Set(kk, value); err != nil {
		b.Discard()
		return err
	}
	commit := b.Commit
	if sync {
		commit = b.CommitSync
	}
	if err := commit(); err != nil {
		return fmt.Errorf("meta: put %s/%s: %w", collection, k, err)
	}
	return nil
}

// Delete removes key, durably. Deleting a missing key is not an error.
func (l *Local) Delete(_ context.Context, collection, k string) error {
	kk, err := key(collection, k)
	if err != nil {
		return err
	}
	b := l.ns.NewBatch()
	if err := b.Delete(kk); err != nil {
		b.Discard()
		return err
	}
	if err := b.CommitSync(); err != nil {
		return fmt.Errorf("meta: delete %s/%s: %w", collection, k, err)
	}
	return nil
}

// Scan calls fn for each key of the collection in order.
func (l *Local) Scan(ctx context.Context, collection string, fn func(string, []byte) error) error {
	lo, err := key(collection, "")
	if err != nil {
		return err
	}
	hi := append([]byte(collection), 1)
	return l.ns.Scan(lo, hi, func(k, v []byte) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		return fn(string(k[len(lo):]), v)
	})
}

// ScanAll calls fn for every pair of every collection, in key order.
func (l *Local) ScanAll(ctx context.Context, fn func(collection, key string, value []byte) error) error {
	return scanAll(ctx, l.ns.Scan, fn)
}

func scanAll(ctx context.Context, scan func(lower, upper []byte, fn func(k, v []byte) error) error, fn func(collection, key string, value []byte) error) error {
	return scan(nil, nil, func(k, v []byte) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		coll, key, ok := strings.Cut(string(k), "\x00")
		if !ok {
			return fmt.Errorf("meta: key %q has no collection", k)
		}
		return fn(coll, key, v)
	})
}

// Snapshot is every pair of a Local as it was when Snapshot was called.
type Snapshot struct{ s *state.Snapshot }

// Snapshot returns a point-in-time view of the store without copying it.
// The caller must Close it.
func (l *Local) Snapshot() *Snapshot { return &Snapshot{l.ns.Snapshot()} }

// ScanAll is Local.ScanAll over the snapshot.
func (s *Snapshot) ScanAll(ctx context.Context, fn func(collection, key string, value []byte) error) error {
	return scanAll(ctx, s.s.Scan, fn)
}

// Close releases the snapshot.
func (s *Snapshot) Close() error { return s.s.Close() }

// DeleteAll removes every pair (a replicated store replacing its replica
// with a snapshot).
func (l *Local) DeleteAll(context.Context) error { return l.ns.Clear() }

// Creator is a Store that can create a key atomically: Create fails with
// ErrExists when the key is there already, whoever else writes it at the
// same time (in a cluster, on another node).
type Creator interface {
	Create(ctx context.Context, collection, key string, value []byte) error
}

// ErrExists answers Create of a key that exists.
var ErrExists = errors.New("meta: key exists")

var _ Creator = (*Local)(nil)

// Create implements Creator within one process.
func (l *Local) Create(ctx context.Context, collection, k string, value []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok, err := l.Get(ctx, collection, k); err != nil || ok {
		if err == nil {
			err = ErrExists
		}
		return err
	}
	return l.Put(ctx, collection, k, value)
}

// Swapper is a Store that can replace a value only if it is unchanged: a
// read-modify-write that two writers (in a cluster, on two nodes) cannot
// both win.
type Swapper interface {
	// Swap stores value under key if the stored value is old, durably,
	// and fails with ErrConflict otherwise (also when the key is missing).
	Swap(ctx context.Context, collection, key string, old, value []byte) error
}

// ErrConflict answers a Swap whose old value is not the stored one.
var ErrConflict = errors.New("meta: value changed since it was read")

var _ Swapper = (*Local)(nil)

// Swap implements Swapper within one process.
func (l *Local) Swap(ctx context.Context, collection, k string, old, value []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	cur, ok, err := l.Get(ctx, collection, k)
	if err != nil {
		return err
	}
	if !ok || !bytes.Equal(cur, old) {
		return ErrConflict
	}
	return l.Put(ctx, collection, k, value)
}

// Pair is a value under a key of a collection, for Batcher.
type Pair struct {
	Collection, Key string
	Value           []byte
}

// Batcher is a Store that writes several pairs in one write: after a
// crash all of them are there or none.
type Batcher interface {
	// PutBatch stores every pair, durably, atomically.
	PutBatch(ctx context.Context, pairs []Pair) error
}

var _ Batcher = (*Local)(nil)

// PutBatch implements Batcher with one Pebble batch.
func (l *Local) PutBatch(_ context.Context, pairs []Pair) error {
	b := l.ns.NewBatch()
	for _, p := range pairs {
		kk, err := key(p.Collection, p.Key)
		if err == nil {
			err = b.Set(kk, p.Value)
		}
		if err != nil {
			b.Discard()
			return err
		}
	}
	if err := b.CommitSync(); err != nil {
		return fmt.Errorf("meta: put a batch of %d: %w", len(pairs), err)
	}
	return nil
}
