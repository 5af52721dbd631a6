// Command grafana writes newsflow's Grafana dashboard, newsflow.json, from
// the rows and panels declared here (go generate ./configs/grafana).
//
// The dashboard reads a Prometheus data source chosen with the
// `datasource` variable; `instance` picks nodes and `stage` the stages of
// the Stages row. Its metric names are those the observability spec
// (issue 21) fixes; the process test TestOperationsMetricsExist
// (cmd/newsflow) checks that a running node exposes every one.
package main

//go:generate go run . -o newsflow.json

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
)

func main() {
	out := flag.String("o", "", "write the dashboard to this file (default: standard output)")
	flag.Parse()
	b, err := render()
	if err != nil {
		fmt.Fprintln(os.Stderr, "grafana:", err)
		os.Exit(1)
	}
	if *out == "" {
		_, err = os.Stdout.Write(b)
	} else {
		err = os.WriteFile(*out, b, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "grafana:", err)
		os.Exit(1)
	}
}

// render returns the dashboard as indented JSON, PromQL's < > & unescaped.
func render() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(newDashboard(rows())); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// A row is a titled row of panels, laid out left to right; width is that
// of its panels that do not set theirs (of 24 columns).
type row struct {
	title  string
	width  int
	panels []panel
}

func rows() []row {
	return []row{
		{"Overview: SLOs", 12, overviewPanels()},
		{"Ingest", 6, ingestPanels()},
		{"Stages", 8, stagePanels()},
		{"Crawl health", 8, crawlPanels()},
		{"Queries", 8, queryPanels()},
		{"Cluster", 6, clusterPanels()},
		{"Resources", 6, resourcePanels()},
	}
}

// sel is a selector of metric on the chosen instances, with further
// label matchers.
func sel(metric string, matchers ...string) string {
	return metric + "{" + strings.Join(append([]string{`instance=~"$instance"`}, matchers...), ", ") + "}"
}

// stageSel is sel on the chosen stages too.
func stageSel(metric string, matchers ...string) string {
	return sel(metric, append([]string{`stage=~"$stage"`}, matchers...)...)
}

// rate is the per-second rate of a selector over the window Grafana picks.
func rate(selector string) string { return "rate(" + selector + "[$__rate_interval])" }

// quantile is the q-quantile of a histogram's selector (its _bucket
// series) by the labels by.
func quantile(q float64, bucketSel, by string) string {
	return fmt.Sprintf("histogram_quantile(%s, sum by (%s) (%s))", num(q), strings.TrimPrefix(by+", le", ", "), rate(bucketSel))
}

func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// le matches a bucket's upper bound as Prometheus 2 stores it ("30") and
// as Prometheus 3, which normalises the label on ingestion, does ("30.0").
func le(bound float64) string {
	s := num(bound)
	if !strings.ContainsAny(s, ".e") {
		s += "|" + s + ".0"
	}
	return `le=~"` + s + `"`
}

// An objective is an SLO of the spec: the good and total events of a
// window, and the share of good ones it targets.
type objective struct {
	id, title, desc string
	target          float64
	good, total     func(window string) string
	// worst, if set, combines per-group ratios (availability: the worst
	// endpoint group).
	worst string
}

func (o objective) ratio(window string) string {
	r := o.good(window) + "\n/\n" + o.total(window)
	if o.worst != "" {
		return o.worst + " (\n" + r + "\n)"
	}
	return r
}

// budget is the share of the error budget over 30 days left: 1 when no
// event was bad, 0 when exactly the budgeted share was, below 0 after.
func (o objective) budget() string {
	return fmt.Sprintf("1 - (1 - (\n%s\n)) / (1 - %s)", o.ratio("30d"), num(o.target))
}

// latencyObjective is an objective on a histogram: good events are those
// at most bound seconds.
func latencyObjective(id, title, desc string, target float64, metric, matcher string, bound float64) objective {
	return objective{id: id, title: title, desc: desc, target: target,
		good: func(w string) string {
			return fmt.Sprintf("sum(rate(%s[%s]))", sel(metric+"_bucket", matcher, le(bound)), w)
		},
		total: func(w string) string {
			return fmt.Sprintf("sum(rate(%s[%s]))", sel(metric+"_count", matcher), w)
		},
	}
}

