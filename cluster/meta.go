package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/newsflow/newsflow/internal/meta"
)

// MetaStore is the metadata store of a cluster node: reads come from the
// node's replica, writes go through Raft, so sources, users, preferences
// and sessions agree on every node.
//
// A read that misses first catches up with the leader (waits until this
// replica has applied everything the leader had applied), so a user
// registered through one node can log in through another at once.
type MetaStore struct {
	n     *Node
	local *meta.Local
}

var (
	_ meta.Store   = (*MetaStore)(nil)
	_ meta.Creator = (*MetaStore)(nil)
	_ meta.Swapper = (*MetaStore)(nil)
)

// Meta returns the node's replicated metadata store.
func (n *Node) Meta() *MetaStore { return &MetaStore{n: n, local: n.cfg.Meta} }

// Get implements meta.Store.
func (m *MetaStore) Get(ctx context.Context, collection, key string) ([]byte, bool, error) {
	v, ok, err := m.local.Get(ctx, collection, key)
	if ok || err != nil {
		return v, ok, err
	}
	if err := m.n.catchUp(ctx); err != nil {
		return nil, false, err
	}
	return m.local.Get(ctx, collection, key)
}

// Scan implements meta.Store over the local replica.
func (m *MetaStore) Scan(ctx context.Context, collection string, fn func(string, []byte) error) error {
	return m.local.Scan(ctx, collection, fn)
}

// Put implements meta.Store.
func (m *MetaStore) Put(ctx context.Context, collection, key string, value []byte) error {
	return m.n.Apply(ctx, Command{Op: OpMetaPut, Collection: collection, Key: key, Value: value})
}

// PutLazy implements meta.Store; replicated like Put.
func (m *MetaStore) PutLazy(ctx context.Context, collection, key string, value []byte) error {
	return m.Put(ctx, collection, key, value)
}

// Delete implements meta.Store.
func (m *MetaStore) Delete(ctx context.Context, collection, key string) error {
	return m.n.Apply(ctx, Command{Op: OpMetaDelete, Collection: collection, Key: key})
}

// Create implements meta.Creator: the leader decides between concurrent
// creates of one key.
func (m *MetaStore) Create(ctx context.Context, collection, key string, value []byte) error {
	return m.n.Apply(ctx, Command{Op: OpMetaCreate, Collection: collection, Key: key, Value: value})
}

// Swap implements meta.Swapper: the leader's state machine compares
// against the latest committed value, so a stale replica's read loses.
func (m *MetaStore) Swap(ctx context.Context, collection, key string, old, value []byte) error {
	return m.n.Apply(ctx, Command{Op: OpMetaSwap, Collection: collection, Key: key, Old: old, Value: value})
}

// catchUp waits until this replica has applied what the leader had
// applied when asked (at most 2 s).
func (n *Node) catchUp(ctx context.Context) error {
	if n.IsLeader() {
		return nil
	}
	leader := n.leaderAddr()
	if leader == "" {
		return nil // no leader: the replica is as good as it gets
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	status, body, err := n.post(ctx, leader, PathIndex, nil)
	if err != nil || status != http.StatusOK {
		return nil // answer from the replica rather than fail a read
	}
	var idx struct {
		Applied uint64 `json:"applied"`
	}
	if err := json.Unmarshal(body, &idx); err != nil {
		return err
	}
	for n.fsm.applied.Load() < idx.Applied {
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil
			}
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil
}
