package crawl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/internal/feed"
	"github.com/newsflow/newsflow/internal/fetch"
	"github.com/newsflow/newsflow/internal/meta"
	"github.com/newsflow/newsflow/internal/option"
	"github.com/newsflow/newsflow/internal/polite"
	"github.com/newsflow/newsflow/internal/redact"
	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/internal/tracing"
	"github.com/newsflow/newsflow/state"
	"github.com/prometheus/client_golang/prometheus"
)

// Options configures the crawler. The zero value is valid.
type Options struct {
	Fetch   fetch.Options         `yaml:",inline"`
	Limiter polite.LimiterOptions `yaml:",inline"`
	Robots  polite.RobotsOptions  `yaml:"-"`
	Breaker polite.BreakerOptions `yaml:"-"`
	// IgnoreRobots skips robots.txt (for feed farms and tests).
	IgnoreRobots bool `yaml:"ignore_robots"`
	// FullText configures fetching articles' pages for their full text.
	FullText FullTextOptions `yaml:"-"`
	// MaxSeen is how many item ids are remembered per source to recognise
	// items a feed sends again (default 5000).
	MaxSeen int `yaml:"-"`
	// ErrorBackoff and MaxErrorBackoff bound the wait after failures
	// (defaults 1m and 6h).
	ErrorBackoff    time.Duration `yaml:"-"`
	MaxErrorBackoff time.Duration `yaml:"-"`
	// ReloadInterval is how often the source list is re-read to pick up
	// changes made elsewhere (default 30s); Kick picks them up at once.
	ReloadInterval time.Duration `yaml:"-"`
	// ManualCrawlInterval is the shortest time between two manual crawls of
	// one source (default 1m).
	ManualCrawlInterval time.Duration `yaml:"-"`
	// Partitions is the partition count articles.raw is created with when
	// missing (default 8).
	Partitions int32 `yaml:"-"`
	// SummaryInterval is how often Run logs one line (at Info) summing up
	// the crawls since the previous one, when there were any (default 1m).
	// Each crawl is logged at Debug; a source that starts failing or
	// recovers gets a line of its own (at most a few per round).
	SummaryInterval time.Duration `yaml:"-"`
	// Owns reports whether this node crawls a source; nil means all.
	Owns func(sourceID string) bool `yaml:"-"`
	// Hold, if set, says whether the node holds its writes (its disk
	// nearly full) and why: while it does, Run starts no crawl (those due
	// wait, their sources not charged with an error) and CrawlNow answers
	// ErrHeld.
	Hold       func() (reason string, held bool) `yaml:"-"`
	Logger     *slog.Logger                      `yaml:"-"`
	Registerer prometheus.Registerer             `yaml:"-"`
	Now        func() time.Time                  `yaml:"-"`
	// Tracing, if set, traces crawls and the items they append.
	Tracing *tracing.Tracing `yaml:"-"`
}

// DefaultOptions returns the defaults the zero value stands for.
func DefaultOptions() Options {
	return Options{
		Fetch:    fetch.DefaultOptions(),
		Limiter:  polite.DefaultLimiterOptions(),
		Robots:   polite.DefaultRobotsOptions(),
		Breaker:  polite.DefaultBreakerOptions(),
		FullText: DefaultFullTextOptions(), MaxSeen: 5000, Partitions: 8,
		ErrorBackoff: time.Minute, MaxErrorBackoff: 6 * time.Hour, ReloadInterval: 30 * time.Second,
		ManualCrawlInterval: time.Minute, SummaryInterval: time.Minute,
	}
}

// withDefaults fills the crawler's zero fields. Of the fetcher's, limiter's,
// robots cache's and breaker's options, which those fill themselves, it
// fills only the ones left zero as a whole.
func (o Options) withDefaults() Options {
	option.Fill(&o.FullText, DefaultFullTextOptions())
	option.Fill(&o, DefaultOptions())
	// Made here, not in DefaultOptions (where a node's configuration
	// starts): each crawler has a registry of its own.
	option.Fill(&o, Options{Logger: slog.New(slog.DiscardHandler), Registerer: prometheus.NewRegistry(), Now: time.Now})
	return o
}

// Validate reports invalid option values.
func (o Options) Validate() error {
	if o.FullText.MinWords < 0 || o.FullText.MaxPerCrawl < 0 || o.FullText.MaxBytes < 0 {
		return errors.New("crawl: full-text limits must not be negative")
	}
	if o.MaxSeen < 0 || o.Partitions < 0 || o.ErrorBackoff < 0 || o.MaxErrorBackoff < 0 || o.ReloadInterval < 0 || o.ManualCrawlInterval < 0 || o.SummaryInterval < 0 {
		return errors.New("crawl: sizes and durations must not be negative")
	}
	if err := o.Fetch.Validate(); err != nil {
		return err
	}
	if err := o.Limiter.Validate(); err != nil {
		return err
	}
	if err := o.Robots.Validate(); err != nil {
		return err
	}
	return o.Breaker.Validate()
}

