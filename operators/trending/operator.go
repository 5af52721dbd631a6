package trending

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/internal/option"
	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/operators/internal/dedup"
	"github.com/newsflow/newsflow/operators/internal/sketch"
	"github.com/newsflow/newsflow/state"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fastjson"
)

// Name is the operator's name in the topology.
const Name = "trending"

// OperatorOptions configures the trending operator. The zero value is valid.
type OperatorOptions struct {
	Counts Options `json:"counts" yaml:",inline"`
	// MaxK is the largest k a query may ask for (default 100).
	MaxK int `json:"max_k" yaml:"max_k"`
	// SnapshotInterval bounds how stale a top-K answer may be while shares
	// keep arriving (default 200ms).
	SnapshotInterval time.Duration `json:"snapshot_interval" yaml:"snapshot_interval"`
	// MaxFuture is how far an event's timestamp may be ahead of the time of
	// the log record carrying it (default 5m); further is invalid input.
	MaxFuture time.Duration `json:"max_future" yaml:"max_future"`
	// NoDedup counts every delivery of an event, as if every event_id were
	// new. It exists to measure what deduplication costs; a node never
	// sets it.
	NoDedup bool `json:"no_dedup,omitempty" yaml:"-"`
	// ParkFor is how long (in event time behind the task's watermark) a
	// share without a category waits for its article's topics when the
	// task has not seen the article yet (default 10m); it counts globally
	// at once. See topics.go.
	ParkFor time.Duration `json:"park_for" yaml:"park_for"`
	// MaxParked bounds the (article, time) pairs of shares waiting for
	// their article per task (default 100000); beyond it a share of an
	// unknown article counts without topics.
	MaxParked int `json:"max_parked" yaml:"max_parked"`
	// Retention is how long, in event time behind the newest article the
	// task has seen, an article's topics are kept (default
	// schema.DefaultRetention; negative keeps them all). The node sets it
	// from retention.articles. A share of an older article counts without
	// topics, as one of an article never seen.
	Retention time.Duration `json:"retention" yaml:"-"`
	// ExactMaxBytes is the memory budget of each partition's exact counts
	// (Counts.MemoryBytes; default DefaultExactMaxBytes). A partition over
	// it is reported (log, metrics, ExactMemory) and keeps counting
	// exactly: see guard.go.
	ExactMaxBytes int64 `json:"exact_max_bytes" yaml:"exact_max_bytes"`
	// Counter is how shares are counted: CounterExact (default) or
	// CounterCMS (counter.go). A partition's state holds the mode it was
	// counted in; a task refuses state of the other mode
	// (ErrCounterChanged): rebuild it with a replay.
	Counter string `json:"counter,omitempty" yaml:"counter"`
	// RepeatShares is how a user's repeated shares of one article count:
	// RepeatOnce (default), at most once in each window at any watermark,
	// or RepeatEvery, every one (repeat.go). A partition's state holds the
	// setting it was counted with; a task refuses state of the other
	// (ErrRepeatSharesChanged): rebuild it with a replay.
	RepeatShares string `json:"repeat_shares,omitempty" yaml:"repeat_shares"`
	// RepeatPairs sizes, in cms mode, each task's table of (user, article)
	// pairs counted within the largest window (default DefaultRepeatPairs;
	// about 30 bytes a pair with the default windows, fixed whatever the
	// number of pairs). Beyond it a new pair may be taken for a repeat
	// (counting once where it should count again, never twice). Exact
	// counts grow the table instead and ignore it.
	RepeatPairs int `json:"repeat_pairs,omitempty" yaml:"repeat_pairs"`
	// PublishTops, when positive, has every task publish its partition's
	// top PublishTops of each window to TopicTops at the end of the
	// batches that change it, for the trending-changes operator
	// (changes.go); at most MaxK. The node sets it from
	// trending.changes.k; 0 publishes nothing.
	PublishTops int `json:"publish_tops,omitempty" yaml:"-"`
	// CMS configures the sketch of CounterCMS. Its Windows, MaxK and
	// Prefix are the operator's (Counts.Windows, MaxK, and 'k'), whatever
	// they are set to here, and MaxIDLen defaults to the longest article
	// id an event may carry (schema.MaxIDBytes).
	CMS sketch.Options `json:"cms,omitzero" yaml:"cms"`
}

