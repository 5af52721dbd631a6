package webhook

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/operators/story"
	"github.com/newsflow/newsflow/state"
)

// Name is the webhooks operator's name.
const Name = "webhooks"

// The webhooks operator keeps the outbox in its state, committed with its
// input offsets like every stage's:
//
//   - a record of schema.TopicStoriesBreaking (story.Episode: a story
//     began a breaking episode) puts one delivery per hook the story passes
//     in the outbox, once per episode: only an episode past the last
//     articles offset announced is (so a stories task that applies its
//     records again after a crash, or a stories stage replayed from the
//     log, emits its episodes again and announces nothing twice);
//   - a record of schema.TopicWebhookDeliveries (Event) says what became
//     of a try: the delivery leaves the outbox (delivered, dead-lettered,
//     its hook gone), or waits for its next try.
//
// The dispatcher (dispatch.go) on the node that runs the task delivers
// what the outbox holds and appends the Events. So every announcement is
// exactly once, a delivery is at least once (a crash between a try and its
// Event tries it again), and the outbox moves with the task: restored from
// its changelog by the node that takes it over.
//
// State keys: "o" hook "/" delivery id → pending (JSON); "m" → the
// articles offset of the last episode announced (8 bytes).
var (
	keyOutbox = []byte("o")
	keyMark   = []byte("m")
)

// Event kinds.
const (
	// EventTried is the outcome of a try: Done, or Tries and NextAt.
	EventTried = "tried"
	// EventImported is a delivery from the outbox of an older release,
	// kept in the metadata store: Pending.
	EventImported = "imported"
)

// Event is a record of schema.TopicWebhookDeliveries.
type Event struct {
	Kind string `json:"kind"`
	Hook string `json:"hook"`
	ID   string `json:"id"` // the delivery id
	// Done: the delivery leaves the outbox. Otherwise it has failed Tries
	// tries and the next falls due at NextAt (ms).
	Done   bool  `json:"done,omitempty"`
	Tries  int   `json:"tries,omitempty"`
	NextAt int64 `json:"next_at,omitempty"`
	// Pending is the imported delivery.
	Pending *pending `json:"pending,omitempty"`
}

// Record is e as a record of schema.TopicWebhookDeliveries.
func (e Event) Record(now time.Time) *eventlog.Record {
	v, _ := json.Marshal(e)
	return &eventlog.Record{Topic: schema.TopicWebhookDeliveries, Partition: 0, Key: []byte(e.Hook), Value: v, Timestamp: now.UnixMilli()}
}

// Hooks lists the registered hooks (every owner's with "").
type Hooks interface {
	List(ctx context.Context, owner string) ([]Hook, error)
}

// Operator is the webhooks stage: the outbox (see above). Its view, the
// deliveries of the outbox as last committed, is what the dispatcher
// reads.
type Operator struct {
	queue   int
	hooks   Hooks
	view    atomic.Pointer[[]pending]
	changed chan struct{} // one token after each publish
}

// NewOperator returns the stage; hooks are listed for each episode. queue
// bounds the outbox (Options.Queue): past it a delivery is dead-lettered
// at once.
func NewOperator(opts Options, hooks Hooks) *Operator {
	opts.Queue = cmp.Or(max(0, opts.Queue), DefaultOptions().Queue)
	o := &Operator{queue: opts.Queue, hooks: hooks, changed: make(chan struct{}, 1)}
	o.view.Store(&[]pending{})
	return o
}

// Spec implements engine.Operator.
func (o *Operator) Spec() engine.Spec {
	return engine.Spec{
		Name:        Name,
		Description: "webhook outbox: one delivery per hook a story that begins a breaking episode passes, until it is delivered, dead-lettered or its hook is gone",
		Inputs: []engine.Input{
			{Topic: schema.TopicStoriesBreaking, Key: "every episode, in partition 0"},
			{Topic: schema.TopicWebhookDeliveries, Key: "every outcome, in partition 0"},
		},
		Stores:    []string{"outbox (deliveries pending)", "the articles offset of the last episode announced"},
		Options:   struct{ Queue int }{o.queue},
		Singleton: true,
	}
}

// Outbox returns the deliveries of the outbox as last committed, by hook
// then id. The slice is shared: do not change it.
func (o *Operator) Outbox() []pending { return *o.view.Load() }

// Changed receives a token after each commit that changed the outbox.
func (o *Operator) Changed() <-chan struct{} { return o.changed }

// NewTask implements engine.Operator.
func (o *Operator) NewTask(tc engine.TaskContext) (engine.Task, error) {
	if tc.Partition != engine.SingletonPartition {
		return nil, fmt.Errorf("webhooks: a singleton has no task for partition %d", tc.Partition)
	}
	return &task{op: o, pending: map[string]pending{}, mark: -1, dirty: map[string]bool{}}, nil
}

type task struct {
	op      *Operator
	pending map[string]pending // by pending.key()
	mark    int64              // the articles offset of the last episode announced; -1: none

	dirty     map[string]bool // outbox keys set or deleted since the last Flush
	dirtyMark bool
	changed   bool // the outbox changed since the last publish
}

