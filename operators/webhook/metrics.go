package webhook

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are a dispatcher's: the deliveries it has scheduled and what
// became of its tries.
type metrics struct {
	pending prometheus.Gauge
	tries   *prometheus.CounterVec
}

// Try outcomes, the label of newsflow_webhook_tries_total.
const (
	outcomeDelivered    = "delivered"
	outcomeFailed       = "failed"
	outcomeDeadLettered = "dead_lettered"
	outcomeDropped      = "dropped" // the hook was deleted
)

func newMetrics() *metrics {
	m := &metrics{
		pending: prometheus.NewGauge(prometheus.GaugeOpts{Name: "newsflow_webhook_pending",
			Help: "Webhook deliveries of the outbox this node has scheduled (waiting for a try or in one); 0 on a node that does not run the webhooks stage."}),
		tries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "newsflow_webhook_tries_total",
			Help: "Webhook tries by outcome: delivered, failed (tried again later), dead_lettered (the last failed), dropped (the hook was deleted)."}, []string{"outcome"}),
	}
	for _, o := range []string{outcomeDelivered, outcomeFailed, outcomeDeadLettered, outcomeDropped} {
		m.tries.WithLabelValues(o)
	}
	return m
}

// Register adds the dispatcher's metrics to r.
func (d *Dispatcher) Register(r prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{d.metrics.pending, d.metrics.tries} {
		if err := r.Register(c); err != nil {
			return fmt.Errorf("webhook: register metrics: %w", err)
		}
	}
	return nil
}
