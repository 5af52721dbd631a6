package engine

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/prometheus/client_golang/prometheus"
)

// What the engine carries from an input record to the records a task emits
// while processing it, so that an event's path through the stages can be
// measured and traced:
//
//   - HeaderOrigin: when the event entered newsflow (ms since the epoch,
//     decimal): the crawl or the HTTP request that first wrote it. A record
//     without it counts from its log timestamp, Kafka's create or append
//     time. Every stage's commit observes the time since the origin of the
//     records it applied (newsflow_event_visible_seconds): the moment the
//     event's effect became visible in that stage's state and outputs.
//   - HeaderTraceParent: the W3C trace context of the event, when it is
//     traced. With a Tracer the engine starts a span for each traced record
//     a task applies, ended when the batch commits, and emitted records
//     carry that span as their parent; without one the header passes on as
//     it came.
//
// A header an operator set on an emitted record is kept.
const (
	HeaderOrigin      = "nf-origin"
	HeaderTraceParent = "traceparent"
)

// Tracer starts the span of a traced record a task applies. Start is called
// from the task's goroutine, before Process, for every applied record that
// carries a traceparent header; it returns the traceparent of the new span,
// for the records emitted while processing it, and end, which the engine
// calls once: with nil when the batch holding the record has committed, or
// with the error that kept it from committing. Implementations must be safe
// for concurrent use by all tasks.
type Tracer interface {
	Start(stage string, partition int32, rec *eventlog.Record, parent []byte) (child []byte, end func(error))
}

// visibleBuckets are the bounds of newsflow_event_visible_seconds. They
// hold the objectives' thresholds (30 s and 60 s) exactly, so the share of
// events within one is a bucket over the count.
var visibleBuckets = []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 30, 60, 120, 300, 600, 1800, 3600}

// OriginOf returns when the event of rec entered newsflow, in ms since the
// epoch: its HeaderOrigin, else its timestamp; 0 when it has neither.
func OriginOf(rec *eventlog.Record) int64 {
	if v, ok := rec.Header(HeaderOrigin); ok {
		if ms, err := strconv.ParseInt(string(v), 10, 64); err == nil && ms > 0 {
			return ms
		}
	}
	return max(rec.Timestamp, 0)
}

// OriginHeader returns the header that marks an event as entering newsflow
// at t, for ingress (the crawler, HTTP ingestion) to set on the records it
// appends.
func OriginHeader(t time.Time) eventlog.Header {
	return eventlog.Header{Key: HeaderOrigin, Value: strconv.AppendInt(nil, t.UnixMilli(), 10)}
}

// lineage is what a task loop knows of the record being processed, for the
// records emitted meanwhile.
type lineage struct {
	origin    int64  // ms since the epoch; 0: unknown
	originHdr []byte // origin formatted once per record, on the first Emit
	trace     []byte // traceparent for emitted records; nil: not traced
}

func (ln *lineage) reset(origin int64, trace []byte) {
	ln.origin, ln.originHdr, ln.trace = origin, nil, trace
}

// stamp adds the lineage headers rec lacks.
func (ln *lineage) stamp(rec *eventlog.Record) {
	var hasOrigin, hasTrace bool
	for _, h := range rec.Headers {
		switch h.Key {
		case HeaderOrigin:
			hasOrigin = true
		case HeaderTraceParent:
			hasTrace = true
		}
	}
	add := 0
	if !hasOrigin && ln.origin > 0 {
		add++
	}
	if !hasTrace && ln.trace != nil {
		add++
	}
	if add == 0 {
		return
	}
	// A fresh slice: the operator may share its headers between records.
	hs := make([]eventlog.Header, len(rec.Headers), len(rec.Headers)+add)
	copy(hs, rec.Headers)
	if !hasOrigin && ln.origin > 0 {
		if ln.originHdr == nil {
			ln.originHdr = strconv.AppendInt(nil, ln.origin, 10)
		}
		hs = append(hs, eventlog.Header{Key: HeaderOrigin, Value: ln.originHdr})
	}
	if !hasTrace && ln.trace != nil {
		hs = append(hs, eventlog.Header{Key: HeaderTraceParent, Value: ln.trace})
	}
	rec.Headers = hs
}

