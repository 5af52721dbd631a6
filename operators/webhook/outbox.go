package webhook

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// colOutbox ("webhook-outbox" in the metadata store: hook id, "/",
// delivery id → pending) is where releases before the webhooks operator
// kept the outbox, with the announced mark in colState; the dispatcher
// moves what it finds there into the operator (Dispatcher.migrate).
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
	// Drop is why the delivery is dead-lettered without a try (the
	// outbox was full when it was announced).
	Drop string `json:"drop,omitempty"`
}

func (p pending) key() string { return p.Hook + "/" + p.ID }

// DeliveryID is the id of the delivery of a story's breaking episode
// (the story became breaking at breakingAt, ms: Story.BreakingSince) to a
// hook: the same
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

// deletePending removes p from the outbox.
func (s *Store) deletePending(ctx context.Context, p pending) error {
	return s.meta.Delete(ctx, colOutbox, p.key())
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