// Crawler crawls the active sources it owns on their schedules and appends
// new items to schema.TopicArticlesRaw.
//
// Delivery: an item is appended, then remembered as seen in the state
// database. A crash between the two can append an item again on the next
// crawl; downstream operators deduplicate by article id (a hash of the
// canonical URL), so no article is counted twice.
type Crawler struct {
	opts    Options
	sources *Sources
	log     eventlog.Log
	seen    state.Namespace
	fetcher *fetch.Fetcher
	limiter *polite.Limiter
	robots  *polite.Robots
	m       *crawlMetrics
	round   *roundLog
	kick    chan struct{} // buffered-1: the source list changed
	notify  chan struct{} // buffered-1: sources in mu.changed changed

	mu struct {
		sync.Mutex
		rnd        *rand.Rand
		lastManual map[string]time.Time
		crawling   map[string]bool
		// stopped is closed and replaced whenever a crawling mark is
		// cleared: CrawlNow waits on it for a crawl under way.
		stopped chan struct{}
		changed map[string]bool // sources Notify reported
	}
}

// New returns a crawler over sources that appends to l and keeps its seen
// sets in db.
func New(sources *Sources, l eventlog.Log, db *state.DB, opts Options) (*Crawler, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	f, err := fetch.New(opts.Fetch)
	if err != nil {
		return nil, err
	}
	lim, err := polite.NewLimiter(opts.Limiter)
	if err != nil {
		return nil, err
	}
	c := &Crawler{opts: opts, sources: sources, log: l, seen: db.Namespace("crawl/seen"), fetcher: f, limiter: lim,
		round: newRoundLog(opts.Now()), kick: make(chan struct{}, 1), notify: make(chan struct{}, 1)}
	c.mu.rnd = rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0x6e6577))
	c.mu.lastManual = map[string]time.Time{}
	c.mu.crawling = map[string]bool{}
	c.mu.stopped = make(chan struct{})
	c.mu.changed = map[string]bool{}
	c.robots, err = polite.NewRobots(c.fetchRobots, opts.Robots)
	if err != nil {
		return nil, err
	}
	if c.m, err = newCrawlMetrics(opts.Registerer); err != nil {
		return nil, err
	}
	if err := opts.Registerer.Register(coverageCollector{c}); err != nil {
		return nil, fmt.Errorf("crawl: register metrics: %w", err)
	}
	return c, nil
}

var (
	activeDesc = prometheus.NewDesc("newsflow_crawl_sources_active",
		"Active sources this node crawls.", nil, nil)
	onTimeDesc = prometheus.NewDesc("newsflow_crawl_sources_on_time",
		"Active sources this node crawls whose feed was read within twice their interval, or that are younger than that: on_time / active is the crawl coverage.", nil, nil)
)

// coverageCollector counts, at each scrape, the active sources this node
// crawls and those read on time.
type coverageCollector struct{ c *Crawler }

func (cc coverageCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- activeDesc
	ch <- onTimeDesc
}

func (cc coverageCollector) Collect(ch chan<- prometheus.Metric) {
	active, onTime, err := cc.c.Coverage(context.Background())
	if err != nil {
		// No sample rather than a false one: the series go stale, and the
		// log says why.
		cc.c.opts.Logger.Warn("crawl coverage: list sources", "err", err)
		return
	}
	ch <- prometheus.MustNewConstMetric(activeDesc, prometheus.GaugeValue, float64(active))
	ch <- prometheus.MustNewConstMetric(onTimeDesc, prometheus.GaugeValue, float64(onTime))
}

// Coverage counts the active sources this node crawls and those whose feed
// was read within twice their interval (Source.OnTime).
func (c *Crawler) Coverage(ctx context.Context) (active, onTime int, err error) {
	list, err := c.sources.List(ctx)
	if err != nil {
		return 0, 0, err
	}
	now := c.opts.Now()
	for i := range list {
		s := &list[i]
		if s.Status != StatusActive || (c.opts.Owns != nil && !c.opts.Owns(s.ID)) {
			continue
		}
		active++
		if s.OnTime(now) {
			onTime++
		}
	}
	return active, onTime, nil
}