// minCommitInterval is the least time between two commits of a trending
// task that keeps up with its input. Answers come from what the task has
// applied, not committed, so it delays no answer; without it a task fed
// by HTTP batches committed after every batch, and with the sketch
// rewrote each changed page every time (2M shares over 1M articles: 11.7
// -> 9.7 us of node CPU per share with cms; exact gains too).
const minCommitInterval = 100 * time.Millisecond

// DefaultOperatorOptions returns the defaults the zero value stands for.
func DefaultOperatorOptions() OperatorOptions {
	return OperatorOptions{Counts: DefaultOptions(), MaxK: 100, SnapshotInterval: 200 * time.Millisecond, MaxFuture: 5 * time.Minute,
		ParkFor: 10 * time.Minute, MaxParked: 100_000, Retention: schema.DefaultRetention, ExactMaxBytes: DefaultExactMaxBytes, Counter: CounterExact,
		RepeatShares: RepeatOnce, RepeatPairs: DefaultRepeatPairs,
		CMS: sketch.Options{Epsilon: sketch.DefaultEpsilon, Delta: sketch.DefaultDelta, CandidatesPerK: sketch.DefaultCandidatesPerK,
			MaxCategories: sketch.DefaultMaxCategories, FreezeAfter: sketch.DefaultFreezeAfter}}
}

// Validate reports invalid option values.
func (o OperatorOptions) Validate() error {
	if err := o.Counts.Validate(); err != nil {
		return err
	}
	if o.MaxK < 0 || o.SnapshotInterval < 0 || o.MaxFuture < 0 || o.ParkFor < 0 || o.MaxParked < 0 || o.ExactMaxBytes < 0 || o.RepeatPairs < 0 {
		return errors.New("trending: max_k, snapshot_interval, max_future, park_for, max_parked, exact_max_bytes and repeat_pairs must not be negative")
	}
	if maxK := cmp.Or(o.MaxK, DefaultOperatorOptions().MaxK); o.PublishTops < 0 || o.PublishTops > maxK {
		return fmt.Errorf("trending: publish_tops %d: want 0 to max_k (%d)", o.PublishTops, maxK)
	}
	switch o.RepeatShares {
	case "", RepeatOnce:
		if n := len(o.Counts.withDefaults().Windows); n > maxRepeatWindows {
			return fmt.Errorf("trending: repeat_shares: once: %d windows, at most %d", n, maxRepeatWindows)
		}
	case RepeatEvery:
	default:
		return fmt.Errorf("trending: repeat_shares %q: want %s or %s", o.RepeatShares, RepeatOnce, RepeatEvery)
	}
	switch o.Counter {
	case "", CounterExact:
	case CounterCMS:
		if err := o.withDefaults().CMS.Validate(); err != nil {
			return fmt.Errorf("trending: cms: %w", err)
		}
	default:
		return fmt.Errorf("trending: counter %q: want %s or %s", o.Counter, CounterExact, CounterCMS)
	}
	return nil
}

func (o OperatorOptions) withDefaults() OperatorOptions {
	d := DefaultOperatorOptions()
	// CMS's zero fields are the sketch's to fill, and only in cms mode,
	// where cmsOptions completes CMS; in exact mode it stays as given.
	d.CMS = sketch.Options{}
	o.Counts = o.Counts.withDefaults()
	option.Fill(&o, d)
	if o.Counter == CounterCMS {
		o.CMS = o.cmsOptions()
	}
	return o
}

// MaxPast is how far an event's timestamp may be behind the time of the log
// record carrying it (or, over HTTP, the server clock): the part of the
// largest window that it covers at any watermark, its size less one
// bucket. An event within MaxPast of the watermark counts in that window.
func (o OperatorOptions) MaxPast() time.Duration {
	o = o.withDefaults()
	var past time.Duration
	for _, s := range o.Counts.Windows {
		past = max(past, s.Size-s.Width())
	}
	return past
}

// DedupHorizon is how long event ids are remembered, in event time behind
// the watermark: the largest window plus MaxFuture (the clock skew an event
// may have), so an event that could still count is always recognised when
// it comes again.
func (o OperatorOptions) DedupHorizon() time.Duration {
	o = o.withDefaults()
	var w time.Duration
	for _, s := range o.Counts.Windows {
		w = max(w, s.Size)
	}
	return w + o.MaxFuture
}

