package webhook

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/newsflow/newsflow/internal/option"
	"github.com/newsflow/newsflow/internal/redact"
	"github.com/newsflow/newsflow/operators/story"
	"golang.org/x/sync/errgroup"
)

// Options configure a Dispatcher. The zero value is valid.
type Options struct {
	// Attempts is how many times a delivery is tried (default 5); then it
	// is dead-lettered.
	Attempts int `yaml:"attempts"`
	// Backoff is the wait before the second try, doubling up to
	// MaxBackoff (defaults 1s and 1m).
	Backoff    time.Duration `yaml:"backoff"`
	MaxBackoff time.Duration `yaml:"max_backoff"`
	// Timeout bounds one try (default 10s).
	Timeout time.Duration `yaml:"timeout"`
	// Every is how often the breaking stories are checked (default 1s).
	Every time.Duration `yaml:"-"`
	// AllowHTTP lets hooks use http URLs (default: https only), for
	// receivers on a private network.
	AllowHTTP bool `yaml:"allow_http"`
	// Workers deliver at once (default 4); Queue deliveries wait (default
	// 1,000; beyond, a delivery is dead-lettered at once).
	Workers int `yaml:"-"`
	Queue   int `yaml:"-"`
}

// DefaultOptions returns the defaults the zero value stands for.
func DefaultOptions() Options {
	return Options{Attempts: 5, Backoff: time.Second, MaxBackoff: time.Minute, Timeout: 10 * time.Second, Every: time.Second, Workers: 4, Queue: 1000}
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
	SentAt   int64        `json:"sent_at"` // ms, of the first try
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

// Dispatcher watches the breaking stories and delivers them to the hooks.
type Dispatcher struct {
	opts     Options
	store    *Store
	stories  Breaking
	client   *http.Client
	dead     DeadLetter
	log      *slog.Logger
	isWriter func() bool
	queue    chan delivery
}

type delivery struct {
	hook Hook
	id   string // Payload.Delivery
	body []byte
}

// New returns a dispatcher; client does the POSTs (with the crawler's
// SSRF guard); isWriter says whether this node delivers now (the story
// writer's node).
func New(opts Options, store *Store, stories Breaking, client *http.Client, dead DeadLetter, isWriter func() bool, log *slog.Logger) (*Dispatcher, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	option.Fill(&opts, DefaultOptions())
	return &Dispatcher{opts: opts, store: store, stories: stories, client: client, dead: dead, isWriter: isWriter, log: log,
		queue: make(chan delivery, opts.Queue)}, nil
}

// Run watches and delivers until ctx is done.
func (d *Dispatcher) Run(ctx context.Context) error {
	g, ctx := errgroup.WithContext(ctx)
	for range d.opts.Workers {
		g.Go(func() error {
			for {
				select {
				case <-ctx.Done():
					return nil
				case dl := <-d.queue:
					d.deliver(ctx, dl)
				}
			}
		})
	}
	g.Go(func() error { d.watch(ctx); return nil })
	return g.Wait()
}

// watch announces each story once per breaking episode: the stories whose
// BreakingAt is after what was announced last. That mark is kept in the
// metadata store, so a restarted node, or the next writer after a
// failover, announces what became breaking meanwhile and nothing twice.
func (d *Dispatcher) watch(ctx context.Context) {
	t := time.NewTicker(d.opts.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !d.isWriter() {
			continue
		}
		mark, err := d.store.announced(ctx)
		if err != nil {
			d.log.Error("webhooks: read the announced mark", "err", err)
			continue
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
			continue
		}
		// The mark first: a crash between it and the deliveries loses
		// them, where the other order would repeat them; deliveries
		// that are queued are at least once from here.
		if err := d.store.setAnnounced(ctx, next); err != nil {
			d.log.Error("webhooks: write the announced mark", "err", err)
			continue
		}
		for _, r := range news {
			d.announce(ctx, r)
		}
	}
}

// announce queues a delivery of r to every hook it passes.
func (d *Dispatcher) announce(ctx context.Context, r story.Ranked) {
	hooks, err := d.store.List(ctx, "")
	if err != nil {
		d.log.Error("webhooks: list", "err", err)
		return
	}
	for _, h := range hooks {
		if !passes(h, r.Story) {
			continue
		}
		var b [8]byte
		_, _ = rand.Read(b[:])
		id := hex.EncodeToString(b[:])
		body, _ := json.Marshal(Payload{Event: eventBreaking, Delivery: id, Hook: h.ID, SentAt: time.Now().UnixMilli(), Story: r})
		select {
		case d.queue <- delivery{h, id, body}:
		default:
			d.deadLetter(ctx, h, body, "delivery queue full")
		}
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

// deliver tries a delivery until it succeeds (2xx) or its attempts are
// spent, then dead-letters it. A hook deleted meanwhile (by its owner, an
// admin, or with its owner's account) is tried no more.
func (d *Dispatcher) deliver(ctx context.Context, dl delivery) {
	wait := d.opts.Backoff
	var reason string
	for attempt := 1; attempt <= d.opts.Attempts; attempt++ {
		if ok, err := d.store.exists(ctx, dl.hook.ID); err == nil && !ok {
			d.log.Info("webhook delivery dropped: the hook was deleted", "hook", dl.hook.ID, "delivery", dl.id, "attempt", attempt)
			return
		}
		status, err := d.try(ctx, dl)
		if err == nil && status/100 == 2 {
			_ = d.store.record(ctx, dl.hook.ID, func(s *Status) { s.Delivered++; s.LastStatus, s.LastError = status, "" })
			return
		}
		reason = fmt.Sprintf("HTTP %d", status)
		if err != nil {
			reason = publicReason(err)
			d.log.Debug("webhook delivery failed", "hook", dl.hook.ID, "url", redact.URL(dl.hook.URL), "attempt", attempt, "err", redact.Text(err.Error()))
		}
		_ = d.store.record(ctx, dl.hook.ID, func(s *Status) { s.Retried++; s.LastStatus, s.LastError = status, reason })
		if attempt == d.opts.Attempts {
			break
		}
		select {
		case <-ctx.Done():
			d.deadLetter(context.Background(), dl.hook, dl.body, "shutting down after "+reason)
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, d.opts.MaxBackoff)
	}
	d.deadLetter(ctx, dl.hook, dl.body, fmt.Sprintf("%d tries failed, the last: %s", d.opts.Attempts, reason))
}

func (d *Dispatcher) try(ctx context.Context, dl delivery) (int, error) {
	ts := time.Now().UnixMilli()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, dl.hook.URL, bytes.NewReader(dl.body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "newsflow-webhook/1")
	req.Header.Set("X-Newsflow-Event", eventBreaking)
	req.Header.Set("X-Newsflow-Delivery", dl.id)
	req.Header.Set("X-Newsflow-Timestamp", strconv.FormatInt(ts, 10))
	req.Header.Set("X-Newsflow-Signature", Sign(dl.hook.Secret, ts, dl.body))
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
