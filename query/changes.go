package query

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/operators/trending"
	"github.com/prometheus/client_golang/prometheus"
)

// The trending.changes topic: one record each time an article enters the
// global top K of a trending window, for dashboards and pipelines.
//
// A watcher reads the merged, cluster-wide trending answer (the one
// /api/v1/trending gives) of every window every Options.StreamInterval
// (2s), whether or not a stream is open, and appends
// a record for each article of a window's top K that it does not remember
// announcing for that window:
//
//	key      the article id
//	value    {"window":"1h","article_id":"a1","rank":3,"count":123,
//	          "error_bound":0,"entered_at":1767225600000}
//	headers  nf-change-id: <window>/<article id>/<entered_at>
//	time     entered_at
//
// entered_at is the answer's as_of: the newest event time it reflects, in
// ms since the epoch, so announcements follow event time, never the wall
// clock. rank and count are the article's when it was seen to enter;
// error_bound is there in cms mode only (trending.counter: cms). The
// header is a deterministic id: a consumer that sees an id twice (an
// append retried after a failure that had written) may drop the repeat.
//
// "First time" is per window span: the watcher remembers (window,
// article) → entered_at and forgets it once the answer's as_of is more
// than the window's span past entered_at. An article is therefore
// announced at most once per window while it is remembered, again once it
// was forgotten (an article that stays on top longer than the span is
// announced once per span), and never for a top K it entered and left
// between two looks. The memory is the topic: a watcher that starts
// emitting (a node start, or partition 0 moving to this node) first reads
// the topic's records of the last largest-window span (by their time,
// which is entered_at) and keeps reading what is appended, so a restart
// or a failover does not announce again what is remembered. An entry is
// remembered once its record is durable: an append that fails is logged
// and the next look tries again from the then current answer.
//
// Only complete, current answers count: while a partition is not
// answered for (restoring, moving) or a node fails to answer, the watcher
// waits, since a top K without some partitions' articles would announce
// articles that did not enter it. For the same reason, a watcher that
// starts appending (a node start, a move of partition 0) waits until this
// node's trending tasks have applied what their inputs held when it began
// to wait, and a snapshot interval more: a task restored from state older
// than its input (the state is not synced, a crash replays the log)
// answers complete but past tops until it has caught up. In a cluster one node appends: the owner of partition
// 0 (it runs the trending task of partition 0, and the story stage), which
// fans out for the answer as the trending handler does. While partition 0
// moves, the old owner may append once more before it learns of the move;
// the new one reads the topic first, so it repeats at most what the old
// one appended after that read.
//
// Every node also follows the topic and hands each new record to its
// open streams as a trending.entered event (stream.go), so streams on any
// node of a cluster get them.
//
// Goroutine: run, owned by Server.Run; the watcher's state is its own.

// HeaderChangeID is the header of a trending.changes record that holds
// its deterministic id, <window>/<article id>/<entered_at>.
const HeaderChangeID = "nf-change-id"

// Defaults of ChangesOptions.
const (
	defaultChangesK = 10
	// changesPartition is the trending partition whose owner appends.
	changesPartition = 0
	// changesPollTimeout bounds a read of the topic's new records.
	changesPollTimeout = 10 * time.Second
	// changesLogEvery spaces the warnings of a watcher that keeps failing.
	changesLogEvery = time.Minute
)

// errIncomplete marks a trending answer without every partition.
var errIncomplete = errors.New("trending answer incomplete")

// ChangesOptions configures the trending.changes topic and the
// trending.entered stream schema. The zero value is valid: enabled, the
// top 10 of every window.
type ChangesOptions struct {
	// Disabled turns the watcher off: nothing is appended or followed.
	Disabled bool
	// K is how many of each window's top the watcher watches (default
	// 10; at most trending's max_k).
	K int
}

// Validate reports invalid option values.
func (o ChangesOptions) Validate() error {
	if o.K < 0 {
		return errors.New("query: trending changes k must not be negative")
	}
	return nil
}

// TrendingChange is the value of a trending.changes record and the data
// of a trending.entered stream event.
type TrendingChange struct {
	Window    string `json:"window"`
	ArticleID string `json:"article_id"`
	Rank      int    `json:"rank"`
	Count     uint64 `json:"count"`
	// Bound is the error bound of Count in cms mode, absent otherwise.
	Bound *uint64 `json:"error_bound,omitempty"`
	// EnteredAt is the as_of of the answer the article entered, ms since
	// the epoch.
	EnteredAt int64 `json:"entered_at"`
}

// ID is the change's deterministic id (HeaderChangeID).
func (c TrendingChange) ID() string {
	return c.Window + "/" + c.ArticleID + "/" + strconv.FormatInt(c.EnteredAt, 10)
}