// Kick makes Run re-read the source list now.
func (c *Crawler) Kick() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// Notify tells the crawler that a source was added or changed elsewhere
// (through another node of a cluster): Run schedules it if it is active,
// this node's and not scheduled yet. Notify does not block.
func (c *Crawler) Notify(id string) {
	c.mu.Lock()
	c.mu.changed[id] = true
	c.mu.Unlock()
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

// takeChanged returns and forgets the sources Notify reported.
func (c *Crawler) takeChanged() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := make([]string, 0, len(c.mu.changed))
	for id := range c.mu.changed {
		ids = append(ids, id)
	}
	clear(c.mu.changed)
	return ids
}

func (c *Crawler) rnd() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.rnd.Float64()
}

// fetchRobots adapts the fetcher to what polite.Robots expects: any HTTP
// answer is a status, errors are for no answer.
func (c *Crawler) fetchRobots(ctx context.Context, robotsURL string) (int, []byte, error) {
	resp, err := c.fetcher.Fetch(ctx, fetch.Request{URL: robotsURL})
	var se *fetch.StatusError
	switch {
	case err == nil:
		return resp.Status, resp.Body, nil
	case errors.As(err, &se):
		return se.Status, nil, nil
	}
	return 0, nil, err
}

// Run crawls until ctx is done, then waits for crawls in flight.
func (c *Crawler) Run(ctx context.Context) error {
	if _, err := eventlog.EnsureTopic(ctx, c.log, schema.TopicArticlesRaw, c.opts.Partitions); err != nil {
		return fmt.Errorf("crawl: ensure topic: %w", err)
	}
	r := &runLoop{c: c, queued: map[string]bool{}, results: make(chan crawlResult),
		workers: max(c.limiter.Options().GlobalConcurrency, 1)}
	defer r.wg.Wait()
	r.reload(ctx)
	reloadTick := time.NewTicker(c.opts.ReloadInterval)
	defer reloadTick.Stop()
	summaryTick := time.NewTicker(c.opts.SummaryInterval)
	defer summaryTick.Stop()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := c.opts.Now()
		wait := time.Hour
		if _, held := c.held(); held {
			wait = time.Second // look again soon; nothing starts meanwhile
		} else {
			r.startDue(ctx, now)
			if at, ok := r.sched.next(); ok && r.inflight < r.workers {
				wait = max(at.Sub(now), 0)
			}
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return nil
		case res := <-r.results:
			r.finished(res)
		case <-c.kick:
			r.reload(ctx)
		case <-c.notify:
			r.changed(ctx)
		case <-reloadTick.C:
			r.reload(ctx)
		case <-summaryTick.C:
			c.round.flush(c.opts.Logger, c.opts.Now())
		case <-timer.C:
		}
	}
}

// runLoop is Run's state: the sources due in order, which are queued, and
// the crawls in flight (at most workers). It is owned by Run's goroutine;
// crawls report on results.
type runLoop struct {
	c        *Crawler
	sched    schedule
	queued   map[string]bool
	results  chan crawlResult
	wg       sync.WaitGroup
	workers  int
	inflight int
}

// reload queues every active source this node crawls that is not queued
// or being crawled, and updates the source metrics.
func (r *runLoop) reload(ctx context.Context) {
	c := r.c
	list, err := c.sources.List(ctx)
	if err != nil {
		c.opts.Logger.Error("crawl: list sources", "err", err)
		return
	}
	open := 0
	owned := map[string]bool{}
	for _, s := range list {
		var br polite.BreakerState
		if len(s.Crawl.Circuit) > 0 && json.Unmarshal(s.Crawl.Circuit, &br) == nil && br.State != polite.Closed {
			open++
		}
		if s.Status != StatusActive || (c.opts.Owns != nil && !c.opts.Owns(s.ID)) {
			continue
		}
		owned[s.ID] = true
		if r.queued[s.ID] || c.isCrawling(s.ID) {
			continue
		}
		r.queue(s.ID, s.Crawl.NextCrawl, s.Authority)
	}
	c.m.sources.Set(float64(len(list)))
	c.m.openCircuits.Set(float64(open))
	c.round.setSources(owned)
}

func (r *runLoop) queue(id string, at time.Time, authority float64) {
	r.queued[id] = true
	r.sched.push(id, at, authority)
}

// startDue starts the crawls that are due, while workers are free.
func (r *runLoop) startDue(ctx context.Context, now time.Time) {
	c := r.c
	for r.inflight < r.workers {
		it, ok := r.sched.popDue(now)
		if !ok {
			return
		}
		delete(r.queued, it.id)
		if c.opts.Owns != nil && !c.opts.Owns(it.id) {
			continue // its partition moved to another node
		}
		if !c.startCrawling(it.id) {
			continue // a manual crawl is running; it reschedules
		}
		r.inflight++
		c.m.scheduleLag.Observe(max(0, now.Sub(it.at).Seconds()))
		r.wg.Go(func() {
			res := c.crawl(ctx, it.id, false)
			select {
			case r.results <- res: // finished clears the crawling mark
			case <-ctx.Done():
				c.stopCrawling(it.id)
			}
		})
	}
}