func objectives() []objective {
	const visible = "newsflow_event_visible_seconds"
	return []objective{
		latencyObjective("article_ingest", "article_ingest: 99% processed within 30 s",
			"Articles the articles stage committed within 30 s of the crawl or append that ingested them.",
			0.99, visible, `stage="articles"`, 30),
		latencyObjective("article_searchable", "article_searchable: 99% within 60 s",
			"Articles searchable (search stage committed) within 60 s of ingestion.",
			0.99, visible, `stage="search"`, 60),
		latencyObjective("article_in_story", "article_in_story: 99% within 60 s",
			"Articles in a story (stories stage committed) within 60 s of ingestion.",
			0.99, visible, `stage="stories"`, 60),
		latencyObjective("trending_update", "trending_update: 95% within 30 s",
			"Shares visible in trending (trending stage committed) within 30 s of ingestion.",
			0.95, visible, `stage="trending", input="shares"`, 30),
		{id: "crawl_coverage", title: "crawl_coverage: 99% of sources on time",
			desc:   "Active sources crawled successfully within twice their interval (on_time / active), averaged over the window.",
			target: 0.99,
			good: func(w string) string {
				return fmt.Sprintf("sum(avg_over_time(%s[%s]))", sel("newsflow_crawl_sources_on_time"), w)
			},
			total: func(w string) string {
				return fmt.Sprintf("sum(avg_over_time(%s[%s]))", sel("newsflow_crawl_sources_active"), w)
			},
		},
		latencyObjective("feed_latency", "feed_latency: 99% of cached feeds within 500 ms",
			"Feed answers from the cache within 0.5 s.",
			0.99, "newsflow_query_seconds", `query="feed", cache="hit"`, 0.5),
		latencyObjective("search_latency", "search_latency: 99% within 1 s",
			"Searches answered within 1 s.",
			0.99, "newsflow_query_seconds", `query="search"`, 1),
		availability(),
	}
}

// availability is the objective of each endpoint group, the worst shown.
func availability() objective {
	return objective{id: "availability", title: "availability: 99.9% not 5xx (worst group)",
		desc:   "Requests answered without a 5xx, per endpoint group (the health probes aside: readiness answers 503 by design while a node restores); shown for the worst group.",
		target: 0.999, worst: "min",
		good: func(w string) string {
			return fmt.Sprintf("sum by (group) (rate(%s[%s]))", sel("newsflow_http_group_requests_total", `group!="health", class!="5xx"`), w)
		},
		total: func(w string) string {
			return fmt.Sprintf("sum by (group) (rate(%s[%s]))", sel("newsflow_http_group_requests_total", `group!="health"`), w)
		},
	}
}

func overviewPanels() []panel {
	var ps []panel
	var history []target
	for _, o := range objectives() {
		ps = append(ps, panel{
			Type: "stat", Title: o.title, Description: o.desc + " Colour: against the target; budget left: of the 30-day error budget.",
			w: 6, h: 5, unit: "percentunit", decimals: ptr(2),
			steps: []step{{"red", nil}, {"green", ptr(o.target)}},
			Targets: []target{
				{Expr: o.ratio("1h"), LegendFormat: "1h", Instant: true},
				{Expr: o.ratio("30d"), LegendFormat: "30d", Instant: true},
				{Expr: o.budget(), LegendFormat: "budget left", Instant: true},
			},
			overrides: []override{byName("budget left", []step{{"red", nil}, {"orange", ptr(0.0)}, {"green", ptr(0.25)}})},
			Options:   statOptions("value_and_name"),
		})
		history = append(history, target{Expr: o.ratio("1h"), LegendFormat: o.id})
	}
	avail := availability()
	ps = append(ps,
		timeseries("Good ratio over 1h, by objective", "percentunit", history...).
			describe("The share of good events over the last hour of each objective, as it was at each point."),
		panel{
			Type: "bargauge", Title: "Availability by endpoint group (30d)",
			Description: "Requests answered without a 5xx over 30 days, per endpoint group; target 99.9%.",
			w:           12, h: 8, unit: "percentunit", decimals: ptr(3), min: ptr(0.99), max: ptr(1.0),
			steps: []step{{"red", nil}, {"green", ptr(0.999)}},
			Targets: []target{{Expr: avail.good("30d") + "\n/\n" + avail.total("30d"),
				LegendFormat: "{{group}}", Instant: true}},
			Options: map[string]any{
				"displayMode": "gradient", "orientation": "horizontal", "showUnfilled": true,
				"reduceOptions": reduce(),
			},
		},
	)
	return ps
}

