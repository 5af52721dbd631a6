package promnames

import (
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func TestMetricNames(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`histogram_quantile(0.99, sum by (stage, le) (rate(newsflow_commit_seconds_bucket{instance=~"$instance", stage=~"$stage"}[$__rate_interval])))`,
			[]string{"newsflow_commit_seconds_bucket"}},
		{`sum(rate(a_total{class!="5xx"}[${__range}])) / sum(rate(a_total[30d])) > on() group_left vector(0.5) or max_over_time(b[$__interval])`,
			[]string{"a_total", "b"}},
		{`absent(up{job="newsflow"}) and on() x:ratio_rate5m`, []string{"up", "x:ratio_rate5m"}},
	} {
		got, err := MetricNames(tc.expr)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("MetricNames(%s) = %q, %v; want %q", tc.expr, got, err, tc.want)
		}
	}
	for _, bad := range []string{`rate(x[5m]`, `{__name__=~"newsflow_.*"}`, `sum(rate(x[$window]))`} {
		if _, err := MetricNames(bad); err == nil {
			t.Errorf("MetricNames(%s): no error", bad)
		}
	}
}

func TestRuleExprs(t *testing.T) {
	exprs, recorded, err := RuleExprs("alerts.yaml", []byte(`
groups:
  - name: slo
    rules:
      - record: newsflow:ingest_good:ratio_rate1h
        expr: sum(rate(a_bucket{le="30"}[1h])) / sum(rate(a_count[1h]))
      - alert: IngestBurn
        expr: newsflow:ingest_good:ratio_rate1h < 0.99
        for: 5m
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(exprs) != 2 || exprs[1].Where != "slo/IngestBurn" || !slices.Equal(recorded, []string{"newsflow:ingest_good:ratio_rate1h"}) {
		t.Fatalf("got %+v, recorded %q", exprs, recorded)
	}
	if _, _, err := RuleExprs("alerts.yaml", []byte("groups:\n  - name: g\n    rules:\n      - alert: A\n")); err == nil {
		t.Error("a rule without expr: no error")
	}
}

func TestDashboardExprs(t *testing.T) {
	exprs, err := DashboardExprs("d.json", []byte(`{
  "templating": {"list": [
    {"name": "datasource", "type": "datasource", "query": "prometheus"},
    {"name": "instance", "type": "query", "query": {"query": "label_values(a_total{job=\"n\", x=\"y\"}, instance)"}},
    {"name": "stage", "type": "query", "query": "label_values(b, stage)"}
  ]},
  "panels": [
    {"type": "row", "title": "R", "panels": [{"type": "stat", "title": "in a row", "targets": [{"refId": "A", "expr": "c"}]}]},
    {"type": "timeseries", "title": "T", "targets": [{"refId": "A", "expr": "d"}, {"refId": "B", "expr": "e"}]}
  ]}`))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range exprs {
		got = append(got, e.Where+": "+e.Expr)
	}
	want := []string{`variable instance: a_total{job="n", x="y"}`, "variable stage: b", `panel "in a row" A: c`, `panel "T" A: d`, `panel "T" B: e`}
	if !slices.Equal(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

const exposition = `# TYPE v_seconds histogram
v_seconds_bucket{stage="articles",le="0.5"} 1
v_seconds_bucket{stage="articles",le="30"} 2
v_seconds_bucket{stage="articles",le="+Inf"} 2
v_seconds_sum{stage="articles"} 3
v_seconds_count{stage="articles"} 2
# TYPE q summary
q{quantile="0.5"} 1
q_sum 1
q_count 1
# TYPE c_total counter
c_total{stage="search",class="5xx"} 0
`

func TestCheck(t *testing.T) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(exposition))
	if err != nil {
		t.Fatal(err)
	}
	exprs := []Expr{
		{File: "f", Where: "good", Expr: `sum(rate(v_seconds_bucket{instance=~"$instance", stage="articles", le=~"30|30.0"}[5m])) / sum(rate(v_seconds_count[5m]))
			+ q{quantile="0.5"} + q_sum + c_total{stage=~"$stage", class!="5xx", job="n"} + up + r:recorded + v_seconds_bucket{le=~"0.5"}`},
		{File: "f", Where: "missing", Expr: `v_seconds_total + q_bucket + c`},
		{File: "f", Where: "labels", Expr: `c_total{kind="x"} + v_seconds_count{le="30"}`},
		{File: "f", Where: "values", Expr: `v_seconds_bucket{stage="article", le="30"} + c_total{stage=~"search|trending"}`},
		{File: "f", Where: "parse", Expr: `sum(`},
	}
	got := Check(fams, exprs, []string{"r:recorded"})
	want := []string{
		"v_seconds_total: no such metric (f: missing)",
		"q_bucket: no such metric (f: missing)",
		"c: no such metric (f: missing)",
		"c_total: no label kind (it has class, stage) (f: labels)",
		"v_seconds_count: no label le (it has stage) (f: labels)",
		`v_seconds_bucket: stage="article" matches no stage (articles, search) (f: values)`,
		`v_seconds_bucket: le="30" matches no bucket bound as Prometheus 2 and 3 both store it (bounds 0.5 30 +Inf) (f: values)`,
	}
	if len(got) != len(want)+1 || !strings.HasPrefix(got[len(got)-1], "does not parse") {
		t.Fatalf("got\n%s", strings.Join(got, "\n"))
	}
	if got = got[:len(want)]; !slices.Equal(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
