package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"
)

// A node's scrapes become a promtool unit test of configs/alerts.yaml:
// the series exactly as the node exported them (names and labels), their
// values replayed on promtool's time axis.

// timeScale stretches real time on promtool's axis: a second of the node's
// life becomes a minute, so that half a minute of a breach spans the rules'
// windows and for clauses, which are minutes and hours. Counters (histogram
// buckets, counts and sums too) and the gauges of elapsedGauges are
// multiplied by the same factor: rates per second, ratios and ages keep the
// values the node measured. Other gauges keep theirs.
const timeScale = 60

// promStep is the spacing of the fixture's samples on promtool's axis, and
// the rules' evaluation interval there.
const promStep = 30 * time.Second

// scrapeEvery is how often the scraper reads /metrics: promStep in real
// time.
const scrapeEvery = promStep / timeScale

// elapsedGauges are the gauges that measure how long something has lasted.
var elapsedGauges = map[string]bool{"newsflow_state_staleness_seconds": true, "newsflow_restore_elapsed_seconds": true}

// reading is one reading of a node's /metrics: its newsflow_ families.
type reading struct {
	at  time.Time
	mfs map[string]*dto.MetricFamily
}

// parseMetrics parses the text exposition format and keeps the newsflow_
// families.
func parseMetrics(r io.Reader) (map[string]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, err
	}
	for name := range mfs {
		if !strings.HasPrefix(name, "newsflow_") {
			delete(mfs, name)
		}
	}
	return mfs, nil
}

// scraper reads a node's /metrics every scrapeEvery until stopped.
type scraper struct {
	url    string
	cancel context.CancelFunc
	done   chan struct{}
	mu     struct {
		sync.Mutex
		scrapes []reading
		err     error
	}
}

// startScraper starts scraping url; the test's cleanup stops it.
func startScraper(t *testing.T, url string) *scraper {
	ctx, cancel := context.WithCancel(context.Background())
	s := &scraper{url: url, cancel: cancel, done: make(chan struct{})}
	go s.run(ctx)
	t.Cleanup(s.stop)
	return s
}

func (s *scraper) run(ctx context.Context) {
	defer close(s.done)
	tick := time.NewTicker(scrapeEvery)
	defer tick.Stop()
	client := &http.Client{Timeout: 5 * time.Second}
	for {
		at := time.Now()
		mfs, err := s.get(ctx, client)
		s.mu.Lock()
		if err != nil && ctx.Err() == nil && s.mu.err == nil {
			s.mu.err = fmt.Errorf("scrape at %s: %w", at.Format(time.TimeOnly), err)
		}
		if err == nil {
			s.mu.scrapes = append(s.mu.scrapes, reading{at: at, mfs: mfs})
		}
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (s *scraper) get(ctx context.Context, client *http.Client) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", s.url, resp.Status)
	}
	return parseMetrics(resp.Body)
}

func (s *scraper) stop() {
	s.cancel()
	<-s.done
}

// since returns the scrapes taken at or after t0, and fails the test if a
// scrape failed.
func (s *scraper) since(t *testing.T, t0 time.Time) []reading {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.err != nil {
		t.Fatal(s.mu.err)
	}
	i := sort.Search(len(s.mu.scrapes), func(i int) bool { return !s.mu.scrapes[i].at.Before(t0) })
	return slices.Clone(s.mu.scrapes[i:])
}

// last returns the latest scrape.
func (s *scraper) last(t *testing.T) reading {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.mu.scrapes) == 0 {
		t.Fatalf("no scrape of %s yet (%v)", s.url, s.mu.err)
	}
	return s.mu.scrapes[len(s.mu.scrapes)-1]
}

