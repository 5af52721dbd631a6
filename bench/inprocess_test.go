package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/node"
	"github.com/newsflow/newsflow/operators/trending"
	"github.com/newsflow/newsflow/query"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
	"golang.org/x/sync/errgroup"
)

// Bounds on the waits of the in-process benchmarks.
const (
	setupTimeout    = time.Minute
	catchUpTimeout  = 10 * time.Minute
	appendWorkers   = 4 // concurrent appenders (HTTP handlers in a real node)
	caughtUpPolling = 5 * time.Millisecond
)

// pipeline is an in-process node without the HTTP server: a node opened
// as newsflow run opens one, on the caller's log, with 8 partitions and
// the trending operator alone, its engine running.
type pipeline struct {
	node   *node.Node
	log    eventlog.Log
	eng    *engine.Engine
	op     *trending.Operator
	reg    *prometheus.Registry
	cancel context.CancelFunc
	done   chan error
}

// startPipeline opens a node in dir on l and runs its engine until stop.
// The shares topic is created first, as a node does.
func startPipeline(ctx context.Context, l eventlog.Log, dir string, topts trending.OperatorOptions) (*pipeline, error) {
	if _, err := eventlog.EnsureTopic(ctx, l, schema.TopicShares, benchPartitions); err != nil {
		return nil, fmt.Errorf("ensure shares topic: %w", err)
	}
	cfg := node.Default()
	cfg.DataDir, cfg.Log.Partitions, cfg.Crawl.Enabled = dir, benchPartitions, false
	cfg.Trending.OperatorOptions = topts
	n, err := node.Open(ctx, cfg, node.Options{Log: l, Operators: []string{trending.Name}})
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(context.Background())
	p := &pipeline{node: n, log: l, eng: n.Engine(), op: n.Trending(), reg: n.Registry(), cancel: cancel, done: make(chan error, 1)}
	go func() { p.done <- p.eng.Run(rctx) }()
	for !p.eng.Ready() {
		select {
		case err := <-p.done:
			n.Close()
			return nil, fmt.Errorf("engine stopped while starting: %w", err)
		case <-ctx.Done():
			p.stop()
			return nil, ctx.Err()
		case <-time.After(caughtUpPolling):
		}
	}
	return p, nil
}

// stop stops the engine (its tasks commit their last batch) and closes the
// state. The log is the caller's.
func (p *pipeline) stop() error {
	p.cancel()
	err := <-p.done
	return errors.Join(err, p.node.Close())
}

// waitCaughtUp polls until every task has committed everything in the log.
func (p *pipeline) waitCaughtUp(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, catchUpTimeout)
	defer cancel()
	for {
		ok, err := p.eng.CaughtUp(ctx)
		if err != nil {
			return fmt.Errorf("caught up: %w", err)
		}
		if ok {
			return nil
		}
		select {
		case err := <-p.done:
			p.done <- err
			return fmt.Errorf("engine stopped: %v", err)
		case <-ctx.Done():
			return fmt.Errorf("not caught up: %w", ctx.Err())
		case <-time.After(caughtUpPolling):
		}
	}
}