// Operator counts shares per article over sliding windows and answers top-K
// queries merged across partitions. Its query methods are safe for
// concurrent use with the running tasks.
type Operator struct {
	opts    OperatorOptions
	maxPast time.Duration
	windows map[string]int
	parts   []atomic.Pointer[partition]
	dups    prometheus.Counter
	// repeats counts, per window, the shares not counted there because
	// the user's share of the article counts already (repeat.go).
	repeats []prometheus.Counter
	// untagged counts the shares without a category by what their
	// article's topics did (topicOutcomes).
	untagged *prometheus.CounterVec
	// guardM and exact are the memory guard's metrics and per-partition
	// state (guard.go).
	guardM  *guardMetrics
	exact   []exactState
	parsers fastjson.ParserPool
	// grain (ms) divides every bucket width: waiting shares are kept per
	// time rounded down to it, which keeps their buckets.
	grain int64
	// view is the last View (see View); viewMu serialises making a new
	// one, so that one set of snapshots has one View.
	view   atomic.Pointer[View]
	viewMu sync.Mutex
}

// Outcomes of a share without a category (the label of
// newsflow_trending_uncategorized_shares_total).
const (
	outcomeTopics   = "topics"    // counted under its article's topics at once
	outcomeNoTopics = "no_topics" // its article has none
	outcomeWaiting  = "waiting"   // its article was not known yet
	outcomeLate     = "late"      // counted under the topics when the article came
	outcomeExpired  = "expired"   // the article did not come within ParkFor
	outcomeFull     = "full"      // MaxParked shares waited already
)

// New returns the operator for an engine with the given partition count.
func New(opts OperatorOptions, partitions int32, reg prometheus.Registerer) (*Operator, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	o := &Operator{opts: opts, maxPast: opts.MaxPast(), windows: map[string]int{}, parts: make([]atomic.Pointer[partition], partitions),
		guardM: newGuardMetrics(), exact: make([]exactState, partitions)}
	for i, w := range opts.Counts.Windows {
		o.windows[w.Name] = i
	}
	for _, w := range opts.Counts.Windows {
		o.grain = gcd(o.grain, w.Width().Milliseconds())
	}
	o.dups = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "newsflow_duplicate_events_total", Help: "Events whose event_id was already applied, dropped.",
		ConstLabels: prometheus.Labels{"operator": Name},
	})
	o.untagged = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "newsflow_trending_uncategorized_shares_total",
		Help: "Shares without a category, by outcome: topics (counted under their article's topics), no_topics (the article has none), " +
			"waiting (the article was not known yet), late (counted under the topics when the article came), " +
			"expired (the article did not come within park_for), full (too many shares waiting).",
	}, []string{"outcome"})
	repeats := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "newsflow_trending_repeat_shares_total",
		Help: "Shares not counted in a window because a share of the same article by the same user counts there already (trending.repeat_shares: once).",
	}, []string{"window"})
	for _, w := range opts.Counts.Windows {
		o.repeats = append(o.repeats, repeats.WithLabelValues(w.Name))
	}
	if reg != nil {
		for _, c := range append([]prometheus.Collector{o.dups, o.untagged, repeats}, o.guardM.collectors()...) {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("trending: register metrics: %w", err)
			}
		}
	}
	return o, nil
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// Options returns the options in force.
func (o *Operator) Options() OperatorOptions { return o.opts }

// Spec implements engine.Operator.
func (o *Operator) Spec() engine.Spec {
	var outputs []string
	if o.opts.PublishTops > 0 {
		outputs = []string{TopicTops}
	}
	return engine.Spec{
		Outputs:     outputs,
		Name:        Name,
		Description: "share counts per article over sliding windows, global and per category (a share without one: its article's topics); top-K",
		Inputs: []engine.Input{
			{Topic: schema.TopicShares, Key: "article_id", Route: o.route},
			{Topic: schema.TopicArticlesIndexed, Key: "article id"},
		},
		Stores: []string{o.countsStore(),
			"event ids: the shares applied within the dedup horizon, by fingerprint",
			"article topics: the topic names of every article",
			"waiting shares: shares without a category whose article was not known yet, per article and time"},
		Options:           o.opts,
		MinCommitInterval: minCommitInterval,
	}
}

// countsStore describes the counts in the topology.
func (o *Operator) countsStore() string {
	if o.opts.Counter == CounterCMS {
		return "windows: a Count-Min Sketch per window bucket (articles and category pairs) and top-K candidates per window and category"
	}
	return "windows: exact per-article share counts per window bucket and category"
}

