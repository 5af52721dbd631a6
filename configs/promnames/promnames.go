// Package promnames reads the PromQL that operations build on, the rules of
// configs/alerts.yaml and the panels of configs/grafana/*.json, and the
// metric names and selectors in it: the tests that hold those files to the
// metrics a node exposes share it. It stands apart from package configs,
// which the binary links, so that the PromQL parser stays out of the
// binary.
package promnames

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"
)

// An Expr is a PromQL expression of a rule file or a dashboard, and where
// it is (a rule's name, or a panel's title and the target's refId).
type Expr struct {
	File  string
	Where string
	Expr  string
}

func (e Expr) String() string { return fmt.Sprintf("%s: %s: %s", e.File, e.Where, e.Expr) }

// A Selector is one vector selector of an expression: the metric it names
// and its other label matchers.
type Selector struct {
	Metric   string
	Matchers []*labels.Matcher
}

// grafanaDurations are the interval variables Grafana replaces before it
// sends a query, and durations that stand in for them when parsing.
var grafanaDurations = strings.NewReplacer(
	"${__rate_interval}", "5m", "$__rate_interval", "5m",
	"${__interval}", "1m", "$__interval", "1m",
	"${__range}", "1h", "$__range", "1h",
)

var promql = parser.NewParser(parser.Options{})

// Selectors parses expr, with Grafana's interval variables ($__rate_interval,
// $__interval, $__range) read as durations, and returns its vector
// selectors. Other Grafana variables must stand inside label values
// (instance=~"$instance"), where PromQL reads them as text.
func Selectors(expr string) ([]Selector, error) {
	e, err := promql.ParseExpr(grafanaDurations.Replace(expr))
	if err != nil {
		return nil, err
	}
	var sels []Selector
	for _, ms := range parser.ExtractSelectors(e) {
		var s Selector
		for _, m := range ms {
			if m.Name == model.MetricNameLabel {
				if m.Type != labels.MatchEqual {
					return nil, fmt.Errorf("selector %s: the metric name is matched by %s, not named", m, m.Type)
				}
				s.Metric = m.Value
				continue
			}
			s.Matchers = append(s.Matchers, m)
		}
		if s.Metric == "" {
			return nil, errors.New("a selector names no metric")
		}
		sels = append(sels, s)
	}
	return sels, nil
}

// MetricNames returns the metric names expr uses, sorted, each once, as
// written (a histogram's series with their _bucket, _sum or _count).
func MetricNames(expr string) ([]string, error) {
	sels, err := Selectors(expr)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, s := range sels {
		names = append(names, s.Metric)
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// RuleExprs returns the expressions of a Prometheus rule file and the
// names its recording rules define (which no node exposes: Prometheus
// computes them).
func RuleExprs(file string, b []byte) (exprs []Expr, recorded []string, err error) {
	var rf struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Record string `yaml:"record"`
				Alert  string `yaml:"alert"`
				Expr   string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &rf); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", file, err)
	}
	for _, g := range rf.Groups {
		for i, r := range g.Rules {
			if r.Record != "" {
				recorded = append(recorded, r.Record)
			}
			name := cmp.Or(r.Alert, r.Record, fmt.Sprintf("rule %d", i))
			if strings.TrimSpace(r.Expr) == "" {
				return nil, nil, fmt.Errorf("%s: group %s: %s has no expr", file, g.Name, name)
			}
			exprs = append(exprs, Expr{File: file, Where: g.Name + "/" + name, Expr: r.Expr})
		}
	}
	slices.Sort(recorded)
	return exprs, slices.Compact(recorded), nil
}

// dashboard is what DashboardExprs reads of a Grafana dashboard: its
// variables and its panels (a collapsed row holds its own).
type dashboard struct {
	Templating struct {
		List []struct {
			Name  string          `json:"name"`
			Type  string          `json:"type"`
			Query json.RawMessage `json:"query"` // a string, or {"query": "..."}
		} `json:"list"`
	} `json:"templating"`
	Panels []panel `json:"panels"`
}

type panel struct {
	Type    string `json:"type"`
	Title   string `json:"title"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

// allPanels are panels with those of their rows, rows left out.
func allPanels(panels []panel) []panel {
	var ps []panel
	for _, p := range panels {
		if p.Type == "row" {
			ps = append(ps, allPanels(p.Panels)...)
			continue
		}
		ps = append(ps, p)
	}
	return ps
}

// labelValuesQuery is a Grafana query variable of the Prometheus data source
// that lists a label's values in the series of a selector.
var labelValuesQuery = regexp.MustCompile(`^\s*label_values\((.+),\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)\s*$`)

// DashboardExprs returns the PromQL of a Grafana dashboard: every panel
// target's expr, and the selector of every label_values(selector, label)
// variable query.
func DashboardExprs(file string, b []byte) ([]Expr, error) {
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	var exprs []Expr
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, err := variableQuery(v.Query)
		if err != nil {
			return nil, fmt.Errorf("%s: variable %s: %w", file, v.Name, err)
		}
		m := labelValuesQuery.FindStringSubmatch(q)
		if m == nil {
			return nil, fmt.Errorf("%s: variable %s: query %q is not label_values(selector, label)", file, v.Name, q)
		}
		exprs = append(exprs, Expr{File: file, Where: "variable " + v.Name, Expr: strings.TrimSpace(m[1])})
	}
	for _, p := range allPanels(d.Panels) {
		for _, t := range p.Targets {
			exprs = append(exprs, Expr{File: file, Where: fmt.Sprintf("panel %q %s", p.Title, t.RefID), Expr: t.Expr})
		}
	}
	return exprs, nil
}

// variableQuery is a query variable's query: Grafana writes it as a
// string, or as an object holding it.
func variableQuery(raw json.RawMessage) (string, error) {
	var q string
	if err := json.Unmarshal(raw, &q); err == nil {
		return q, nil
	}
	var obj struct {
		Query string `json:"query"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return "", fmt.Errorf("query: %w", err)
	}
	return obj.Query, nil
}

// OperationsExprs reads the PromQL that operations build on, in dir (the
// module's configs/): the rules of alerts.yaml and the panels of
// grafana/*.json, whichever exist, each named by its path from dir's
// parent (configs/alerts.yaml). recorded are the names recording rules
// define.
func OperationsExprs(dir string) (exprs []Expr, recorded []string, err error) {
	name := func(path string) string {
		if rel, err := filepath.Rel(filepath.Dir(dir), path); err == nil {
			return rel
		}
		return path
	}
	rules := filepath.Join(dir, "alerts.yaml")
	b, err := os.ReadFile(rules)
	switch {
	case err == nil:
		if exprs, recorded, err = RuleExprs(name(rules), b); err != nil {
			return nil, nil, err
		}
	case !errors.Is(err, os.ErrNotExist):
		return nil, nil, err
	}
	dashboards, err := filepath.Glob(filepath.Join(dir, "grafana", "*.json"))
	if err != nil {
		return nil, nil, err
	}
	for _, path := range dashboards {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, nil, err
		}
		es, err := DashboardExprs(name(path), b)
		if err != nil {
			return nil, nil, err
		}
		exprs = append(exprs, es...)
	}
	return exprs, recorded, nil
}
