package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/internal/testutil"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkStoryFailover measures the story writer's failover as readers
// see it. Three nodes; the UCI headlines arrive steadily (100 articles a
// second, again and again under new URLs) while both other nodes are asked
// GET /api/v1/stories?limit=1 every 10 ms. The node running the story
// writer is SIGKILLed, and the benchmark measures:
//
//   - kill-to-fresh-s: from the kill to the first answer of a survivor
//     that reflects a commit made after the kill (the answer's time less
//     its staleness_ms is after the kill): failure detection
//     (cluster.down_after, 2 s, plus an election when the writer's node
//     led the cluster), reassignment, the new writer's claim and the tail
//     of the changelog after its standby copy, its first commit, and the
//     survivors' copies applying it;
//   - availability-%: the survivors' answers that were 200 with
//     staleness_ms, from the kill until 5 s after the fresh answer, over
//     all of them (the lowest round's);
//   - stale-max-s: the largest staleness an answer gave.
//
// After each kill the node is started again and the benchmark waits until
// it is ready and the cluster whole. One op is NEWSFLOW_BENCH_STORY_KILLS rounds
// (default 4); which node writes, and whether it leads, follows from the
// previous rounds. The nodes, kfake and the producer share this machine's
// cores (host-cores).
func BenchmarkStoryFailover(b *testing.B) {
	kills := testutil.EnvInt(b, "NEWSFLOW_BENCH_STORY_KILLS", 4)
	raw := uciRawArticles(b)
	bc := startBenchCluster(b, 3)
	stop := make(chan struct{})
	produced := make(chan error, 1)
	go func() { produced <- produceSteadily(bc.brokers, raw, stop) }()
	defer func() {
		close(stop)
		if err := <-produced; err != nil {
			b.Errorf("produce: %v", err)
		}
	}()
	// Articles have been arriving for a while before the first kill.
	time.Sleep(10 * time.Second)
	var fresh []time.Duration
	var staleMax time.Duration
	avail := 100.0
	var rounds []string
	b.ResetTimer()
	for range b.N {
		for range kills {
			r := bc.storyFailover()
			fresh = append(fresh, r.fresh)
			staleMax = max(staleMax, r.staleMax)
			avail = min(avail, r.availability)
			rounds = append(rounds, r.String())
		}
	}
	b.StopTimer()
	b.ReportMetric(benchMedian(fresh).Seconds(), "kill-to-fresh-s")
	b.ReportMetric(slices.Max(fresh).Seconds(), "kill-to-fresh-max-s")
	b.ReportMetric(avail, "availability-%")
	b.ReportMetric(staleMax.Seconds(), "stale-max-s")
	b.ReportMetric(float64(runtime.NumCPU()), "host-cores")
	b.Logf("rounds: %s; the 3 node processes, kfake and the producer share this machine's %d cores", strings.Join(rounds, "; "), runtime.NumCPU())
}

// storyRound is one kill of the story writer.
type storyRound struct {
	writer             string
	leader             bool
	fresh, staleMax    time.Duration
	answers, good      int
	tail               float64 // changes the new writer read from the changelog (all its claims)
	availability       float64
	firstFailureReason string
}

func (r storyRound) String() string {
	s := fmt.Sprintf("%s%s fresh after %s, %d/%d answered (%.2f%%), stale up to %s, the new writer's claims read %.0f changes in all", r.writer,
		map[bool]string{true: " (leader)", false: ""}[r.leader], r.fresh.Round(10*time.Millisecond), r.good, r.answers, r.availability,
		r.staleMax.Round(10*time.Millisecond), r.tail)
	if r.firstFailureReason != "" {
		s += ", first failure: " + r.firstFailureReason
	}
	return s
}

