package engine

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	recordsIn      *prometheus.CounterVec
	busySeconds    *prometheus.CounterVec
	recordsOut     *prometheus.CounterVec
	deadLetters    *prometheus.CounterVec
	poison         *prometheus.CounterVec
	duplicates     *prometheus.CounterVec
	taskRestarts   *prometheus.CounterVec
	commitSeconds  *prometheus.HistogramVec
	lag            *prometheus.GaugeVec
	restoreSeconds *prometheus.HistogramVec
	restoreChanges *prometheus.CounterVec
	standbyChanges *prometheus.CounterVec
	visible        *prometheus.HistogramVec
	paused         *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		recordsIn: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "newsflow_records_in_total", Help: "Input records applied by a stage's tasks.",
		}, []string{"stage"}),
		busySeconds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "newsflow_task_busy_seconds_total",
			Help: "Time a stage's tasks spent applying records and committing them, summed over the stage's tasks: its rate is the stage's utilisation (1: one task busy all the time).",
		}, []string{"stage"}),
		recordsOut: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "newsflow_records_out_total", Help: "Records a stage appended to output topics.",
		}, []string{"stage", "topic"}),
		deadLetters: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "newsflow_dead_letters_total", Help: "Records sent to the dead-letter topic.",
		}, []string{"stage"}),
		poison: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "newsflow_poison_records_total",
			Help: "Records dead-lettered because applying them failed (a panic or an error) engine.max_record_failures times in a row; the task moved on.",
		}, []string{"stage"}),
		duplicates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "newsflow_repartition_duplicates_total", Help: "Forwarded records dropped because they were already applied.",
		}, []string{"stage"}),
		taskRestarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "newsflow_task_restarts_total", Help: "Tasks restarted from committed state after an error.",
		}, []string{"stage"}),
		commitSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "newsflow_commit_seconds", Help: "Time to append a batch's outputs and commit its state and offsets.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}, []string{"stage"}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "newsflow_lag_records", Help: "Records in an input partition not yet committed by its task.",
		}, []string{"stage", "topic", "partition"}),
		restoreSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "newsflow_changelog_restore_seconds", Help: "Time a task took to claim its changelog partition and bring its local state up to date (cluster mode).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 18),
		}, []string{"stage"}),
		restoreChanges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "newsflow_changelog_restore_changes_total", Help: "State changes a task read from its changelog when it claimed it (cluster mode): the tail after the local copy, or all of it.",
		}, []string{"stage"}),
		standbyChanges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "newsflow_standby_changes_total", Help: "State changes applied to standby copies of partitions this node does not run (cluster mode).",
		}, []string{"stage"}),
		visible: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "newsflow_event_visible_seconds",
			Help:    "Time from an event's ingestion into newsflow (the crawl or request that first wrote it; else its log timestamp) until the commit of the stage that applied it, by stage and the input topic it was first written to.",
			Buckets: visibleBuckets,
		}, []string{"stage", "input"}),
		paused: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "newsflow_stage_paused", Help: "1 while the stage's tasks on this node are paused (POST /api/v1/admin/stages/{stage}/pause).",
		}, []string{"stage"}),
	}
	reg.MustRegister(m.visible, m.paused, m.recordsIn, m.busySeconds, m.recordsOut, m.deadLetters, m.poison, m.duplicates, m.taskRestarts, m.commitSeconds, m.lag, m.restoreSeconds,
		m.restoreChanges, m.standbyChanges)
	return m
}

// initStages creates every stage's series, so that they are present (at 0)
// from the start: rates and alerts need a series before its first event.
func (m *metrics) initStages(e *Engine) {
	for _, st := range e.stages {
		name := st.name
		m.recordsIn.WithLabelValues(name)
		m.busySeconds.WithLabelValues(name)
		m.deadLetters.WithLabelValues(name)
		m.poison.WithLabelValues(name)
		m.taskRestarts.WithLabelValues(name)
		m.commitSeconds.WithLabelValues(name)
		m.paused.WithLabelValues(name)
		// Present on a single node too (at 0), so that one dashboard and
		// one set of rules serve both.
		if !st.localState {
			m.restoreSeconds.WithLabelValues(name)
			m.restoreChanges.WithLabelValues(name)
		}
		if st.standby {
			m.standbyChanges.WithLabelValues(name)
		}
		if len(st.forwardedFrom) > 0 {
			m.duplicates.WithLabelValues(name)
		}
		if st.repartition {
			continue
		}
		seen := map[string]bool{}
		for _, ins := range st.inputs {
			for _, in := range ins {
				if t := sourceTopic(st, in); !seen[t] {
					seen[t] = true
					m.visible.WithLabelValues(name, t)
				}
			}
		}
	}
	for _, op := range e.ops {
		s := op.Spec()
		for _, t := range s.Outputs {
			m.recordsOut.WithLabelValues(s.Name, t)
		}
	}
}
