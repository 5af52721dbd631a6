package main

import (
	"bytes"
	"context"
	"os/exec"
	"sync/atomic"
	"testing"
	"time"
)

// TestCrashEmbedded ingests 1,000,000 shares through `newsflow produce`
// while the node is SIGKILLed and restarted at random moments; the final
// 1h and 24h counts must equal the exact counts: nothing lost, nothing
// counted twice.
func TestCrashEmbedded(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test skipped in -short mode")
	}
	stream := genShares(1_000_000, 5000, 42)
	file := stream.writeFile(t)
	n := startNode(t, t.TempDir())
	n.waitReady(30 * time.Second)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	produce := exec.CommandContext(ctx, binPath, "produce", "shares", file, "--addr", "http://"+n.addr, "--batch", "2000")
	var out bytes.Buffer
	produce.Stdout, produce.Stderr = &out, &out
	if err := produce.Start(); err != nil {
		t.Fatal(err)
	}
	stop, done := make(chan struct{}), make(chan struct{})
	var kills atomic.Int64
	go func() { defer close(done); killer(t, n, 5, 1, stop, &kills) }()
	perr := produce.Wait()
	during := kills.Load()
	close(stop)
	<-done
	if perr != nil {
		t.Fatalf("produce: %v\n%s", perr, out.String())
	}
	if !bytes.Contains(out.Bytes(), []byte("accepted 1000000, rejected 0")) {
		t.Fatalf("produce output: %s", out.String())
	}
	n.waitCaughtUp(5 * time.Minute)
	verifyCounts(t, n, stream.counts)

	// And once more after a kill: the state restored from Pebble is exact.
	n.kill()
	n.start()
	ready := n.waitReady(60 * time.Second)
	n.waitCaughtUp(time.Minute)
	verifyCounts(t, n, stream.counts)
	t.Logf("%d kills during ingestion, %d in all; restart to ready %s", during, kills.Load(), ready)
}
