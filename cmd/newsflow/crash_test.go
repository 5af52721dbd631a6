package main

import (
	"bytes"
	"context"
	"fmt"
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

	during, kills := produceUnderKills(t, n, file, len(stream.lines), 5, 1)
	n.waitCaughtUp(5 * time.Minute)
	verifyCounts(t, n, stream.counts)

	// And once more after a kill: the state restored from Pebble is exact.
	n.kill()
	n.start()
	ready := n.waitReady(60 * time.Second)
	n.waitCaughtUp(time.Minute)
	verifyCounts(t, n, stream.counts)
	t.Logf("%d kills during ingestion, %d in all; restart to ready %s", during, kills, ready)
}

// produceUnderKills runs `newsflow produce shares FILE` against n (batches
// of 2,000) while the node is SIGKILLed and restarted at random moments,
// at least minKills times, and checks that every line was accepted. It
// returns the kills during the run and in all.
func produceUnderKills(t *testing.T, n *nodeProc, file string, lines, minKills int, seed uint64) (during, all int64) {
	t.Helper()
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
	go func() { defer close(done); killer(t, n, minKills, seed, stop, &kills) }()
	perr := produce.Wait()
	during = kills.Load()
	close(stop)
	<-done
	if perr != nil || !bytes.Contains(out.Bytes(), fmt.Appendf(nil, "accepted %d, rejected 0", lines)) {
		t.Fatalf("produce: %v\n%s", perr, out.String())
	}
	return during, kills.Load()
}
