package main

// The dashboard's JSON model (Grafana schema version 39), and the layout of
// rows: panels left to right, a new line when the next one does not fit
// the 24 columns.

// A panel as declared: what it shows, and how large it is (w = 0: the
// row's width).
type panel struct {
	Type        string // timeseries, stat or bargauge
	Title       string
	Description string
	Targets     []target
	Options     map[string]any // nil: the type's defaults

	w, h      int
	unit      string
	decimals  *int
	min, max  *float64
	noValue   string
	steps     []step // thresholds (stat, bargauge; timeseries: drawn as a line)
	stack     bool
	overrides []override
}

// A target is one PromQL query of a panel.
type target struct {
	Expr         string
	LegendFormat string
	Instant      bool // stat and bar gauge panels: the latest value only
}

// A step is a threshold: color from value up (nil: the base).
type step struct {
	Color string   `json:"color"`
	Value *float64 `json:"value"`
}

type override struct {
	Matcher    map[string]string `json:"matcher"`
	Properties []map[string]any  `json:"properties"`
}

// byName gives the field name its own thresholds.
func byName(name string, steps []step) override {
	return override{
		Matcher:    map[string]string{"id": "byName", "options": name},
		Properties: []map[string]any{{"id": "thresholds", "value": thresholds(steps)}},
	}
}

func thresholds(steps []step) map[string]any {
	return map[string]any{"mode": "absolute", "steps": steps}
}

// timeseries is a time series panel of unit.
func timeseries(title, unit string, targets ...target) panel {
	return panel{Type: "timeseries", Title: title, Targets: targets, unit: unit, h: 8}
}

func (p panel) describe(d string) panel { p.Description = d; return p }

func (p panel) width(w int) panel { p.w = w; return p }

// stacked stacks the panel's series (parts of a whole).
func (p panel) stacked() panel { p.stack = true; return p }

// threshold draws a dashed line at v (an SLO's bound).
func (p panel) threshold(v float64) panel {
	p.steps = []step{{"green", nil}, {"red", ptr(v)}}
	return p
}

func reduce() map[string]any {
	return map[string]any{"calcs": []string{"lastNotNull"}, "fields": "", "values": false}
}

