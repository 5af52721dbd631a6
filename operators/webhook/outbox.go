package webhook

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/newsflow/newsflow/internal/meta"
)

// The outbox ("webhook-outbox" in the metadata store: hook id, "/",
// delivery id → pending) holds every delivery from before the announced
// mark moves past its story until it succeeded, was dead-lettered or its
// hook went. In a cluster it is replicated with the mark, so the node
// that takes the story writer role after a failover resumes it.
const colOutbox = "webhook-outbox"

// pending is a delivery in the outbox.
type pending struct {
	ID    string `json:"id"` // the delivery id, X-Newsflow-Delivery
	Hook  string `json:"hook"`
	Owner string `json:"owner"`
	// Tries is how many tries failed so far; NextAt (ms) is when the
	// next falls due.
	Tries  int             `json:"tries,omitempty"`
	NextAt int64           `json:"next_at"`
	Body   json.RawMessage `json:"body"`
}

func (p pending) key() string { return p.Hook + "/" + p.ID }

// DeliveryID is the id of the delivery of a story's breaking episode
// (the story became breaking at breakingAt, ms) to a hook: the same
// whichever node announces it and however often, so a receiver
// deduplicates the repeats that at least once implies.
func DeliveryID(hook, storyID string, breakingAt int64) string {
	h := sha256.New()
	h.Write([]byte(hook))
	h.Write([]byte{0})
	h.Write([]byte(storyID))
	h.Write([]byte{0})
	h.Write([]byte(strconv.FormatInt(breakingAt, 10)))
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// announce writes the deliveries ps to the outbox and moves the announced
// mark to m: in one atomic write where the metadata store can
// (meta.Batcher: a node's own store), else each delivery before the mark
// (a cluster's, one Raft command a write). Then a crash between them
// leaves the mark where it was: the stories are announced again under the
// same delivery ids, overwriting the entries, and a receiver sees a repeat
// at worst, never a loss.
func (s *Store) announce(ctx context.Context, ps []pending, m mark) error {
	mv, _ := json.Marshal(m)
	if b, ok := s.meta.(meta.Batcher); ok {
		pairs := make([]meta.Pair, 0, len(ps)+1)
		for _, p := range ps {
			v, _ := json.Marshal(p)
			pairs = append(pairs, meta.Pair{Collection: colOutbox, Key: p.key(), Value: v})
		}
		pairs = append(pairs, meta.Pair{Collection: colState, Key: "announced", Value: mv})
		return b.PutBatch(ctx, pairs)
	}
	for _, p := range ps {
		if err := s.putPending(ctx, p); err != nil {
			return err
		}
	}
	return s.meta.Put(ctx, colState, "announced", mv)
}

// putPending stores p durably.
func (s *Store) putPending(ctx context.Context, p pending) error {
	v, _ := json.Marshal(p)
	if err := s.meta.Put(ctx, colOutbox, p.key(), v); err != nil {
		return fmt.Errorf("webhook: outbox: %w", err)
	}
	return nil
}

// retryPending stores p after a failed try; a crash may lose the update
// (the delivery is then tried again sooner, and more often), never p.
func (s *Store) retryPending(ctx context.Context, p pending) error {
	v, _ := json.Marshal(p)
	return s.meta.PutLazy(ctx, colOutbox, p.key(), v)
}

// deletePending removes p from the outbox.
func (s *Store) deletePending(ctx context.Context, p pending) error {
	return s.meta.Delete(ctx, colOutbox, p.key())
}

// pendingIDs returns the deliveries in the outbox of hook ("" for every
// hook): their delivery ids, in key order.
func (s *Store) pendingIDs(ctx context.Context, hook string) ([]string, error) {
	var ids []string
	err := s.scanPending(ctx, hook, func(p pending) error { ids = append(ids, p.ID); return nil })
	return ids, err
}

func (s *Store) scanPending(ctx context.Context, hook string, fn func(pending) error) error {
	return s.meta.Scan(ctx, colOutbox, func(k string, v []byte) error {
		if hook != "" && !strings.HasPrefix(k, hook+"/") {
			return nil
		}
		var p pending
		if err := json.Unmarshal(v, &p); err != nil {
			return fmt.Errorf("webhook: outbox %s: %w", k, err)
		}
		return fn(p)
	})
}

// dropPending removes every delivery of hook from the outbox.
func (s *Store) dropPending(ctx context.Context, hook string) error {
	var keys []string
	if err := s.scanPending(ctx, hook, func(p pending) error { keys = append(keys, p.key()); return nil }); err != nil {
		return err
	}
	for _, k := range keys {
		if err := s.meta.Delete(ctx, colOutbox, k); err != nil {
			return fmt.Errorf("webhook: outbox: %w", err)
		}
	}
	return nil
}