// visibility collects, per input of a task, the origins of the records
// applied since the last commit, and observes their age when the batch
// commits.
type visibility struct {
	obs     []prometheus.Observer // by input index
	origins [][]int64             // by input index
	spans   []func(error)         // the ends of the traced records' spans
}

func (v *visibility) add(input int, origin int64) bool {
	if origin > 0 && v.obs[input] != nil {
		v.origins[input] = append(v.origins[input], origin)
		return true
	}
	return false
}

// drop forgets the origin add noted last for input.
func (v *visibility) drop(input int) {
	if n := len(v.origins[input]); n > 0 {
		v.origins[input] = v.origins[input][:n-1]
	}
}

// committed observes the age of every record of the committed batch and
// ends the spans of its traced records.
func (v *visibility) committed(now time.Time) {
	ms := now.UnixMilli()
	for i, os := range v.origins {
		for _, o := range os {
			v.obs[i].Observe(float64(max(0, ms-o)) / 1000)
		}
		v.origins[i] = os[:0]
	}
	v.endSpans(nil)
}

// endSpans ends the spans of the batch's traced records.
func (v *visibility) endSpans(err error) {
	for _, end := range v.spans {
		end(err)
	}
	clear(v.spans)
	v.spans = v.spans[:0]
}

// errUncommitted ends the span of a traced record whose batch did not
// commit: the task stopped or failed first, and applies it again.
var errUncommitted = errors.New("batch not committed; the task applies it again")

// sourceTopic is the topic an input's records were first written to: the
// operator's input topic for its repartition topic.
func sourceTopic(st *stage, in stageInput) string {
	if in.mode == modeForwarded && st.forwardedFrom != nil {
		if t, ok := st.forwardedFrom[in.tp.Topic]; ok {
			return t
		}
	}
	return in.tp.Topic
}

// pause is a stage's pause switch. While paused, its tasks on this node
// commit what they applied and wait; ch is closed on resume.
type pause struct {
	mu sync.Mutex // serialises Pause and Resume
	ch atomic.Pointer[chan struct{}]
}

// wait blocks while the stage is paused, until it is resumed or ctx is done.
func (p *pause) wait(ctx context.Context) {
	for {
		ch := p.ch.Load()
		if ch == nil {
			return
		}
		select {
		case <-*ch:
		case <-ctx.Done():
			return
		}
	}
}

// Hold makes every task of the engine, of every stage, commit what it
// applied and read nothing more until every holder has released it: the
// node's way to stop writing state when it must (its disk nearly full, no
// contact with the cluster's leader). who names the holder, reason says
// why, in StageStates and the log; holding again updates the reason.
// Unlike Pause it is the node's, not an operator's, and does not change a
// stage's paused switch. Safe for concurrent use.
func (e *Engine) Hold(who, reason string) {
	e.hold.mu.Lock()
	defer e.hold.mu.Unlock()
	if e.holders == nil {
		e.holders = map[string]string{}
	}
	if _, ok := e.holders[who]; !ok {
		e.opts.Logger.Warn("every stage held", "by", who, "reason", reason)
	}
	e.holders[who] = reason
	e.holdReasonLocked()
	ch := make(chan struct{})
	e.hold.ch.CompareAndSwap(nil, &ch)
}

// Release ends who's Hold; the tasks go on once no holder is left.
func (e *Engine) Release(who string) {
	e.hold.mu.Lock()
	defer e.hold.mu.Unlock()
	reason, ok := e.holders[who]
	if !ok {
		return
	}
	delete(e.holders, who)
	e.holdReasonLocked()
	e.opts.Logger.Info("hold released", "by", who, "was", reason)
	if len(e.holders) > 0 {
		return
	}
	if ch := e.hold.ch.Swap(nil); ch != nil {
		close(*ch)
	}
}

// holdReasonLocked sets holdReason from the holders, sorted by holder.
func (e *Engine) holdReasonLocked() {
	var rs []string
	for _, who := range slices.Sorted(maps.Keys(e.holders)) {
		rs = append(rs, e.holders[who])
	}
	r := strings.Join(rs, "; ")
	e.holdReason.Store(&r)
}

// Held returns the reasons of the Holds in effect, and whether there are
// any.
func (e *Engine) Held() (string, bool) {
	if e.hold.ch.Load() == nil {
		return "", false
	}
	return *e.holdReason.Load(), true
}

