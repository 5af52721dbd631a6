package trending

import (
	"log/slog"
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// The memory guard of the exact counters.
//
// Exact counts grow with the number of distinct articles shared within the
// largest window (see Memory in the package documentation); nothing bounds
// that number. Each task measures its
// counts with Counts.MemoryBytes after every commit and compares them with
// OperatorOptions.ExactMaxBytes. When a partition goes over, the node says
// so once per crossing: a Warn log line naming the partition, the bytes,
// the budget and what to do, and newsflow_trending_exact_over_budget_total
// counts the crossing. It warns again only after the counts have fallen
// below 90% of the budget (expiry) and crossed it anew, so counts hovering
// at the budget do not repeat the warning. The gauges
// newsflow_trending_exact_bytes and newsflow_trending_exact_budget_bytes and
// /health/detailed (Operator.ExactMemory) show where every partition
// stands. The guard never drops a share: answers stay exact over budget,
// and the memory keeps growing until the operator switches to the sketch
// counter (trending.counter: cms) or the budget is raised.
//
// The guard applies to the exact counter only. The sketch's memory is
// fixed by its options (sketch.Options.MaxMemoryBytes); its current size
// is published as newsflow_trending_cms_bytes and in ExactMemory (mode
// "cms", with the bound as MaxBytes).

// DefaultExactMaxBytes is the default per-partition budget of the exact
// counts: 8 partitions at 512 MiB are 4 GiB of live heap, about 8 GiB of
// resident memory with Go's default GC headroom, a third of a 24 GiB
// machine, leaving the rest to stories, search, the remembered event ids
// and Pebble. At about 125 bytes per distinct article (an article shared
// in one 15-minute bucket of the day, under one category), 512 MiB holds
// about 4 million articles per partition, 34 million per node.
const DefaultExactMaxBytes = 512 << 20

// guardRearmPercent is how far below the budget (in percent of it) the
// counts must fall before a new crossing warns again.
const guardRearmPercent = 90

// guardAction tells an operator what to do about a partition over budget.
const guardAction = "set trending.counter: cms (a Count-Min Sketch, fixed memory whatever the number of articles) " +
	"or raise trending.exact_max_bytes if the node has the memory; counts stay exact meanwhile"

// memoryGuard is one task's view of its counts against the budget. It
// belongs to the task goroutine.
type memoryGuard struct {
	budget int64
	over   bool // crossed, and not yet back under the re-arm level
}

// observe records the counts' size and reports whether it just went over
// the budget (once per crossing).
func (g *memoryGuard) observe(bytes int64) (crossed bool) {
	switch {
	case !g.over && bytes > g.budget:
		g.over = true
		return true
	case g.over && float64(bytes) < float64(g.budget)*guardRearmPercent/100:
		g.over = false
	}
	return false
}

// guardMetrics are the guard's metrics, labelled by partition.
type guardMetrics struct {
	bytes     *prometheus.GaugeVec
	budget    *prometheus.GaugeVec
	crossings *prometheus.CounterVec
	cmsBytes  *prometheus.GaugeVec
}

func newGuardMetrics() *guardMetrics {
	return &guardMetrics{
		bytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "newsflow_trending_exact_bytes",
			Help: "Estimated heap bytes of a partition's exact share counts (Counts.MemoryBytes), as of its last commit.",
		}, []string{"partition"}),
		budget: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "newsflow_trending_exact_budget_bytes",
			Help: "Memory budget of a partition's exact share counts (trending.exact_max_bytes).",
		}, []string{"partition"}),
		crossings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "newsflow_trending_exact_over_budget_total",
			Help: "Times a partition's exact share counts went over trending.exact_max_bytes (once per crossing; " +
				"counted again only after falling below 90% of it). The counts stay exact; consider trending.counter: cms.",
		}, []string{"partition"}),
		cmsBytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "newsflow_trending_cms_bytes",
			Help: "Bytes of a partition's sketch counts (trending.counter: cms), on the Go heap and off it, as of its last commit; bounded by trending.cms.",
		}, []string{"partition"}),
	}
}

func (m *guardMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.bytes, m.budget, m.crossings, m.cmsBytes}
}