// counter sums the samples of a counter family whose label name=value.
func (p *pipeline) counter(family, label, value string) float64 {
	mfs, err := p.reg.Gather()
	if err != nil {
		return -1
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != family {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if label == "" || (lp.GetName() == label && lp.GetValue() == value) {
					sum += m.GetCounter().GetValue()
					break
				}
			}
			if label == "" && len(m.GetLabel()) == 0 {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// verify checks that the trending stage applied exactly n shares, none of
// them invalid or a repeat: the run measured what it claims to.
func (p *pipeline) verify(n int) error {
	applied := p.counter("newsflow_records_in_total", "stage", trending.Name)
	dead := p.counter("newsflow_dead_letters_total", "", "")
	dups := p.counter("newsflow_duplicate_events_total", "operator", trending.Name)
	if int(applied) != n || dead != 0 || dups != 0 {
		return fmt.Errorf("trending applied %v of %d shares; %v dead letters, %v repeated event ids", applied, n, dead, dups)
	}
	return nil
}

// memoryPerPartitionMB is the trending windows' estimated heap per
// partition, averaged over partitions, in MB (10^6 bytes).
func (p *pipeline) memoryPerPartitionMB() float64 {
	mem := p.op.MemoryBytes()
	var sum int
	for _, m := range mem {
		sum += m
	}
	return float64(sum) / float64(len(mem)) / 1e6
}

// appendBatches appends the batches from appendWorkers goroutines. Workers
// take batches in stream order, so concurrent appends are close in event
// time (as concurrent HTTP requests are).
func appendBatches(ctx context.Context, l eventlog.Log, batches [][]*eventlog.Record) error {
	var next atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	for range appendWorkers {
		g.Go(func() error {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(batches) {
					return nil
				}
				if err := l.Append(gctx, batches[i]); err != nil {
					return fmt.Errorf("append batch %d: %w", i, err)
				}
			}
		})
	}
	return g.Wait()
}

// httpIngester serves the query API of a pipeline on a loopback port.
type httpIngester struct {
	addr   string
	cancel context.CancelFunc
	done   chan error
}

func startHTTP(p *pipeline) (*httpIngester, error) {
	srv, err := query.New(p.node.Deps(),
		query.Options{MaxPast: p.op.Options().MaxPast(), Registerer: p.reg})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &httpIngester{addr: ln.Addr().String(), cancel: cancel, done: make(chan error, 1)}
	go func() { h.done <- srv.Run(ctx, ln) }()
	return h, nil
}

func (h *httpIngester) stop() error {
	h.cancel()
	return <-h.done
}

// postBatches POSTs NDJSON bodies to /api/v1/events/share/batch from
// appendWorkers client goroutines, in stream order.
func postBatches(ctx context.Context, addr string, bodies [][]byte) error {
	c := &fasthttp.HostClient{Addr: addr, MaxConns: appendWorkers, ReadTimeout: time.Minute, WriteTimeout: time.Minute}
	defer c.CloseIdleConnections()
	url := "http://" + addr + "/api/v1/events/share/batch"
	var next atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	for range appendWorkers {
		g.Go(func() error {
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			for gctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= len(bodies) {
					return nil
				}
				req.Reset()
				req.SetRequestURI(url)
				req.Header.SetMethod(fasthttp.MethodPost)
				req.Header.SetContentType("application/x-ndjson")
				req.SetBodyRaw(bodies[i])
				if err := c.Do(req, resp); err != nil {
					return fmt.Errorf("post batch %d: %w", i, err)
				}
				if resp.StatusCode() != fasthttp.StatusAccepted {
					return fmt.Errorf("post batch %d: status %d: %.300s", i, resp.StatusCode(), resp.Body())
				}
			}
			return gctx.Err()
		})
	}
	return g.Wait()
}

// e2eResult is what one end-to-end run measured.
type e2eResult struct {
	elapsed      time.Duration // first append to everything committed
	memPerPartMB float64
}

// ingestFunc feeds the whole stream into a running pipeline.
type ingestFunc func(ctx context.Context, p *pipeline) error

// runEndToEnd runs one end-to-end measurement: with the timer stopped it
// opens the log and starts the pipeline; with the timer running it ingests
// and waits until everything is committed; then, stopped again, it checks
// the counts and tears down. The log is opened by open and closed by the
// close it returns.
func runEndToEnd(b *testing.B, n int, open func(dir string) (eventlog.Log, func() error, error), ingest ingestFunc, topts trending.OperatorOptions) e2eResult {
	b.Helper()
	b.StopTimer()
	ctx := context.Background()
	dir := b.TempDir()
	l, closeLog, err := open(dir)
	if err != nil {
		b.Fatalf("open log: %v", err)
	}
	sctx, cancel := context.WithTimeout(ctx, setupTimeout)
	p, err := startPipeline(sctx, l, dir, topts)
	cancel()
	if err != nil {
		closeLog()
		b.Fatalf("start pipeline: %v", err)
	}
	runtime.GC() // leave the generator's garbage out of the measurement
	b.StartTimer()

	start := time.Now()
	err = ingest(ctx, p)
	if err == nil {
		err = p.waitCaughtUp(ctx)
	}
	elapsed := time.Since(start)

	b.StopTimer()
	if err == nil {
		err = p.verify(n)
	}
	res := e2eResult{elapsed: elapsed, memPerPartMB: p.memoryPerPartitionMB()}
	err = errors.Join(err, p.stop(), closeLog())
	if err != nil {
		b.Fatal(err)
	}
	b.StartTimer()
	return res
}

// reportEndToEnd reports the rate over all runs and the last run's memory.
func reportEndToEnd(b *testing.B, n int, runs []e2eResult) {
	var total time.Duration
	for _, r := range runs {
		total += r.elapsed
	}
	b.ReportMetric(float64(n*len(runs))/total.Seconds(), "events/s")
	b.ReportMetric(runs[len(runs)-1].memPerPartMB, "MB/partition")
}
