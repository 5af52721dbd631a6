package slo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/newsflow/newsflow/internal/option"
	"github.com/newsflow/newsflow/internal/tick"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Options configures an Evaluator. The zero value is valid.
type Options struct {
	// Interval is how often Run reads the registry (default 10s).
	Interval time.Duration
	// Resolution is the spacing of the snapshots kept for the 5m and 1h
	// windows (default 1m); the SLO window's are an hour apart.
	Resolution time.Duration
	// Window is the SLO window (default 30 days, at least an hour).
	Window time.Duration
	// Now is the clock (default time.Now).
	Now    func() time.Time
	Logger *slog.Logger
}

// DefaultOptions returns the defaults the zero value stands for.
func DefaultOptions() Options {
	return Options{Interval: 10 * time.Second, Resolution: time.Minute, Window: 30 * 24 * time.Hour}
}

// Validate reports invalid option values.
func (o Options) Validate() error {
	switch {
	case o.Interval < 0 || o.Resolution < 0 || o.Window < 0:
		return errors.New("slo: durations must not be negative")
	case o.Resolution > longWindow:
		return fmt.Errorf("slo: resolution %s: at most %s", o.Resolution, longWindow)
	case o.Window != 0 && o.Window < coarseResolution:
		return fmt.Errorf("slo: window %s: at least %s", o.Window, coarseResolution)
	}
	return nil
}

// The windows of the burn rates, and the spacing of the SLO window's
// snapshots.
const (
	shortWindow      = 5 * time.Minute
	longWindow       = time.Hour
	coarseResolution = time.Hour
)

// Evaluator measures the objectives on one node's registry. Its methods
// are safe for concurrent use.
type Evaluator struct {
	g          prometheus.Gatherer
	opts       Options
	objectives []Objective
	windows    []namedWindow // short, long, the SLO window

	mu struct {
		sync.Mutex
		last   map[seriesKey]reading // the registry's values at the last reading
		cum    map[key]counts        // good and total since start
		gauges map[string]gaugeReading
		start  snapshot
		fine   ring // every Resolution, for the last hour
		coarse ring // every hour, for the SLO window
		at     time.Time
	}
}

type namedWindow struct {
	name string
	d    time.Duration
}

// key names an objective's counts: the objective, and the endpoint group
// of an availability entry ("" for the objective's own sums).
type key struct{ id, group string }

// seriesKey names one series of the registry an objective reads.
type seriesKey struct {
	id     string
	series string // its label values
}

type counts struct{ good, total float64 }

// reading is a series' counts as read, with the time it was created or
// last reset (unix ns, 0 when the registry does not say).
type reading struct {
	counts
	created int64
}

func (c counts) sub(d counts) counts { return counts{c.good - d.good, c.total - d.total} }

// gaugeReading is a coverage objective's gauges as last read.
type gaugeReading struct {
	at          time.Time
	good, total float64
}

// New returns an evaluator of Objectives over g. It reads g once, so its
// windows start now: what the registry counted before is not counted.
func New(g prometheus.Gatherer, opts Options) (*Evaluator, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	option.Fill(&opts, DefaultOptions())
	option.Fill(&opts, Options{Now: time.Now, Logger: slog.New(slog.DiscardHandler)})
	e := &Evaluator{g: g, opts: opts, objectives: Objectives(), windows: []namedWindow{
		{"5m", shortWindow}, {"1h", longWindow}, {windowName(opts.Window), opts.Window}}}
	e.mu.last, e.mu.cum, e.mu.gauges = map[seriesKey]reading{}, map[key]counts{}, map[string]gaugeReading{}
	e.mu.fine = newRing(int(longWindow/opts.Resolution) + 2)
	e.mu.coarse = newRing(int(opts.Window/coarseResolution) + 2)
	e.mu.Lock()
	defer e.mu.Unlock()
	now := opts.Now()
	e.readLocked(now)
	// What the registry holds now is the baseline: nothing counted yet.
	clear(e.mu.cum)
	e.mu.start = snapshot{at: now, cum: map[key]counts{}}
	return e, nil
}

