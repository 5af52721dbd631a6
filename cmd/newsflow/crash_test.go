package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/newsflow/newsflow/internal/testutil"
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
	n := runNode(t, t.TempDir(), nil)

	during, kills := produceUnderKills(t, n, file, len(stream.lines), 5, 1)
	verifyCounts(t, n, stream.counts)

	// And once more after a kill: the state restored from Pebble is exact.
	ready := killAndRestart(n)
	verifyCounts(t, n, stream.counts)
	t.Logf("%d kills during ingestion, %d in all; restart to ready %s", during, kills, ready)
}

// killAndRestart SIGKILLs n, starts it again and waits until it is ready
// (at most 60s) and has caught up with its log (at most a minute). It
// returns the time from start to ready.
func killAndRestart(n *nodeProc) time.Duration {
	n.Kill()
	n.Start()
	ready := n.WaitReady(60 * time.Second)
	n.WaitCaughtUp(time.Minute)
	return ready
}

// produceUnderKills runs `newsflow produce shares FILE` against n (batches
// of 2,000) while the node is SIGKILLed and restarted at random moments,
// at least minKills times, checks that every line was accepted and waits
// (at most 5 minutes) until n has caught up. It returns the kills during
// the run and in all.
func produceUnderKills(t *testing.T, n *nodeProc, file string, lines, minKills int, seed uint64) (during, all int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	produce := exec.CommandContext(ctx, binPath, "produce", "shares", file, "--addr", "http://"+n.Addr, "--batch", "2000")
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
	n.WaitCaughtUp(5 * time.Minute)
	return during, kills.Load()
}

// TestCrashEmbeddedCMS is TestCrashEmbedded with trending.counter: cms:
// after SIGKILLs while producing, every count is at least the exact count
// and within its error bound of it, and the answers (every article's
// shares and bounds, the top 100 of every window globally and per
// category) are byte for byte those of an uncrashed run over the same
// log: a replay into fresh state. A node set to the exact counter then
// refuses the partitions' cms state and says how to rebuild it.
func TestCrashEmbeddedCMS(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test skipped in -short mode")
	}
	stream := genShares(1_000_000, 5000, 43)
	file := stream.writeFile(t)
	data := t.TempDir()
	// A narrow sketch (512 counters a row for about 1,250 keys a partition)
	// so that estimates do exceed the exact counts: the answers of the
	// crashed run and of the replay agree only if counting is
	// deterministic.
	cms := []string{"NEWSFLOW_TRENDING_COUNTER=cms", "NEWSFLOW_TRENDING_CMS_WIDTH=512"}
	n := runNode(t, data, cms)

	during, kills := produceUnderKills(t, n, file, len(stream.lines), 5, 2)
	verifyEstimates(t, n, stream.counts)
	ready := killAndRestart(n)
	verifyEstimates(t, n, stream.counts)
	// A graceful stop commits everything; the restarted node answers from
	// the restored state.
	stopClean(t, n)
	n.Start()
	n.WaitReady(60 * time.Second)
	ids := slices.Sorted(maps.Keys(stream.counts))
	crashed := rawAnswers(t, n, ids)
	stopClean(t, n)

	replayTrending(t, data, cms)
	n.Start()
	n.WaitReady(60 * time.Second)
	n.WaitCaughtUp(time.Minute)
	replayed := rawAnswers(t, n, ids)
	for k, want := range crashed {
		if got := replayed[k]; !bytes.Equal(got, want) {
			t.Fatalf("%s differs between the crashed run and a replay of its log:\ncrashed  %.600s\nreplayed %.600s", k, want, got)
		}
	}
	if !bytes.Contains(crashed["/api/v1/trending?window=1h&k=100"], []byte(`"error_bound":`)) {
		t.Fatalf("no error_bound in %.300s", crashed["/api/v1/trending?window=1h&k=100"])
	}
	stopClean(t, n)

	// The exact counter refuses the cms state.
	exact := startNode(t, data)
	msg := []byte("newsflow replay --operator trending --from-offset 0")
	testutil.Eventually(t, 30*time.Second, func() error {
		if !bytes.Contains([]byte(exact.LogTail(1<<20)), msg) {
			return fmt.Errorf("no error naming the replay in the log of a node set to the exact counter:\n%s", exact.LogTail(2000))
		}
		return nil
	})
	if !strings.Contains(exact.LogTail(1<<20), "holds cms counts and trending.counter is exact") {
		t.Fatalf("the error does not say which counters:\n%s", exact.LogTail(2000))
	}
	t.Logf("%d kills during ingestion, %d in all; restart to ready %s", during, kills, ready)
}

