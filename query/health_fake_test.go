package query

import (
	"encoding/json"
	"testing"

	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/eventlog/embedded"
	"github.com/newsflow/newsflow/operators/trending"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
)

// standbyEngine is a cluster node's engine that runs partition 1 only and
// whose standby copy of the story state has not caught up yet.
type standbyEngine struct{ fakeEngine }

func (standbyEngine) Ready() bool                        { return false }
func (standbyEngine) Options() engine.Options            { return engine.Options{Cluster: true} }
func (standbyEngine) Assigned() map[int32]uint64         { return map[int32]uint64{1: 3} }
func (standbyEngine) StageStates() []engine.StageState   { return nil }
func (standbyEngine) HomePartition(string) (int32, bool) { return engine.SingletonPartition, true }
func (standbyEngine) Freshness(string, int32) (engine.Freshness, bool) {
	return engine.Freshness{}, false
}

// /health/ready says when it waits for the standby copy rather than for
// its own tasks.
func TestReadyWaitsForStandby(t *testing.T) {
	l, err := embedded.Open(embedded.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	reg := prometheus.NewRegistry()
	tr, err := trending.New(trending.DefaultOperatorOptions(), 1, reg)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Deps{Log: l, Engine: standbyEngine{}, Trending: tr, Stories: fakeStories{}},
		Options{MaxPast: tr.Options().MaxPast(), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	var ctx fasthttp.RequestCtx
	ctx.Request.SetRequestURI("/health/ready")
	ctx.Request.Header.Set("Host", "localhost")
	srv.Handler()(&ctx)
	var body map[string]string
	if err := json.Unmarshal(ctx.Response.Body(), &body); err != nil || ctx.Response.StatusCode() != fasthttp.StatusServiceUnavailable ||
		body["reason"] != "standby" || body["status"] != "not ready" {
		t.Fatalf("ready: %d %s", ctx.Response.StatusCode(), ctx.Response.Body())
	}
}
