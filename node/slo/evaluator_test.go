package slo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/internal/testutil"
	"github.com/prometheus/client_golang/prometheus"
)

var t0 = time.Date(2025, 11, 21, 12, 0, 0, 0, time.UTC)

// fakeNode is a registry holding the metrics the objectives read, as a
// node registers them, and a clock that moves when the test says.
type fakeNode struct {
	t       *testing.T
	reg     *prometheus.Registry
	clock   *testutil.Clock
	visible *prometheus.HistogramVec
	query   *prometheus.HistogramVec
	groups  *prometheus.CounterVec
	active  prometheus.Gauge
	onTime  prometheus.Gauge
	e       *Evaluator
}

func newFakeNode(t *testing.T, opts Options) *fakeNode {
	t.Helper()
	f := &fakeNode{t: t, reg: prometheus.NewRegistry(), clock: testutil.NewClock(t0)}
	f.register()
	opts.Now = f.clock.Now
	var err error
	if f.e, err = New(f.reg, opts); err != nil {
		t.Fatal(err)
	}
	return f
}

// register (re)creates the node's metrics at zero, as a restarted
// process has them.
func (f *fakeNode) register() {
	if f.visible != nil {
		for _, c := range []prometheus.Collector{f.visible, f.query, f.groups, f.active, f.onTime} {
			f.reg.Unregister(c)
		}
	}
	f.visible = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: MetricEventVisible, Help: "h",
		Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 30, 60, 120, 300, 600, 1800, 3600}}, []string{"stage", "input"})
	f.query = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: MetricQuerySeconds, Help: "h",
		Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}}, []string{"query", "cache"})
	f.groups = prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricGroupRequests, Help: "h"}, []string{"group", "class"})
	f.active = prometheus.NewGauge(prometheus.GaugeOpts{Name: MetricSourcesActive, Help: "h"})
	f.onTime = prometheus.NewGauge(prometheus.GaugeOpts{Name: MetricSourcesOnTime, Help: "h"})
	f.reg.MustRegister(f.visible, f.query, f.groups, f.active, f.onTime)
}

// observe records n events of stage taking d each: shares for trending,
// articles for the other stages.
func (f *fakeNode) observe(stage string, n int, d time.Duration) {
	input := "articles.raw"
	if stage == "trending" {
		input = "shares"
	}
	for range n {
		f.visible.WithLabelValues(stage, input).Observe(d.Seconds())
	}
}

// tick advances the clock by d, a minute at a time, reading the
// registry after each minute as Run would.
func (f *fakeNode) tick(d time.Duration) {
	for ; d > 0; d -= time.Minute {
		f.clock.Advance(min(d, time.Minute))
		f.e.Observe()
	}
}

func (f *fakeNode) result(id string) Result {
	f.t.Helper()
	rep := f.e.Report()
	for _, r := range rep.Objectives {
		if r.ID == id {
			return r
		}
	}
	f.t.Fatalf("no objective %s in %+v", id, rep)
	return Result{}
}

// wantWindow checks a window's counts, span and value.
func wantWindow(t *testing.T, r Result, name string, good, total, seconds float64, sinceStart bool) {
	t.Helper()
	w, ok := r.Windows[name]
	if !ok {
		t.Fatalf("%s: no window %s: %+v", r.ID, name, r.Windows)
	}
	if w.Good != good || w.Total != total || w.Seconds != seconds || w.SinceStart != sinceStart {
		t.Fatalf("%s %s %s: good %v total %v over %v s (since start %v), want %v %v over %v s (%v)",
			r.ID, r.Group, name, w.Good, w.Total, w.Seconds, w.SinceStart, good, total, seconds, sinceStart)
	}
	if total == 0 {
		if w.Value != nil || w.BurnRate != nil {
			t.Fatalf("%s %s: no events, yet value %v burn %v", r.ID, name, w.Value, w.BurnRate)
		}
		return
	}
	wantFloat(t, r.ID+" "+name+" value", w.Value, good/total)
	wantFloat(t, r.ID+" "+name+" burn rate", w.BurnRate, (1-good/total)/(1-r.Target))
}