// value returns the sum of the values of name's series in sc whose labels
// include want (label, value pairs), a histogram's count, and whether
// there is one.
func (sc reading) value(name string, want ...string) (float64, bool) {
	mf := sc.mfs[name]
	sum, found := 0.0, false
	for _, m := range mf.GetMetric() {
		labels := map[string]string{}
		for _, lp := range m.GetLabel() {
			labels[lp.GetName()] = lp.GetValue()
		}
		match := true
		for i := 0; i+1 < len(want); i += 2 {
			match = match && labels[want[i]] == want[i+1]
		}
		if !match {
			continue
		}
		found = true
		switch mf.GetType() {
		case dto.MetricType_COUNTER:
			sum += m.GetCounter().GetValue()
		case dto.MetricType_HISTOGRAM:
			sum += float64(m.GetHistogram().GetSampleCount())
		case dto.MetricType_GAUGE:
			sum += m.GetGauge().GetValue()
		default:
			sum += m.GetUntyped().GetValue()
		}
	}
	return sum, found
}

// sample is one series of a reading as the text format writes it.
type sample struct {
	series string
	value  float64
	kind   sampleKind
}

// sampleKind says how a series is replayed on promtool's axis.
type sampleKind int

const (
	level   sampleKind = iota // a gauge: its value as measured
	counter                   // multiplied by timeScale; after the last reading, at its mean rate
	elapsed                   // a gauge of elapsed time: multiplied by timeScale
)

// samples expands a family into the series Prometheus stores for it.
func samples(mf *dto.MetricFamily) []sample {
	name := mf.GetName()
	var out []sample
	for _, m := range mf.GetMetric() {
		labels := m.GetLabel()
		switch mf.GetType() {
		case dto.MetricType_COUNTER:
			out = append(out, sample{seriesName(name, labels), m.GetCounter().GetValue(), counter})
		case dto.MetricType_GAUGE:
			kind := level
			if elapsedGauges[name] {
				kind = elapsed
			}
			out = append(out, sample{seriesName(name, labels), m.GetGauge().GetValue(), kind})
		case dto.MetricType_HISTOGRAM:
			h := m.GetHistogram()
			inf := false
			for _, b := range h.GetBucket() {
				inf = inf || math.IsInf(b.GetUpperBound(), +1)
				out = append(out, sample{seriesName(name+"_bucket", labels, "le", leValue(b.GetUpperBound())), float64(b.GetCumulativeCount()), counter})
			}
			if !inf {
				out = append(out, sample{seriesName(name+"_bucket", labels, "le", "+Inf"), float64(h.GetSampleCount()), counter})
			}
			out = append(out, sample{seriesName(name+"_sum", labels), h.GetSampleSum(), counter},
				sample{seriesName(name+"_count", labels), float64(h.GetSampleCount()), counter})
		case dto.MetricType_SUMMARY:
			s := m.GetSummary()
			for _, q := range s.GetQuantile() {
				out = append(out, sample{seriesName(name, labels, "quantile", leValue(q.GetQuantile())), q.GetValue(), level})
			}
			out = append(out, sample{seriesName(name+"_sum", labels), s.GetSampleSum(), counter},
				sample{seriesName(name+"_count", labels), float64(s.GetSampleCount()), counter})
		default:
			out = append(out, sample{seriesName(name, labels), m.GetUntyped().GetValue(), level})
		}
	}
	return out
}