// changesSource is what the watcher asks of the node: the complete,
// merged top k of a window (an error wrapping errIncomplete when some
// partition or node is missing from it), whether this node is the one
// that appends, and the positions of this node's trending tasks and
// whether they all restored (engine.Engine.Progress and Ready).
type changesSource struct {
	top      func(window string, k int) (trending.Result, error)
	emits    func() bool
	progress func() ([]engine.Progress, bool)
}

// changesWatcher appends trending.changes records and follows the topic.
type changesWatcher struct {
	log      eventlog.Log
	src      changesSource
	windows  []trending.WindowSpec
	longest  time.Duration
	fresh    time.Duration // trending's snapshot interval
	k        int
	cms      bool
	interval time.Duration
	// announce, if set, hands new records' values to the open streams.
	announce func(values [][]byte)
	logger   *slog.Logger
	total    *prometheus.CounterVec

	// The fields below belong to run's goroutine (or a test's).
	parts  int32           // of the topic; 0 until it is ensured
	reader eventlog.Reader // follows the topic; nil before the first look
	next   []int64         // the next offset to read, per partition
	loaded bool            // seen covers the topic: this node appends
	// target is what the trending inputs held when the watcher began to
	// wait for the tasks to catch up, caughtUp when they had.
	target   map[eventlog.TopicPartition]int64
	caughtUp time.Time
	seen     map[string]map[string]int64 // window → article → entered_at
	// mine are the ids this node appended and announced, until read back.
	mine     map[string]bool
	failing  bool
	loggedAt time.Time
}

func newChangesWatcher(l eventlog.Log, topts trending.OperatorOptions, src changesSource, opts ChangesOptions, interval time.Duration,
	announce func([][]byte), logger *slog.Logger, reg prometheus.Registerer) (*changesWatcher, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	k := opts.K
	if k == 0 {
		k = defaultChangesK
	}
	if topts.MaxK > 0 {
		k = min(k, topts.MaxK)
	}
	windows := topts.Counts.Windows
	if len(windows) == 0 {
		windows = trending.DefaultWindows()
	}
	w := &changesWatcher{log: l, src: src, windows: windows, fresh: topts.SnapshotInterval, k: k, cms: topts.Counter == trending.CounterCMS,
		interval: interval, announce: announce, logger: logger, mine: map[string]bool{},
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "newsflow_trending_changes_total",
			Help: "Articles announced on trending.changes as entering a window's top K, by window (on the node that appends).",
		}, []string{"window"})}
	for _, s := range windows {
		w.longest = max(w.longest, s.Size)
		w.total.WithLabelValues(s.Name) // present at 0
	}
	if err := reg.Register(w.total); err != nil {
		return nil, fmt.Errorf("query: register metrics: %w", err)
	}
	return w, nil
}