// replayTrending runs `newsflow replay --operator trending --from-offset 0`
// on a stopped node's data with the environment env.
func replayTrending(t *testing.T, data string, env []string) {
	t.Helper()
	cmd := exec.Command(binPath, "replay", "--operator", "trending", "--from-offset", "0",
		"--config", "../../configs/newsflow.yaml", "--data", data, "--log-level", "warn")
	cmd.Env = append(append(os.Environ(), "NEWSFLOW_CRAWL_ENABLED=false"), env...)
	if out, err := cmd.CombinedOutput(); err != nil || !bytes.Contains(out, []byte("replayed trending")) {
		t.Fatalf("replay: %v\n%s", err, out)
	}
}

// rawAnswers returns the bodies of what the trending API says about ids:
// every article's shares, and the top 100 of every window, globally and
// for two categories.
func rawAnswers(t *testing.T, n *nodeProc, ids []string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	get := func(path string) {
		var raw json.RawMessage
		if err := getJSON(n.URL(path), &raw); err != nil {
			t.Fatal(err)
		}
		out[path] = raw
	}
	for _, w := range []string{"1m", "1h", "24h"} {
		get("/api/v1/trending?window=" + w + "&k=100")
		for _, cat := range []string{"tech", "sports"} {
			get("/api/v1/trending?window=" + w + "&k=100&category=" + cat)
		}
	}
	for _, id := range ids {
		get("/api/v1/articles/" + id + "/shares")
	}
	return out
}

// verifyEstimates checks, in cms mode, every article's 1h and 24h counts
// and the top 100 of both windows against the exact counts: never below,
// never more than the reported error bound above.
func verifyEstimates(t *testing.T, n *nodeProc, want map[string]uint64) {
	t.Helper()
	maxErr, maxBound := uint64(0), uint64(0)
	for id, exact := range want {
		var sh struct {
			Counts map[string]uint64 `json:"counts"`
			Bounds map[string]uint64 `json:"bounds"`
		}
		if err := getJSON(n.URL("/api/v1/articles/"+id+"/shares"), &sh); err != nil {
			t.Fatal(err)
		}
		for _, w := range []string{"1h", "24h"} {
			c, b := sh.Counts[w], sh.Bounds[w]
			if c < exact || c-exact > b || b == 0 {
				t.Fatalf("%s %s: %d ± %d, exact %d", id, w, c, b, exact)
			}
			maxErr, maxBound = max(maxErr, c-exact), max(maxBound, b)
		}
	}
	// Top-K answers come from snapshots that may be up to the snapshot
	// interval (200ms) stale; poll until they are fresh.
	check := func(w string) error {
		var res struct {
			Items []struct {
				Rank      int    `json:"rank"`
				ArticleID string `json:"article_id"`
				Count     uint64 `json:"count"`
				Bound     uint64 `json:"error_bound"`
			} `json:"items"`
		}
		if err := getJSON(n.URL("/api/v1/trending?window="+w+"&k=100"), &res); err != nil {
			return err
		}
		if len(res.Items) != min(100, len(want)) {
			return fmt.Errorf("trending %s returned %d items", w, len(res.Items))
		}
		for i, it := range res.Items {
			exact := want[it.ArticleID]
			if it.Rank != i+1 || it.Count < exact || it.Count-exact > it.Bound || it.Bound == 0 ||
				(i > 0 && it.Count > res.Items[i-1].Count) {
				return fmt.Errorf("trending %s rank %d: %+v, exact %d", w, i+1, it, exact)
			}
		}
		return nil
	}
	for _, w := range []string{"1h", "24h"} {
		testutil.Eventually(t, 5*time.Second, func() error { return check(w) })
	}
	t.Logf("%s: %d articles within their bounds; largest error %d, largest bound %d", n.Addr, len(want), maxErr, maxBound)
}
