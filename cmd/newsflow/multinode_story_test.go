package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/engine/eventlog/kafkalog"
	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/internal/testutil"
	"github.com/newsflow/newsflow/node"
	"github.com/newsflow/newsflow/operators/story"
	"github.com/newsflow/newsflow/state"
	"github.com/twmb/franz-go/pkg/kgo"
)

// storyLoad asks every running node for /api/v1/stories and /api/v1/feed
// in turn until stop is closed (the killed node no longer once it is
// killed), and keeps what their answers said: failures, answers without staleness_ms, the
// largest staleness, and when the first answer after the fresh mark came
// back fresh.
type storyLoad struct {
	total, unmarked atomic.Int64
	maxStale        atomic.Int64
	killed          atomic.Pointer[string] // the node not asked any more
	failures
	freshMu   sync.Mutex
	staleSeen bool      // an answer was stale (since the kill)
	freshAt   time.Time // the first fresh answer after a stale one
}

// freshMS is the staleness under which an answer counts as fresh: about
// two commit intervals of the writer.
const freshMS = 1000

func (q *storyLoad) run(tc *testCluster, stop <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	client := &http.Client{Timeout: 5 * time.Second}
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		case <-time.After(15 * time.Millisecond):
		}
		id := tc.ids[i%len(tc.ids)]
		n := tc.nodes[id]
		if k := q.killed.Load(); !n.Running() || k != nil && *k == id {
			continue
		}
		path := "/api/v1/stories?limit=20"
		if (i/len(tc.ids))%2 == 1 {
			path = "/api/v1/feed?limit=20"
		}
		q.total.Add(1)
		resp, err := client.Get(n.URL(path))
		if err != nil {
			if n.Running() {
				q.fail(err.Error())
			} else {
				q.total.Add(-1) // killed under the request
			}
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			q.fail(path + " " + strconv.Itoa(resp.StatusCode) + " " + string(body))
			continue
		}
		var page struct {
			Stories []json.RawMessage `json:"stories"`
			Stale   *int64            `json:"staleness_ms"`
		}
		if err := json.Unmarshal(body, &page); err != nil || page.Stale == nil {
			q.unmarked.Add(1)
			continue
		}
		for {
			m := q.maxStale.Load()
			if *page.Stale <= m || q.maxStale.CompareAndSwap(m, *page.Stale) {
				break
			}
		}
		q.freshMu.Lock()
		switch {
		case *page.Stale > freshMS:
			q.staleSeen = true
		case q.staleSeen && q.freshAt.IsZero():
			q.freshAt = time.Now()
		}
		q.freshMu.Unlock()
	}
}

// uciRawArticles reads the UCI headlines as raw articles published over the
// last two days, in their order of time.
func uciRawArticles(t testing.TB) [][]byte {
	t.Helper()
	const path = "../../../shared/data/clustering/uci_dev.ndjson"
	f, err := os.Open(path)
	if err != nil {
		testutil.NoSharedData(t, "shared corpus %s not available (%v); skipping", path, err)
	}
	defer f.Close()
	type line struct {
		ID, Title, URL, Publisher string
		Published                 time.Time `json:"published_at"`
	}
	var docs []line
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		docs = append(docs, l)
	}
	slices.SortStableFunc(docs, func(a, b line) int { return a.Published.Compare(b.Published) })
	first, last := docs[0].Published, docs[len(docs)-1].Published
	span := max(last.Sub(first), time.Second)
	now := time.Now().UTC().Truncate(time.Second)
	var out [][]byte
	for _, d := range docs {
		at := now.Add(-48 * time.Hour).Add(time.Duration(float64(47*time.Hour) * float64(d.Published.Sub(first)) / float64(span)))
		b, _ := json.Marshal(map[string]string{
			"url": d.URL, "source_id": "uci-" + strconv.Itoa(len(d.Publisher)%9), "title": d.Title,
			"published_at": at.Format(time.RFC3339Nano),
		})
		out = append(out, b)
	}
	return out
}