// finished takes the result of a crawl and queues its source again.
func (r *runLoop) finished(res crawlResult) {
	r.inflight--
	// Cleared here, not by the worker, so that a reload between the end
	// of the crawl and this moment cannot queue the source again.
	r.c.stopCrawling(res.id)
	if res.reschedule && !r.queued[res.id] {
		r.queue(res.id, res.next, res.authority)
	}
}

// changed queues the sources added or edited since the last call.
func (r *runLoop) changed(ctx context.Context) {
	c := r.c
	for _, id := range c.takeChanged() {
		if r.queued[id] || c.isCrawling(id) || (c.opts.Owns != nil && !c.opts.Owns(id)) {
			continue
		}
		s, err := c.sources.Get(ctx, id)
		if err != nil || s.Status != StatusActive {
			continue // deleted, or not to be crawled
		}
		r.queue(s.ID, s.Crawl.NextCrawl, s.Authority)
	}
}

func (c *Crawler) startCrawling(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.crawling[id] {
		return false
	}
	c.mu.crawling[id] = true
	return true
}

func (c *Crawler) stopCrawling(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.mu.crawling, id)
	close(c.mu.stopped)
	c.mu.stopped = make(chan struct{})
}

func (c *Crawler) isCrawling(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.crawling[id]
}

// ErrTooSoon is returned by CrawlNow for a source crawled manually less
// than ManualCrawlInterval ago.
var ErrTooSoon = errors.New("source was crawled manually moments ago")

// ErrHeld is returned by CrawlNow while the node holds its writes
// (Options.Hold); the error's text says why.
var ErrHeld = errors.New("crawling paused")

// held says whether the node holds its writes, and why.
func (c *Crawler) held() (string, bool) {
	if c.opts.Hold == nil {
		return "", false
	}
	return c.opts.Hold()
}

// ErrBusy is returned by CrawlNow when a crawl of the source under way
// did not end within busyWait.
var ErrBusy = errors.New("source is being crawled now")

// busyWait is how long CrawlNow waits for a crawl of the source under way
// (the scheduler's, or another manual one) to end before its own.
const busyWait = 10 * time.Second

// CrawlNow crawls one source at once and returns the record of the crawl.
// If the source is being crawled, it first waits (up to busyWait) for that
// crawl to end.
func (c *Crawler) CrawlNow(ctx context.Context, id string) (CrawlRecord, error) {
	if _, err := c.sources.Get(ctx, id); err != nil {
		return CrawlRecord{}, err
	}
	if reason, held := c.held(); held {
		return CrawlRecord{}, fmt.Errorf("%w: %s", ErrHeld, reason)
	}
	wait := time.NewTimer(busyWait)
	defer wait.Stop()
	c.mu.Lock()
	for c.mu.crawling[id] {
		stopped := c.mu.stopped
		c.mu.Unlock()
		select {
		case <-stopped:
		case <-wait.C:
			return CrawlRecord{}, ErrBusy
		case <-ctx.Done():
			return CrawlRecord{}, ctx.Err()
		}
		c.mu.Lock()
	}
	now := c.opts.Now()
	if last, ok := c.mu.lastManual[id]; ok && now.Sub(last) < c.opts.ManualCrawlInterval {
		c.mu.Unlock()
		return CrawlRecord{}, fmt.Errorf("%w; try again in %s", ErrTooSoon, (c.opts.ManualCrawlInterval - now.Sub(last)).Round(time.Second))
	}
	c.mu.lastManual[id] = now
	c.mu.crawling[id] = true
	c.mu.Unlock()
	res := c.crawl(ctx, id, true)
	c.stopCrawling(id)
	c.Kick() // let Run requeue it with its new schedule
	return res.record, res.err
}

type crawlResult struct {
	id         string
	reschedule bool
	next       time.Time
	authority  float64
	record     CrawlRecord
	err        error
}

// claimTimeout bounds a claim (in a cluster, a write through the leader).
const claimTimeout = 10 * time.Second

// unclaim makes the source due at next again if its latest claim is still
// the one given.
func (c *Crawler) unclaim(id, claim string, next time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := c.sources.Update(ctx, id, func(s *Source) error {
		if s.Crawl.Claim != claim {
			return ErrNotDue // crawled or claimed since
		}
		s.Crawl.NextCrawl, s.Crawl.Claim = next.UTC(), ""
		return nil
	})
	if err != nil && !errors.Is(err, ErrNotDue) {
		c.opts.Logger.Warn("crawl: give back the claim of a crawl cut short", "source", id, "err", err)
	}
}