// route co-locates shares by article id: the record key, or article_id
// from the value when a producer sent no key.
func (o *Operator) route(rec *eventlog.Record) ([]byte, bool) {
	if len(rec.Key) > 0 {
		return rec.Key, true
	}
	p := o.parsers.Get()
	id, ok := schema.ArticleIDOf(p, rec.Value)
	o.parsers.Put(p)
	return []byte(id), ok
}

// NewTask implements engine.Operator.
func (o *Operator) NewTask(tc engine.TaskContext) (engine.Task, error) {
	if int(tc.Partition) >= len(o.parts) {
		return nil, fmt.Errorf("trending: partition %d beyond %d", tc.Partition, len(o.parts))
	}
	return &task{op: o, p: tc.Partition, seen: dedup.New(o.dedupOptions()), log: taskLogger(tc.Logger),
		guard: memoryGuard{budget: o.opts.ExactMaxBytes}}, nil
}

// dedupOptions are the options of each task's set of applied event ids.
func (o *Operator) dedupOptions() dedup.Options {
	return dedup.Options{Horizon: o.opts.DedupHorizon(), Prefix: dedupPrefix}
}

// dedupPrefix starts the event id keys in a task's namespace (the exact
// counts use 'c', 'm', 'n', 's' and 'w', the sketch 'k', the counter
// mode 'o', the repeat pairs 'u', the join 'a', 'j', 'p', 'q' and 'x').
const dedupPrefix = 'e'

// partition is the live state of one task, shared with queries.
type partition struct {
	mu     sync.RWMutex // guards counts
	counts counter      // of the operator's mode (counter.go)
	// seenBytes is the heap of the task's set of applied event ids and of
	// its repeat pairs, as of its last Flush (both belong to the task
	// goroutine).
	seenBytes atomic.Int64
	version   atomic.Uint64 // bumped on every applied share
	snap      atomic.Pointer[snapshot]
	snapMu    sync.Mutex // serialises snapshot rebuilds; taken before mu
}

// snapshot is an immutable top-K view of one partition.
type snapshot struct {
	version   uint64
	at        time.Time
	watermark int64
	global    [][]Entry            // per window
	byCat     []map[string][]Entry // per window
}

func (pt *partition) rebuild(o *Operator) *snapshot {
	pt.snapMu.Lock()
	defer pt.snapMu.Unlock()
	if s := pt.snap.Load(); s != nil && s.version == pt.version.Load() {
		return s
	}
	// TopK may reorganise its candidate sets, so it takes the write lock.
	pt.mu.Lock()
	s := &snapshot{version: pt.version.Load(), at: time.Now(), watermark: pt.counts.Watermark()}
	cats := pt.counts.Categories()
	for w := range o.opts.Counts.Windows {
		s.global = append(s.global, pt.counts.TopK(w, "", o.opts.MaxK))
		m := make(map[string][]Entry, len(cats))
		for _, c := range cats {
			if top := pt.counts.TopK(w, c, o.opts.MaxK); len(top) > 0 {
				m[c] = top
			}
		}
		s.byCat = append(s.byCat, m)
	}
	pt.mu.Unlock()
	pt.snap.Store(s)
	return s
}

// current returns a snapshot no older than the snapshot interval unless
// nothing changed since.
func (pt *partition) current(o *Operator) *snapshot {
	s := pt.snap.Load()
	if s == nil || (s.version != pt.version.Load() && time.Since(s.at) >= o.opts.SnapshotInterval) {
		return pt.rebuild(o)
	}
	return s
}

type task struct {
	op     *Operator
	p      int32
	part   *partition
	seen   *dedup.Set     // owned by the task goroutine
	join   *articleTopics // owned by the task goroutine
	parser fastjson.Parser
	log    *slog.Logger
	guard  memoryGuard // owned by the task goroutine
	// wroteMode is set once the counter mode is in the task's state.
	wroteMode bool
	// pairs are the (user, article) pairs counted per window with
	// RepeatShares once (nil with every); wroteEvery is set once the
	// every setting is in the task's state. Owned by the task goroutine.
	pairs      *repeatPairs
	pairBuf    []byte
	wroteEvery bool
	// tops is what the task last published of each window (changes.go);
	// owned by the task goroutine.
	tops []published
}