// exactState is what queries see of one partition's guard.
type exactState struct {
	bytes atomic.Int64 // the counter's MemoryBytes at the last commit
}

// checkMemoryLocked measures the task's counts, publishes the size and warns if
// it just crossed the budget (exact counts only). The caller holds
// t.part.mu (or is the only one to know t.part yet).
func (t *task) checkMemoryLocked() {
	n := int64(t.part.counts.MemoryBytes())
	t.op.exact[t.p].bytes.Store(n)
	label := strconv.Itoa(int(t.p))
	exact, ok := t.part.counts.(*Counts)
	if !ok {
		t.op.guardM.cmsBytes.WithLabelValues(label).Set(float64(n))
		return
	}
	t.op.guardM.bytes.WithLabelValues(label).Set(float64(n))
	t.op.guardM.budget.WithLabelValues(label).Set(float64(t.guard.budget))
	if t.guard.observe(n) {
		t.op.guardM.crossings.WithLabelValues(label).Inc()
		// The engine's logger names the stage and the partition.
		t.log.Warn("trending: exact counts over their memory budget",
			"bytes", n, "budget", t.guard.budget, "articles", exact.Articles(), "action", guardAction)
	}
}

// forgetMemory removes a closed task's gauges: the partition may run
// elsewhere now.
func (t *task) forgetMemory() {
	label := strconv.Itoa(int(t.p))
	t.op.guardM.bytes.DeleteLabelValues(label)
	t.op.guardM.budget.DeleteLabelValues(label)
	t.op.guardM.cmsBytes.DeleteLabelValues(label)
	t.op.exact[t.p].bytes.Store(0)
}

// ExactMemory is where the exact counts of the running partitions stand
// against their memory budget (/health/detailed shows it), or in cms mode
// the sketches' memory against their fixed bound.
type ExactMemory struct {
	// Mode is the counter: "exact" or "cms".
	Mode string `json:"mode"`
	// BudgetBytes is the budget of each partition (trending.exact_max_bytes);
	// exact mode only.
	BudgetBytes int64 `json:"budget_bytes,omitempty"`
	// MaxBytes is, in cms mode, the most a partition's sketch can take
	// (sketch.Options.MaxMemoryBytes of trending.cms).
	MaxBytes int64 `json:"max_bytes,omitempty"`
	// OverBudget is true when some partition is over the budget.
	OverBudget bool              `json:"over_budget"`
	Partitions []PartitionMemory `json:"partitions"`
	// Action says what to do when OverBudget.
	Action string `json:"action,omitempty"`
}

// PartitionMemory is one running partition's counts (Bytes: their
// MemoryBytes as of its last commit).
type PartitionMemory struct {
	Partition  int32 `json:"partition"`
	Bytes      int64 `json:"bytes"`
	OverBudget bool  `json:"over_budget"`
}

// ExactMemory reports the exact counts of this node's running partitions
// against the budget, as of each one's last commit; in cms mode, the
// sketches' memory (never over a budget: the guard does not apply).
func (o *Operator) ExactMemory() ExactMemory {
	out := ExactMemory{Mode: o.opts.Counter, BudgetBytes: o.opts.ExactMaxBytes, Partitions: []PartitionMemory{}}
	if o.opts.Counter == CounterCMS {
		out.BudgetBytes, out.MaxBytes = 0, int64(o.opts.CMS.MaxMemoryBytes())
	}
	for i := range o.parts {
		if o.parts[i].Load() == nil {
			continue
		}
		n := o.exact[i].bytes.Load()
		if o.opts.Counter == CounterCMS {
			out.Partitions = append(out.Partitions, PartitionMemory{Partition: int32(i), Bytes: n})
			continue
		}
		pm := PartitionMemory{Partition: int32(i), Bytes: n, OverBudget: n > o.opts.ExactMaxBytes}
		out.OverBudget = out.OverBudget || pm.OverBudget
		out.Partitions = append(out.Partitions, pm)
	}
	if out.OverBudget {
		out.Action = guardAction
	}
	return out
}

// taskLogger is the engine's logger for a task, or one that discards.
func taskLogger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}