// windowName writes d as a window name: days, hours or minutes when it
// is a whole number of them.
func windowName(d time.Duration) string {
	switch day := 24 * time.Hour; {
	case d%day == 0:
		return strconv.FormatInt(int64(d/day), 10) + "d"
	case d%time.Hour == 0:
		return strconv.FormatInt(int64(d/time.Hour), 10) + "h"
	case d%time.Minute == 0:
		return strconv.FormatInt(int64(d/time.Minute), 10) + "m"
	}
	return d.String()
}

// Run reads the registry every Interval until ctx is done.
func (e *Evaluator) Run(ctx context.Context) error {
	return tick.Every(ctx, e.opts.Interval, e.Observe)
}

// Observe reads the registry now (Run does, every Interval).
func (e *Evaluator) Observe() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.observeLocked(e.opts.Now())
}

// observeLocked reads the registry at now and keeps a snapshot when one
// is due.
func (e *Evaluator) observeLocked(now time.Time) {
	if now.Before(e.mu.at) {
		now = e.mu.at // a clock that stepped back: no negative spans
	}
	e.readLocked(now)
	for _, r := range []struct {
		ring  *ring
		every time.Duration
	}{{&e.mu.fine, e.opts.Resolution}, {&e.mu.coarse, coarseResolution}} {
		last := e.mu.start.at
		if s, ok := r.ring.newest(); ok {
			last = s.at
		}
		if now.Sub(last) >= r.every {
			r.ring.push(snapshot{at: now, cum: cloneCounts(e.mu.cum)})
		}
	}
}

// readLocked gathers the registry and adds what each series counted since
// the last reading to the cumulative counts.
func (e *Evaluator) readLocked(now time.Time) {
	mfs, err := e.g.Gather()
	if err != nil {
		// A registry answers what it could gather along with the error.
		e.opts.Logger.Warn("slo: gather metrics", "err", err)
	}
	fams := make(map[string]*dto.MetricFamily, len(mfs))
	for _, mf := range mfs {
		fams[mf.GetName()] = mf
	}
	for _, o := range e.objectives {
		switch o.Kind {
		case Latency:
			bound := o.Threshold.Seconds()
			for _, m := range fams[o.Metric].GetMetric() {
				if !hasLabels(m, o.Labels) {
					continue
				}
				h := m.GetHistogram()
				var good uint64
				for _, b := range h.GetBucket() {
					if b.GetUpperBound() <= bound {
						good = max(good, b.GetCumulativeCount())
					}
				}
				r := reading{counts{float64(good), float64(h.GetSampleCount())}, created(h.GetCreatedTimestamp())}
				e.mu.cum[key{id: o.ID}] = add(e.mu.cum[key{id: o.ID}], e.deltaLocked(seriesKey{o.ID, labelString(m)}, r))
			}
		case Availability:
			for _, m := range fams[o.Metric].GetMetric() {
				group, class := labelValue(m, labelGroup), labelValue(m, labelClass)
				if group == ProbeGroup {
					continue
				}
				v := m.GetCounter().GetValue()
				r := reading{counts{total: v}, created(m.GetCounter().GetCreatedTimestamp())}
				if class != classServerError {
					r.good = v
				}
				g := key{id: o.ID, group: group}
				if _, ok := e.mu.cum[g]; !ok {
					e.mu.cum[g] = counts{} // listed from its first reading, even at zero
				}
				d := e.deltaLocked(seriesKey{o.ID, group + "\x00" + class}, r)
				e.mu.cum[g] = add(e.mu.cum[g], d)
				e.mu.cum[key{id: o.ID}] = add(e.mu.cum[key{id: o.ID}], d)
			}
		case Coverage:
			total, okT := gaugeSum(fams[o.Metric])
			good, okG := gaugeSum(fams[o.GoodMetric])
			// The gauges' values hold from one reading to the next: what
			// was read last is integrated up to now.
			if prev, ok := e.mu.gauges[o.ID]; ok {
				dt := now.Sub(prev.at).Seconds()
				e.mu.cum[key{id: o.ID}] = add(e.mu.cum[key{id: o.ID}], counts{min(prev.good, prev.total) * dt, prev.total * dt})
			}
			if okT && okG {
				e.mu.gauges[o.ID] = gaugeReading{at: now, good: max(good, 0), total: max(total, 0)}
			} else {
				delete(e.mu.gauges, o.ID)
			}
		}
	}
	e.mu.at = now
}