func (t *task) Restore(r state.Reader) error {
	c, err := t.restoreCounter(r)
	if err != nil {
		return err
	}
	if err := t.seen.Load(r); err != nil {
		releaseCounter(c)
		return err
	}
	if err := t.restoreRepeat(r); err != nil {
		releaseCounter(c)
		return err
	}
	t.join = newArticleTopics(r, t.op.opts.Retention)
	if err := t.join.load(); err != nil {
		releaseCounter(c)
		return err
	}
	t.part = &partition{counts: c}
	t.checkMemoryLocked() // no one else knows t.part yet
	t.part.rebuild(t.op)
	t.op.parts[t.p].Store(t.part)
	return nil
}

func (t *task) Process(pc *engine.ProcessContext, rec *eventlog.Record) error {
	if rec.Topic == schema.TopicArticlesIndexed {
		return t.processArticle(rec)
	}
	s, err := schema.DecodeShare(&t.parser, rec.Value)
	if err != nil {
		return engine.Invalid("share: %v", err)
	}
	if len(rec.Key) > 0 && string(rec.Key) != s.ArticleID {
		return engine.Invalid("share: record key %q does not match article_id %q", rec.Key, s.ArticleID)
	}
	if rec.Timestamp > 0 {
		if err := schema.CheckTime(s.Timestamp, rec.Timestamp, t.op.maxPast, t.op.opts.MaxFuture); err != nil {
			return engine.Invalid("share: %v relative to the record time", err)
		}
	}
	// The counts change only under the lock (queries read them), but only
	// this goroutine writes them, so it may read them without the lock.
	if t.part.counts.TooOld(s.Timestamp) {
		return engine.Invalid("share: timestamp %s is older than every window (the largest is %s) at the partition's watermark %s",
			time.UnixMilli(s.Timestamp).UTC().Format(time.RFC3339Nano), t.part.counts.Horizon(),
			time.UnixMilli(t.part.counts.Watermark()).UTC().Format(time.RFC3339Nano))
	}
	// The set's horizon covers every window, so it remembers every share
	// that could still count.
	if !t.op.opts.NoDedup {
		added, err := t.seen.Add(dedup.FingerprintOf(s.EventID), s.Timestamp)
		if err != nil {
			return err
		}
		if !added {
			t.op.dups.Inc()
			return nil
		}
	}
	// A repeated share counts only in the windows that do not count the
	// user's share of the article already (repeat.go).
	mask := AllWindows
	if t.pairs != nil && s.UserID != "" {
		var f, covered uint64
		f, t.pairBuf = pairFingerprint(t.pairBuf, s.UserID, s.ArticleID)
		mask, covered = t.pairs.Decide(f, s.Timestamp, t.part.counts.Watermark())
		for rep := covered &^ mask; rep != 0; rep &= rep - 1 {
			t.op.repeats[bits.TrailingZeros64(rep)].Inc()
		}
		if mask == 0 {
			t.part.mu.Lock()
			t.part.counts.Advance(s.Timestamp)
			t.part.mu.Unlock()
			t.part.version.Add(1)
			return nil
		}
	}
	// A share without a category counts under its article's topics too
	// (topics.go).
	var topics []string
	known := true
	if s.Category == "" {
		if topics, known, err = t.join.lookup(s.ArticleID); err != nil {
			return err
		}
	}
	t.part.mu.Lock()
	t.part.counts.AddIn(s.ArticleID, s.Category, s.Timestamp, mask)
	for _, tp := range topics {
		t.part.counts.AddToCategoryIn(s.ArticleID, tp, s.Timestamp, mask)
	}
	wm := t.part.counts.Watermark()
	t.part.mu.Unlock()
	t.part.version.Add(1)
	// Waiting shares are kept per time rounded down to the grain, which
	// divides every bucket width: the same buckets, fewer entries.
	limit, at := wm-t.op.opts.ParkFor.Milliseconds(), s.Timestamp-s.Timestamp%t.op.grain
	switch {
	case s.Category != "":
	case !known && at < limit:
		t.op.untagged.WithLabelValues(outcomeExpired).Inc()
	case !known && t.join.park(s.ArticleID, at, mask, t.op.opts.MaxParked):
		t.op.untagged.WithLabelValues(outcomeWaiting).Inc()
	case !known:
		t.op.untagged.WithLabelValues(outcomeFull).Inc()
	case len(topics) == 0:
		t.op.untagged.WithLabelValues(outcomeNoTopics).Inc()
	default:
		t.op.untagged.WithLabelValues(outcomeTopics).Inc()
	}
	if n := t.join.expire(limit); n > 0 {
		t.op.untagged.WithLabelValues(outcomeExpired).Add(float64(n))
	}
	return nil
}

