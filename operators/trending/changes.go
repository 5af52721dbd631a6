package trending

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/state"
	"github.com/prometheus/client_golang/prometheus"
)

// The trending.changes topic: one record each time an article enters the
// global top K of a trending window, for dashboards and pipelines.
//
// Two stages make it, each exactly once over its input:
//
//   - every trending task, at the end of a batch (EndBatch), publishes its
//     partition's top K of each window to TopicTops when the batch
//     changed which articles it holds or their order, and at most every
//     topsInterval when only their counts changed;
//   - the trending-changes operator (a singleton) keeps each partition's
//     latest top and the articles it announced; at each top it merges the
//     window's global top K (partitions hold disjoint articles, so it is
//     the top K of their tops) and emits a record for each article in it
//     that it does not remember announcing for that window:
//
//	key      the article id
//	value    {"window":"1h","article_id":"a1","rank":3,"count":123,
//	          "error_bound":0,"entered_at":1767225600000}
//	headers  nf-change-id: <window>/<article id>/<entered_at>
//	time     entered_at
//
// entered_at is the newest watermark among the window's partition tops
// (the as_of a trending answer at that moment would give), so
// announcements follow event time, never the wall clock. rank and count
// are the article's when it entered; error_bound is there in cms mode only.
// The header is a deterministic id: the operator's outputs are at least
// once (a crash between appending and committing repeats them), so a
// consumer that sees an id twice may drop the repeat.
//
// "First time" is per window span: an announced (window, article) is
// remembered with its entered_at and forgotten once entered_at is more
// than the window's span behind the window's newest watermark. An
// article is therefore announced at most once per window while it is
// remembered, again once it was forgotten, and never for a top K it
// entered and left within one batch of its partition.
//
// A partition's top older than the window's newest watermark by more than
// the span counts for nothing (its shares have left the window), and a
// top at a position (the task's input offsets, ProcessContext.Position)
// not beyond the one kept for its partition is ignored: a trending task
// restored from older state (the state is not synced; a crash replays the
// log) applies its input again and publishes past tops again, which must
// not bring back what they held. The memory and
// the tops are the operator's state, committed with its input offsets, so
// a restart or a failover neither repeats nor loses an announcement.
// Until a trending partition has published its first top it counts as
// empty, which it is unless its state predates the topic (an upgrade):
// its articles then join the merge at its first batch.

// TopicTops is the internal topic of the trending tasks' tops, read by
// the trending-changes operator from its partition 0.
const TopicTops = "newsflow-trending-tops"

// ChangesName is the trending-changes operator's name.
const ChangesName = "trending-changes"

// HeaderChangeID is the header of a trending.changes record that holds
// its deterministic id, <window>/<article id>/<entered_at>.
const HeaderChangeID = "nf-change-id"

// DefaultChangesK is how many of each window's top the node's
// trending-changes operator watches by default (trending.changes.k).
const DefaultChangesK = 10

// topsInterval is the least wall time between two tops of a window that a
// task publishes while only counts changed, not membership or order.
const topsInterval = time.Second

// Change is the value of a trending.changes record.
type Change struct {
	Window    string `json:"window"`
	ArticleID string `json:"article_id"`
	Rank      int    `json:"rank"`
	Count     uint64 `json:"count"`
	// Bound is the error bound of Count in cms mode, absent otherwise.
	Bound *uint64 `json:"error_bound,omitempty"`
	// EnteredAt is the window's newest watermark when the article
	// entered, ms since the epoch.
	EnteredAt int64 `json:"entered_at"`
}

// ID is the change's deterministic id (HeaderChangeID).
func (c Change) ID() string {
	return c.Window + "/" + c.ArticleID + "/" + strconv.FormatInt(c.EnteredAt, 10)
}

// partitionTop is one trending partition's top K of one window, the value
// of a TopicTops record (keyed by the window's name).
type partitionTop struct {
	Partition int32  `json:"partition"`
	Window    string `json:"window"`
	// Position is the task's engine.ProcessContext.Position: a top at a
	// position not beyond the one kept is a past state published again.
	Position  int64      `json:"position"`
	Watermark int64      `json:"watermark"`
	Top       []topEntry `json:"top"`
}

type topEntry struct {
	ArticleID string `json:"a"`
	Count     uint64 `json:"n"`
	Bound     uint64 `json:"b,omitempty"`
}

// published is what a task last published for a window.
type published struct {
	top []Entry
	at  time.Time
}

