package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/newsflow/newsflow/configs/promnames"
	"github.com/prometheus/prometheus/model/labels"
)

// newsflow.json is what this program writes.
func TestDashboardUpToDate(t *testing.T) {
	want, err := render()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("newsflow.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("newsflow.json differs from what main.go declares: run go generate ./configs/grafana")
	}
}

// Every dashboard here is one Grafana imports into any Prometheus data
// source: a datasource variable, an instance variable, and panels that
// each read that data source with PromQL that parses and keeps to the
// chosen instances; ids unique, panels inside the 24 columns and apart.
func TestDashboards(t *testing.T) {
	files, err := filepath.Glob("*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards: %v", err)
	}
	for _, file := range files {
		t.Run(file, func(t *testing.T) {
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			checkDashboard(t, b)
		})
	}
}

func checkDashboard(t *testing.T, b []byte) {
	var d struct {
		SchemaVersion int    `json:"schemaVersion"`
		UID           string `json:"uid"`
		Title         string `json:"title"`
		Templating    struct {
			List []struct{ Name, Type string }
		}
		Panels []struct {
			ID         int
			Type       string
			Title      string
			Datasource *datasource
			GridPos    gridPos
			Targets    []struct {
				Datasource *datasource
				RefID      string
				Expr       string
			}
			Panels []json.RawMessage
		}
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	if d.SchemaVersion < 39 || d.UID == "" || d.Title == "" {
		t.Errorf("schemaVersion %d, uid %q, title %q", d.SchemaVersion, d.UID, d.Title)
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
	}
	if vars["datasource"] != "datasource" || vars["instance"] != "query" {
		t.Errorf("variables %v: want a datasource variable `datasource` and a query variable `instance`", vars)
	}
	ids := map[int]bool{}
	var boxes []gridPos
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel %q: id %d used twice", p.Title, p.ID)
		}
		ids[p.ID] = true
		g := p.GridPos
		if g.W <= 0 || g.H <= 0 || g.X < 0 || g.Y < 0 || g.X+g.W > 24 {
			t.Errorf("panel %q: gridPos %+v", p.Title, g)
		}
		for _, o := range boxes {
			if g.X < o.X+o.W && o.X < g.X+g.W && g.Y < o.Y+o.H && o.Y < g.Y+g.H {
				t.Errorf("panel %q at %+v overlaps another at %+v", p.Title, g, o)
			}
		}
		boxes = append(boxes, g)
		if p.Title == "" {
			t.Errorf("panel %d has no title", p.ID)
		}
		if p.Type == "row" {
			if len(p.Panels) > 0 {
				t.Errorf("row %q: collapsed rows hide their panels from this test", p.Title)
			}
			continue
		}
		if p.Datasource == nil || *p.Datasource != *prometheus {
			t.Errorf("panel %q: datasource %+v, want %+v", p.Title, p.Datasource, prometheus)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no target", p.Title)
		}
		var refs []string
		for _, tg := range p.Targets {
			if slices.Contains(refs, tg.RefID) || tg.RefID == "" {
				t.Errorf("panel %q: refId %q empty or used twice", p.Title, tg.RefID)
			}
			refs = append(refs, tg.RefID)
			if tg.Datasource == nil || *tg.Datasource != *prometheus {
				t.Errorf("panel %q %s: datasource %+v", p.Title, tg.RefID, tg.Datasource)
			}
			sels, err := promnames.Selectors(tg.Expr)
			if err != nil {
				t.Errorf("panel %q %s: %v\n%s", p.Title, tg.RefID, err, tg.Expr)
				continue
			}
			for _, s := range sels {
				if !slices.ContainsFunc(s.Matchers, func(m *labels.Matcher) bool {
					return m.Name == "instance" && m.Type == labels.MatchRegexp && m.Value == "$instance"
				}) {
					t.Errorf("panel %q %s: %s is not kept to instance=~\"$instance\"", p.Title, tg.RefID, s.Metric)
				}
			}
		}
	}
	// The variables' queries and the targets, as the process test reads them.
	exprs, err := promnames.DashboardExprs("dashboard", b)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range exprs {
		if _, err := promnames.Selectors(e.Expr); err != nil {
			t.Errorf("%s: %v", e, err)
		}
	}
}