// processArticle records an article's topics and counts the shares that
// waited for it under them.
func (t *task) processArticle(rec *eventlog.Record) error {
	id, topics, err := schema.ArticleTopics(&t.parser, rec.Value)
	if err != nil {
		return engine.Invalid("indexed article: %v", err)
	}
	t.join.set(id, topics, rec.Timestamp) // the article's first-seen time
	ws := t.join.unpark(id)
	if len(ws) == 0 {
		return nil
	}
	late, expired, none := 0, 0, 0
	t.part.mu.Lock()
	limit := t.part.counts.Watermark() - t.op.opts.ParkFor.Milliseconds()
	for _, w := range ws {
		switch {
		case w.ts < limit:
			expired += int(w.n)
			continue
		case len(topics) == 0:
			none += int(w.n)
			continue
		}
		late += int(w.n)
		for range w.n {
			for _, tp := range topics {
				t.part.counts.AddToCategoryIn(id, tp, w.ts, w.mask)
			}
		}
	}
	t.part.mu.Unlock()
	t.part.version.Add(1)
	t.op.untagged.WithLabelValues(outcomeLate).Add(float64(late))
	t.op.untagged.WithLabelValues(outcomeExpired).Add(float64(expired))
	t.op.untagged.WithLabelValues(outcomeNoTopics).Add(float64(none))
	return nil
}

func (t *task) Flush(w state.Writer) error {
	if err := t.seen.Flush(w); err != nil {
		return err
	}
	if err := t.join.flush(w); err != nil {
		return err
	}
	seen := t.seen.MemoryBytes()
	if t.pairs != nil {
		seen += t.pairs.MemoryBytes()
	}
	t.part.seenBytes.Store(int64(seen))
	if err := t.flushRepeat(w); err != nil {
		return err
	}
	if err := t.flushMode(w); err != nil {
		return err
	}
	t.part.mu.Lock()
	defer t.part.mu.Unlock()
	if err := t.part.counts.Flush(w); err != nil {
		return err
	}
	t.checkMemoryLocked()
	return nil
}

// EndBatch publishes the tops the batch changed, with PublishTops.
func (t *task) EndBatch(pc *engine.ProcessContext) error { return t.publishTops(pc) }

// Committed publishes a new top-K snapshot at most once per snapshot
// interval while the task is busy, and sooner (a quarter of it) when the
// task has caught up, so that a task that keeps up with a steady stream,
// committing after every poll, still spends its time counting. A query
// rebuilds a snapshot older than the interval itself, so answers are never
// staler than the interval.
func (t *task) Committed(info engine.CommitInfo) {
	s := t.part.snap.Load()
	if s == nil || s.version == t.part.version.Load() {
		return
	}
	age := time.Since(s.at)
	if age >= t.op.opts.SnapshotInterval || (info.CaughtUp && age >= t.op.opts.SnapshotInterval/4) {
		t.part.rebuild(t.op)
	}
}

func (t *task) Close() error {
	if t.part == nil {
		return nil
	}
	if t.op.parts[t.p].CompareAndSwap(t.part, nil) {
		t.forgetMemory()
	}
	// A query that found the partition before may still read it: the
	// counts answer after release.
	t.part.mu.Lock()
	releaseCounter(t.part.counts)
	t.part.mu.Unlock()
	return nil
}

// Item is one ranked article.
type Item struct {
	Rank      int    `json:"rank"`
	ArticleID string `json:"article_id"`
	Count     uint64 `json:"count"`
	// Bound is the error bound of Count in cms mode (Entry.Bound); absent
	// from exact answers.
	Bound uint64 `json:"error_bound,omitempty"`
}

// Result is a top-K answer.
type Result struct {
	Window   string `json:"window"`
	Category string `json:"category,omitempty"`
	Items    []Item `json:"items"`
	// AsOf is the latest event time (ms) reflected in the answer.
	AsOf int64 `json:"as_of"`
	// Partial lists partitions whose state was not available (restoring).
	Partial []int32 `json:"missing_partitions,omitempty"`
}

// ErrUnknownWindow is returned for a window name that is not configured.
var ErrUnknownWindow = errors.New("unknown window")