// crawl fetches one source once and records the outcome on it.
//
// It first claims the source (see Sources.Claim): a source that another
// node crawled since this one scheduled it is only rescheduled, and a
// manual crawl (force) claims it whenever it is due.
func (c *Crawler) crawl(ctx context.Context, id string, force bool) crawlResult {
	res := crawlResult{id: id}
	now := c.opts.Now()
	cctx, cancel := context.WithTimeout(ctx, claimTimeout)
	s, err := c.sources.Claim(cctx, id, now, force)
	cancel()
	switch {
	case errors.Is(err, ErrNotDue):
		res.reschedule, res.next, res.authority = s.Status == StatusActive, s.Crawl.NextCrawl, s.Authority
		return res
	case ctx.Err() == nil && (errors.Is(err, meta.ErrConflict) || errors.Is(err, context.DeadlineExceeded)):
		// Updates kept conflicting, or the store did not answer in time
		// (in a cluster: no leader): try again soon.
		c.opts.Logger.Warn("crawl: claim source", "source", id, "err", err)
		res.reschedule, res.next, res.authority = true, now.Add(time.Second), s.Authority
		return res
	case err != nil:
		res.err = err
		return res
	}
	res.authority = s.Authority
	var br polite.BreakerState
	if len(s.Crawl.Circuit) > 0 {
		if err := json.Unmarshal(s.Crawl.Circuit, &br); err != nil {
			br = polite.BreakerState{}
		}
	}
	rec := CrawlRecord{At: now.UTC()}
	st := s.Crawl
	var next time.Time
	var gone string
	newURL := ""
	ctx, span := c.opts.Tracing.Crawl(ctx, s.ID, s.Name, s.FeedURL)
	defer func() { span.End(rec.Outcome, rec.Error, rec.ItemsNew) }()

	// fail records a failed crawl and returns when to try again.
	// fail records a Transient or Permanent failure (Classify) and returns
	// the next attempt.
	fail := func(err error) time.Time {
		st.ConsecutiveErrors++
		st.LastError = c.publicError(s.ID, err)
		rec.Outcome, rec.Error = "error", st.LastError
		if Classify(err) == Permanent {
			rec.Class = Permanent.String()
			return now.Add(time.Duration(s.MaxInterval))
		}
		br.Failure(now, c.opts.Breaker, c.rnd)
		return maxTime(br.NextAttempt(), now.Add(fetch.Backoff(st.ConsecutiveErrors, c.opts.ErrorBackoff, c.opts.MaxErrorBackoff, c.rnd)))
	}

	switch host, herr := polite.HostKey(s.FeedURL); {
	case herr != nil:
		next = fail(herr)
	case !br.Allow(now):
		rec.Outcome, rec.Error = "skipped", "circuit open until "+br.NextAttempt().UTC().Format(time.RFC3339)
		next = br.NextAttempt()
	default:
		next = c.fetchAndIngest(ctx, &s, &st, &br, &rec, host, now, fail, &gone, &newURL)
	}
	if ctx.Err() != nil {
		// Shutting down: nothing was decided about this source. Give the
		// claim back, so that whoever crawls it next does not wait an
		// interval for a crawl that did not happen.
		c.unclaim(id, s.Crawl.Claim, now)
		res.reschedule, res.next = true, now
		return res
	}
	rec.Duration = Duration(c.opts.Now().Sub(now))
	c.m.fetches.WithLabelValues(rec.Outcome).Inc()
	c.m.fetchSeconds.Observe(time.Duration(rec.Duration).Seconds())
	c.m.bytes.Add(float64(rec.Bytes))
	c.m.itemsNew.Add(float64(rec.ItemsNew))
	circuit, _ := json.Marshal(br)
	st.Circuit = circuit
	st.LastCrawl, st.NextCrawl, st.LastResult = now.UTC(), next.UTC(), &rec
	_, err = c.sources.Update(ctx, id, func(cur *Source) error {
		cur.Crawl = st
		if newURL != "" {
			cur.FeedURL = newURL
		}
		if gone != "" {
			cur.Status, cur.StatusReason = StatusGone, gone
		}
		return nil
	})
	if err != nil {
		c.opts.Logger.Error("crawl: record crawl", "source", id, "err", err)
	}
	res.record, res.next, res.reschedule = rec, next, gone == "" && err == nil
	c.logCrawl(&s, rec, st.ConsecutiveErrors)
	return res
}

// publicError is the message of a crawl error as the source's crawl
// state keeps it, for admins and the setup page: without the node's own
// addresses (its DNS resolver, its end of a connection). The log has the
// whole error at Debug.
func (c *Crawler) publicError(id string, err error) string {
	msg := err.Error()
	public := redact.InternalAddrs(msg)
	if public != msg {
		c.opts.Logger.Debug("crawl: error", "source", id, "err", redact.Text(msg))
	}
	return public
}