// TestClusterStoryWriterFailover: three processes; articles arrive
// steadily while the node running the story writer is killed. Every
// survivor answers /api/v1/stories and /api/v1/feed from its own copy
// throughout (200, with staleness_ms, which grows while no node writes
// and falls back once one does), and afterwards every story, asked of
// every survivor, has exactly the articles an uncrashed stories task gives
// them over the same log.
func TestClusterStoryWriterFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test skipped in -short mode")
	}
	raw := uciRawArticles(t)
	tc := startTestCluster(t)
	v, _ := tc.waitView(10*time.Second, "with an owner of partition 0", func(v clusterView) bool {
		return len(v.Partitions) > 0 && v.Partitions[0].Owner != "" && v.Partitions[0].Running
	})
	writer := v.Partitions[0].Owner
	var survivors []string
	for _, id := range tc.ids {
		if id != writer {
			survivors = append(survivors, id)
		}
	}
	// Every node has its copy before the load starts.
	for _, id := range tc.ids {
		tc.nodes[id].WaitReady(60 * time.Second)
	}

	var load storyLoad
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go load.run(tc, stop, &wg)
	produced := produceRaw(t, tc.brokers, raw, 40, 400*time.Millisecond)

	time.Sleep(12 * time.Second)
	load.killed.Store(&writer)
	tc.nodes[writer].Kill()
	killed := time.Now()
	load.freshMu.Lock()
	load.staleSeen, load.freshAt = false, time.Time{}
	load.freshMu.Unlock()
	_, moved := tc.waitView(30*time.Second, "with the story partition on a survivor", func(v clusterView) bool {
		return v.Partitions[0].Owner != writer && v.Partitions[0].Owner != "" && v.Partitions[0].Running
	})
	t.Logf("writer %s killed: partition 0 runs elsewhere after %s", writer, moved.Round(time.Millisecond))
	if err := <-produced; err != nil {
		t.Fatalf("produce: %v", err)
	}
	for _, id := range survivors {
		tc.nodes[id].WaitCaughtUp(3 * time.Minute)
	}
	// The copies catch up with the writer's last commit.
	testutil.Eventually(t, 30*time.Second, func() error {
		for _, id := range survivors {
			var p storiesAnswer
			if err := getJSON(tc.nodes[id].URL("/api/v1/stories?limit=1"), &p); err != nil || p.Stale == nil || *p.Stale != 0 {
				return fmt.Errorf("node %s: stories %+v %v, want staleness 0", id, p, err)
			}
		}
		return nil
	})
	// The new writer restored a claim and a tail: what its standby copy
	// had not applied yet.
	v, _ = tc.waitView(10*time.Second, "with the story partition running", func(v clusterView) bool { return v.Partitions[0].Running })
	newWriter := tc.nodes[v.Partitions[0].Owner]
	tail := metricSum(t, newWriter, `newsflow_changelog_restore_changes_total{stage="stories"}`)
	copied := metricSum(t, newWriter, `newsflow_standby_changes_total{stage="stories"}`)
	t.Logf("new writer %s: %.0f changes restored from the changelog at the claim, %.0f applied to its standby copy before", v.Partitions[0].Owner, tail, copied)
	if copied == 0 || tail > copied/5 {
		t.Errorf("the new writer restored %.0f changes at its claim and had applied %.0f to its copy: want a short tail after a copy", tail, copied)
	}

	// The killed node comes back with a copy of its own, caught up.
	tc.nodes[writer].Start()
	tc.nodes[writer].WaitReady(90 * time.Second)
	close(stop)
	wg.Wait()

	total, failed := load.total.Load(), load.failed.Load()
	load.freshMu.Lock()
	freshAt := load.freshAt
	load.freshMu.Unlock()
	load.mu.Lock()
	t.Logf("story queries: %d, failed %d, without staleness %d; largest staleness %d ms; first fresh answer %s after the kill; failures %v",
		total, failed, load.unmarked.Load(), load.maxStale.Load(), freshAt.Sub(killed).Round(time.Millisecond), load.reasons)
	load.mu.Unlock()
	if total < 200 || failed > 0 || load.unmarked.Load() > 0 {
		t.Errorf("story queries during the failover: %d sent, %d failed, %d without staleness_ms; want every one answered with it", total, failed, load.unmarked.Load())
	}
	if load.maxStale.Load() <= freshMS {
		t.Errorf("largest staleness %d ms: the answers never said they were stale while no node wrote", load.maxStale.Load())
	}
	if freshAt.IsZero() {
		t.Error("no fresh answer after the failover")
	}

	// The stories equal an uncrashed run over the same log.
	want := referenceStories(t, tc.brokers)
	if len(want) < 100 {
		t.Fatalf("the reference has %d stories", len(want))
	}
	for _, id := range tc.ids {
		checked := 0
		for sid, arts := range want {
			var d struct {
				ID       string `json:"id"`
				Articles []struct {
					ID string `json:"id"`
				} `json:"articles"`
			}
			if err := getJSON(tc.nodes[id].URL("/api/v1/stories/"+sid), &d); err != nil {
				t.Fatalf("story %s through %s: %v", sid, id, err)
			}
			var got []string
			for _, a := range d.Articles {
				got = append(got, a.ID)
			}
			sort.Strings(got)
			if d.ID != sid || !slices.Equal(got, arts) {
				t.Fatalf("story %s through %s: %s with %d articles %v, want %d %v", sid, id, d.ID, len(got), got, len(arts), arts)
			}
			checked++
		}
		t.Logf("%d stories through %s equal the uncrashed run's", checked, id)
	}
}