// WindowNames lists the configured windows.
func (o *Operator) WindowNames() []string {
	out := make([]string, 0, len(o.opts.Counts.Windows))
	for _, w := range o.opts.Counts.Windows {
		out = append(out, w.Name)
	}
	return out
}

// Top returns the k most shared articles in a window, globally or for one
// category, merged across partitions (from the current View).
func (o *Operator) Top(window, category string, k int) (Result, error) {
	if _, ok := o.windows[window]; !ok {
		return Result{}, fmt.Errorf("%w %q", ErrUnknownWindow, window)
	}
	return o.View().Top(window, category, k)
}

// View is the trending state at one moment: one snapshot of each running
// partition, no older than the snapshot interval unless nothing changed
// since (what Top answers from). A View never changes; the merge of its
// partitions' lists for a window and category is made on first use and
// kept, so every query over the same snapshots shares one merge.
//
// Operator.View returns the same *View for as long as no partition
// publishes a new snapshot, starts or stops, and each new view has a larger
// Generation, so callers may keep what they derive from an answer
// (serialised responses) with the generation: it is current exactly while
// View() returns a view of that generation.
type View struct {
	o     *Operator
	gen   uint64
	snaps []*snapshot // per partition; nil while it is not running here
	asOf  int64       // the newest watermark of the snapshots
	// partial lists the partitions not running here.
	partial []int32
	mu      struct {
		sync.Mutex
		// merged is the top MaxK per window and category asked for so far
		// (categories without an article are not kept).
		merged map[viewKey][]Entry
	}
}

type viewKey struct {
	window   int
	category string
}

// View returns the current view. Each partition's snapshot is the one
// Top would use (rebuilt first when it is older than the snapshot interval
// and shares arrived since); when they are all the snapshots of the last
// view, that view is returned.
func (o *Operator) View() *View {
	if v := o.view.Load(); v != nil && o.unchanged(v) {
		return v
	}
	o.viewMu.Lock()
	defer o.viewMu.Unlock()
	snaps := make([]*snapshot, len(o.parts))
	for i := range o.parts {
		if pt := o.parts[i].Load(); pt != nil {
			snaps[i] = pt.current(o)
		}
	}
	gen := uint64(1)
	if v := o.view.Load(); v != nil {
		if slices.Equal(v.snaps, snaps) {
			return v // another query made it meanwhile
		}
		gen = v.gen + 1
	}
	v := &View{o: o, gen: gen, snaps: snaps}
	v.mu.merged = map[viewKey][]Entry{}
	for i, s := range snaps {
		if s == nil {
			v.partial = append(v.partial, int32(i))
			continue
		}
		v.asOf = max(v.asOf, s.watermark)
	}
	o.view.Store(v)
	return v
}

// Generation numbers the operator's views from 1: a later view has a
// larger generation.
func (v *View) Generation() uint64 { return v.gen }

// unchanged reports whether every partition's current snapshot is the one
// v holds: the same partitions run, none published a snapshot since, and
// none is due for a rebuild (current would rebuild it).
func (o *Operator) unchanged(v *View) bool {
	var now time.Time // read only when a partition has applied shares since its snapshot
	for i := range o.parts {
		pt := o.parts[i].Load()
		if pt == nil {
			if v.snaps[i] != nil {
				return false
			}
			continue
		}
		s := pt.snap.Load()
		if s == nil || s != v.snaps[i] {
			return false
		}
		if s.version != pt.version.Load() {
			if now.IsZero() {
				now = time.Now()
			}
			if now.Sub(s.at) >= o.opts.SnapshotInterval {
				return false
			}
		}
	}
	return true
}

// Top returns the k most shared articles in a window, globally or for one
// category, merged across the view's partitions. The answer for k is the
// first k items of the answer for any larger k.
func (v *View) Top(window, category string, k int) (Result, error) {
	wi, ok := v.o.windows[window]
	if !ok {
		return Result{}, fmt.Errorf("%w %q", ErrUnknownWindow, window)
	}
	k = min(max(k, 1), v.o.opts.MaxK)
	top := v.merged(wi, category)
	top = top[:min(k, len(top))]
	res := Result{Window: window, Category: category, AsOf: v.asOf, Partial: slices.Clone(v.partial), Items: make([]Item, len(top))}
	for i, e := range top {
		res.Items[i] = Item{Rank: i + 1, ArticleID: e.ArticleID, Count: e.Count, Bound: e.Bound}
	}
	return res, nil
}

