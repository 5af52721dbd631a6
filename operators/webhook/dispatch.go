package webhook

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/newsflow/newsflow/internal/option"
	"github.com/newsflow/newsflow/internal/redact"
	"github.com/newsflow/newsflow/operators/story"
)

// Options configure a Dispatcher. The zero value is valid.
type Options struct {
	// Attempts is how many times a delivery is tried (default 5); then it
	// is dead-lettered.
	Attempts int `yaml:"attempts"`
	// Backoff is the wait before the second try, doubling up to
	// MaxBackoff (defaults 1s and 1m). A delivery waits for its retry in
	// the outbox, holding no worker.
	Backoff    time.Duration `yaml:"backoff"`
	MaxBackoff time.Duration `yaml:"max_backoff"`
	// Timeout bounds one try (default 10s).
	Timeout time.Duration `yaml:"timeout"`
	// Every is how often the dispatcher checks, besides each commit of the
	// outbox, whether this node runs the webhooks task (default 1s).
	Every time.Duration `yaml:"-"`
	// AllowHTTP lets hooks use http URLs (default: https only), for
	// receivers on a private network.
	AllowHTTP bool `yaml:"allow_http"`
	// Workers try deliveries at once (default 4). A hook has one try in
	// flight at most, an owner PerOwner (default: half the workers, at
	// least one), so one user's hooks never hold every worker.
	Workers  int `yaml:"-"`
	PerOwner int `yaml:"-"`
	// Queue bounds the deliveries the outbox holds (default 10,000);
	// beyond, a new delivery is dead-lettered at once, untried.
	Queue int `yaml:"-"`
	// Drain bounds how long the tries in flight may go on once Run's
	// context is done (default 5s); what is not delivered by then stays
	// in the outbox.
	Drain time.Duration `yaml:"-"`
}

// DefaultOptions returns the defaults the zero value stands for.
func DefaultOptions() Options {
	return Options{Attempts: 5, Backoff: time.Second, MaxBackoff: time.Minute, Timeout: 10 * time.Second, Every: time.Second, Workers: 4,
		Queue: 10_000, Drain: 5 * time.Second}
}

// Validate reports invalid option values.
func (o Options) Validate() error {
	return option.Join("webhook", option.NotNegative("attempts", o.Attempts), option.NotNegative("backoff", o.Backoff),
		option.NotNegative("max_backoff", o.MaxBackoff), option.NotNegative("timeout", o.Timeout))
}

// Payload is the body of a delivery.
type Payload struct {
	Event    string       `json:"event"` // "story.breaking"
	Delivery string       `json:"delivery"`
	Hook     string       `json:"hook"`
	SentAt   int64        `json:"sent_at"` // ms, when its episode was recorded (the log time of the article that began it)
	Story    story.Ranked `json:"story"`
}

// eventBreaking is the event of a story that became breaking.
const eventBreaking = "story.breaking"

// DeadLetter receives a delivery that failed its last try, with the reason.
type DeadLetter func(ctx context.Context, hook Hook, body []byte, reason string) error

// Report makes an Event durable (appends it to
// schema.TopicWebhookDeliveries), for the operator to apply.
type Report func(ctx context.Context, e Event) error

// Dispatcher delivers what the webhooks operator's outbox holds, on the
// node that runs the operator's task.
//
// One loop (Run's goroutine) owns the schedule: it takes in the outbox
// after each commit of the task while this node runs it, and hands the
// tries that fall due to the workers; workers only try (one HTTP request,
// bounded by Options.Timeout) and report the outcome (an Event).
type Dispatcher struct {
	opts     Options
	store    *Store
	outbox   *Operator
	client   *http.Client
	dead     DeadLetter
	report   Report
	log      *slog.Logger
	isWriter func() bool
	now      func() time.Time
	metrics  *metrics
}

// outcome is what became of a try: again, p waits for its next try at
// p.NextAt (also when the outcome could not be reported: p stays in the
// outbox); gone, its hook was deleted; neither, p is done.
type outcome struct {
	p     pending
	again bool
	gone  bool
}

// New returns a dispatcher of outbox's deliveries; client does the POSTs
// (with the crawler's SSRF guard); report makes outcomes durable;
// isWriter says whether this node runs outbox's task now.
func New(opts Options, store *Store, outbox *Operator, client *http.Client, dead DeadLetter, report Report, isWriter func() bool, log *slog.Logger) (*Dispatcher, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	option.Fill(&opts, DefaultOptions())
	if opts.PerOwner == 0 {
		opts.PerOwner = max(1, opts.Workers/2)
	}
	return &Dispatcher{opts: opts, store: store, outbox: outbox, client: client, dead: dead, report: report, isWriter: isWriter, log: log,
		now: store.now, metrics: newMetrics()}, nil
}

