package webhook

import (
	"bytes"
	"context"
	"encoding/json"
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
	// Every is how often the breaking stories are checked (default 1s).
	Every time.Duration `yaml:"-"`
	// AllowHTTP lets hooks use http URLs (default: https only), for
	// receivers on a private network.
	AllowHTTP bool `yaml:"allow_http"`
	// Workers try deliveries at once (default 4). A hook has one try in
	// flight at most, an owner PerOwner (default: half the workers, at
	// least one), so one user's hooks never hold every worker.
	Workers  int `yaml:"-"`
	PerOwner int `yaml:"-"`
	// Queue bounds the deliveries this node has pending (default
	// 10,000); beyond, a new delivery is dead-lettered at once.
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
	SentAt   int64        `json:"sent_at"` // ms, when it was announced
	Story    story.Ranked `json:"story"`
}

// eventBreaking is the event of a story that became breaking.
const eventBreaking = "story.breaking"

// DeadLetter receives a delivery that failed its last try, with the reason.
type DeadLetter func(ctx context.Context, hook Hook, body []byte, reason string) error

// Breaking is what the dispatcher reads of the stories.
type Breaking interface {
	Breaking() story.ListResult
}

// Dispatcher watches the breaking stories and delivers them to the hooks
// through the outbox.
//
// One loop (Run's goroutine) owns the schedule: it announces, resumes
// the outbox when the node becomes the writer, and hands the tries that
// fall due to the workers; workers only try (one HTTP request, bounded by
// Options.Timeout) and write the outcome to the outbox.
type Dispatcher struct {
	opts     Options
	store    *Store
	stories  Breaking
	client   *http.Client
	dead     DeadLetter
	log      *slog.Logger
	isWriter func() bool
	now      func() time.Time
	metrics  *metrics
}

// outcome is what became of a try: again, p waits for its next try at
// p.NextAt; gone, its hook was deleted.
type outcome struct {
	p     pending
	again bool
	gone  bool
}

// New returns a dispatcher; client does the POSTs (with the crawler's
// SSRF guard); isWriter says whether this node delivers now (the story
// writer's node).
func New(opts Options, store *Store, stories Breaking, client *http.Client, dead DeadLetter, isWriter func() bool, log *slog.Logger) (*Dispatcher, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	option.Fill(&opts, DefaultOptions())
	if opts.PerOwner == 0 {
		opts.PerOwner = max(1, opts.Workers/2)
	}
	return &Dispatcher{opts: opts, store: store, stories: stories, client: client, dead: dead, isWriter: isWriter, log: log, now: store.now,
		metrics: newMetrics()}, nil
}

// Run watches and delivers until ctx is done. Then it takes no new try,
// lets the tries in flight finish for up to Options.Drain, and returns;
// every delivery not done stays in the outbox for the next writer.
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

// resync is how often the writer reads the whole outbox again.
const resync = time.Minute

// loop runs the schedule until ctx is done.
func (d *Dispatcher) loop(ctx context.Context, work chan<- pending, outcomes <-chan outcome) {
	s := newSched(d.opts.PerOwner)
	idle, writer := d.opts.Workers, false
	var resumed time.Time
	poll := func() {
		switch w := d.isWriter(); {
		case w && (!writer || time.Since(resumed) >= resync):
			// Also now and then: in a cluster, the replica a new writer
			// resumed from may have lagged the old writer's last entries.
			d.resume(ctx, s)
			writer, resumed = true, time.Now()
		case !w && writer:
			s.reset() // the outbox keeps them for the next writer
			writer = false
		}
		if writer {
			d.watch(ctx, s)
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
			s.done(o.p, o.again && writer, o.gone)
		case <-wake:
		case <-tick.C:
			poll()
		}
	}
}

// resume schedules every delivery of the outbox that is not scheduled
// yet: after a start, a crash, or on the node that took the writer role,
// and every resync.
func (d *Dispatcher) resume(ctx context.Context, s *sched) {
	n := 0
	err := d.store.scanPending(ctx, "", func(p pending) error {
		if s.add(p) {
			n++
		}
		return nil
	})
	if err != nil {
		d.log.Error("webhooks: read the outbox", "err", err)
	}
	if n > 0 {
		d.log.Info("webhooks: resumed the outbox", "deliveries", n)
	}
}