// merged returns the top MaxK of window wi and category across the view's
// partitions, merging them on first use.
func (v *View) merged(wi int, category string) []Entry {
	key := viewKey{wi, category}
	v.mu.Lock()
	defer v.mu.Unlock()
	if top, ok := v.mu.merged[key]; ok {
		return top
	}
	// Each partition's list is sorted and partitions hold disjoint
	// articles, so the answer is the top k of the partitions' top ks.
	maxK := v.o.opts.MaxK
	all := make([]Entry, 0, maxK*len(v.snaps))
	for _, s := range v.snaps {
		if s == nil {
			continue
		}
		top := s.global[wi]
		if category != "" {
			top = s.byCat[wi][category]
		}
		all = append(all, top[:min(maxK, len(top))]...)
	}
	slices.SortFunc(all, compareEntries)
	top := slices.Clip(all[:min(maxK, len(all))])
	if category == "" || len(top) > 0 {
		// Only categories that exist are kept: a client naming many
		// unknown ones does not grow the view.
		v.mu.merged[key] = top
	}
	return top
}

// MergeItems merges top-k lists of disjoint partitions (from several
// nodes, say) into one ranked top k. An article listed twice (a partition
// answered by two nodes while it moved) counts once, with its higher count.
func MergeItems(k int, lists ...[]Item) []Item {
	var all []Entry
	for _, l := range lists {
		for _, it := range l {
			all = append(all, Entry{ArticleID: it.ArticleID, Count: it.Count, Bound: it.Bound})
		}
	}
	slices.SortFunc(all, compareEntries)
	// The first of an article's entries has its highest count.
	seen := make(map[string]bool, len(all))
	out := make([]Item, 0, min(k, len(all)))
	for _, e := range all {
		if len(out) == k {
			break
		}
		if seen[e.ArticleID] {
			continue
		}
		seen[e.ArticleID] = true
		out = append(out, Item{Rank: len(out) + 1, ArticleID: e.ArticleID, Count: e.Count, Bound: e.Bound})
	}
	return out
}

// compareEntries orders by count descending, then article id, like TopK.
func compareEntries(a, b Entry) int {
	if c := cmp.Compare(b.Count, a.Count); c != 0 {
		return c
	}
	return cmp.Compare(a.ArticleID, b.ArticleID)
}

// Shares is the share count of one article in each window.
type Shares struct {
	ArticleID string            `json:"article_id"`
	Counts    map[string]uint64 `json:"counts"`
	// Bounds are, in cms mode, the error bounds of Counts per window (the
	// true count is in [count-bound, count]); absent in exact mode.
	Bounds map[string]uint64 `json:"bounds,omitempty"`
	AsOf   int64             `json:"as_of"`
}

// ErrUnavailable is returned when the partition that owns a key is not
// running (restoring, or owned by another node).
var ErrUnavailable = errors.New("partition unavailable")

// Shares returns an article's share counts from the partition that owns
// it: exactly, or in cms mode estimates with their bounds.
func (o *Operator) Shares(articleID string) (Shares, error) {
	p := eventlog.PartitionFor([]byte(articleID), int32(len(o.parts)))
	pt := o.parts[p].Load()
	if pt == nil {
		return Shares{}, fmt.Errorf("%w: partition %d", ErrUnavailable, p)
	}
	out := Shares{ArticleID: articleID, Counts: map[string]uint64{}}
	if o.opts.Counter == CounterCMS {
		out.Bounds = map[string]uint64{}
	}
	pt.mu.RLock()
	for i, w := range o.opts.Counts.Windows {
		n, bound := pt.counts.Estimate(i, articleID)
		out.Counts[w.Name] = n
		if out.Bounds != nil {
			out.Bounds[w.Name] = bound
		}
	}
	out.AsOf = pt.counts.Watermark()
	pt.mu.RUnlock()
	return out, nil
}

// MemoryBytes estimates the memory the windows and the remembered event ids
// of each running partition hold (in cms mode the sketch's counters are off
// the Go heap).
func (o *Operator) MemoryBytes() []int {
	out := make([]int, len(o.parts))
	for i := range o.parts {
		if pt := o.parts[i].Load(); pt != nil {
			pt.mu.RLock()
			out[i] = pt.counts.MemoryBytes() + int(pt.seenBytes.Load())
			pt.mu.RUnlock()
		}
	}
	return out
}