func wantFloat(t *testing.T, what string, got *float64, want float64) {
	t.Helper()
	if got == nil || math.Abs(*got-want) > 1e-9 {
		t.Fatalf("%s = %v, want %v", what, deref(got), want)
	}
}

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

// A latency objective over its windows: the 5m window is the counts
// since the snapshot five minutes ago, the others since the start while
// it is less than their span ago (and they say so).
func TestLatencyWindows(t *testing.T) {
	f := newFakeNode(t, Options{})
	f.observe("search", 7, time.Second) // before the evaluator: not counted
	var err error
	if f.e, err = New(f.reg, Options{Now: f.clock.Now}); err != nil {
		t.Fatal(err)
	}
	f.tick(time.Minute)
	f.observe("articles", 99, time.Second)
	f.observe("articles", 1, 40*time.Second)
	f.observe("articles", 3, 30*time.Second) // at the bound: good
	f.observe("stories", 5, time.Second)     // another stage
	f.tick(7 * time.Minute)
	f.observe("articles", 10, 45*time.Second)
	f.tick(2 * time.Minute)

	r := f.result("article_ingest")
	wantWindow(t, r, "5m", 0, 10, 300, false)
	wantWindow(t, r, "1h", 102, 113, 600, true)
	wantWindow(t, r, "30d", 102, 113, 600, true)
	if r.Status != StatusBreached || r.ThresholdS != 30 || r.Target != 0.99 {
		t.Fatalf("status %s, threshold %v, target %v", r.Status, r.ThresholdS, r.Target)
	}
	wantFloat(t, "budget", r.ErrorBudgetRemaining, 1-(11.0/113)/(1-0.99))
	if r.Metric != `newsflow_event_visible_seconds{stage="articles"} le=30` ||
		f.result("trending_update").Metric != `newsflow_event_visible_seconds{input="shares",stage="trending"} le=30` {
		t.Fatalf("metric %q", r.Metric)
	}
	s := f.result("article_in_story")
	wantWindow(t, s, "30d", 5, 5, 600, true)
	if s.Status != StatusOK {
		t.Fatalf("article_in_story: %s", s.Status)
	}
	if r := f.result("article_searchable"); r.Status != StatusNoData || r.Value != nil || r.ErrorBudgetRemaining != nil {
		t.Fatalf("article_searchable (counted before the evaluator): %+v", r)
	}

	// The 5m window moves on: nothing in the last five minutes.
	f.tick(5 * time.Minute)
	wantWindow(t, f.result("article_ingest"), "5m", 0, 0, 300, false)
}

// Burning: the budget of the SLO window is not spent, but the last hour
// and the last five minutes spend it at more than FastBurn.
func TestBurning(t *testing.T) {
	f := newFakeNode(t, Options{})
	f.observe("trending", 100000, time.Second)
	f.tick(2 * time.Hour)
	f.observe("trending", 80, 31*time.Second)
	f.observe("trending", 20, time.Second)
	// Articles the trending stage reads for their topics are not shares.
	f.visible.WithLabelValues("trending", "articles.raw").Observe(1)
	f.tick(time.Minute)
	r := f.result("trending_update")
	wantWindow(t, r, "5m", 20, 100, 300, false) // burn rate 0.8/0.05 = 16
	wantWindow(t, r, "1h", 20, 100, 3600, false)
	wantWindow(t, r, "30d", 100020, 100100, 2*3600+60, true)
	if r.Status != StatusBurning {
		t.Fatalf("status %s: %+v", r.Status, r.Windows)
	}
	wantFloat(t, "budget", r.ErrorBudgetRemaining, 1-(80.0/100100)/0.05)
	// Five minutes later the 5m window is clean: no longer burning.
	f.tick(5 * time.Minute)
	if r := f.result("trending_update"); r.Status != StatusOK {
		t.Fatalf("after the burst: %s %+v", r.Status, r.Windows)
	}
}