// logCrawl logs one crawl at Debug, and on a line of its own at Warn or
// Info when the source started failing or recovered with it (a few per
// round; Run's summary counts the rest). s is the source as claimed,
// before the crawl; consecutive are its consecutive errors after it.
func (c *Crawler) logCrawl(s *Source, rec CrawlRecord, consecutive int) {
	l := c.opts.Logger
	ctx := context.Background()
	// A feed URL may carry credentials (user:password@, a token in its
	// query): the log names it without them.
	feedURL, errText := redact.URL(s.FeedURL), redact.Text(rec.Error)
	if l.Enabled(ctx, slog.LevelDebug) {
		l.LogAttrs(ctx, slog.LevelDebug, "crawl", slog.String("source", s.ID), slog.String("url", feedURL), slog.String("outcome", rec.Outcome),
			slog.String("err", errText), slog.Int("items_new", rec.ItemsNew), slog.Int("errors", consecutive), slog.Duration("duration", time.Duration(rec.Duration)))
	}
	switch tr, show := c.round.record(s.ID, s.Crawl.ConsecutiveErrors, rec); {
	case !show:
	case tr == startedFailing && rec.Class == Permanent.String():
		l.Warn("crawl: source failing; retrying cannot fix it, trying again after its max interval", "source", s.ID, "name", s.Name,
			"url", feedURL, "err", errText, "reason", ClassifyFailure(rec.Error).Hint, "next", time.Duration(s.MaxInterval))
	case tr == startedFailing:
		l.Warn("crawl: source failing; retrying with backoff", "source", s.ID, "name", s.Name, "url", feedURL, "err", errText,
			"reason", ClassifyFailure(rec.Error).Hint)
	case tr == recovered:
		l.Info("crawl: source recovered", "source", s.ID, "name", s.Name, "after_errors", s.Crawl.ConsecutiveErrors)
	}
}

// fetchAndIngest does the network part of a crawl and returns the next
// crawl time.
func (c *Crawler) fetchAndIngest(ctx context.Context, s *Source, st *CrawlState, br *polite.BreakerState, rec *CrawlRecord,
	host string, now time.Time, fail func(error) time.Time, gone, newURL *string) time.Time {
	lo, hi := time.Duration(s.MinInterval), time.Duration(s.MaxInterval)
	cur := max(time.Duration(st.Interval), lo)
	if !c.opts.IgnoreRobots {
		ok, delay, err := c.robots.Allowed(ctx, c.fetcherUA(), s.FeedURL)
		if delay > 0 {
			c.limiter.SetCrawlDelay(host, delay)
		}
		if !ok && err != nil {
			// robots.txt could not be read: RFC 9309 says assume
			// everything is disallowed; record why, and back off.
			return fail(fmt.Errorf("robots.txt: %w", err))
		}
		if !ok {
			msg := "disallowed by robots.txt"
			rec.Outcome, rec.Error = "disallowed", msg
			st.LastError = msg
			return now.Add(hi)
		}
	}
	release, err := c.limiter.Acquire(ctx, host)
	if err != nil {
		return now
	}
	resp, ferr := c.fetcher.Fetch(ctx, fetch.Request{URL: s.FeedURL, ETag: st.ETag, LastModified: st.LastModified})
	release()
	if resp != nil {
		rec.Status, rec.Bytes = resp.Status, resp.Bytes
	}
	if ctx.Err() != nil {
		return now
	}
	if ferr != nil {
		switch Classify(ferr) {
		case Gone:
			*gone = "410 Gone: the server says the feed was removed permanently"
			st.LastError = c.publicError(s.ID, ferr)
			rec.Outcome, rec.Error = "gone", st.LastError
			return time.Time{}
		case RateLimited:
			ra := fetch.RetryAfter(ferr)
			br.RateLimited(now, ra)
			c.limiter.PauseHost(host, now.Add(max(ra, polite.DefaultRetryAfter)))
			st.LastError = c.publicError(s.ID, ferr)
			rec.Outcome, rec.Error = "rate_limited", st.LastError
			return maxTime(br.NextAttempt(), now.Add(cur))
		}
		return fail(ferr)
	}
	hints := Hints{MaxAge: resp.CacheMaxAge, Expires: resp.Expires, RetryAfter: resp.RetryAfter}
	if resp.PermanentURL != "" && resp.PermanentURL != s.FeedURL {
		*newURL = resp.PermanentURL
	}
	if resp.NotModified {
		rec.Outcome = "not_modified"
		c.succeed(st, br, now)
		st.Interval = Duration(NextInterval(cur, 0, nil, lo, hi, hints, now, c.rnd))
		return now.Add(time.Duration(st.Interval))
	}
	final, _ := url.Parse(resp.FinalURL)
	f, perr := feed.Parse(resp.Body, resp.ContentType, final, now)
	if perr != nil {
		return fail(fmt.Errorf("parse: %w", perr))
	}
	rec.ItemsSeen = len(f.Items)
	added, err := c.ingest(ctx, s.ID, f.Items, func(fresh []*feed.Item) {
		c.fillFullText(ctx, c.wantsFullText(s, f.Items, fresh), rec)
	})
	rec.ItemsNew = added
	if err != nil {
		return fail(fmt.Errorf("append articles: %w", err))
	}
	rec.Outcome = "ok"
	st.ETag, st.LastModified = resp.ETag, resp.LastModified
	c.succeed(st, br, now)
	hints.TTL = f.TTL
	published := make([]time.Time, 0, len(f.Items))
	for _, it := range f.Items {
		published = append(published, it.PublishedAt)
	}
	st.Interval = Duration(NextInterval(cur, added, published, lo, hi, hints, now, c.rnd))
	return now.Add(time.Duration(st.Interval))
}

