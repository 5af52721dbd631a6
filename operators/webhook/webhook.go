// Package webhook delivers breaking news to URLs readers and admins
// register: when a story becomes breaking, every hook whose filter it
// passes gets a signed JSON POST, retried with backoff, and dead-lettered
// after the last try.
//
// Hooks live in the metadata store ("webhooks": id → Hook; "webhook-status":
// id → Status), so every node of a cluster knows them. The outbox is the
// state of the webhooks operator (operator.go): each breaking episode the
// stories operator emits is announced into it once, and each delivery
// waits there until it is delivered, dead-lettered or its hook goes. The
// node that runs the operator's task delivers (dispatch.go; the caller
// decides: New's isWriter), so a restarted node, or the next owner after
// a failover, resumes what was pending. A delivery is at least once: a
// receiver deduplicates by the X-Newsflow-Delivery header, the same on
// every try (DeliveryID).
//
// Retries are scheduled, not slept (sched.go): a hook has one try in
// flight at most and an owner's hooks at most half the workers, so a
// receiver that never answers delays only its own hook.
//
// Signature: X-Newsflow-Signature is "sha256=" and the hex HMAC-SHA256,
// keyed by the hook's secret, of X-Newsflow-Timestamp (ms), a dot, and the
// body. A receiver recomputes it and refuses old timestamps.
package webhook

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/newsflow/newsflow/internal/jsontime"
	"github.com/newsflow/newsflow/internal/meta"
)

// Hook is a registered webhook.
type Hook struct {
	ID    string `json:"id"`
	Owner string `json:"owner"` // user id
	URL   string `json:"url"`
	// Secret keys the signature; shown to its owner.
	Secret string `json:"secret"`
	// Topics and Sources filter the stories (empty: any); a story passes
	// with one of its topics and one of its sources.
	Topics  []string        `json:"topics,omitempty"`
	Sources []string        `json:"sources,omitempty"`
	Created jsontime.Millis `json:"created_at"`
}

// Status is what became of a hook's deliveries.
type Status struct {
	Delivered    int             `json:"delivered"`
	Retried      int             `json:"retried"`
	DeadLettered int             `json:"dead_lettered"`
	LastAttempt  jsontime.Millis `json:"last_attempt_at,omitzero"`
	LastStatus   int             `json:"last_status,omitempty"`
	LastError    string          `json:"last_error,omitempty"`
}

// Errors callers branch on.
var (
	ErrInvalid  = errors.New("invalid webhook")
	ErrNotFound = errors.New("no such webhook")
	ErrTooMany  = fmt.Errorf("at most %d webhooks per user", MaxPerUser)
)

// MaxPerUser bounds a user's hooks.
const MaxPerUser = 10

const (
	colHooks  = "webhooks"
	colStatus = "webhook-status"
	colState  = "webhook-state"
)

// Store keeps hooks in the metadata store. Safe for concurrent use.
type Store struct {
	meta      meta.Store
	now       func() time.Time
	allowHTTP bool
	mu        sync.Mutex // serializes status updates of this process
}

// NewStore returns hooks over m; now is the clock (time.Now when nil).
// Hook URLs must be https unless allowHTTP (webhooks.allow_http: receivers
// on a private network, tests).
func NewStore(m meta.Store, now func() time.Time, allowHTTP bool) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{meta: m, now: now, allowHTTP: allowHTTP}
}

// Add registers a hook for owner. URL must be absolute http or https.
func (s *Store) Add(ctx context.Context, owner, rawURL string, topics, sources []string) (Hook, error) {
	u, err := url.Parse(strings.TrimSpace(rawURL))
	switch {
	case err != nil || u.Host == "" || len(rawURL) > 2048 || (u.Scheme != "http" && u.Scheme != "https"):
		return Hook{}, fmt.Errorf("%w: the URL must be an absolute https URL", ErrInvalid)
	case u.Scheme == "http" && !s.allowHTTP:
		return Hook{}, fmt.Errorf("%w: the URL must be https (webhooks.allow_http allows http)", ErrInvalid)
	}
	for _, l := range [][]string{topics, sources} {
		if len(l) > 50 || slices.ContainsFunc(l, func(v string) bool { return v == "" || len(v) > 128 }) {
			return Hook{}, fmt.Errorf("%w: at most 50 topics and 50 sources, each 1 to 128 bytes", ErrInvalid)
		}
	}
	mine, err := s.List(ctx, owner)
	if err != nil {
		return Hook{}, err
	}
	if len(mine) >= MaxPerUser {
		return Hook{}, ErrTooMany
	}
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return Hook{}, err
	}
	id := hex.EncodeToString(b[:8])
	h := Hook{ID: id, Owner: owner, URL: u.String(), Secret: base64.RawURLEncoding.EncodeToString(b[8:]),
		Topics: topics, Sources: sources, Created: jsontime.Of(s.now())}
	v, _ := json.Marshal(h)
	if err := s.meta.Put(ctx, colHooks, id, v); err != nil {
		return Hook{}, fmt.Errorf("webhook: add: %w", err)
	}
	return h, nil
}