// A restarted process's counters start from zero: what they count after
// the reset is added to what was counted before, and nothing is lost or
// subtracted.
func TestCountersReset(t *testing.T) {
	f := newFakeNode(t, Options{})
	f.query.WithLabelValues("search", "miss").Observe(0.2)
	f.query.WithLabelValues("search", "miss").Observe(2)
	f.groups.WithLabelValues("feed", "2xx").Add(50)
	f.groups.WithLabelValues("feed", "5xx").Add(2)
	f.tick(time.Minute)
	f.register()
	f.query.WithLabelValues("search", "miss").Observe(0.3)
	f.groups.WithLabelValues("feed", "2xx").Add(7)
	f.tick(time.Minute)
	wantWindow(t, f.result("search_latency"), "30d", 2, 3, 120, true)
	a := f.result(AvailabilityID)
	wantWindow(t, a, "30d", 57, 59, 120, true)
	if len(a.Groups) != 1 || a.Groups[0].Group != "feed" {
		t.Fatalf("groups %+v", a.Groups)
	}
	wantWindow(t, a.Groups[0], "30d", 57, 59, 120, true)
	// A series that restarts and counts more than before it did.
	f.register()
	f.query.WithLabelValues("search", "miss").Observe(0.1)
	f.query.WithLabelValues("search", "miss").Observe(0.1)
	f.query.WithLabelValues("search", "miss").Observe(0.1)
	f.query.WithLabelValues("search", "hit").Observe(5) // search is every cache label
	f.tick(time.Minute)
	wantWindow(t, f.result("search_latency"), "30d", 5, 7, 180, true)
}

// Without any of the metrics every objective has no data: no value, no
// budget, no burn rate, and the JSON holds nulls, never NaN.
func TestNoData(t *testing.T) {
	clock := testutil.NewClock(t0)
	e, err := New(prometheus.NewRegistry(), Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour)
	rep := e.Report()
	if len(rep.Objectives) != len(Objectives()) || rep.Window != "30d" || strings.Join(rep.Windows, ",") != "5m,1h,30d" ||
		rep.AsOf != t0.Add(time.Hour).UnixMilli() {
		t.Fatalf("report %+v", rep)
	}
	for _, r := range rep.Objectives {
		if r.Status != StatusNoData || r.Value != nil || r.ErrorBudgetRemaining != nil || len(r.Groups) != 0 {
			t.Errorf("%s: %+v", r.ID, r)
		}
		for name, w := range r.Windows {
			if w.Total != 0 || w.Value != nil || w.BurnRate != nil {
				t.Errorf("%s %s: %+v", r.ID, name, w)
			}
		}
	}
	b, err := json.Marshal(rep)
	if err != nil || strings.Contains(string(b), "NaN") || !strings.Contains(string(b), `"value":null`) {
		t.Fatalf("json %s: %v", b, err)
	}
}

// Crawl coverage is the on-time sources over the active ones, each
// reading holding until the next: source-seconds.
func TestCoverage(t *testing.T) {
	f := newFakeNode(t, Options{})
	f.active.Set(10)
	f.onTime.Set(9)
	f.e.Observe()
	f.tick(10 * time.Minute)
	f.onTime.Set(5)
	f.e.Observe()
	f.tick(5 * time.Minute)
	r := f.result("crawl_coverage")
	wantWindow(t, r, "5m", 5*300, 10*300, 300, false)
	wantWindow(t, r, "30d", 9*600+5*300, 10*900, 900, true)
	if r.Status != StatusBreached || r.Metric != "newsflow_crawl_sources_on_time / newsflow_crawl_sources_active" {
		t.Fatalf("%s %s", r.Status, r.Metric)
	}
	// More on time than active (read between two updates) counts as all.
	f.onTime.Set(12)
	f.e.Observe()
	f.tick(time.Minute)
	wantWindow(t, f.result("crawl_coverage"), "5m", 4*5*60+10*60, 10*300, 300, false)
}

