package slo

import (
	"cmp"
	"slices"
)

// FastBurn is the burn rate at which an objective is burning: its 5m and
// 1h burn rates both at least this much (2% of a 30-day budget spent in
// an hour, the fast-burn alert of Google's SRE workbook).
const FastBurn = 14.4

// Statuses of a Result.
const (
	StatusOK       = "ok"
	StatusBurning  = "burning"
	StatusBreached = "breached"
	StatusNoData   = "no_data"
)

// Report is how a node (or a cluster: Combine) stands against every
// objective.
type Report struct {
	// Node is the node the report is of ("" for a single node or the
	// whole cluster); set by who serves it.
	Node string `json:"node,omitempty"`
	// AsOf is when the counts were read, in ms since the epoch.
	AsOf int64 `json:"as_of"`
	// Window names the SLO window (30d), over which Value, the error
	// budget and the status are computed; Windows names every window of
	// a Result, shortest first.
	Window     string   `json:"window"`
	Windows    []string `json:"windows"`
	Objectives []Result `json:"objectives"`
}

// Result is one objective (or one endpoint group of the availability
// objective) over each window.
type Result struct {
	ID string `json:"id"`
	// Group is the endpoint group of an entry of Groups.
	Group       string  `json:"group,omitempty"`
	Description string  `json:"description"`
	Target      float64 `json:"target"`
	// ThresholdS is a latency objective's bound in seconds.
	ThresholdS float64 `json:"threshold_s,omitempty"`
	// Metric says what good and total count.
	Metric string `json:"metric"`
	// Value is the fraction of good events over the SLO window, nil
	// without events.
	Value *float64 `json:"value"`
	// ErrorBudgetRemaining is 1 - bad fraction / (1 - target) over the SLO
	// window: 1 untouched, 0 spent, negative overspent; nil without
	// events. The availability objective has its least group's.
	ErrorBudgetRemaining *float64 `json:"error_budget_remaining"`
	// Status is ok, burning, breached or no_data (see the package
	// comment). The availability objective has its worst group's.
	Status  string            `json:"status"`
	Windows map[string]Window `json:"windows"`
	// Groups are the availability objective's endpoint groups, by name;
	// the objective's own counts are their sums.
	Groups []Result `json:"groups,omitempty"`
}

// Window is an objective's counts over one window.
type Window struct {
	Good  float64 `json:"good"`
	Total float64 `json:"total"`
	// Value is Good/Total, nil without events.
	Value *float64 `json:"value"`
	// BurnRate is (1 - Value) / (1 - target), nil without events.
	BurnRate *float64 `json:"burn_rate"`
	// Seconds is how long the counts cover: the window, or somewhat more
	// (snapshots are kept every minute, or hour); less when the evaluator
	// started less than the window ago (SinceStart).
	Seconds    float64 `json:"window_s"`
	SinceStart bool    `json:"since_start,omitempty"`
}

// derive computes a window's value and burn rate from its counts.
func (w *Window) derive(target float64) {
	w.Value, w.BurnRate = nil, nil
	if w.Total <= 0 {
		return
	}
	v := w.Good / w.Total
	burn := (w.Total - w.Good) / w.Total / (1 - target)
	w.Value, w.BurnRate = &v, &burn
}

// derive computes the result's values, budget and status from its
// windows' counts (and its groups'); window names the SLO window, short
// and long the windows of the burn rates.
func (r *Result) derive(window, short, long string) {
	for name, w := range r.Windows {
		w.derive(r.Target)
		r.Windows[name] = w
	}
	for i := range r.Groups {
		r.Groups[i].derive(window, short, long)
	}
	w := r.Windows[window]
	r.Value, r.ErrorBudgetRemaining, r.Status = w.Value, nil, StatusNoData
	if w.BurnRate != nil {
		left := 1 - *w.BurnRate
		r.ErrorBudgetRemaining = &left
		s, l := r.Windows[short].BurnRate, r.Windows[long].BurnRate
		switch {
		case left < 0:
			r.Status = StatusBreached
		case s != nil && l != nil && *s >= FastBurn && *l >= FastBurn:
			r.Status = StatusBurning
		default:
			r.Status = StatusOK
		}
	}
	if len(r.Groups) == 0 {
		return
	}
	// The availability objective holds per group: it stands as its worst
	// group does.
	for _, g := range r.Groups {
		if severity(g.Status) > severity(r.Status) {
			r.Status = g.Status
		}
		if b := g.ErrorBudgetRemaining; b != nil && (r.ErrorBudgetRemaining == nil || *b < *r.ErrorBudgetRemaining) {
			left := *b
			r.ErrorBudgetRemaining = &left
		}
	}
}

// severity orders statuses from the best to the worst.
func severity(status string) int {
	return slices.Index([]string{StatusNoData, StatusOK, StatusBurning, StatusBreached}, status)
}

// Combine adds up reports of several nodes: good and total counts are
// summed per objective, group and window, and everything else derived
// again from the sums. A window covers the longest of the nodes' spans,
// and is since_start only when it is on every node. The reports must
// come from the same objectives and windows (any node of one version);
// an objective or group only some nodes report counts only theirs.
func Combine(reports ...Report) Report {
	if len(reports) == 0 {
		return Report{}
	}
	out := Report{Window: reports[0].Window, Windows: slices.Clone(reports[0].Windows)}
	at := map[string]int{} // objective id → index in out.Objectives
	for _, rep := range reports {
		out.AsOf = max(out.AsOf, rep.AsOf)
		for _, r := range rep.Objectives {
			i, ok := at[r.ID]
			if !ok {
				i = len(out.Objectives)
				at[r.ID] = i
				out.Objectives = append(out.Objectives, emptyLike(r))
			}
			o := &out.Objectives[i]
			addWindows(o.Windows, r.Windows)
			for _, g := range r.Groups {
				j := slices.IndexFunc(o.Groups, func(x Result) bool { return x.Group == g.Group })
				if j < 0 {
					j = len(o.Groups)
					o.Groups = append(o.Groups, emptyLike(g))
				}
				addWindows(o.Groups[j].Windows, g.Windows)
			}
		}
	}
	short, long := shortWindowNames(out.Windows)
	for i := range out.Objectives {
		o := &out.Objectives[i]
		slices.SortFunc(o.Groups, func(a, b Result) int { return cmp.Compare(a.Group, b.Group) })
		o.derive(out.Window, short, long)
	}
	return out
}

// emptyLike returns r's definition with no counts (windows marked since
// start, until a node says otherwise).
func emptyLike(r Result) Result {
	e := Result{ID: r.ID, Group: r.Group, Description: r.Description, Target: r.Target, ThresholdS: r.ThresholdS, Metric: r.Metric,
		Windows: map[string]Window{}}
	for name := range r.Windows {
		e.Windows[name] = Window{SinceStart: true}
	}
	return e
}

// addWindows adds the counts of from to into.
func addWindows(into, from map[string]Window) {
	for name, w := range from {
		s, ok := into[name]
		if !ok {
			s.SinceStart = true
		}
		s.Good += w.Good
		s.Total += w.Total
		s.Seconds = max(s.Seconds, w.Seconds)
		s.SinceStart = s.SinceStart && w.SinceStart
		into[name] = s
	}
}

// shortWindowNames returns the windows of the burn rates: the first two
// of a report's windows.
func shortWindowNames(windows []string) (short, long string) {
	if len(windows) < 3 {
		return "", ""
	}
	return windows[0], windows[1]
}
