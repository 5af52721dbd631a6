package testutil

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestCounter(t *testing.T) {
	reg := prometheus.NewRegistry()
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "x_total", Help: "x"}, []string{"stage"})
	plain := prometheus.NewCounter(prometheus.CounterOpts{Name: "y_total", Help: "y"})
	reg.MustRegister(vec, plain)
	vec.WithLabelValues("a").Add(2)
	vec.WithLabelValues("b").Add(3)
	plain.Add(4)
	for _, c := range []struct {
		name, label, value string
		want               float64
	}{{"x_total", "stage", "a", 2}, {"x_total", "stage", "b", 3}, {"x_total", "stage", "c", 0}, {"y_total", "", "", 4}, {"z_total", "", "", 0}} {
		if got := Counter(t, reg, c.name, c.label, c.value); got != c.want {
			t.Errorf("Counter(%s, %s=%s) = %v, want %v", c.name, c.label, c.value, got, c.want)
		}
	}
}