// run looks every interval until ctx is done, then closes the reader.
func (w *changesWatcher) run(ctx context.Context) {
	defer w.close()
	t := time.NewTicker(w.interval)
	defer t.Stop()
	for {
		err := w.step(ctx)
		if ctx.Err() != nil {
			return
		}
		w.report(err)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (w *changesWatcher) close() {
	if w.reader != nil {
		_ = w.reader.Close()
		w.reader = nil
	}
}

// report logs a failing watcher once a changesLogEvery, and its recovery.
func (w *changesWatcher) report(err error) {
	switch {
	case err == nil && w.failing:
		w.failing = false
		w.logger.Info("trending.changes: appending and following again")
	case err != nil && (!w.failing || time.Since(w.loggedAt) >= changesLogEvery):
		w.failing, w.loggedAt = true, time.Now()
		w.logger.Warn("trending.changes: nothing announced this time; trying again every interval", "err", err)
	}
}

// step is one look: follow the topic, and on the node that appends,
// append the articles that entered a window's top K.
// It stays whole: each early return is a reason not to
// announce this time (not the writer, not caught up, an incomplete answer,
// a failed read or append), and together they are the watcher's rules.
func (w *changesWatcher) step(ctx context.Context) error {
	if !w.src.emits() {
		if w.loaded {
			// Partition 0 moved away: another node appends now. Forget,
			// and read the topic again should it come back.
			w.loaded, w.seen = false, nil
		}
		w.target, w.caughtUp = nil, time.Time{}
		if w.announce == nil {
			return w.ensure(ctx) // no streams to hand records to
		}
		return w.follow(ctx, true)
	}
	if !w.loaded {
		if ok, err := w.settled(ctx); err != nil || !ok {
			if ferr := w.follow(ctx, true); err == nil {
				err = ferr
			}
			return err
		}
	}
	answers := make([]*trending.Result, len(w.windows))
	cut, some := int64(0), false
	for i, s := range w.windows {
		res, err := w.src.top(s.Name, w.k)
		if err != nil {
			if !errors.Is(err, errIncomplete) {
				w.logger.Debug("trending.changes: no answer", "window", s.Name, "err", err)
			}
			continue
		}
		answers[i] = &res
		if len(res.Items) > 0 {
			if !some || res.AsOf-w.longest.Milliseconds() < cut {
				cut = res.AsOf - w.longest.Milliseconds()
			}
			some = true
		}
	}
	if !w.loaded {
		if !some {
			// Nothing to announce: follow for the streams only, and read
			// the memory once there is.
			return w.follow(ctx, true)
		}
		if err := w.load(ctx, max(cut, 0)); err != nil {
			return err
		}
	} else if err := w.follow(ctx, true); err != nil {
		return err // appending without the latest records could repeat them
	}
	var recs []*eventlog.Record
	var news []TrendingChange
	for i, s := range w.windows {
		res := answers[i]
		if res == nil {
			continue
		}
		mem := w.seen[s.Name]
		for a, at := range mem {
			if res.AsOf-at > s.Size.Milliseconds() {
				delete(mem, a)
			}
		}
		for _, it := range res.Items {
			if _, ok := mem[it.ArticleID]; ok {
				continue
			}
			c := TrendingChange{Window: s.Name, ArticleID: it.ArticleID, Rank: it.Rank, Count: it.Count, EnteredAt: res.AsOf}
			if w.cms {
				c.Bound = &it.Bound
			}
			value, err := json.Marshal(c)
			if err != nil {
				return fmt.Errorf("encode %s: %w", c.ID(), err)
			}
			news = append(news, c)
			recs = append(recs, &eventlog.Record{Topic: schema.TopicTrendingChanges,
				Partition: eventlog.PartitionFor([]byte(c.ArticleID), w.parts), Key: []byte(c.ArticleID), Value: value,
				Timestamp: c.EnteredAt, Headers: []eventlog.Header{{Key: HeaderChangeID, Value: []byte(c.ID())}}})
		}
	}
	if len(recs) == 0 {
		return nil
	}
	if err := w.log.Append(ctx, recs); err != nil {
		// Whatever of it was written is read back next time.
		return fmt.Errorf("append %d records to %s: %w", len(recs), schema.TopicTrendingChanges, err)
	}
	values := make([][]byte, len(recs))
	for i, c := range news {
		w.rememberChange(c)
		w.mine[c.ID()] = true
		w.total.WithLabelValues(c.Window).Inc()
		values[i] = recs[i].Value
	}
	if w.announce != nil {
		w.announce(values)
	}
	return nil
}

// settled reports whether this node's trending tasks have applied what
// their inputs held when the watcher first asked, a snapshot interval ago
// or more (so that every answer reflects it).
func (w *changesWatcher) settled(ctx context.Context) (bool, error) {
	progress, ready := w.src.progress()
	if !ready {
		return false, nil
	}
	if w.target == nil {
		target := make(map[eventlog.TopicPartition]int64, len(progress))
		for _, p := range progress {
			tp := eventlog.TopicPartition{Topic: p.Topic, Partition: p.Partition}
			o, err := w.log.Offsets(ctx, tp)
			if err != nil {
				return false, fmt.Errorf("trending input %s: %w", tp, err)
			}
			target[tp] = o.End
		}
		w.target = target
	}
	if w.caughtUp.IsZero() {
		for _, p := range progress {
			if p.Committed < w.target[eventlog.TopicPartition{Topic: p.Topic, Partition: p.Partition}] {
				return false, nil
			}
		}
		w.caughtUp = time.Now()
	}
	return time.Since(w.caughtUp) >= w.fresh, nil
}

// ensure creates the topic unless it exists (one partition: one order
// for every consumer) and learns its partition count.
func (w *changesWatcher) ensure(ctx context.Context) error {
	if w.parts > 0 {
		return nil
	}
	n, err := eventlog.EnsureTopic(ctx, w.log, schema.TopicTrendingChanges, 1)
	if err != nil {
		return err
	}
	w.parts = n
	return nil
}

// load reads the topic's records from time cut on into the memory, then
// follows it from there: the node appends from now on.
func (w *changesWatcher) load(ctx context.Context, cut int64) error {
	if err := w.ensure(ctx); err != nil {
		return err
	}
	pos := make(map[eventlog.TopicPartition]int64, w.parts)
	next := make([]int64, w.parts)
	for p := range w.parts {
		tp := eventlog.TopicPartition{Topic: schema.TopicTrendingChanges, Partition: p}
		off, err := w.log.OffsetForTime(ctx, tp, cut)
		if err != nil {
			return fmt.Errorf("read %s: %w", tp, err)
		}
		pos[tp], next[p] = off, off
	}
	r, err := w.log.NewReader(pos)
	if err != nil {
		return fmt.Errorf("read %s: %w", schema.TopicTrendingChanges, err)
	}
	w.close()
	w.reader, w.next, w.seen = r, next, map[string]map[string]int64{}
	clear(w.mine)
	if err := w.follow(ctx, false); err != nil {
		w.close() // read it all again next time
		return err
	}
	w.loaded = true
	return nil
}

// follow reads the records appended to the topic since the last read (the
// first time: from its end), remembers them when the node appends, and
// hands those of other nodes to the streams when announce is true.
func (w *changesWatcher) follow(ctx context.Context, announce bool) error {
	if err := w.ensure(ctx); err != nil {
		return err
	}
	ends := make([]int64, w.parts)
	for p := range w.parts {
		tp := eventlog.TopicPartition{Topic: schema.TopicTrendingChanges, Partition: p}
		o, err := w.log.Offsets(ctx, tp)
		if err != nil {
			return fmt.Errorf("read %s: %w", tp, err)
		}
		ends[p] = o.End
		if w.reader != nil {
			w.next[p] = max(w.next[p], o.Start) // retention passed it
		}
	}
	if w.reader == nil {
		pos := make(map[eventlog.TopicPartition]int64, w.parts)
		for p := range w.parts {
			pos[eventlog.TopicPartition{Topic: schema.TopicTrendingChanges, Partition: p}] = ends[p]
		}
		r, err := w.log.NewReader(pos)
		if err != nil {
			return fmt.Errorf("read %s: %w", schema.TopicTrendingChanges, err)
		}
		w.reader, w.next = r, ends
		return nil
	}
	var values [][]byte
	defer func() {
		if len(values) > 0 && w.announce != nil {
			w.announce(values)
		}
	}()
	for {
		behind := false
		for p := range w.parts {
			behind = behind || w.next[p] < ends[p]
		}
		if !behind {
			return nil
		}
		pctx, cancel := context.WithTimeout(ctx, changesPollTimeout)
		recs, err := w.reader.Poll(pctx, 1000)
		cancel()
		if err != nil {
			return fmt.Errorf("read %s: %w", schema.TopicTrendingChanges, err)
		}
		for _, rec := range recs {
			if rec.Partition < 0 || rec.Partition >= w.parts {
				continue
			}
			w.next[rec.Partition] = max(w.next[rec.Partition], rec.Offset+1)
			var c TrendingChange
			if json.Unmarshal(rec.Value, &c) != nil || c.Window == "" || c.ArticleID == "" {
				continue // not ours to read
			}
			if w.loaded || !announce {
				w.rememberChange(c)
			}
			if w.mine[c.ID()] {
				delete(w.mine, c.ID())
				continue // announced when appended
			}
			if announce {
				values = append(values, rec.Value)
			}
		}
	}
}

// rememberChange notes that c's article was announced for its window.
func (w *changesWatcher) rememberChange(c TrendingChange) {
	if w.seen == nil {
		w.seen = map[string]map[string]int64{}
	}
	mem := w.seen[c.Window]
	if mem == nil {
		mem = map[string]int64{}
		w.seen[c.Window] = mem
	}
	if at, ok := mem[c.ArticleID]; !ok || c.EnteredAt > at {
		mem[c.ArticleID] = c.EnteredAt
	}
}

// changesTop is the watcher's answer: the cluster-wide top k of a window,
// as GET /api/v1/trending answers it, or an error wrapping errIncomplete
// when a partition or a node is missing from it.
func (s *Server) changesTop(window string, k int) (trending.Result, error) {
	res, failed, err := s.trendingTop(window, "", k, s.deps.Cluster != nil)
	if err != nil {
		return res, err
	}
	if len(res.Partial) > 0 || len(failed) > 0 {
		return res, fmt.Errorf("%w: partitions %v missing, nodes %v did not answer", errIncomplete, res.Partial, failed)
	}
	return res, nil
}

// trendingProgress returns the positions of this node's trending tasks
// and whether every task of the node has restored.
func (s *Server) trendingProgress() ([]engine.Progress, bool) {
	var out []engine.Progress
	for _, p := range s.deps.Engine.Progress() {
		if p.Stage == trending.Name {
			out = append(out, p)
		}
	}
	return out, s.deps.Engine.Ready()
}

// emitsChanges reports whether this node appends to trending.changes: it
// is not in a cluster, or it owns the trending partition 0 (as the story
// owner is found, route.go).
func (s *Server) emitsChanges() bool {
	if s.deps.Cluster == nil {
		return true
	}
	st, _ := s.deps.Cluster.State()
	m, ok := st.Owner(changesPartition)
	return ok && m.ID == s.deps.Cluster.ID()
}