// Availability has an entry per endpoint group; the objective stands as
// its worst group, its counts the groups' sums.
func TestAvailabilityGroups(t *testing.T) {
	f := newFakeNode(t, Options{})
	for _, g := range []string{"feed", "search", "admin"} {
		for _, c := range []string{"2xx", "3xx", "4xx", "5xx"} {
			f.groups.WithLabelValues(g, c) // pre-initialised, as the node has them
		}
	}
	f.tick(time.Minute)
	f.groups.WithLabelValues("feed", "2xx").Add(9990)
	f.groups.WithLabelValues("feed", "4xx").Add(5)
	f.groups.WithLabelValues("feed", "5xx").Add(5)
	f.groups.WithLabelValues("search", "2xx").Add(98)
	f.groups.WithLabelValues("search", "5xx").Add(2)
	// Readiness probes answer 503 while a node restores: not counted.
	f.groups.WithLabelValues(ProbeGroup, "5xx").Add(40)
	f.tick(time.Minute)
	a := f.result(AvailabilityID)
	var names []string
	for _, g := range a.Groups {
		names = append(names, g.Group)
	}
	if strings.Join(names, ",") != "admin,feed,search" {
		t.Fatalf("groups %v", names)
	}
	wantWindow(t, a.Groups[0], "30d", 0, 0, 120, true)
	wantWindow(t, a.Groups[1], "30d", 9995, 10000, 120, true)
	wantWindow(t, a.Groups[2], "30d", 98, 100, 120, true)
	wantWindow(t, a, "30d", 10093, 10100, 120, true)
	if a.Groups[0].Status != StatusNoData || a.Groups[1].Status != StatusOK || a.Groups[2].Status != StatusBreached || a.Status != StatusBreached {
		t.Fatalf("statuses %s %s %s; objective %s", a.Groups[0].Status, a.Groups[1].Status, a.Groups[2].Status, a.Status)
	}
	wantFloat(t, "feed budget", a.Groups[1].ErrorBudgetRemaining, 1-0.0005/0.001)
	wantFloat(t, "objective budget (search's)", a.ErrorBudgetRemaining, 1-0.02/0.001)
	wantFloat(t, "objective value", a.Value, 10093.0/10100)
}

// Memory is bounded: a minute's snapshots for the last hour, an hour's
// for the SLO window, whatever the time run; the SLO window then covers
// its span (and up to an hour more), no longer since the start.
func TestBoundedHistory(t *testing.T) {
	f := newFakeNode(t, Options{Window: 3 * time.Hour})
	for range 10 * 60 {
		f.observe("articles", 1, time.Second)
		f.tick(time.Minute)
	}
	f.e.mu.Lock()
	fine, coarse := f.e.mu.fine.n, f.e.mu.coarse.n
	f.e.mu.Unlock()
	if fine != 62 || coarse != 5 {
		t.Fatalf("snapshots held: %d fine, %d coarse", fine, coarse)
	}
	r := f.result("article_ingest")
	if r.Windows["3h"].SinceStart || r.Windows["3h"].Seconds != 3*3600 {
		t.Fatalf("3h window: %+v", r.Windows["3h"])
	}
	// One event a minute: a window's count is its span in minutes.
	for name, w := range r.Windows {
		wantWindow(t, r, name, w.Seconds/60, w.Seconds/60, w.Seconds, false)
	}
}