func (c *Crawler) succeed(st *CrawlState, br *polite.BreakerState, now time.Time) {
	st.ConsecutiveErrors, st.LastError, st.LastSuccess = 0, "", now.UTC()
	br.Success(now)
}

func (c *Crawler) fetcherUA() string {
	if c.opts.Fetch.UserAgent != "" {
		return c.opts.Fetch.UserAgent
	}
	return fetch.DefaultUserAgent
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// ingest appends the items not seen before and remembers them; it returns
// how many were new. prepare, if not nil, is given the new items before
// they are written.
func (c *Crawler) ingest(ctx context.Context, sourceID string, items []feed.Item, prepare func([]*feed.Item)) (int, error) {
	key := []byte(sourceID)
	raw, _, err := c.seen.Get(key)
	if err != nil {
		return 0, err
	}
	seen := map[string]bool{}
	var order []string
	if len(raw) > 0 {
		order = strings.Split(string(raw), "\n")
		for _, id := range order {
			seen[id] = true
		}
	}
	parts, err := c.log.Partitions(ctx, schema.TopicArticlesRaw)
	if err != nil {
		return 0, err
	}
	var recs []*eventlog.Record
	var spans tracing.Spans // of the records, when the crawl is traced
	var fresh []string
	var freshItems []*feed.Item
	for i := range items {
		it := &items[i]
		if seen[it.ArticleID] {
			continue
		}
		seen[it.ArticleID] = true
		freshItems = append(freshItems, it)
	}
	if prepare != nil && len(freshItems) > 0 {
		prepare(freshItems)
	}
	for _, it := range freshItems {
		v, err := json.Marshal(it.RawArticle(sourceID))
		if err != nil {
			return 0, err
		}
		k := []byte(it.ArticleID)
		recs = append(recs, &eventlog.Record{Topic: schema.TopicArticlesRaw, Partition: eventlog.PartitionFor(k, parts),
			Key: k, Value: v, Timestamp: it.FetchedAt.UnixMilli(),
			Headers: []eventlog.Header{{Key: "source_id", Value: []byte(sourceID)}, engine.OriginHeader(it.FetchedAt)}})
		spans.Add(c.opts.Tracing.Item(ctx, it.ArticleID, it.URL), recs[len(recs)-1])
		fresh = append(fresh, it.ArticleID)
	}
	if len(recs) == 0 {
		return 0, nil
	}
	err = c.log.Append(ctx, recs)
	spans.End(err)
	if err != nil {
		return 0, err
	}
	for _, it := range freshItems {
		if !it.PublishedAt.IsZero() {
			c.m.published.Observe(max(0, it.FetchedAt.Sub(it.PublishedAt).Seconds()))
		}
	}
	order = append(fresh, order...)
	if len(order) > c.opts.MaxSeen {
		order = order[:c.opts.MaxSeen]
	}
	b := c.seen.NewBatch()
	if err := b.Set(key, []byte(strings.Join(order, "\n"))); err != nil {
		b.Discard()
		return 0, err
	}
	return len(recs), b.Commit()
}

type crawlMetrics struct {
	fetches      *prometheus.CounterVec
	bytes        prometheus.Counter
	itemsNew     prometheus.Counter
	fetchSeconds prometheus.Histogram
	scheduleLag  prometheus.Histogram
	openCircuits prometheus.Gauge
	sources      prometheus.Gauge
	fullText     *prometheus.CounterVec
	published    prometheus.Histogram
}

func newCrawlMetrics(reg prometheus.Registerer) (*crawlMetrics, error) {
	m := &crawlMetrics{
		fetches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "newsflow_crawl_fetches_total", Help: "Feed crawls by outcome (ok, not_modified, error, rate_limited, gone, skipped, disallowed).",
		}, []string{"outcome"}),
		bytes:    prometheus.NewCounter(prometheus.CounterOpts{Name: "newsflow_crawl_bytes_total", Help: "Bytes received from feed servers."}),
		itemsNew: prometheus.NewCounter(prometheus.CounterOpts{Name: "newsflow_crawl_items_new_total", Help: "New items appended to articles.raw."}),
		fetchSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "newsflow_crawl_duration_seconds", Help: "Time to crawl one source.", Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
		}),
		scheduleLag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "newsflow_crawl_schedule_lag_seconds", Help: "How late a crawl started after it was due.", Buckets: prometheus.ExponentialBuckets(0.01, 2, 16),
		}),
		openCircuits: prometheus.NewGauge(prometheus.GaugeOpts{Name: "newsflow_crawl_open_circuits", Help: "Sources whose circuit breaker is open or half-open."}),
		sources:      prometheus.NewGauge(prometheus.GaugeOpts{Name: "newsflow_crawl_sources", Help: "Sources known to the crawler."}),
		fullText: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "newsflow_crawl_fulltext_total", Help: "Article pages fetched for their full text, by outcome (ok, error, no_text, disallowed, skipped).",
		}, []string{"outcome"}),
	}
	m.published = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "newsflow_article_publication_delay_seconds", Help: "Time from a new item's publication (as its feed dates it) to the crawl that found it.",
		Buckets: []float64{1, 5, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 86400},
	})
	for _, outcome := range []string{"ok", "not_modified", "error", "rate_limited", "gone", "skipped", "disallowed"} {
		m.fetches.WithLabelValues(outcome)
	}
	for _, outcome := range []string{"ok", "error", "no_text", "disallowed", "skipped"} {
		m.fullText.WithLabelValues(outcome)
	}
	for _, col := range []prometheus.Collector{m.fetches, m.bytes, m.itemsNew, m.fetchSeconds, m.scheduleLag, m.openCircuits, m.sources, m.fullText, m.published} {
		if err := reg.Register(col); err != nil {
			return nil, fmt.Errorf("crawl: register metrics: %w", err)
		}
	}
	return m, nil
}