// watch announces each story once per breaking episode: the stories whose
// BreakingAt is after what was announced last. Their deliveries go to the
// outbox with the mark that moves past them (Store.announce), with ids
// that depend only on the hook and the episode.
// The mark is in the metadata store, so a restarted node, or the next
// writer after a failover, announces what became breaking meanwhile.
func (d *Dispatcher) watch(ctx context.Context, s *sched) {
	mark, err := d.store.announced(ctx)
	if err != nil {
		d.log.Error("webhooks: read the announced mark", "err", err)
		return
	}
	var news []story.Ranked
	next := mark
	for _, r := range d.stories.Breaking().Stories {
		if r.BreakingAt > mark.At || r.BreakingAt == mark.At && !slices.Contains(mark.IDs, r.ID) {
			news = append(news, r)
			next = next.add(r.BreakingAt, r.ID)
		}
	}
	if len(news) == 0 {
		return
	}
	hooks, err := d.store.List(ctx, "")
	if err != nil {
		d.log.Error("webhooks: list", "err", err)
		return
	}
	now := d.now().UnixMilli()
	var ps []pending
	for _, r := range news {
		for _, h := range hooks {
			if !passes(h, r.Story) {
				continue
			}
			id := DeliveryID(h.ID, r.ID, r.BreakingAt)
			body, _ := json.Marshal(Payload{Event: eventBreaking, Delivery: id, Hook: h.ID, SentAt: now, Story: r})
			if s.len()+len(ps) >= d.opts.Queue {
				d.deadLetter(ctx, h, body, "too many deliveries pending")
				continue
			}
			ps = append(ps, pending{ID: id, Hook: h.ID, Owner: h.Owner, NextAt: now, Body: body})
		}
	}
	if err := d.store.announce(ctx, ps, next); err != nil {
		d.log.Error("webhooks: announce", "err", err)
		return // the mark stays: announced again at the next check, under the same ids
	}
	for _, p := range ps {
		s.add(p)
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

// attempt tries p once and writes the outcome to the outbox: delivered
// (2xx) or dead-lettered after its last try, p leaves it; otherwise p
// waits there for its next try. A hook deleted meanwhile (by its owner,
// an admin, or with its owner's account) is tried no more: its deliveries
// leave the outbox.
func (d *Dispatcher) attempt(ctx context.Context, p pending) outcome {
	h, ok, err := d.store.hook(ctx, p.Hook)
	switch {
	case err != nil:
		d.log.Error("webhooks: read the hook", "hook", p.Hook, "err", err)
		p.NextAt = d.now().Add(d.opts.Backoff).UnixMilli()
		return outcome{p: p, again: true}
	case !ok:
		d.log.Info("webhook delivery dropped: the hook was deleted", "hook", p.Hook, "delivery", p.ID, "tries", p.Tries)
		if err := d.store.dropPending(ctx, p.Hook); err != nil {
			d.log.Error("webhooks: drop the deliveries of a deleted hook", "hook", p.Hook, "err", err)
		}
		d.metrics.tries.WithLabelValues(outcomeDropped).Inc()
		return outcome{p: p, gone: true}
	}
	tctx, cancel := context.WithTimeout(ctx, d.opts.Timeout)
	status, err := d.try(tctx, h, p)
	cancel()
	if err == nil && status/100 == 2 {
		if err := d.store.deletePending(ctx, p); err != nil {
			d.log.Error("webhooks: outbox", "delivery", p.ID, "err", err) // tried again: at least once
		}
		_ = d.store.record(ctx, h.ID, func(s *Status) { s.Delivered++; s.LastStatus, s.LastError = status, "" })
		d.metrics.tries.WithLabelValues(outcomeDelivered).Inc()
		return outcome{p: p}
	}
	if ctx.Err() != nil {
		return outcome{p: p} // cut short at shutdown: the outbox keeps p as it was
	}
	reason := fmt.Sprintf("HTTP %d", status)
	if err != nil {
		reason = publicReason(err)
		d.log.Debug("webhook delivery failed", "hook", h.ID, "url", redact.URL(h.URL), "delivery", p.ID, "try", p.Tries+1, "err", redact.Text(err.Error()))
	}
	_ = d.store.record(ctx, h.ID, func(s *Status) { s.Retried++; s.LastStatus, s.LastError = status, reason })
	p.Tries++
	if p.Tries >= d.opts.Attempts {
		d.metrics.tries.WithLabelValues(outcomeDeadLettered).Inc()
		d.deadLetter(ctx, h, p.Body, fmt.Sprintf("%d tries failed, the last: %s", p.Tries, reason))
		if err := d.store.deletePending(ctx, p); err != nil {
			d.log.Error("webhooks: outbox", "delivery", p.ID, "err", err)
		}
		return outcome{p: p}
	}
	d.metrics.tries.WithLabelValues(outcomeFailed).Inc()
	p.NextAt = d.now().Add(retryDelay(d.opts.Backoff, d.opts.MaxBackoff, p.Tries)).UnixMilli()
	if err := d.store.retryPending(ctx, p); err != nil {
		d.log.Error("webhooks: outbox", "delivery", p.ID, "err", err)
	}
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