// leValue writes a bucket bound as the text format does.
func leValue(f float64) string {
	if math.IsInf(f, +1) {
		return "+Inf"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// seriesName writes name{labels} in PromQL's series notation, with extra
// label pairs last (le, quantile), as the text format orders them.
func seriesName(name string, labels []*dto.LabelPair, extra ...string) string {
	var parts []string
	for _, lp := range labels {
		parts = append(parts, lp.GetName()+"="+strconv.Quote(lp.GetValue()))
	}
	for i := 0; i+1 < len(extra); i += 2 {
		parts = append(parts, extra[i]+"="+strconv.Quote(extra[i+1]))
	}
	if len(parts) == 0 {
		return name
	}
	return name + "{" + strings.Join(parts, ",") + "}"
}

// timeline is the samples of a run of scrapes, by series.
type timeline struct {
	at     []time.Time
	series []string             // in order of first appearance
	values []map[string]float64 // per reading
	kind   map[string]sampleKind
}

func newTimeline(scrapes []reading) *timeline {
	tl := &timeline{kind: map[string]sampleKind{}}
	seen := map[string]bool{}
	for _, sc := range scrapes {
		vals := map[string]float64{}
		names := make([]string, 0, len(sc.mfs))
		for name := range sc.mfs {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			for _, s := range samples(sc.mfs[name]) {
				vals[s.series] = s.value
				tl.kind[s.series] = s.kind
				if !seen[s.series] {
					seen[s.series] = true
					tl.series = append(tl.series, s.series)
				}
			}
		}
		tl.at = append(tl.at, sc.at)
		tl.values = append(tl.values, vals)
	}
	return tl
}

// end is the time of the last reading on promtool's axis.
func (tl *timeline) end() time.Duration {
	return tl.at[len(tl.at)-1].Sub(tl.at[0]) * timeScale
}

// steps is the number of promStep steps up to d on promtool's axis.
func steps(d time.Duration) int { return int(d / promStep) }

// value returns the series' value at promtool time tau: interpolated
// linearly between the scrapes around it; after the last reading, at the
// steady state of the run (a counter at its mean rate since it appeared, a
// gauge at its last value). ok is false where the series is absent.
func (tl *timeline) value(series string, tau time.Duration) (v float64, ok bool) {
	r := tl.at[0].Add(tau / timeScale)
	last := len(tl.at) - 1
	if !r.Before(tl.at[last]) {
		lv, ok := tl.values[last][series]
		if !ok {
			return 0, false
		}
		if tl.kind[series] != counter {
			return lv, true
		}
		first := 0
		for ; first < last; first++ {
			if _, ok := tl.values[first][series]; ok {
				break
			}
		}
		rate := 0.0
		if span := tl.at[last].Sub(tl.at[first]).Seconds(); span > 0 {
			rate = (lv - tl.values[first][series]) / span
		}
		return lv + rate*r.Sub(tl.at[last]).Seconds(), true
	}
	j := sort.Search(len(tl.at), func(i int) bool { return tl.at[i].After(r) }) - 1
	a, okA := tl.values[j][series]
	b, okB := tl.values[j+1][series]
	if !okA || !okB {
		return 0, false
	}
	f := r.Sub(tl.at[j]).Seconds() / tl.at[j+1].Sub(tl.at[j]).Seconds()
	return a + (b-a)*f, true
}

// valuesString writes the series' samples every promStep from 0 to span
// in promtool's notation: runs of one value as "vxN", and the steady state
// after the last reading as one "a+bxN".
func (tl *timeline) valuesString(series string, span time.Duration) string {
	at := func(i int) (float64, bool) {
		v, ok := tl.value(series, time.Duration(i)*promStep)
		if tl.kind[series] != level {
			v *= timeScale
		}
		return v, ok
	}
	var items []string
	prev, run := "", 0
	flush := func() {
		switch {
		case run == 1:
			items = append(items, prev)
		case run > 1:
			items = append(items, fmt.Sprintf("%sx%d", prev, run-1))
		}
	}
	last := min(steps(tl.end()), steps(span))
	for i := 0; i <= last; i++ {
		item := "_"
		if v, ok := at(i); ok {
			item = formatValue(v)
		}
		if item != prev {
			flush()
			prev, run = item, 0
		}
		run++
	}
	flush()
	if tail := steps(span) - last; tail > 0 {
		v0, ok := at(last + 1)
		v1, _ := at(last + 2)
		switch d := v1 - v0; {
		case !ok:
			items = append(items, fmt.Sprintf("_x%d", tail-1))
		case d >= 0:
			items = append(items, fmt.Sprintf("%s+%sx%d", formatValue(v0), formatValue(d), tail-1))
		default:
			items = append(items, fmt.Sprintf("%s-%sx%d", formatValue(v0), formatValue(-d), tail-1))
		}
	}
	return strings.Join(items, " ")
}

// formatValue writes a sample value for promtool.
func formatValue(v float64) string { return strconv.FormatFloat(v, 'g', 10, 64) }

// The promtool unit test file (promtool test rules).
type (
	ruleTestFile struct {
		RuleFiles          []string       `yaml:"rule_files"`
		EvaluationInterval string         `yaml:"evaluation_interval"`
		Tests              []ruleTestCase `yaml:"tests"`
	}
	ruleTestCase struct {
		Interval    string       `yaml:"interval"`
		InputSeries []inputSerie `yaml:"input_series"`
		AlertTests  []alertTest  `yaml:"alert_rule_test"`
	}
	inputSerie struct {
		Series string `yaml:"series"`
		Values string `yaml:"values"`
	}
	alertTest struct {
		EvalTime  string     `yaml:"eval_time"`
		Alertname string     `yaml:"alertname"`
		ExpAlerts []expAlert `yaml:"exp_alerts"`
	}
	expAlert struct {
		Labels map[string]string `yaml:"exp_labels"`
	}
)

// alertCheck says which alerts of one name fire at a time on promtool's
// axis: none, or one per label set (the severity included).
type alertCheck struct {
	at     time.Duration
	name   string
	firing []map[string]string
}

// testCase makes the promtool test of the timeline up to span.
func (tl *timeline) testCase(span time.Duration, checks []alertCheck) ruleTestCase {
	tc := ruleTestCase{Interval: promDuration(promStep)}
	for _, s := range tl.series {
		tc.InputSeries = append(tc.InputSeries, inputSerie{Series: s, Values: tl.valuesString(s, span)})
	}
	for _, c := range checks {
		at := alertTest{EvalTime: promDuration(c.at), Alertname: c.name, ExpAlerts: []expAlert{}}
		for _, l := range c.firing {
			at.ExpAlerts = append(at.ExpAlerts, expAlert{Labels: l})
		}
		tc.AlertTests = append(tc.AlertTests, at)
	}
	return tc
}

// promDuration writes d in seconds, a duration promtool reads.
func promDuration(d time.Duration) string { return strconv.FormatInt(int64(d/time.Second), 10) + "s" }

// onStep rounds d down to promStep.
func onStep(d time.Duration) time.Duration { return d / promStep * promStep }

// runPromtoolTest writes the rules of configs/alerts.yaml without their
// annotations (the firing labels are what the scrapes decide; the
// annotations are checked by configs/alerts_test.yaml) and the test case
// into a directory, and runs promtool test rules; it fails t with
// promtool's report if the alerts are not as expected.
func runPromtoolTest(t *testing.T, promtool, root, name string, tc ruleTestCase) {
	t.Helper()
	dir := t.TempDir()
	rules := rulesWithoutAnnotations(t, filepath.Join(root, "configs", "alerts.yaml"))
	if err := os.WriteFile(filepath.Join(dir, "alerts.yaml"), rules, 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := yaml.Marshal(ruleTestFile{RuleFiles: []string{"alerts.yaml"}, EvaluationInterval: promDuration(promStep), Tests: []ruleTestCase{tc}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name+"_test.yaml")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool, "test", "rules", path).CombinedOutput()
	if err != nil {
		keep := filepath.Join(os.TempDir(), "newsflow-"+name+"_test.yaml")
		os.WriteFile(keep, b, 0o644)
		t.Errorf("%s: promtool test rules: %v (the test file is kept at %s)\n%s", name, err, keep, out)
		return
	}
	t.Logf("%s: promtool test rules passed (%d series, %d alert checks, %.0f KB)", name, len(tc.InputSeries), len(tc.AlertTests), float64(len(b))/1024)
}

// rulesWithoutAnnotations returns the rule file at path without the
// alerts' annotations.
func rulesWithoutAnnotations(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var strip func(n *yaml.Node)
	strip = func(n *yaml.Node) {
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == "annotations" {
					n.Content = append(n.Content[:i], n.Content[i+2:]...)
					i -= 2
				}
			}
		}
		for _, c := range n.Content {
			strip(c)
		}
	}
	strip(&doc)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	if err := enc.Encode(&doc); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
