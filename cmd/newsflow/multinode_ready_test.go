package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestClusterRestartedNodeReadyWhenComplete: a follower killed and started
// again says ready only once it answers what it will be asked: from the
// first 200 of its /health/ready on, every trending query through it is
// complete (no missing partition, no failed node) and every per-key query
// answers 200, polled every 25ms for five seconds.
func TestClusterRestartedNodeReadyWhenComplete(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test skipped in -short mode")
	}
	tc := startTestCluster(t)
	stream := genShares(20_000, 500, 61)
	if err := <-produceShares(t, tc.brokers, stream.lines, 5_000, 0); err != nil {
		t.Fatalf("produce: %v", err)
	}
	tc.WaitCaughtUp(2 * time.Minute)
	v, _ := tc.waitView(10*time.Second, "led", func(v clusterView) bool { return v.Leader != "" })
	var f string
	for _, id := range tc.ids {
		if id != v.Leader {
			f = id
			break
		}
	}
	tc.nodes[f].Kill()
	tc.waitView(20*time.Second, "without partitions on the dead follower", func(v clusterView) bool {
		return v.owns(f) == 0 && v.allRunning()
	})
	n := tc.nodes[f]
	n.Start()
	client := &http.Client{Timeout: 5 * time.Second}
	get := func(path string) (int, string) {
		resp, err := client.Get(n.URL(path))
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	var readyAt time.Time
	deadline := time.Now().Add(60 * time.Second)
	for readyAt.IsZero() && time.Now().Before(deadline) {
		if code, _ := get("/health/ready"); code == http.StatusOK {
			readyAt = time.Now()
		}
		time.Sleep(25 * time.Millisecond)
	}
	if readyAt.IsZero() {
		t.Fatal("the restarted node never said ready")
	}
	var ids []string
	for id := range stream.counts {
		if len(ids) < 20 {
			ids = append(ids, id)
		}
	}
	// Each query is sent right after a readiness check says 200, as a
	// load balancer routing on readiness would: it must be complete.
	failures, asked, unready := 0, 0, 0
	for i := 0; time.Since(readyAt) < 5*time.Second; i++ {
		time.Sleep(25 * time.Millisecond)
		if code, _ := get("/health/ready"); code != http.StatusOK {
			unready++ // taken out of rotation: the cluster moves partitions to it
			continue
		}
		path := "/api/v1/trending?window=1h&k=10"
		if i%2 == 1 {
			path = "/api/v1/articles/" + ids[i%len(ids)] + "/shares"
		}
		asked++
		code, body := get(path)
		switch {
		case code != http.StatusOK:
			failures++
			t.Errorf("%s after ready: %s: %d %.200s", time.Since(readyAt).Round(time.Millisecond), path, code, body)
		case strings.Contains(body, `"missing_partitions":[`) || strings.Contains(body, `"failed_nodes":[`):
			failures++
			t.Errorf("%s after ready: %s: partial: %.200s", time.Since(readyAt).Round(time.Millisecond), path, body)
		}
		if failures > 10 {
			t.Fatal("giving up after 10 failed queries")
		}
	}
	t.Logf("in the 5s after the first ready: %d queries while ready, %d checks not ready", asked, unready)
	if asked == 0 {
		t.Fatal("never ready again after the first time")
	}
}