func ingestPanels() []panel {
	return []panel{
		timeseries("Crawl fetches by outcome", "reqps",
			target{Expr: "sum by (outcome) (" + rate(sel("newsflow_crawl_fetches_total")) + ")", LegendFormat: "{{outcome}}"}).stacked(),
		timeseries("New items", "cps",
			target{Expr: "sum(" + rate(sel("newsflow_crawl_items_new_total")) + ")", LegendFormat: "crawled"},
			target{Expr: "sum(" + rate(sel("newsflow_ingested_events_total", `type="article"`, `result="accepted"`)) + ")", LegendFormat: "posted"}).
			describe("New feed items the crawler appended to articles.raw, and articles posted to the HTTP API."),
		timeseries("HTTP ingested events by result", "cps",
			target{Expr: "sum by (type, result) (" + rate(sel("newsflow_ingested_events_total")) + ")", LegendFormat: "{{type}} {{result}}"}),
		timeseries("Publication delay (fetched − published)", "s",
			target{Expr: quantile(0.5, sel("newsflow_article_publication_delay_seconds_bucket"), ""), LegendFormat: "p50"},
			target{Expr: quantile(0.9, sel("newsflow_article_publication_delay_seconds_bucket"), ""), LegendFormat: "p90"},
			target{Expr: quantile(0.99, sel("newsflow_article_publication_delay_seconds_bucket"), ""), LegendFormat: "p99"}).
			describe("How old new items were when the crawler found them: fetched_at − published_at."),
	}
}

func stagePanels() []panel {
	visible := stageSel("newsflow_event_visible_seconds_bucket")
	return []panel{
		timeseries("Records in", "cps",
			target{Expr: "sum by (stage) (" + rate(stageSel("newsflow_records_in_total")) + ")", LegendFormat: "{{stage}}"}),
		timeseries("Records out", "cps",
			target{Expr: "sum by (stage, topic) (" + rate(stageSel("newsflow_records_out_total")) + ")", LegendFormat: "{{stage}} → {{topic}}"}),
		timeseries("Lag (records)", "short",
			target{Expr: "sum by (stage) (" + stageSel("newsflow_lag_records") + ")", LegendFormat: "{{stage}}"}).
			describe("Records in the stage's input partitions not yet committed, refreshed every 5 s."),
		timeseries("Utilisation", "percentunit",
			target{Expr: "sum by (stage) (" + rate(stageSel("newsflow_task_busy_seconds_total")) + ")", LegendFormat: "{{stage}}"}).
			describe("Time the stage's tasks spent applying and committing: 100% is one task busy all the time; a stage of N tasks can reach N × 100%."),
		timeseries("Commit latency p99", "s",
			target{Expr: quantile(0.99, stageSel("newsflow_commit_seconds_bucket"), "stage"), LegendFormat: "{{stage}}"}),
		timeseries("Event visible latency p50 / p99", "s",
			target{Expr: quantile(0.5, visible, "stage"), LegendFormat: "{{stage}} p50"},
			target{Expr: quantile(0.99, visible, "stage"), LegendFormat: "{{stage}} p99"}).
			describe("From an event's ingestion (crawl or append) to the commit of the stage that applied it."),
		timeseries("Dead letters", "cpm",
			target{Expr: "sum by (stage) (" + rate(stageSel("newsflow_dead_letters_total")) + ") * 60", LegendFormat: "{{stage}}"}).
			describe("Records sent to newsflow-deadletter, per minute.").width(6),
		timeseries("Task restarts", "cpm",
			target{Expr: "sum by (stage) (" + rate(stageSel("newsflow_task_restarts_total")) + ") * 60", LegendFormat: "{{stage}}"}).
			describe("Tasks restarted from committed state after an error, per minute.").width(6),
		timeseries("Tasks running", "short",
			target{Expr: "sum by (stage) (" + stageSel("newsflow_tasks_running") + ")", LegendFormat: "{{stage}}"}).width(6),
		panel{
			Type: "stat", Title: "Paused stages",
			Description: "Stages an operator paused (newsflow stage pause), and on how many nodes.",
			w:           6, h: 8, unit: "short", noValue: "none paused",
			steps:   []step{{"green", nil}, {"red", ptr(1.0)}},
			Targets: []target{{Expr: "sum by (stage) (" + stageSel("newsflow_stage_paused") + ") > 0", LegendFormat: "{{stage}}", Instant: true}},
			Options: statOptions("value_and_name"),
		},
	}
}

