package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// genMixedShares makes n share events with timestamps spread at random
// over the span before now, in random time order, over `articles`
// articles (skewed), then mixes in repeats of dupFrac of them (the same
// line: same event id, timestamp and content) at random places. counts
// holds the exact per-article counts of the distinct events.
func genMixedShares(n, articles int, span time.Duration, dupFrac float64, seed uint64) *shareStream {
	rng := rand.New(rand.NewPCG(seed, seed^0xd0b))
	z := rand.NewZipf(rng, 1.1, 1, uint64(articles-1))
	cats := []string{"world", "business", "tech", "science", "sports"}
	now := time.Now().UnixMilli()
	s := &shareStream{counts: map[string]uint64{}}
	for i := range n {
		a := z.Uint64()
		id := fmt.Sprintf("mix-%05d", a)
		s.counts[id]++
		s.lines = append(s.lines, fmt.Appendf(nil,
			`{"event_id":"mix-%d-%d","article_id":"%s","user_id":"u%d-%d","category":"%s","timestamp":%d}`,
			seed, i, id, rng.IntN(50000), i, cats[a%uint64(len(cats))], now-rng.Int64N(span.Milliseconds())))
	}
	for range int(float64(n) * dupFrac) {
		s.lines = append(s.lines, s.lines[rng.IntN(n)])
	}
	rng.Shuffle(len(s.lines), func(i, j int) { s.lines[i], s.lines[j] = s.lines[j], s.lines[i] })
	return s
}

// produceFile runs `newsflow produce shares FILE` against n and checks
// that it accepted every line.
func produceFile(t *testing.T, n *nodeProc, file string, lines int, extra ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	args := append([]string{"produce", "shares", file, "--addr", "http://" + n.Addr}, extra...)
	out, err := exec.CommandContext(ctx, binPath, args...).CombinedOutput()
	if err != nil || !bytes.Contains(out, fmt.Appendf(nil, "accepted %d, rejected 0", lines)) {
		t.Fatalf("produce: %v\n%s", err, out)
	}
}

// TestOutOfOrderBatchExact: 100,000 shares whose timestamps span the last
// 20 minutes, in random time order, posted in one batch: every 1h and 24h
// count is exact (nothing inside a window is dropped as late).
func TestOutOfOrderBatchExact(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test skipped in -short mode")
	}
	stream := genMixedShares(100_000, 2000, 20*time.Minute, 0, 71)
	n := runNode(t, t.TempDir(), nil)
	produceFile(t, n, stream.writeFile(t), len(stream.lines), "--batch", "100000")
	n.WaitCaughtUp(2 * time.Minute)
	verifyCounts(t, n, stream.counts)
}

// TestDuplicateEventsExact: a file in which 30% of the lines repeat an
// earlier event id is produced while the node is SIGKILLed and restarted
// at random moments, and then produced a second time: every count is the
// exact count of distinct events, after the first run and after the
// second, and after a restart.
func TestDuplicateEventsExact(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test skipped in -short mode")
	}
	stream := genMixedShares(300_000, 3000, 30*time.Minute, 0.3, 72)
	file := stream.writeFile(t)
	n := runNode(t, t.TempDir(), nil)

	kills, _ := produceUnderKills(t, n, file, len(stream.lines), 3, 2)
	verifyCounts(t, n, stream.counts)

	// The same file again: a new run of produce, so new Idempotency-Keys;
	// only the event ids make the events repeats.
	produceFile(t, n, file, len(stream.lines))
	n.WaitCaughtUp(5 * time.Minute)
	verifyCounts(t, n, stream.counts)
	// Every line of the second run is a repeat (the counter counts since
	// the node's last start).
	dups := metricSum(t, n, `newsflow_duplicate_events_total{operator="trending"}`)
	if dups < float64(len(stream.lines)) {
		t.Fatalf("%v shares taken for repeats since the last restart; the second run alone repeats %d", dups, len(stream.lines))
	}

	killAndRestart(n)
	verifyCounts(t, n, stream.counts)
	t.Logf("%d kills during ingestion; %v repeats dropped", kills, dups)
}

// metricSum sums the samples of n's /metrics whose name and labels start
// with prefix.
func metricSum(t testing.TB, n *nodeProc, prefix string) float64 {
	t.Helper()
	resp, err := http.Get(n.URL("/metrics"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		sum += v
	}
	return sum
}