// Combine sums the nodes' counts and derives the rest again.
func TestCombine(t *testing.T) {
	a, b := newFakeNode(t, Options{}), newFakeNode(t, Options{})
	a.observe("articles", 99, time.Second)
	a.groups.WithLabelValues("feed", "2xx").Add(10)
	b.observe("articles", 1, time.Minute)
	b.groups.WithLabelValues("search", "5xx").Add(1)
	a.tick(10 * time.Minute)
	b.tick(3 * time.Minute)
	ra, rb := a.e.Report(), b.e.Report()
	// Through JSON, as the reports of other nodes arrive.
	var back Report
	if js, err := json.Marshal(rb); err != nil || json.Unmarshal(js, &back) != nil {
		t.Fatalf("json: %v", err)
	}
	c := Combine(ra, back)
	if c.Window != "30d" || c.AsOf != ra.AsOf || len(c.Objectives) != len(ra.Objectives) {
		t.Fatalf("combined %+v", c)
	}
	for _, r := range c.Objectives {
		switch r.ID {
		case "article_ingest":
			wantWindow(t, r, "30d", 99, 100, 600, true)
			// b's since its start: a's window is the longer.
			wantWindow(t, r, "5m", 0, 1, 300, false)
			if r.Status != StatusOK {
				t.Errorf("article_ingest: %s", r.Status)
			}
		case AvailabilityID:
			wantWindow(t, r, "30d", 10, 11, 600, true)
			if len(r.Groups) != 2 || r.Groups[0].Group != "feed" || r.Groups[1].Group != "search" {
				t.Fatalf("groups %+v", r.Groups)
			}
			wantWindow(t, r.Groups[1], "30d", 0, 1, 180, true)
			if r.Status != StatusBreached || r.Groups[0].Status != StatusOK {
				t.Errorf("availability %s, feed %s", r.Status, r.Groups[0].Status)
			}
		}
	}
	if got := Combine(); got.Objectives != nil {
		t.Errorf("combine of nothing: %+v", got)
	}
}

// Run reads the registry every interval and stops with its context.
func TestRun(t *testing.T) {
	reg := prometheus.NewRegistry()
	e, err := New(reg, Options{Interval: 5 * time.Millisecond, Resolution: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	testutil.Eventually(t, 5*time.Second, func() error {
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.mu.fine.n < 3 {
			return fmt.Errorf("%d snapshots", e.mu.fine.n)
		}
		return nil
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestOptions(t *testing.T) {
	for _, o := range []Options{{Interval: -1}, {Resolution: 2 * time.Hour}, {Window: time.Minute}} {
		if _, err := New(prometheus.NewRegistry(), o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
	// A registry that fails to gather part of its metrics still answers
	// with the rest.
	reg := prometheus.NewRegistry()
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: MetricEventVisible, Help: "h", ConstLabels: prometheus.Labels{"stage": "articles", "input": "articles.raw"},
		Buckets: []float64{30}})
	reg.MustRegister(h, failing{})
	e, err := New(reg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	h.Observe(1)
	r := e.Report().Objectives[0]
	if r.Windows["30d"].Total != 1 {
		t.Fatalf("with a failing collector: %+v", r.Windows)
	}
}

// failing is a collector whose collection fails.
type failing struct{}

var failingDesc = prometheus.NewDesc("failing", "h", nil, nil)

func (failing) Describe(ch chan<- *prometheus.Desc) { ch <- failingDesc }
func (failing) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.NewInvalidMetric(failingDesc, errors.New("broken"))
}

// A registry that does not say when a series was created (a collector of
// const metrics): a counter that goes down was reset.
func TestResetWithoutCreatedTime(t *testing.T) {
	c := &constRequests{}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	clock := testutil.NewClock(t0)
	e, err := New(reg, Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []float64{10, 25, 4, 9} { // reset after 25
		c.value = v
		clock.Advance(time.Minute)
		e.Observe()
	}
	r := e.Report().Objectives[len(Objectives())-1]
	wantWindow(t, r, "30d", 25+9, 25+9, 240, true)
}

type constRequests struct{ value float64 }

var constRequestsDesc = prometheus.NewDesc(MetricGroupRequests, "h", []string{"group", "class"}, nil)

func (c *constRequests) Describe(ch chan<- *prometheus.Desc) { ch <- constRequestsDesc }
func (c *constRequests) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(constRequestsDesc, prometheus.CounterValue, c.value, "feed", "2xx")
}
