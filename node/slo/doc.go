// Package slo holds newsflow's service level objectives and measures a
// node against them.
//
// The objectives (Objectives) are data: an id, what is promised, the
// target fraction of good events, the latency bound where there is one,
// and the metric good and total events are counted from. Every one is
// read from the node's own Prometheus registry:
//
//   - Latency objectives from a histogram: good events are the
//     observations in the buckets up to the objective's threshold, which
//     is one of the histogram's bucket bounds (otherwise the largest bound
//     below it, so that no slow event counts as good); total events are
//     all observations.
//   - Coverage (crawl_coverage) from two gauges, the sources crawled on
//     time and the active ones, integrated over time: good and total are
//     source-seconds, so a window's value is the share of the active
//     sources that were on time, averaged over the window and weighted by
//     the number of sources.
//   - Availability from a counter of requests by endpoint group and status
//     class: good requests are those not answered 5xx; one entry per
//     group.
//
// An Evaluator observes the registry every Options.Interval (Run), keeps
// its own cumulative good and total counts (a counter that goes down was
// reset: it counts from zero again, and its new value is added), and keeps
// copies of those counts: one every Options.Resolution for the last hour,
// and one an hour for the SLO window (Options.Window, 30 days). A window's
// counts are the current counts less those of the newest copy at least
// the window old, or of the evaluator's start when none is (since_start,
// with window_s saying how long it covers). Memory is bounded by the two
// rings, whatever the traffic.
//
// From a window's counts a Report derives the value (good/total), the
// burn rate ((1 - value) / (1 - target): 1 spends the error budget exactly
// over the SLO window), the error budget remaining over the SLO window
// (1 - burn rate, negative once the objective is missed) and a status:
// no_data (no event in the SLO window), breached (budget below zero),
// burning (the 5m and 1h burn rates both at least FastBurn) or ok. Good
// and total counts add up across nodes (Combine), so a cluster's report
// is the sum of its nodes'.
package slo