// Run delivers until ctx is done. Then it takes no new try, lets the
// tries in flight finish for up to Options.Drain, and returns; every
// delivery not done stays in the outbox for the task's next run.
func (d *Dispatcher) Run(ctx context.Context) error {
	tryCtx, cancelTries := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelTries()
	work := make(chan pending, d.opts.Workers)
	outcomes := make(chan outcome, d.opts.Workers) // never full: at most Workers tries in flight
	var wg sync.WaitGroup
	for range d.opts.Workers {
		wg.Go(func() {
			for p := range work {
				outcomes <- d.attempt(tryCtx, p)
			}
		})
	}
	d.loop(ctx, work, outcomes)
	close(work)
	t := time.AfterFunc(d.opts.Drain, cancelTries)
	defer t.Stop()
	wg.Wait()
	return nil
}

// loop runs the schedule until ctx is done.
func (d *Dispatcher) loop(ctx context.Context, work chan<- pending, outcomes <-chan outcome) {
	s := newSched(d.opts.PerOwner)
	// finished holds the deliveries whose last outcome was reported but
	// that the outbox still lists (its task has not committed the Event
	// yet): they are not taken in again.
	finished := map[string]bool{}
	idle, writer := d.opts.Workers, false
	poll := func() {
		switch w := d.isWriter(); {
		case w && !writer:
			d.migrate(ctx)
			writer = true
		case !w && writer:
			s.reset() // the outbox keeps them for the task's next run
			writer = false
		}
		if writer {
			d.takeIn(s, finished)
		}
	}
	poll()
	tick := time.NewTicker(d.opts.Every)
	defer tick.Stop()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		d.metrics.pending.Set(float64(s.len()))
		var wake <-chan time.Time
		if writer {
			for idle > 0 {
				p, ok := s.next(d.now())
				if !ok {
					break
				}
				idle--
				work <- p
			}
			if at, ok := s.wake(); ok && idle > 0 {
				timer.Reset(at.Sub(d.now()))
				wake = timer.C
			}
		}
		select {
		case <-ctx.Done():
			return
		case o := <-outcomes:
			idle++
			if !o.again && !o.gone {
				finished[o.p.ID] = true
			}
			s.done(o.p, o.again && writer, o.gone)
		case <-wake:
		case <-d.outbox.Changed():
			poll()
		case <-tick.C:
			poll()
		}
	}
}

// takeIn schedules every delivery of the outbox that is not scheduled
// yet, nor finished.
func (d *Dispatcher) takeIn(s *sched, finished map[string]bool) {
	box := d.outbox.Outbox()
	listed := make(map[string]bool, len(finished))
	for _, p := range box {
		if finished[p.ID] {
			listed[p.ID] = true
			continue
		}
		s.add(p)
	}
	for id := range finished {
		if !listed[id] {
			delete(finished, id) // its Event is committed
		}
	}
}

// migrate moves the deliveries an older release left in the metadata
// store's outbox into the operator's (EventImported), then deletes them
// there, with the old announced mark. A crash in between imports them
// again: the operator keeps the first.
func (d *Dispatcher) migrate(ctx context.Context) {
	n := 0
	err := d.store.scanPending(ctx, "", func(p pending) error {
		if err := d.report(ctx, Event{Kind: EventImported, Hook: p.Hook, ID: p.ID, Pending: &p}); err != nil {
			return err
		}
		n++
		return d.store.deletePending(ctx, p)
	})
	if err == nil {
		err = d.store.meta.Delete(ctx, colState, "announced")
	}
	if err != nil {
		d.log.Error("webhooks: move the outbox of the metadata store", "moved", n, "err", err)
		return
	}
	if n > 0 {
		d.log.Info("webhooks: moved the outbox of the metadata store into the webhooks stage", "deliveries", n)
	}
}

func passes(h Hook, st *story.Story) bool {
	if len(h.Topics) > 0 && !slices.ContainsFunc(st.Topics, func(l story.Label) bool { return slices.Contains(h.Topics, l.Topic) }) {
		return false
	}
	if len(h.Sources) > 0 && !slices.ContainsFunc(st.Sources, func(s story.SourceCount) bool { return slices.Contains(h.Sources, s.SourceID) }) {
		return false
	}
	return true
}