// storyFailover kills the node running the story writer and measures what
// the survivors answer, then restarts it and waits for the cluster.
func (bc *benchCluster) storyFailover() storyRound {
	bc.b.Helper()
	var v clusterView
	if err := getJSON(bc.nodes[0].URL("/api/v1/admin/cluster"), &v); err != nil || !bc.formed(v) || v.Leader == "" {
		bc.fatalf("cluster not whole before a kill: %+v, %v", v, err)
	}
	r := storyRound{writer: v.Partitions[0].Owner}
	r.leader = r.writer == v.Leader
	var target *benchNode
	var survivors []*benchNode
	for _, n := range bc.nodes {
		if n.id == r.writer {
			target = n
		} else {
			survivors = append(survivors, n)
		}
	}
	client := &http.Client{Timeout: 10 * time.Second}
	// ask returns the staleness a node's answer gives, when the request
	// was sent (the commit the answer reflects is no older than sent less
	// the staleness) and when the answer came.
	ask := func(n *benchNode) (stale time.Duration, sent, got time.Time, err error) {
		sent = time.Now()
		resp, err := client.Get(n.URL("/api/v1/stories?limit=1"))
		if err != nil {
			return 0, sent, time.Now(), err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got = time.Now()
		var page storiesAnswer
		if resp.StatusCode != 200 || json.Unmarshal(body, &page) != nil || page.Stale == nil {
			return 0, sent, got, fmt.Errorf("%d %s", resp.StatusCode, bytes.TrimSpace(body[:min(len(body), 200)]))
		}
		return time.Duration(min(*page.Stale, math.MaxInt64/int64(time.Millisecond))) * time.Millisecond, sent, got, nil
	}
	var mu sync.Mutex
	var freshAt time.Time
	killed := time.Now()
	target.Kill()
	var wg sync.WaitGroup
	for _, n := range survivors {
		wg.Go(func() {
			for {
				stale, sent, got, err := ask(n)
				mu.Lock()
				r.answers++
				switch {
				case err != nil:
					if r.firstFailureReason == "" {
						r.firstFailureReason = n.id + ": " + err.Error()
					}
				default:
					r.good++
					r.staleMax = max(r.staleMax, stale)
					// The answer reflects a commit made after the kill. A
					// current copy (staleness 0, as of a check at most
					// 500 ms old) has articles produced after the kill
					// (one batch every 100 ms) once that check came after
					// them.
					if freshAt.IsZero() && (stale > 0 && sent.Add(-stale).After(killed) || stale == 0 && sent.Sub(killed) > 600*time.Millisecond) {
						freshAt = got
					}
				}
				done := !freshAt.IsZero() && time.Since(freshAt) > 5*time.Second || time.Since(killed) > 2*time.Minute
				mu.Unlock()
				if done {
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	if freshAt.IsZero() {
		bc.fatalf("no fresh story answer within 2 minutes of killing the writer %s", r.writer)
	}
	r.fresh = freshAt.Sub(killed)
	if err := getJSON(survivors[0].URL("/api/v1/admin/cluster"), &v); err == nil {
		for _, n := range survivors {
			if n.id == v.Partitions[0].Owner {
				r.tail = metricSum(bc.b, n.nodeProc, `newsflow_changelog_restore_changes_total{stage="stories"}`)
			}
		}
	}
	r.availability = 100 * float64(r.good) / float64(max(r.answers, 1))
	// Articles keep arriving, so the cluster is never caught up: the
	// restarted node is ready (its copies caught up once) and has its
	// partitions back.
	target.Start()
	target.WaitReady(2 * time.Minute)
	bc.waitFormed(2 * time.Minute)
	return r
}

// produceSteadily writes the raw articles to articles.raw, 10 every 100 ms,
// over and over with the round in their URLs, until stop is closed.
func produceSteadily(brokers []string, raw [][]byte, stop <-chan struct{}) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		return err
	}
	defer cl.Close()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for i := 0; ; {
		select {
		case <-stop:
			return nil
		case <-t.C:
		}
		var recs []*kgo.Record
		for range 10 {
			var a map[string]string
			if err := json.Unmarshal(raw[i%len(raw)], &a); err != nil {
				return err
			}
			round := i / len(raw)
			a["url"] += "-r" + strconv.Itoa(round)
			a["published_at"] = time.Now().UTC().Format(time.RFC3339Nano)
			v, _ := json.Marshal(a)
			recs = append(recs, &kgo.Record{Topic: schema.TopicArticlesRaw, Value: v})
			i++
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := cl.ProduceSync(ctx, recs...).FirstErr()
		cancel()
		if err != nil {
			return err
		}
	}
}
