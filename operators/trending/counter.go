package trending

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/operators/internal/sketch"
	"github.com/newsflow/newsflow/state"
)

// Counter modes (OperatorOptions.Counter).
const (
	// CounterExact counts every (window, bucket, category, article) cell
	// with Counts: exact answers, memory growing with the number of
	// distinct articles (guard.go watches it).
	CounterExact = "exact"
	// CounterCMS counts with a sliding-window Count-Min Sketch (package
	// sketch): memory fixed by its options whatever the number of
	// articles, estimates never below the true count and within their
	// reported error bound with high probability.
	CounterCMS = "cms"
)

// counter is what a partition counts its shares with. Both modes have the
// same window semantics (a share counts in every window whose span at the
// watermark holds its bucket, in any arrival order) and the same top-K
// order (count descending, then article id ascending).
//
// Concurrency: the task goroutine calls the Add methods, Advance, Flush and Load
// under the partition's write lock (and TooOld, Watermark and Horizon
// without it: only it writes). Queries call Estimate, Categories,
// Watermark and MemoryBytes under the read lock, and TopK under the write
// lock (the exact counter reorganises its candidate sets there).
type counter interface {
	Add(articleID, category string, ts int64) bool
	AddToCategory(articleID, category string, ts int64) bool
	// AddIn and AddToCategoryIn count only in the windows of a mask (bit
	// w; windows from 64 on always); Advance only moves the watermark.
	AddIn(articleID, category string, ts int64, mask uint64) bool
	AddToCategoryIn(articleID, category string, ts int64, mask uint64) bool
	Advance(ts int64)
	TooOld(ts int64) bool
	Watermark() int64
	Horizon() time.Duration
	Categories() []string
	// TopK is the top k of window w (by index) in category ("" for all),
	// count descending then article id ascending, each with its error
	// bound (0 when exact).
	TopK(w int, category string, k int) []Entry
	// Estimate is an article's global count in window w and its error
	// bound (0 when exact): the true count is in [count-bound, count].
	Estimate(w int, articleID string) (count, bound uint64)
	MemoryBytes() int
	Flush(wr state.Writer) error
	Load(r state.Reader) error
}

var (
	_ counter = (*Counts)(nil)
	_ counter = cmsCounter{}
)

// Estimate implements counter: exact counts have no error.
func (c *Counts) Estimate(w int, articleID string) (count, bound uint64) {
	return c.Count(w, articleID), 0
}

// cmsCounter is a sketch.Counts as a counter.
type cmsCounter struct{ *sketch.Counts }

func (c cmsCounter) TopK(w int, category string, k int) []Entry {
	top := c.Counts.TopK(w, category, k)
	out := make([]Entry, len(top))
	for i, e := range top {
		out[i] = Entry{ArticleID: e.ArticleID, Count: e.Count, Bound: e.Bound}
	}
	return out
}

func (c cmsCounter) Estimate(w int, articleID string) (count, bound uint64) {
	e := c.Counts.Count(w, articleID)
	return e.Count, e.Bound
}

// cmsPrefix starts every key of the sketch in a task's namespace.
const cmsPrefix = sketch.DefaultPrefix

// cmsOptions are the sketch options of the operator: o.CMS with the
// operator's windows, MaxK and key prefix, and ids as long as an event
// may carry (so that every article may trend).
func (o OperatorOptions) cmsOptions() sketch.Options {
	c := o.CMS
	c.Windows = slices.Clone(o.Counts.Windows)
	c.MaxK = o.MaxK
	c.Prefix = cmsPrefix
	if c.MaxIDLen == 0 {
		c.MaxIDLen = schema.MaxIDBytes
	}
	return c
}

// releaseCounter returns the memory c holds off the Go heap (the sketch's
// counters; the exact counts hold none). c must not change after, but its
// queries still answer: the caller holds the partition's write lock, or
// is the only one to know c.
func releaseCounter(c counter) {
	if r, ok := c.(interface{ Release() }); ok {
		r.Release()
	}
}

// newCounter returns an empty counter of the operator's mode.
func (o *Operator) newCounter() counter {
	if o.opts.Counter == CounterCMS {
		return cmsCounter{sketch.New(o.opts.CMS)}
	}
	return NewCounts(o.opts.Counts)
}

// The counter mode is stored in the task's state under modeKey when the
// task first commits. State without it (written before the mode was
// stored) that holds exact counts (their layout key) is exact.
var modeKey = []byte{'o'}

// ErrCounterChanged is returned by a task's Restore when the partition's
// stored counts were made by another counter than the configured one.
// One counter cannot read the other's state, and mixing them would
// answer nonsense: rebuild the state with a replay of the log.
var ErrCounterChanged = errors.New("trending: stored counts were made by another counter")

// replayHint tells an operator how to rebuild trending state.
const replayHint = "stop the node and rebuild trending with `newsflow replay --operator trending --from-offset 0` " +
	"(with the new setting in its config; the log must still hold the largest window)"

// storedMode returns the counter mode of the state in r ("" if it holds
// no counts) and whether the mode itself is stored.
func storedMode(r state.Reader) (mode string, stored bool, err error) {
	v, ok, err := r.Get(modeKey)
	if err != nil {
		return "", false, fmt.Errorf("trending: load counter mode: %w", err)
	}
	if ok {
		return string(v), true, nil
	}
	if _, ok, err = r.Get(layoutKey); err != nil {
		return "", false, fmt.Errorf("trending: load layout: %w", err)
	} else if ok {
		return CounterExact, false, nil
	}
	return "", false, nil
}

// restoreCounter loads the partition's counter from r, refusing state of
// another mode or layout.
func (t *task) restoreCounter(r state.Reader) (counter, error) {
	mode := t.op.opts.Counter
	stored, explicit, err := storedMode(r)
	if err != nil {
		return nil, err
	}
	if stored != "" && stored != mode {
		return nil, fmt.Errorf("%w: partition %d holds %s counts and trending.counter is %s: %s, or set trending.counter: %s again",
			ErrCounterChanged, t.p, stored, mode, replayHint, stored)
	}
	t.wroteMode = explicit
	c := t.op.newCounter()
	if err := c.Load(r); err != nil {
		releaseCounter(c)
		if errors.Is(err, ErrLayoutChanged) || errors.Is(err, sketch.ErrLayoutChanged) {
			return nil, fmt.Errorf("partition %d: %w: the windows or the trending.cms sizes changed: %s, or restore the previous settings",
				t.p, err, replayHint)
		}
		return nil, err
	}
	return c, nil
}

// flushMode stores the counter mode once.
func (t *task) flushMode(w state.Writer) error {
	if t.wroteMode {
		return nil
	}
	if err := w.Set(modeKey, []byte(t.op.opts.Counter)); err != nil {
		return fmt.Errorf("trending: flush counter mode: %w", err)
	}
	t.wroteMode = true
	return nil
}