// deltaLocked returns what series s counted since the last reading, r
// being its reading now. A series that was reset (registered again, as by
// a restart) counted all of r since: it says so by a new created time,
// or, without one, by counts that went down.
func (e *Evaluator) deltaLocked(s seriesKey, r reading) counts {
	prev, ok := e.mu.last[s]
	e.mu.last[s] = r
	if !ok || r.created != prev.created || r.total < prev.total || r.good < prev.good {
		return r.counts
	}
	return r.sub(prev.counts)
}

// created returns a created timestamp (a *timestamppb.Timestamp, whose
// getters read nil as zero) in unix ns, 0 when there is none.
func created(ts interface {
	GetSeconds() int64
	GetNanos() int32
}) int64 {
	return ts.GetSeconds()*int64(time.Second) + int64(ts.GetNanos())
}

func add(a, b counts) counts { return counts{a.good + b.good, a.total + b.total} }

func hasLabels(m *dto.Metric, want map[string]string) bool {
	for name, v := range want {
		if labelValue(m, name) != v {
			return false
		}
	}
	return true
}

func labelValue(m *dto.Metric, name string) string {
	for _, lp := range m.GetLabel() {
		if lp.GetName() == name {
			return lp.GetValue()
		}
	}
	return ""
}

// labelString identifies a series of a family by its label values.
func labelString(m *dto.Metric) string {
	var s string
	for _, lp := range m.GetLabel() {
		s += lp.GetName() + "=" + lp.GetValue() + "\x00"
	}
	return s
}

// gaugeSum sums a gauge family's series; false when there is none.
func gaugeSum(mf *dto.MetricFamily) (float64, bool) {
	if mf == nil || len(mf.GetMetric()) == 0 {
		return 0, false
	}
	var sum float64
	for _, m := range mf.GetMetric() {
		sum += m.GetGauge().GetValue()
	}
	return sum, true
}

// Report reads the registry and reports every objective over each window.
func (e *Evaluator) Report() Report {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.opts.Now()
	e.observeLocked(now)
	now = e.mu.at
	rep := Report{AsOf: now.UnixMilli(), Window: e.windows[2].name}
	bases := make([]snapshot, len(e.windows))
	for i, w := range e.windows {
		rep.Windows = append(rep.Windows, w.name)
		bases[i] = e.baselineLocked(now.Add(-w.d))
	}
	result := func(o Objective, group string) Result {
		r := Result{ID: o.ID, Group: group, Description: o.Description, Target: o.Target, ThresholdS: o.Threshold.Seconds(),
			Metric: o.MetricName(), Windows: make(map[string]Window, len(e.windows))}
		k := key{id: o.ID, group: group}
		for i, w := range e.windows {
			c := e.mu.cum[k].sub(bases[i].cum[k])
			span := now.Sub(bases[i].at)
			r.Windows[w.name] = Window{Good: c.good, Total: c.total, Seconds: span.Seconds(), SinceStart: span < w.d}
		}
		return r
	}
	for _, o := range e.objectives {
		r := result(o, "")
		if o.Kind == Availability {
			for _, g := range e.groupsLocked(o.ID) {
				r.Groups = append(r.Groups, result(o, g))
			}
		}
		r.derive(rep.Window, e.windows[0].name, e.windows[1].name)
		rep.Objectives = append(rep.Objectives, r)
	}
	return rep
}

// groupsLocked returns the endpoint groups objective id has counts of,
// sorted.
func (e *Evaluator) groupsLocked(id string) []string {
	var out []string
	for k := range e.mu.cum {
		if k.id == id && k.group != "" {
			out = append(out, k.group)
		}
	}
	slices.Sort(out)
	return out
}

// baselineLocked returns the newest snapshot taken at or before t, or the
// start when there is none.
func (e *Evaluator) baselineLocked(t time.Time) snapshot {
	base := e.mu.start
	for _, r := range []*ring{&e.mu.fine, &e.mu.coarse} {
		if s, ok := r.atOrBefore(t); ok && s.at.After(base.at) {
			base = s
		}
	}
	return base
}