func crawlPanels() []panel {
	return []panel{
		timeseries("Crawl coverage (on time / active)", "percentunit",
			target{Expr: "sum(" + sel("newsflow_crawl_sources_on_time") + ")\n/\nsum(" + sel("newsflow_crawl_sources_active") + ")", LegendFormat: "coverage"}).
			threshold(0.99).
			describe("Active sources crawled successfully within twice their interval; the SLO is 99%."),
		timeseries("Sources", "short",
			target{Expr: "sum(" + sel("newsflow_crawl_sources_active") + ")", LegendFormat: "active"},
			target{Expr: "sum(" + sel("newsflow_crawl_sources_on_time") + ")", LegendFormat: "on time"},
			target{Expr: "sum(" + sel("newsflow_crawl_sources") + ")", LegendFormat: "known"}),
		timeseries("Open circuits", "short",
			target{Expr: "sum by (instance) (" + sel("newsflow_crawl_open_circuits") + ")", LegendFormat: "{{instance}}"}).
			describe("Sources whose circuit breaker is open or half-open."),
		timeseries("Schedule lag", "s",
			target{Expr: quantile(0.5, sel("newsflow_crawl_schedule_lag_seconds_bucket"), ""), LegendFormat: "p50"},
			target{Expr: quantile(0.99, sel("newsflow_crawl_schedule_lag_seconds_bucket"), ""), LegendFormat: "p99"}).
			describe("How late crawls started after they were due."),
		timeseries("Fetch duration", "s",
			target{Expr: quantile(0.5, sel("newsflow_crawl_duration_seconds_bucket"), ""), LegendFormat: "p50"},
			target{Expr: quantile(0.99, sel("newsflow_crawl_duration_seconds_bucket"), ""), LegendFormat: "p99"}).
			describe("Time to crawl one source."),
		timeseries("Full-text fetches by outcome", "reqps",
			target{Expr: "sum by (outcome) (" + rate(sel("newsflow_crawl_fulltext_total")) + ")", LegendFormat: "{{outcome}}"}).stacked(),
	}
}

func queryPanels() []panel {
	const q = "newsflow_query_seconds_bucket"
	return []panel{
		timeseries("Feed latency by cache state", "s",
			target{Expr: quantile(0.5, sel(q, `query="feed"`), "cache"), LegendFormat: "{{cache}} p50"},
			target{Expr: quantile(0.99, sel(q, `query="feed"`), "cache"), LegendFormat: "{{cache}} p99"}).
			threshold(0.5).
			describe("The SLO: 99% of feed answers from the cache (hit) within 0.5 s."),
		timeseries("Search latency", "s",
			target{Expr: quantile(0.5, sel(q, `query="search"`), ""), LegendFormat: "p50"},
			target{Expr: quantile(0.99, sel(q, `query="search"`), ""), LegendFormat: "p99"}).
			threshold(1).
			describe("Search has no result cache. The SLO: 99% within 1 s."),
		timeseries("Requests by group and class", "reqps",
			target{Expr: "sum by (group, class) (" + rate(sel("newsflow_http_group_requests_total")) + ")", LegendFormat: "{{group}} {{class}}"}).stacked(),
		timeseries("5xx ratio by group", "percentunit",
			target{Expr: "sum by (group) (" + rate(sel("newsflow_http_group_requests_total", `class="5xx"`)) + ")\n/\nsum by (group) (" +
				rate(sel("newsflow_http_group_requests_total")) + ")", LegendFormat: "{{group}}"}).
			threshold(0.001).
			describe("The availability SLO allows 0.1% per group."),
		timeseries("Slowest routes (p99)", "s",
			target{Expr: "topk(5, " + quantile(0.99, sel("newsflow_http_request_seconds_bucket"), "route") + ")", LegendFormat: "{{route}}"}).
			describe("The five routes with the highest p99 latency, from the server's start of the request."),
		timeseries("Open streams", "short",
			target{Expr: "sum by (instance) (" + sel("newsflow_http_streams_open") + ")", LegendFormat: "{{instance}}"}).
			describe("Open server-sent event streams (GET /api/v1/stream)."),
	}
}