// publishTops publishes the partition's tops that the batch changed
// (EndBatch of the trending task).
func (t *task) publishTops(pc *engine.ProcessContext) error {
	k := t.op.opts.PublishTops
	if k <= 0 {
		return nil
	}
	windows := t.op.opts.Counts.Windows
	if t.tops == nil {
		t.tops = make([]published, len(windows))
	}
	now := time.Now()
	t.part.mu.Lock()
	wm := t.part.counts.Watermark()
	tops := make([][]Entry, len(windows))
	for w := range windows {
		tops[w] = t.part.counts.TopK(w, "", k)
	}
	t.part.mu.Unlock()
	for w, top := range tops {
		last := &t.tops[w]
		if last.at.IsZero() || !sameArticles(last.top, top) || (!slices.Equal(last.top, top) && now.Sub(last.at) >= topsInterval) {
			if err := t.emitTop(pc, windows[w].Name, pc.Position(), wm, top); err != nil {
				return err
			}
			last.top, last.at = top, now
		}
	}
	return nil
}

func (t *task) emitTop(pc *engine.ProcessContext, window string, pos, wm int64, top []Entry) error {
	v := partitionTop{Partition: t.p, Window: window, Position: pos, Watermark: wm, Top: make([]topEntry, len(top))}
	for i, e := range top {
		v.Top[i] = topEntry(e)
	}
	value, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("trending: encode top: %w", err)
	}
	pc.Emit(&eventlog.Record{Topic: TopicTops, Partition: engine.SingletonPartition, Key: []byte(window), Value: value, Timestamp: wm})
	return nil
}

// sameArticles reports whether a and b list the same articles in the same
// order.
func sameArticles(a, b []Entry) bool {
	return slices.EqualFunc(a, b, func(x, y Entry) bool { return x.ArticleID == y.ArticleID })
}

// Changes is the trending-changes operator (see the top of this file).
type Changes struct {
	k       int
	cms     bool
	windows map[string]time.Duration // name → span
	total   *prometheus.CounterVec
}

// NewChanges returns the trending-changes operator over the tops of a
// trending operator with opts, announcing entries into each window's top
// k (at most opts.MaxK).
func NewChanges(opts OperatorOptions, k int, reg prometheus.Registerer) (*Changes, error) {
	if k < 1 {
		return nil, fmt.Errorf("trending: changes k %d: want at least 1", k)
	}
	opts = opts.withDefaults()
	c := &Changes{k: min(k, opts.MaxK), cms: opts.Counter == CounterCMS, windows: map[string]time.Duration{},
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "newsflow_trending_changes_total",
			Help: "Articles announced on trending.changes as entering a window's top K, by window (on the node that runs the trending-changes task).",
		}, []string{"window"})}
	for _, w := range opts.Counts.Windows {
		c.windows[w.Name] = w.Size
		c.total.WithLabelValues(w.Name) // present at 0
	}
	if reg != nil {
		if err := reg.Register(c.total); err != nil {
			return nil, fmt.Errorf("trending: register metrics: %w", err)
		}
	}
	return c, nil
}

// K is how many of each window's top the operator watches.
func (c *Changes) K() int { return c.k }

// Spec implements engine.Operator.
func (c *Changes) Spec() engine.Spec {
	return engine.Spec{
		Name:        ChangesName,
		Description: "announces each article that enters a window's global top K on trending.changes, once per window span",
		Inputs:      []engine.Input{{Topic: TopicTops, Key: "window (every record on partition 0)"}},
		Outputs:     []string{schema.TopicTrendingChanges},
		Stores: []string{"tops: each trending partition's latest top K of each window",
			"announced: the articles announced per window, with when they entered"},
		Options:   map[string]int{"k": c.k},
		Singleton: true,
	}
}

// NewTask implements engine.Operator.
func (c *Changes) NewTask(engine.TaskContext) (engine.Task, error) {
	return &changesTask{op: c, tops: map[string]map[int32]partitionTop{}, seen: map[string]map[string]int64{},
		dirtyTops: map[string]map[int32]bool{}, dirtySeen: map[string]map[string]bool{}, counted: map[string]int{}}, nil
}

// State keys of the trending-changes task: 't' window 0x00 partition
// (4 bytes) → a partitionTop; 'r' window 0x00 article → entered_at (8
// bytes).
func topKey(window string, p int32) []byte {
	return binary.BigEndian.AppendUint32(append(append([]byte{'t'}, window...), 0), uint32(p))
}

func seenKey(window, article string) []byte {
	return append(append(append([]byte{'r'}, window...), 0), article...)
}

// splitKey returns the window and the rest of a state key.
func splitKey(k []byte) (window string, rest []byte, ok bool) {
	i := slices.Index(k[1:], 0)
	if i < 0 {
		return "", nil, false
	}
	return string(k[1 : 1+i]), k[2+i:], true
}

type changesTask struct {
	op   *Changes
	tops map[string]map[int32]partitionTop // window → partition → latest top
	seen map[string]map[string]int64       // window → article → entered_at
	// dirtyTops and dirtySeen are the keys changed since the last Flush
	// (a seen key no longer in seen is deleted).
	dirtyTops map[string]map[int32]bool
	dirtySeen map[string]map[string]bool
	// counted are the announcements since the last commit, per window.
	counted map[string]int
}