// attempt tries p once and reports the outcome: delivered (2xx) or
// dead-lettered after its last try, p leaves the outbox; otherwise it
// waits there for its next try. A hook deleted meanwhile (by its owner, an
// admin, or with its owner's account) is tried no more: its deliveries
// leave the outbox. An outcome that cannot be reported is a failed try
// that is not counted: p is tried again.
func (d *Dispatcher) attempt(ctx context.Context, p pending) outcome {
	h, ok, err := d.store.hook(ctx, p.Hook)
	switch {
	case err != nil:
		d.log.Error("webhooks: read the hook", "hook", p.Hook, "err", err)
		return d.later(p)
	case !ok:
		if !d.reported(ctx, Event{Kind: EventTried, Hook: p.Hook, ID: p.ID, Done: true}) {
			return d.later(p)
		}
		d.log.Info("webhook delivery dropped: the hook was deleted", "hook", p.Hook, "delivery", p.ID, "tries", p.Tries)
		d.metrics.tries.WithLabelValues(outcomeDropped).Inc()
		return outcome{p: p, gone: true}
	case p.Drop != "":
		if !d.reported(ctx, Event{Kind: EventTried, Hook: p.Hook, ID: p.ID, Done: true}) {
			return d.later(p)
		}
		d.metrics.tries.WithLabelValues(outcomeDeadLettered).Inc()
		d.deadLetter(ctx, h, p.Body, p.Drop)
		return outcome{p: p}
	}
	tctx, cancel := context.WithTimeout(ctx, d.opts.Timeout)
	status, err := d.try(tctx, h, p)
	cancel()
	if err == nil && status/100 == 2 {
		if !d.reported(ctx, Event{Kind: EventTried, Hook: p.Hook, ID: p.ID, Done: true}) {
			return d.later(p) // tried again: at least once
		}
		_ = d.store.record(ctx, h.ID, func(s *Status) { s.Delivered++; s.LastStatus, s.LastError = status, "" })
		d.metrics.tries.WithLabelValues(outcomeDelivered).Inc()
		return outcome{p: p}
	}
	if ctx.Err() != nil {
		return outcome{p: p, again: true} // cut short at shutdown: the outbox keeps p as it was
	}
	reason := fmt.Sprintf("HTTP %d", status)
	if err != nil {
		reason = publicReason(err)
		d.log.Debug("webhook delivery failed", "hook", h.ID, "url", redact.URL(h.URL), "delivery", p.ID, "try", p.Tries+1, "err", redact.Text(err.Error()))
	}
	tried := p
	tried.Tries++
	if tried.Tries >= d.opts.Attempts {
		if !d.reported(ctx, Event{Kind: EventTried, Hook: p.Hook, ID: p.ID, Done: true}) {
			return d.later(p)
		}
		_ = d.store.record(ctx, h.ID, func(s *Status) { s.Retried++; s.LastStatus, s.LastError = status, reason })
		d.metrics.tries.WithLabelValues(outcomeDeadLettered).Inc()
		d.deadLetter(ctx, h, p.Body, fmt.Sprintf("%d tries failed, the last: %s", tried.Tries, reason))
		return outcome{p: tried}
	}
	tried.NextAt = d.now().Add(retryDelay(d.opts.Backoff, d.opts.MaxBackoff, tried.Tries)).UnixMilli()
	if !d.reported(ctx, Event{Kind: EventTried, Hook: p.Hook, ID: p.ID, Tries: tried.Tries, NextAt: tried.NextAt}) {
		return d.later(p)
	}
	_ = d.store.record(ctx, h.ID, func(s *Status) { s.Retried++; s.LastStatus, s.LastError = status, reason })
	d.metrics.tries.WithLabelValues(outcomeFailed).Inc()
	return outcome{p: tried, again: true}
}

// reported reports e and says whether it is durable.
func (d *Dispatcher) reported(ctx context.Context, e Event) bool {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := d.report(rctx, e); err != nil {
		d.log.Error("webhooks: record the outcome of a try; it is tried again", "hook", e.Hook, "delivery", e.ID, "err", err)
		return false
	}
	return true
}

// later is p again after Options.Backoff, its tries as they were.
func (d *Dispatcher) later(p pending) outcome {
	p.NextAt = d.now().Add(d.opts.Backoff).UnixMilli()
	return outcome{p: p, again: true}
}

func (d *Dispatcher) try(ctx context.Context, h Hook, p pending) (int, error) {
	ts := d.now().UnixMilli()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL, bytes.NewReader(p.Body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "newsflow-webhook/1")
	req.Header.Set("X-Newsflow-Event", eventBreaking)
	req.Header.Set("X-Newsflow-Delivery", p.ID)
	req.Header.Set("X-Newsflow-Timestamp", strconv.FormatInt(ts, 10))
	req.Header.Set("X-Newsflow-Signature", Sign(h.Secret, ts, p.Body))
	resp, err := d.client.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return resp.StatusCode, nil
}

// publicReason is why a try failed as the hook's status and the dead
// letter keep it, which its owner and admins read: without the
// credentials of the hook's URL and without the node's own addresses (its
// DNS resolver, its end of the connection).
func publicReason(err error) string {
	return redact.Text(redact.InternalAddrs(err.Error()))
}

// deadLetter records a delivery that failed its last try; the log names
// the hook's URL without its credentials.
func (d *Dispatcher) deadLetter(ctx context.Context, h Hook, body []byte, reason string) {
	d.log.Warn("webhook delivery dead-lettered", "hook", h.ID, "url", redact.URL(h.URL), "reason", reason)
	_ = d.store.record(ctx, h.ID, func(s *Status) { s.DeadLettered++; s.LastError = reason })
	if d.dead != nil {
		if err := d.dead(ctx, h, body, reason); err != nil {
			d.log.Error("webhook: dead letter", "hook", h.ID, "err", err)
		}
	}
}