func clusterPanels() []panel {
	return []panel{
		{
			Type: "stat", Title: "Members", Description: "Cluster members up and down, as the nodes see them (a single node: 1 up).",
			w: 4, h: 8, unit: "short",
			steps:     []step{{"green", nil}},
			Targets:   []target{{Expr: "max by (state) (" + sel("newsflow_cluster_members") + ")", LegendFormat: "{{state}}", Instant: true}},
			overrides: []override{byName("down", []step{{"green", nil}, {"red", ptr(1.0)}})},
			Options:   statOptions("value_and_name"),
		},
		{
			Type: "stat", Title: "Leader", Description: "The node that leads the control plane.",
			w: 4, h: 8, unit: "short", noValue: "no leader",
			steps:   []step{{"blue", nil}},
			Targets: []target{{Expr: sel("newsflow_cluster_leader") + " == 1", LegendFormat: "{{instance}}", Instant: true}},
			Options: statOptions("name"),
		},
		{
			Type: "stat", Title: "Unowned partitions", Description: "Partitions with no owner that is up (the worst node's view).",
			w: 4, h: 8, unit: "short",
			steps:   []step{{"green", nil}, {"red", ptr(1.0)}},
			Targets: []target{{Expr: "max(" + sel("newsflow_partitions_unowned") + ")", LegendFormat: "unowned", Instant: true}},
			Options: statOptions("value"),
		},
		timeseries("Partitions owned", "short",
			target{Expr: "sum by (instance) (" + sel("newsflow_partitions_owned") + ")", LegendFormat: "{{instance}}"}).stacked().width(12),
		timeseries("Restore elapsed", "s",
			target{Expr: "max by (instance, stage) (" + sel("newsflow_restore_elapsed_seconds") + ")", LegendFormat: "{{instance}} {{stage}}"}).
			describe("How long the oldest restore of a stage in progress on a node has been running; 0 when none."),
		timeseries("State staleness", "s",
			target{Expr: "max by (instance, stage) (" + sel("newsflow_state_staleness_seconds") + ")", LegendFormat: "{{instance}} {{stage}}"}).
			describe("How far a node's copy of a followed stage's state (stories) is behind; 0 when current."),
		timeseries("Standby changes applied", "cps",
			target{Expr: "sum by (stage) (" + rate(sel("newsflow_standby_changes_total")) + ")", LegendFormat: "{{stage}}"}),
		timeseries("Peer request errors", "reqps",
			target{Expr: "sum by (instance) (" + rate(sel("newsflow_peer_request_errors_total")) + ")", LegendFormat: "{{instance}}"}).
			describe("Routed or fanned-out queries to other nodes that failed or timed out."),
	}
}

func resourcePanels() []panel {
	return []panel{
		timeseries("Disk free (data)", "percentunit",
			target{Expr: "min by (instance) (\n" + sel("newsflow_disk_free_bytes", `dir="data"`) + "\n/\n" + sel("newsflow_disk_size_bytes", `dir="data"`) + "\n)",
				LegendFormat: "{{instance}}"}).
			threshold(0.1),
		timeseries("Process RSS", "bytes",
			target{Expr: sel("process_resident_memory_bytes"), LegendFormat: "{{instance}}"}),
		timeseries("Goroutines", "short",
			target{Expr: sel("go_goroutines"), LegendFormat: "{{instance}}"}),
		timeseries("CPU", "percentunit",
			target{Expr: rate(sel("process_cpu_seconds_total")), LegendFormat: "{{instance}}"}).
			describe("100% is one core busy."),
	}
}

func ptr[T any](v T) *T { return &v }
