package promnames

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/prometheus/model/labels"
)

// prometheusOwn are series Prometheus makes itself, not a node.
var prometheusOwn = []string{"up", "ALERTS", "ALERTS_FOR_STATE", "scrape_duration_seconds",
	"scrape_samples_scraped", "scrape_samples_post_metric_relabeling", "scrape_series_added"}

// targetLabels are the labels Prometheus gives every series of a target.
var targetLabels = []string{"instance", "job"}

// Check returns what exprs ask of a node that the metric families fams
// (a node's /metrics, parsed) lack, one line per problem naming where:
//   - a metric name that no family has (a histogram's _bucket, _sum and
//     _count are its family's, a summary's _sum and _count too), unless a
//     recording rule defines it (recorded) or Prometheus does (up, ALERTS);
//   - a label a selector matches on that the family's series lack (but
//     instance and job, which Prometheus adds);
//   - a stage a selector names that no series has;
//   - an le of a _bucket selector that matches no bucket bound as both
//     Prometheus 2 ("30") and Prometheus 3, which normalises le on
//     ingestion ("30.0"), store it.
//
// Matchers whose value holds a Grafana variable ($instance) are checked
// for their label only.
func Check(fams map[string]*dto.MetricFamily, exprs []Expr, recorded []string) []string {
	stages := labelValues(fams, "stage")
	seen := map[string]bool{}
	var problems []string
	report := func(e Expr, format string, args ...any) {
		p := fmt.Sprintf(format, args...)
		if !seen[p] {
			seen[p] = true
			problems = append(problems, p+" ("+e.File+": "+e.Where+")")
		}
	}
	for _, e := range exprs {
		sels, err := Selectors(e.Expr)
		if err != nil {
			report(e, "does not parse: %v", err)
			continue
		}
		for _, s := range sels {
			if slices.Contains(recorded, s.Metric) || slices.Contains(prometheusOwn, s.Metric) {
				continue
			}
			f, suffix := family(fams, s.Metric)
			if f == nil {
				report(e, "%s: no such metric", s.Metric)
				continue
			}
			names := labelNames(f, suffix)
			for _, m := range s.Matchers {
				switch {
				case slices.Contains(targetLabels, m.Name):
				case !slices.Contains(names, m.Name):
					report(e, "%s: no label %s (it has %s)", s.Metric, m.Name, strings.Join(names, ", "))
				case strings.Contains(m.Value, "$") || m.Type == labels.MatchNotEqual || m.Type == labels.MatchNotRegexp:
				case m.Name == "stage" && !slices.ContainsFunc(stages, m.Matches):
					report(e, "%s: %s matches no stage (%s)", s.Metric, m, strings.Join(stages, ", "))
				case m.Name == "le" && suffix == "_bucket" && !matchesBound(f, m):
					report(e, "%s: %s matches no bucket bound as Prometheus 2 and 3 both store it (bounds %s)", s.Metric, m, bounds(f))
				}
			}
		}
	}
	return problems
}

// family is the metric family of name in fams, and the suffix of a
// histogram's or summary's series name ("" when name is a family's own).
func family(fams map[string]*dto.MetricFamily, name string) (*dto.MetricFamily, string) {
	if f, ok := fams[name]; ok {
		return f, ""
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		f, ok := fams[strings.TrimSuffix(name, suffix)]
		if !ok || !strings.HasSuffix(name, suffix) {
			continue
		}
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			return f, suffix
		case dto.MetricType_SUMMARY:
			if suffix != "_bucket" {
				return f, suffix
			}
		}
	}
	return nil, ""
}

// labelNames are the labels of a family's series (with le for a
// histogram's buckets), sorted.
func labelNames(f *dto.MetricFamily, suffix string) []string {
	var names []string
	if suffix == "_bucket" {
		names = append(names, "le")
	}
	if suffix == "" && f.GetType() == dto.MetricType_SUMMARY {
		names = append(names, "quantile")
	}
	for _, m := range f.GetMetric() {
		for _, lp := range m.GetLabel() {
			names = append(names, lp.GetName())
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// labelValues are the values of label in any family's series, sorted.
func labelValues(fams map[string]*dto.MetricFamily, label string) []string {
	var vs []string
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label {
					vs = append(vs, lp.GetValue())
				}
			}
		}
	}
	slices.Sort(vs)
	return slices.Compact(vs)
}

// matchesBound tells whether m matches a bucket bound of f in both forms
// Prometheus stores le in: 2.x as exposed ("30"), 3.x normalised ("30.0").
func matchesBound(f *dto.MetricFamily, m *labels.Matcher) bool {
	for _, b := range bucketBounds(f) {
		v2 := strconv.FormatFloat(b, 'g', -1, 64)
		v3 := v2
		if !strings.ContainsAny(v2, ".eInf") {
			v3 += ".0"
		}
		if m.Matches(v2) && m.Matches(v3) {
			return true
		}
	}
	return false
}

func bucketBounds(f *dto.MetricFamily) []float64 {
	var bs []float64
	for _, m := range f.GetMetric() {
		for _, b := range m.GetHistogram().GetBucket() {
			bs = append(bs, b.GetUpperBound())
		}
	}
	slices.Sort(bs)
	return slices.Compact(bs)
}

func bounds(f *dto.MetricFamily) string {
	var s []string
	for _, b := range bucketBounds(f) {
		s = append(s, strconv.FormatFloat(b, 'g', -1, 64))
	}
	return strings.Join(s, " ")
}
