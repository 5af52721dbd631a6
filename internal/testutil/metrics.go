package testutil

import (
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