// List returns owner's hooks ("" for every hook), oldest first.
func (s *Store) List(ctx context.Context, owner string) ([]Hook, error) {
	out := []Hook{}
	err := s.meta.Scan(ctx, colHooks, func(_ string, v []byte) error {
		var h Hook
		if err := json.Unmarshal(v, &h); err != nil {
			return err
		}
		if owner == "" || h.Owner == owner {
			out = append(out, h)
		}
		return nil
	})
	slices.SortStableFunc(out, func(a, b Hook) int { return a.Created.Compare(b.Created.Time) })
	return out, err
}

// Delete removes owner's hook ("" owner: any hook, for an admin).
func (s *Store) Delete(ctx context.Context, owner, id string) error {
	v, ok, err := s.meta.Get(ctx, colHooks, id)
	if err != nil {
		return err
	}
	var h Hook
	if !ok || json.Unmarshal(v, &h) != nil || owner != "" && h.Owner != owner {
		return ErrNotFound
	}
	if err := s.meta.Delete(ctx, colStatus, id); err != nil {
		return err
	}
	// Its deliveries leave the outbox when they fall due: a try finds
	// the hook gone first.
	return s.meta.Delete(ctx, colHooks, id)
}

// DeleteOwner removes every hook of owner with its status and the
// deliveries of the outbox, when the account goes, and returns how many
// hooks it removed. A delivery of them that is queued or waits for a retry
// is dropped before its next try (Dispatcher).
func (s *Store) DeleteOwner(ctx context.Context, owner string) (int, error) {
	if owner == "" {
		return 0, fmt.Errorf("%w: no owner", ErrInvalid)
	}
	hooks, err := s.List(ctx, owner)
	if err != nil {
		return 0, err
	}
	for i, h := range hooks {
		if err := s.Delete(ctx, owner, h.ID); err != nil && !errors.Is(err, ErrNotFound) {
			return i, fmt.Errorf("webhook: delete %s: %w", h.ID, err)
		}
	}
	return len(hooks), nil
}

// exists reports whether the hook id is registered.
func (s *Store) exists(ctx context.Context, id string) (bool, error) {
	_, ok, err := s.meta.Get(ctx, colHooks, id)
	return ok, err
}

// hook returns the hook id, false if there is none.
func (s *Store) hook(ctx context.Context, id string) (Hook, bool, error) {
	var h Hook
	v, ok, err := s.meta.Get(ctx, colHooks, id)
	if err == nil && ok {
		err = json.Unmarshal(v, &h)
	}
	return h, ok, err
}

// Status returns what became of a hook's deliveries.
func (s *Store) Status(ctx context.Context, id string) (Status, error) {
	var st Status
	v, ok, err := s.meta.Get(ctx, colStatus, id)
	if err == nil && ok {
		err = json.Unmarshal(v, &st)
	}
	return st, err
}

// record updates a hook's status after an attempt.
func (s *Store) record(ctx context.Context, id string, fn func(*Status)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ok, err := s.exists(ctx, id); err != nil || !ok {
		return err // deleted meanwhile: no status to keep
	}
	st, err := s.Status(ctx, id)
	if err != nil {
		return err
	}
	st.LastAttempt = jsontime.Of(s.now())
	fn(&st)
	v, _ := json.Marshal(st)
	return s.meta.PutLazy(ctx, colStatus, id, v)
}

// Sign returns the signature header value of a body sent at ts (ms).
func Sign(secret string, ts int64, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(strconv.FormatInt(ts, 10)))
	m.Write([]byte{'.'})
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}