func (t *task) Restore(r state.Reader) error {
	err := r.Scan(keyOutbox, state.PrefixEnd(keyOutbox), func(k, v []byte) error {
		var p pending
		if err := json.Unmarshal(v, &p); err != nil {
			return fmt.Errorf("webhooks: outbox entry %q: %w", k, err)
		}
		t.pending[p.key()] = p
		return nil
	})
	if err != nil {
		return err
	}
	if v, ok, err := r.Get(keyMark); err != nil {
		return err
	} else if ok {
		if len(v) != 8 {
			return fmt.Errorf("webhooks: corrupt announced mark %x", v)
		}
		t.mark = int64(binary.BigEndian.Uint64(v))
	}
	t.publish()
	return nil
}

func (t *task) Process(pc *engine.ProcessContext, rec *eventlog.Record) error {
	switch rec.Topic {
	case schema.TopicStoriesBreaking:
		return t.announce(rec)
	case schema.TopicWebhookDeliveries:
		var e Event
		if err := json.Unmarshal(rec.Value, &e); err != nil {
			return engine.Invalid("webhook delivery event: %v", err)
		}
		return t.apply(e)
	}
	return engine.Invalid("webhooks: unexpected topic %s", rec.Topic)
}

// announce puts the deliveries of an episode in the outbox: one per hook
// the story passes that existed when the episode was recorded.
func (t *task) announce(rec *eventlog.Record) error {
	var ep story.Episode
	if err := json.Unmarshal(rec.Value, &ep); err != nil || ep.Story.Story == nil || ep.Story.ID == "" || ep.Story.BreakingSince == 0 {
		return engine.Invalid("breaking story: %v", cmpErr(err, errors.New("no story id or breaking_since")))
	}
	if ep.Offset <= t.mark {
		return nil // announced before
	}
	t.mark, t.dirtyMark = ep.Offset, true
	r := ep.Story
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	hooks, err := t.op.hooks.List(ctx, "")
	cancel()
	if err != nil {
		return fmt.Errorf("webhooks: list the hooks: %w", err)
	}
	for _, h := range hooks {
		if !passes(h, r.Story) || h.Created.UnixMilli() > rec.Timestamp {
			continue
		}
		id := DeliveryID(h.ID, r.ID, r.BreakingSince)
		p := pending{ID: id, Hook: h.ID, Owner: h.Owner, NextAt: rec.Timestamp}
		if _, ok := t.pending[p.key()]; ok {
			continue
		}
		p.Body, _ = json.Marshal(Payload{Event: eventBreaking, Delivery: id, Hook: h.ID, SentAt: rec.Timestamp, Story: r})
		if len(t.pending) >= t.op.queue {
			p.Drop = "too many deliveries pending"
		}
		t.put(p)
	}
	return nil
}

// apply applies what became of a delivery. Applied again, it changes
// nothing more.
func (t *task) apply(e Event) error {
	switch e.Kind {
	case EventTried:
		k := e.Hook + "/" + e.ID
		p, ok := t.pending[k]
		switch {
		case !ok:
		case e.Done:
			delete(t.pending, k)
			t.dirty[k], t.changed = true, true
		case e.Tries >= p.Tries:
			p.Tries, p.NextAt = e.Tries, e.NextAt
			t.put(p)
		}
	case EventImported:
		p := e.Pending
		if p == nil || p.ID == "" || p.Hook == "" {
			return engine.Invalid("webhook delivery event: imported without a delivery")
		}
		if _, ok := t.pending[p.key()]; !ok {
			t.put(*p)
		}
	default:
		return engine.Invalid("webhook delivery event: unknown kind %q", e.Kind)
	}
	return nil
}

func (t *task) put(p pending) {
	k := p.key()
	t.pending[k] = p
	t.dirty[k], t.changed = true, true
}

func (t *task) Flush(w state.Writer) error {
	for k := range t.dirty {
		key := append(slices.Clip(keyOutbox), k...)
		p, ok := t.pending[k]
		if !ok {
			if err := w.Delete(key); err != nil {
				return err
			}
			continue
		}
		v, err := json.Marshal(p)
		if err != nil {
			return err
		}
		if err := w.Set(key, v); err != nil {
			return err
		}
	}
	clear(t.dirty)
	if t.dirtyMark {
		if err := w.Set(keyMark, binary.BigEndian.AppendUint64(nil, uint64(t.mark))); err != nil {
			return err
		}
		t.dirtyMark = false
	}
	return nil
}

func (t *task) Committed(engine.CommitInfo) {
	if t.changed {
		t.publish()
	}
}

// publish makes the outbox the view the dispatcher reads.
func (t *task) publish() {
	v := make([]pending, 0, len(t.pending))
	for _, p := range t.pending {
		v = append(v, p)
	}
	slices.SortFunc(v, func(a, b pending) int { return strings.Compare(a.key(), b.key()) })
	t.op.view.Store(&v)
	t.changed = false
	select {
	case t.op.changed <- struct{}{}:
	default:
	}
}

func (t *task) Close() error { return nil }

func cmpErr(err, otherwise error) error {
	if err != nil {
		return err
	}
	return otherwise
}
