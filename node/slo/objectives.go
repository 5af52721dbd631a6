package slo

import (
	"maps"
	"slices"
	"strconv"
	"time"
)

// Kind says how an objective's good and total events are counted.
type Kind uint8

const (
	// Latency counts the observations of a histogram (Metric, the series
	// with Labels): good at or below Threshold, total all of them.
	Latency Kind = iota
	// Coverage integrates two gauges over time: good is GoodMetric, total
	// Metric, in source-seconds.
	Coverage
	// Availability counts a counter of requests with the labels group and
	// class (2xx, 3xx, 4xx, 5xx): good is every class but 5xx. It has one
	// entry per group.
	Availability
)

// Objective is one service level objective.
type Objective struct {
	// ID names the objective in /api/v1/admin/slo, alerts and dashboards.
	ID string
	// Description says what is promised, without the target.
	Description string
	// Target is the fraction of events that must be good (0.99).
	Target float64
	// Threshold is a latency objective's bound.
	Threshold time.Duration
	Kind      Kind
	// Metric is the histogram (Latency), the gauge of all sources
	// (Coverage) or the request counter (Availability).
	Metric string
	// Labels select a latency histogram's series: each label named must
	// have the value given (other labels are summed over).
	Labels map[string]string
	// GoodMetric is the gauge of the good sources (Coverage).
	GoodMetric string
}

// Metric names the objectives read (the names issue 21 fixes).
const (
	MetricEventVisible  = "newsflow_event_visible_seconds"
	MetricQuerySeconds  = "newsflow_query_seconds"
	MetricSourcesActive = "newsflow_crawl_sources_active"
	MetricSourcesOnTime = "newsflow_crawl_sources_on_time"
	MetricGroupRequests = "newsflow_http_group_requests_total"
)

// AvailabilityID is the id of the availability objective, the one with
// an entry per endpoint group.
const AvailabilityID = "availability"

// ProbeGroup is the endpoint group of the health probes, which availability
// leaves out: /health/ready answers 503 by design while a node restores.
const ProbeGroup = "health"

// The labels of MetricGroupRequests, and the class that is not good.
const (
	labelGroup       = "group"
	labelClass       = "class"
	classServerError = "5xx"
)

// Objectives returns newsflow's objectives, in the order reports list
// them. Each call returns a new slice.
func Objectives() []Objective {
	stage := func(s string) map[string]string { return map[string]string{"stage": s} }
	return []Objective{
		{ID: "article_ingest", Description: "articles processed by the articles stage within 30 s of the crawl",
			Target: 0.99, Threshold: 30 * time.Second, Kind: Latency, Metric: MetricEventVisible, Labels: stage("articles")},
		{ID: "article_searchable", Description: "articles searchable within 60 s",
			Target: 0.99, Threshold: 60 * time.Second, Kind: Latency, Metric: MetricEventVisible, Labels: stage("search")},
		{ID: "article_in_story", Description: "articles in a story within 60 s",
			Target: 0.99, Threshold: 60 * time.Second, Kind: Latency, Metric: MetricEventVisible, Labels: stage("stories")},
		// The trending stage also reads articles (their topics): only
		// shares count.
		{ID: "trending_update", Description: "shares visible in trending within 30 s",
			Target: 0.95, Threshold: 30 * time.Second, Kind: Latency, Metric: MetricEventVisible,
			Labels: map[string]string{"stage": "trending", "input": "shares"}},
		{ID: "crawl_coverage", Description: "active sources crawled within twice their interval",
			Target: 0.99, Kind: Coverage, Metric: MetricSourcesActive, GoodMetric: MetricSourcesOnTime},
		{ID: "feed_latency", Description: "cached feed answers within 500 ms",
			Target: 0.99, Threshold: 500 * time.Millisecond, Kind: Latency, Metric: MetricQuerySeconds,
			Labels: map[string]string{"query": "feed", "cache": "hit"}},
		{ID: "search_latency", Description: "searches within 1 s",
			Target: 0.99, Threshold: time.Second, Kind: Latency, Metric: MetricQuerySeconds,
			Labels: map[string]string{"query": "search"}},
		{ID: AvailabilityID, Description: "requests per endpoint group not answered 5xx (health probes aside)",
			Target: 0.999, Kind: Availability, Metric: MetricGroupRequests},
	}
}

// MetricName is how a report names where an objective's events come
// from: the metric with its label selection, and the bound.
func (o Objective) MetricName() string {
	switch o.Kind {
	case Coverage:
		return o.GoodMetric + " / " + o.Metric
	case Availability:
		return o.Metric + `{class!="` + classServerError + `"} / all, by group`
	}
	s := o.Metric
	if len(o.Labels) > 0 {
		s += "{"
		for i, k := range slices.Sorted(maps.Keys(o.Labels)) {
			if i > 0 {
				s += ","
			}
			s += k + `="` + o.Labels[k] + `"`
		}
		s += "}"
	}
	return s + " le=" + formatSeconds(o.Threshold)
}

// formatSeconds writes d in seconds, as Prometheus' le label does.
func formatSeconds(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'g', -1, 64) }
