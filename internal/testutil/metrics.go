package testutil

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Counter returns the value of the counter name in g whose label has
// value (the first sample of name if label is ""), or 0 if g holds none:
// a labelled counter has no sample until it is first counted.
func Counter(tb testing.TB, g prometheus.Gatherer, name, label, value string) float64 {
	tb.Helper()
	mfs, err := g.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label == "" {
				return m.GetCounter().GetValue()
			}
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// Series reads a Prometheus text exposition (a node's /metrics) into the
// value of each series, keyed as exposed: name{label="value",...}, labels
// in exposition order.
func Series(text []byte) (map[string]float64, error) {
	out := map[string]float64{}
	for line := range strings.SplitSeq(string(text), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics line %q: %w", line, err)
		}
		out[line[:i]] = v
	}
	return out, nil
}