func statOptions(textMode string) map[string]any {
	return map[string]any{
		"reduceOptions": reduce(), "orientation": "auto", "textMode": textMode,
		"colorMode": "value", "graphMode": "none", "justifyMode": "auto", "wideLayout": true,
	}
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// prometheus is the data source the `datasource` variable picks.
var prometheus = &datasource{Type: "prometheus", UID: "${datasource}"}

type gridPos struct {
	H int `json:"h"`
	W int `json:"w"`
	X int `json:"x"`
	Y int `json:"y"`
}

type jsonTarget struct {
	Datasource   *datasource `json:"datasource"`
	EditorMode   string      `json:"editorMode"`
	Expr         string      `json:"expr"`
	Instant      bool        `json:"instant"`
	LegendFormat string      `json:"legendFormat"`
	Range        bool        `json:"range"`
	RefID        string      `json:"refId"`
}

type fieldConfig struct {
	Defaults  map[string]any `json:"defaults"`
	Overrides []override     `json:"overrides"`
}

type jsonPanel struct {
	ID          int            `json:"id"`
	Type        string         `json:"type"`
	Title       string         `json:"title"`
	Description string         `json:"description,omitempty"`
	Collapsed   *bool          `json:"collapsed,omitempty"`
	Datasource  *datasource    `json:"datasource,omitempty"`
	GridPos     gridPos        `json:"gridPos"`
	FieldConfig *fieldConfig   `json:"fieldConfig,omitempty"`
	Options     map[string]any `json:"options,omitempty"`
	Targets     []jsonTarget   `json:"targets,omitempty"`
	Panels      *[]jsonPanel   `json:"panels,omitempty"`
}

type variable struct {
	Name        string         `json:"name"`
	Label       string         `json:"label"`
	Type        string         `json:"type"`
	Datasource  *datasource    `json:"datasource,omitempty"`
	Query       any            `json:"query"`
	Definition  string         `json:"definition,omitempty"`
	Current     map[string]any `json:"current"`
	Hide        int            `json:"hide"`
	IncludeAll  bool           `json:"includeAll"`
	AllValue    string         `json:"allValue,omitempty"`
	Multi       bool           `json:"multi"`
	Options     []any          `json:"options"`
	Refresh     int            `json:"refresh"`
	Regex       string         `json:"regex"`
	Sort        int            `json:"sort"`
	SkipURLSync bool           `json:"skipUrlSync"`
}

// labelVariable lists the values of label in the series of selector; all
// of them when none is picked.
func labelVariable(name, label, selector string) variable {
	q := "label_values(" + selector + ", " + label + ")"
	return variable{
		Name: name, Label: label, Type: "query", Datasource: prometheus,
		Query:      map[string]any{"query": q, "refId": "PrometheusVariableQueryEditor-VariableQuery"},
		Definition: q, Current: map[string]any{}, IncludeAll: true, AllValue: ".*", Multi: true,
		Options: []any{}, Refresh: 2, Sort: 1,
	}
}

type dashboard struct {
	Annotations   map[string]any `json:"annotations"`
	Description   string         `json:"description"`
	Editable      bool           `json:"editable"`
	GraphTooltip  int            `json:"graphTooltip"`
	ID            *int           `json:"id"`
	Links         []any          `json:"links"`
	Panels        []jsonPanel    `json:"panels"`
	Refresh       string         `json:"refresh"`
	SchemaVersion int            `json:"schemaVersion"`
	Tags          []string       `json:"tags"`
	Templating    struct {
		List []variable `json:"list"`
	} `json:"templating"`
	Time struct {
		From string `json:"from"`
		To   string `json:"to"`
	} `json:"time"`
	Timepicker map[string]any `json:"timepicker"`
	Timezone   string         `json:"timezone"`
	Title      string         `json:"title"`
	UID        string         `json:"uid"`
	Version    int            `json:"version"`
}

func newDashboard(rows []row) dashboard {
	d := dashboard{
		Annotations: map[string]any{"list": []map[string]any{{
			"builtIn": 1, "datasource": map[string]string{"type": "grafana", "uid": "-- Grafana --"},
			"enable": true, "hide": true, "iconColor": "rgba(0, 211, 255, 1)", "name": "Annotations & Alerts", "type": "dashboard",
		}}},
		Description:   "newsflow: SLOs, ingest, stages, crawl health, queries, cluster and resources (configs/grafana; metric names of the observability spec).",
		Editable:      true,
		GraphTooltip:  1, // a shared crosshair
		Links:         []any{},
		Refresh:       "30s",
		SchemaVersion: 39,
		Tags:          []string{"newsflow"},
		Timepicker:    map[string]any{},
		Timezone:      "browser",
		Title:         "newsflow",
		UID:           "newsflow",
		Version:       1,
	}
	d.Time.From, d.Time.To = "now-6h", "now"
	d.Templating.List = []variable{
		{Name: "datasource", Label: "Data source", Type: "datasource", Query: "prometheus",
			Current: map[string]any{}, Options: []any{}, Refresh: 1},
		labelVariable("instance", "instance", "newsflow_records_in_total"),
		labelVariable("stage", "stage", `newsflow_records_in_total{instance=~"$instance"}`),
	}
	id, y := 0, 0
	for _, r := range rows {
		id++
		d.Panels = append(d.Panels, jsonPanel{ID: id, Type: "row", Title: r.title, Collapsed: ptr(false),
			GridPos: gridPos{H: 1, W: 24, Y: y}, Panels: &[]jsonPanel{}})
		y++
		x, lineH := 0, 0
		for _, p := range r.panels {
			w := p.w
			if w == 0 {
				w = r.width
			}
			if x+w > 24 {
				x, y, lineH = 0, y+lineH, 0
			}
			id++
			d.Panels = append(d.Panels, p.json(id, gridPos{H: p.h, W: w, X: x, Y: y}))
			x += w
			lineH = max(lineH, p.h)
		}
		y += lineH
	}
	return d
}

func (p panel) json(id int, pos gridPos) jsonPanel {
	defaults := map[string]any{"unit": p.unit}
	if p.decimals != nil {
		defaults["decimals"] = *p.decimals
	}
	if p.min != nil {
		defaults["min"] = *p.min
	}
	if p.max != nil {
		defaults["max"] = *p.max
	}
	if p.noValue != "" {
		defaults["noValue"] = p.noValue
	}
	steps := p.steps
	if steps == nil {
		steps = []step{{"green", nil}}
	}
	defaults["thresholds"] = thresholds(steps)
	opts := p.Options
	if p.Type == "timeseries" {
		defaults["color"] = map[string]string{"mode": "palette-classic"}
		stacking, line := "none", "off"
		if p.stack {
			stacking = "normal"
		}
		if p.steps != nil {
			line = "dashed"
		}
		defaults["custom"] = map[string]any{
			"drawStyle": "line", "lineWidth": 1, "fillOpacity": 10, "showPoints": "never", "spanNulls": false,
			"stacking":        map[string]string{"mode": stacking, "group": "A"},
			"thresholdsStyle": map[string]string{"mode": line},
		}
		if opts == nil {
			opts = map[string]any{
				"legend":  map[string]any{"displayMode": "list", "placement": "bottom", "showLegend": true, "calcs": []string{}},
				"tooltip": map[string]any{"mode": "multi", "sort": "desc"},
			}
		}
	} else {
		defaults["color"] = map[string]string{"mode": "thresholds"}
	}
	jp := jsonPanel{ID: id, Type: p.Type, Title: p.Title, Description: p.Description, Datasource: prometheus, GridPos: pos,
		FieldConfig: &fieldConfig{Defaults: defaults, Overrides: p.overrides}, Options: opts}
	if jp.FieldConfig.Overrides == nil {
		jp.FieldConfig.Overrides = []override{}
	}
	for i, t := range p.Targets {
		jp.Targets = append(jp.Targets, jsonTarget{Datasource: prometheus, EditorMode: "code", Expr: t.Expr,
			Instant: t.Instant, LegendFormat: t.LegendFormat, Range: !t.Instant, RefID: string(rune('A' + i))})
	}
	return jp
}