// Guard is the SSRF guard the crawler dials with, as a check of feed URLs
// before they are stored (fetch.Guard.CheckURL).
func (c *Crawler) Guard() *fetch.Guard { return c.fetcher.Guard() }

// ErrNoFeed is returned by Resolve for a page that is no feed and names
// none.
var ErrNoFeed = errors.New("not a feed and links to none")

// commonFeedPaths are tried when a page names no feed.
var commonFeedPaths = []string{"/feed", "/rss", "/rss.xml", "/feed.xml", "/atom.xml", "/index.xml", "/feed.json"}

// Resolved is a feed found for a URL someone wants to follow.
type Resolved struct {
	FeedURL string
	// Homepage is the page's URL when discovery was needed, else the
	// feed's own link (may be empty).
	Homepage string
	// Title is the feed's title (may be empty).
	Title string
}

// Resolve turns a URL someone wants to follow into a feed: the URL itself
// if it serves a feed, else the first feed its page links to (<link
// rel="alternate">), else the first common feed path that serves a feed.
func (c *Crawler) Resolve(ctx context.Context, raw string) (Resolved, error) {
	asFeed := func(u string) (*feed.Feed, *fetch.Response, error) {
		resp, err := c.fetcher.Fetch(ctx, fetch.Request{URL: u})
		if err != nil {
			return nil, nil, err
		}
		final, _ := url.Parse(resp.FinalURL)
		f, perr := feed.Parse(resp.Body, resp.ContentType, final, c.opts.Now())
		if perr != nil {
			return nil, resp, nil
		}
		return f, resp, nil
	}
	f, resp, err := asFeed(raw)
	if err != nil {
		return Resolved{}, fmt.Errorf("fetch %s: %w", raw, err)
	}
	if f != nil {
		r := Resolved{FeedURL: raw, Title: f.Title}
		if u, err := url.Parse(f.Link); err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" {
			r.Homepage = f.Link
		}
		return r, nil
	}
	page, _ := url.Parse(resp.FinalURL)
	cands := feed.Discover(resp.Body, page)
	for _, p := range commonFeedPaths {
		cands = append(cands, page.ResolveReference(&url.URL{Path: p}).String())
	}
	for _, cand := range cands {
		if f, _, err := asFeed(cand); err == nil && f != nil {
			return Resolved{FeedURL: cand, Homepage: resp.FinalURL, Title: f.Title}, nil
		}
	}
	return Resolved{}, fmt.Errorf("%s: %w", raw, ErrNoFeed)
}