// ErrUnknownStage is returned for a stage name the topology does not have.
var ErrUnknownStage = errors.New("unknown stage")

// errNotBuilt: the engine has not built its topology yet (before Run).
var errNotBuilt = errors.New("engine not running yet")

func (e *Engine) stageNamed(name string) (*stage, error) {
	if !e.built.Load() {
		return nil, errNotBuilt
	}
	for _, st := range e.stages {
		if st.name == name {
			return st, nil
		}
	}
	return nil, ErrUnknownStage
}

// Pause pauses a stage's tasks on this node: each commits what it applied
// and reads nothing more until Resume. The batch a task is applying when
// Pause is called is still applied and committed. Its inputs keep growing,
// so its lag does. A paused stage stays paused across a task's restart but
// not across the node's. Pausing a paused stage does nothing.
func (e *Engine) Pause(stage string) error {
	st, err := e.stageNamed(stage)
	if err != nil {
		return err
	}
	st.pause.mu.Lock() // the switch and its gauge change together
	defer st.pause.mu.Unlock()
	ch := make(chan struct{})
	if st.pause.ch.CompareAndSwap(nil, &ch) {
		e.m.paused.WithLabelValues(st.name).Set(1)
		e.opts.Logger.Warn("stage paused", "stage", st.name)
	}
	return nil
}

// Resume resumes a stage paused by Pause.
func (e *Engine) Resume(stage string) error {
	st, err := e.stageNamed(stage)
	if err != nil {
		return err
	}
	st.pause.mu.Lock()
	defer st.pause.mu.Unlock()
	if ch := st.pause.ch.Swap(nil); ch != nil {
		close(*ch)
		e.m.paused.WithLabelValues(st.name).Set(0)
		e.opts.Logger.Info("stage resumed", "stage", st.name)
	}
	return nil
}

// StageState is what a node does for one stage.
type StageState struct {
	Stage string `json:"stage"`
	// Running counts the stage's tasks on this node that have restored
	// their state; Restoring those still restoring.
	Running   int `json:"running"`
	Restoring int `json:"restoring"`
	// RestoringFor is how long the oldest restore in progress has run.
	RestoringFor time.Duration `json:"-"`
	// Standby counts the partitions of which this node keeps a standby copy.
	Standby int  `json:"standby"`
	Paused  bool `json:"paused"`
	// Held is the reason the node holds every stage (Engine.Hold), or "".
	Held string `json:"held,omitempty"`
}