func (t *changesTask) Restore(r state.Reader) error {
	err := r.Scan([]byte{'t'}, []byte{'t' + 1}, func(k, v []byte) error {
		w, rest, ok := splitKey(k)
		if !ok || len(rest) != 4 {
			return fmt.Errorf("trending-changes: bad top key %q", k)
		}
		var pt partitionTop
		if err := json.Unmarshal(v, &pt); err != nil {
			return fmt.Errorf("trending-changes: top %q: %w", k, err)
		}
		inner(t.tops, w)[int32(binary.BigEndian.Uint32(rest))] = pt
		return nil
	})
	if err != nil {
		return err
	}
	return r.Scan([]byte{'r'}, []byte{'r' + 1}, func(k, v []byte) error {
		w, rest, ok := splitKey(k)
		if !ok || len(v) != 8 {
			return fmt.Errorf("trending-changes: bad announced key %q", k)
		}
		inner(t.seen, w)[string(rest)] = int64(binary.BigEndian.Uint64(v))
		return nil
	})
}

// inner returns m[k], made when missing.
func inner[K comparable, V any](m map[string]map[K]V, k string) map[K]V {
	v, ok := m[k]
	if !ok {
		v = map[K]V{}
		m[k] = v
	}
	return v
}

func (t *changesTask) Process(pc *engine.ProcessContext, rec *eventlog.Record) error {
	var pt partitionTop
	if err := json.Unmarshal(rec.Value, &pt); err != nil {
		return engine.Invalid("trending top: %v", err)
	}
	span, ok := t.op.windows[pt.Window]
	if !ok {
		return nil // a window no longer configured
	}
	tops := inner(t.tops, pt.Window)
	if old, ok := tops[pt.Partition]; ok && pt.Position <= old.Position {
		return nil // a past top, published again by a task that replays
	}
	tops[pt.Partition] = pt
	inner(t.dirtyTops, pt.Window)[pt.Partition] = true

	asOf, merged := t.merge(pt.Window, span)
	seen, dirty := inner(t.seen, pt.Window), inner(t.dirtySeen, pt.Window)
	for a, at := range seen {
		if asOf-at > span.Milliseconds() {
			delete(seen, a)
			dirty[a] = true
		}
	}
	for i, e := range merged {
		if _, ok := seen[e.ArticleID]; ok {
			continue
		}
		c := Change{Window: pt.Window, ArticleID: e.ArticleID, Rank: i + 1, Count: e.Count, EnteredAt: asOf}
		if t.op.cms {
			c.Bound = &e.Bound
		}
		value, err := json.Marshal(c)
		if err != nil {
			return fmt.Errorf("trending-changes: encode %s: %w", c.ID(), err)
		}
		pc.Emit(&eventlog.Record{Topic: schema.TopicTrendingChanges, Partition: 0, Key: []byte(c.ArticleID), Value: value,
			Timestamp: c.EnteredAt, Headers: []eventlog.Header{{Key: HeaderChangeID, Value: []byte(c.ID())}}})
		seen[e.ArticleID] = asOf
		dirty[e.ArticleID] = true
		t.counted[pt.Window]++
	}
	return nil
}

// merge returns the window's newest watermark and its global top k: the
// top k of the partitions' tops that are within the span of it.
func (t *changesTask) merge(window string, span time.Duration) (int64, []Entry) {
	tops := t.tops[window]
	var asOf int64
	for _, pt := range tops {
		asOf = max(asOf, pt.Watermark)
	}
	var all []Entry
	for _, pt := range tops {
		if asOf-pt.Watermark >= span.Milliseconds() {
			continue // every share it counted has left the window
		}
		for _, e := range pt.Top {
			all = append(all, Entry(e))
		}
	}
	slices.SortFunc(all, compareEntries)
	return asOf, all[:min(t.op.k, len(all))]
}

func (t *changesTask) Flush(w state.Writer) error {
	for win, parts := range t.dirtyTops {
		for p := range parts {
			v, err := json.Marshal(t.tops[win][p])
			if err != nil {
				return err
			}
			if err := w.Set(topKey(win, p), v); err != nil {
				return err
			}
		}
	}
	clear(t.dirtyTops)
	for win, arts := range t.dirtySeen {
		for a := range arts {
			at, ok := t.seen[win][a]
			var err error
			if ok {
				err = w.Set(seenKey(win, a), binary.BigEndian.AppendUint64(nil, uint64(at)))
			} else {
				err = w.Delete(seenKey(win, a))
			}
			if err != nil {
				return err
			}
		}
	}
	clear(t.dirtySeen)
	return nil
}

// Committed counts the batch's announcements: once, whatever a restart
// before the commit applied again.
func (t *changesTask) Committed(engine.CommitInfo) {
	for w, n := range t.counted {
		t.op.total.WithLabelValues(w).Add(float64(n))
	}
	clear(t.counted)
}

func (t *changesTask) Close() error { return nil }