type storiesAnswer struct {
	Stale *int64 `json:"staleness_ms"`
}

// produceRaw writes lines to articles.raw in chunks with a pause after
// each; the channel gets the outcome.
func produceRaw(t *testing.T, brokers []string, lines [][]byte, chunk int, pause time.Duration) <-chan error {
	t.Helper()
	recs := make([]*kgo.Record, len(lines))
	for i, l := range lines {
		recs[i] = &kgo.Record{Topic: schema.TopicArticlesRaw, Value: l}
	}
	return produceChunks(t, brokers, recs, chunk, pause)
}

// referenceStories runs a stories task of the node's default configuration
// in this process over partition 0 of the articles topic, as the cluster
// left it, and returns each story's sorted article ids.
func referenceStories(t *testing.T, brokers []string) map[string][]string {
	t.Helper()
	cfg := node.Default()
	opts := cfg.Stories
	opts.Builder.Retention = cfg.Retention.Articles
	op, err := story.New(opts, cfg.Engine.Partitions, nil)
	if err != nil {
		t.Fatal(err)
	}
	db, err := state.Open(t.TempDir(), state.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ns := db.Namespace("stories")
	task, err := op.NewTask(engine.TaskContext{Partition: engine.SingletonPartition})
	if err != nil {
		t.Fatal(err)
	}
	if err := task.Restore(ns); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{schema.TopicArticles: {engine.SingletonPartition: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	end := endOffset(t, brokers, schema.TopicArticles, engine.SingletonPartition)
	var pc engine.ProcessContext
	var ids []string
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for next := int64(0); next < end; {
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatalf("read articles: %v", err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			next = r.Offset + 1
			rec := &eventlog.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp.UnixMilli()}
			if err := task.Process(&pc, rec); err != nil {
				if _, invalid := engine.IsInvalid(err); !invalid {
					t.Fatalf("reference: %v", err)
				}
			}
			var a struct{ ID string }
			if json.Unmarshal(r.Value, &a) == nil && a.ID != "" {
				ids = append(ids, a.ID)
			}
		})
	}
	b := ns.NewBatch()
	if err := task.Flush(b); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	task.Committed(engine.CommitInfo{})
	out := map[string][]string{}
	for _, id := range ids {
		if sid, ok := op.StoryOfArticle(id); ok && !slices.Contains(out[sid], id) {
			out[sid] = append(out[sid], id)
		}
	}
	for _, arts := range out {
		sort.Strings(arts)
	}
	return out
}

// endOffset returns the end offset of a partition.
func endOffset(t *testing.T, brokers []string, topic string, p int32) int64 {
	t.Helper()
	l, err := kafkalog.Open(context.Background(), kafkalog.Options{Brokers: brokers})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	o, err := l.Offsets(context.Background(), eventlog.TopicPartition{Topic: topic, Partition: p})
	if err != nil {
		t.Fatal(err)
	}
	return o.End
}