// StageStates returns, for every stage of the topology in order, what this
// node does for it.
func (e *Engine) StageStates() []StageState {
	if !e.built.Load() {
		return nil
	}
	now := time.Now()
	out := make([]StageState, len(e.stages))
	idx := make(map[*stage]int, len(e.stages))
	held, _ := e.Held()
	for i, st := range e.stages {
		out[i] = StageState{Stage: st.name, Paused: st.pause.ch.Load() != nil, Held: held}
		idx[st] = i
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, tr := range e.mu.runners {
		s := &out[idx[tr.st]]
		if tr.restored.Load() && !tr.restoring.Load() {
			s.Running++
			continue
		}
		s.Restoring++
		if start := tr.opened.Load(); start > 0 {
			s.RestoringFor = max(s.RestoringFor, now.Sub(time.UnixMilli(start)))
		}
	}
	for _, sb := range e.mu.standbys {
		out[idx[sb.st]].Standby++
	}
	return out
}

// stageCollector reports the stage states at each scrape.
type stageCollector struct {
	e                            *Engine
	running, restoring, stale    *prometheus.Desc
	restoringFor, partitionsDesc *prometheus.Desc
}

func newStageCollector(e *Engine) *stageCollector {
	return &stageCollector{
		e: e,
		running: prometheus.NewDesc("newsflow_tasks_running",
			"Tasks of a stage running on this node with their state restored.", []string{"stage"}, nil),
		restoring: prometheus.NewDesc("newsflow_tasks_restoring",
			"Tasks of a stage on this node still restoring their state.", []string{"stage"}, nil),
		restoringFor: prometheus.NewDesc("newsflow_restore_elapsed_seconds",
			"How long the oldest restore of a stage's task in progress on this node has been running; 0 when none is.", []string{"stage"}, nil),
		stale: prometheus.NewDesc("newsflow_state_staleness_seconds",
			"How stale this node's copy of a stage's state is (stages with standby copies): 0 while it reflects every record the log held at the last check, else the age of the commit it reflects.", []string{"stage"}, nil),
		partitionsDesc: prometheus.NewDesc("newsflow_partitions_owned",
			"Engine partitions this node runs.", nil, nil),
	}
}

func (c *stageCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.running
	ch <- c.restoring
	ch <- c.restoringFor
	ch <- c.stale
	ch <- c.partitionsDesc
}

func (c *stageCollector) Collect(ch chan<- prometheus.Metric) {
	e := c.e
	if !e.built.Load() {
		return
	}
	now := time.Now()
	for i, s := range e.StageStates() {
		ch <- prometheus.MustNewConstMetric(c.running, prometheus.GaugeValue, float64(s.Running), s.Stage)
		ch <- prometheus.MustNewConstMetric(c.restoring, prometheus.GaugeValue, float64(s.Restoring), s.Stage)
		ch <- prometheus.MustNewConstMetric(c.restoringFor, prometheus.GaugeValue, s.RestoringFor.Seconds(), s.Stage)
		st := e.stages[i]
		if !st.standby {
			continue
		}
		var stale time.Duration
		for _, f := range st.fresh {
			if fr, ok := f.get(now); ok {
				stale = max(stale, fr.Staleness)
			}
		}
		ch <- prometheus.MustNewConstMetric(c.stale, prometheus.GaugeValue, stale.Seconds(), st.name)
	}
	ch <- prometheus.MustNewConstMetric(c.partitionsDesc, prometheus.GaugeValue, float64(e.ownedPartitions()))
}

// ownedPartitions counts the engine partitions this node runs.
func (e *Engine) ownedPartitions() int {
	if !e.opts.Cluster {
		return int(e.opts.Partitions)
	}
	e.assign.Lock()
	defer e.assign.Unlock()
	return len(e.assign.parts)
}

// watchLag refreshes the high watermark and lag gauge of every task input
// whose task has not committed for a LagInterval from the log's end
// offsets, until ctx is done: a task that commits refreshes them itself;
// this covers one that does not (stuck, paused, or idle).
func (e *Engine) watchLag(ctx context.Context) {
	t := time.NewTicker(e.opts.LagInterval)
	defer t.Stop()
	shown := map[progressKey]bool{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := map[progressKey]bool{}
		for _, p := range e.Progress() {
			tp := eventlog.TopicPartition{Topic: p.Topic, Partition: p.Partition}
			if time.Since(p.updated) < e.opts.LagInterval {
				now[progressKey{p.Stage, tp}] = true // its task's commit set the gauge
				continue
			}
			octx, cancel := context.WithTimeout(ctx, 5*time.Second)
			o, err := e.log.Offsets(octx, tp)
			cancel()
			if err != nil {
				continue
			}
			e.setProgress(p.Stage, tp, -1, o.End)
			now[progressKey{p.Stage, tp}] = true
		}
		for _, p := range e.Progress() {
			k := progressKey{p.Stage, eventlog.TopicPartition{Topic: p.Topic, Partition: p.Partition}}
			if !now[k] {
				continue
			}
			e.m.lag.WithLabelValues(p.Stage, p.Topic, strconv.Itoa(int(p.Partition))).Set(float64(p.Lag()))
			if p.Lag() > 0 {
				// A task that does not commit (stuck or paused) no longer
				// reflects its input: its state's staleness grows.
				e.markBehind(p.Stage, p.Partition)
			}
		}
		for k := range shown {
			if !now[k] {
				e.m.lag.DeleteLabelValues(k.stage, k.tp.Topic, strconv.Itoa(int(k.tp.Partition)))
			}
		}
		shown = now
	}
}

// markBehind notes that the task of a stage partition running on this node
// has not applied everything its input holds.
func (e *Engine) markBehind(stage string, p int32) {
	st, err := e.stageNamed(stage)
	if err != nil || p < 0 || p >= st.partitions {
		return
	}
	if f := st.fresh[p]; f.source.Load() == &sourceTask {
		f.current.Store(false)
	}
}
