package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/engine/eventlog/embedded"
	"github.com/newsflow/newsflow/engine/eventlog/kafkalog"
	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/internal/testutil"
	"github.com/newsflow/newsflow/operators/trending"
)

// changesShares writes a file of shares, counts[a] of article a, at
// base and the milliseconds after it, and returns it with its lines.
func changesShares(t *testing.T, base int64, counts map[string]uint64) (path string, lines int) {
	t.Helper()
	var b strings.Builder
	for a, n := range counts {
		for i := range n {
			fmt.Fprintf(&b, `{"event_id":"%s-%d","article_id":"%s","user_id":"u%d","category":"tech","timestamp":%d}`+"\n", a, i, a, i, base+int64(i))
			lines++
		}
	}
	path = filepath.Join(t.TempDir(), "shares.ndjson")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, lines
}

// changesTop are 15 articles, tc-00 shared 30 times, tc-01 29 and so on,
// and the ten most shared.
func changesTop() (counts map[string]uint64, top []string) {
	counts = map[string]uint64{}
	for a := range 15 {
		id := fmt.Sprintf("tc-%02d", a)
		counts[id] = uint64(30 - a)
		if a < 10 {
			top = append(top, id)
		}
	}
	return counts, top
}

// waitChanges waits until the node counts at least n announcements in
// every window.
func waitChanges(t *testing.T, nd *nodeProc, n float64) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, func() error {
		for _, w := range []string{"1m", "1h", "24h"} {
			if got := metricSum(t, nd, `newsflow_trending_changes_total{window="`+w+`"}`); got < n {
				return fmt.Errorf("%v trending.changes announcements in window %s, want %v", got, w, n)
			}
		}
		return nil
	})
}

// checkAnnounced checks changes (in the order read) against the top 10:
// each (window, article) at most once, each article of the top in every
// window, counts not above the article's shares.
func checkAnnounced(t *testing.T, what string, changes []trending.Change, shares map[string]uint64, top []string) {
	t.Helper()
	seen := map[string]int{}
	for _, c := range changes {
		seen[c.Window+"/"+c.ArticleID]++
		if c.Count < 1 || c.Count > shares[c.ArticleID] || c.Rank < 1 || c.Rank > 10 || c.EnteredAt == 0 || c.Bound != nil {
			t.Errorf("%s: %+v", what, c)
		}
	}
	for _, w := range []string{"1m", "1h", "24h"} {
		for _, a := range top {
			if n := seen[w+"/"+a]; n != 1 {
				t.Errorf("%s: %s announced %d times in %s, want once", what, a, n, w)
			}
		}
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("%s: %s announced %d times", what, k, n)
		}
	}
}

// TestTrendingChanges: shares make ten articles the top of every window
// of a node; without any stream open, the node appends each to
// trending.changes once per window (key, value, time and id header as
// documented), does not announce them again after a restart, only a new
// article that enters then, and after a crash appends at most repeats
// (the same ids). The README's curl example, open
// meanwhile, shows the same as trending.entered schema.
func TestTrendingChanges(t *testing.T) {
	curl := needCurl(t)
	example := regexp.MustCompile("`(curl -sN localhost:8080/api/v1/stream [^`]*)`").FindStringSubmatch(readmeUsingIt(t))
	if example == nil {
		t.Fatal("README: no curl -sN example of the stream's trending.entered events")
	}
	dir := t.TempDir()
	n := runNode(t, dir, []string{"NEWSFLOW_HTTP_STREAM_INTERVAL=200ms"})

	// The README's example, for a while: it runs until stopped.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := strings.Replace(strings.ReplaceAll(example[1], "localhost:8080", n.Addr), "curl ", "timeout 10 "+curl+" ", 1)
	sse := exec.CommandContext(ctx, "bash", "-c", cmd)
	var sseOut strings.Builder
	sse.Stdout, sse.Stderr = &sseOut, &sseOut
	if err := sse.Start(); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if metricSum(t, n, "newsflow_http_streams_open") < 1 {
			return fmt.Errorf("the README's stream example did not connect: %s", sseOut.String())
		}
		return nil
	})

	base := time.Now().Add(-5 * time.Second).UnixMilli()
	shares, top := changesTop()
	path, lines := changesShares(t, base, shares)
	produceFile(t, n, path, lines)
	n.WaitCaughtUp(30 * time.Second)
	waitChanges(t, n, 10)
	time.Sleep(time.Second) // five more looks: nothing new
	appended := metricSum(t, n, "newsflow_trending_changes_total")

	_ = sse.Wait() // timeout ends curl, and grep has printed what it found
	var streamed []trending.Change
	for _, line := range strings.Split(sseOut.String(), "\n") {
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			var c trending.Change
			if err := json.Unmarshal([]byte(data), &c); err != nil {
				t.Fatalf("README stream example printed %q: %v", line, err)
			}
			streamed = append(streamed, c)
		}
	}
	if !strings.Contains(sseOut.String(), "event: trending.entered") {
		t.Fatalf("README stream example printed no trending.entered event:\n%s", sseOut.String())
	}
	checkAnnounced(t, "stream", streamed, shares, top)
	if float64(len(streamed)) != appended {
		t.Fatalf("the stream showed %d, the node appended %v", len(streamed), appended)
	}

	// A stop and start: the trending-changes task restores what it
	// announced, so nothing is announced again; an article that enters
	// then is (its shares at the same event time: no window span passes).
	if err := n.Stop(syscall.SIGTERM); err != nil {
		t.Fatalf("stop: %v", err)
	}
	n.Start()
	n.WaitReady(30 * time.Second)
	n.WaitCaughtUp(30 * time.Second)
	time.Sleep(2 * time.Second)
	if again := metricSum(t, n, "newsflow_trending_changes_total"); again != 0 {
		t.Fatalf("after a restart the node announced %v more", again)
	}
	shares["tc-99"] = 50
	path, lines = changesShares(t, base, map[string]uint64{"tc-99": 50})
	produceFile(t, n, path, lines)
	n.WaitCaughtUp(30 * time.Second)
	waitChanges(t, n, 1)
	time.Sleep(time.Second)
	if again := metricSum(t, n, "newsflow_trending_changes_total"); again != 3 {
		t.Fatalf("after a restart the node announced %v, want tc-99 in each window", again)
	}
	appended += 3

	// A crash loses the state applied since its last sync: the tasks
	// apply their input again and may append again what they had, with
	// the same ids, and nothing else.
	n.Kill()
	n.Start()
	n.WaitReady(30 * time.Second)
	n.WaitCaughtUp(30 * time.Second)
	time.Sleep(2 * time.Second)
	n.Kill()

	l, err := embedded.Open(embedded.Options{Dir: filepath.Join(dir, "log"), RetentionAge: embedded.KeepForever})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	recs, logged := readChangesTopic(t, l)
	if float64(len(recs)) < appended {
		t.Fatalf("%d records in trending.changes, %v counted by the node", len(recs), appended)
	}
	ids := map[string]bool{}
	var distinct []trending.Change
	for i, c := range logged {
		switch {
		case float64(i) < appended:
			if ids[c.ID()] {
				t.Fatalf("record %d repeats %s without a crash", i, c.ID())
			}
			ids[c.ID()] = true
			distinct = append(distinct, c)
		case !ids[c.ID()]:
			t.Fatalf("after the crash, record %d is new: %+v", i, c)
		}
	}
	checkAnnounced(t, "topic", distinct, shares, append(top, "tc-99"))
	t.Logf("%d records (%d after the crash, each a repeat), the first %s", len(recs), len(recs)-int(appended), recs[0].Value)
	t.Logf("%d records, the first %s", len(recs), recs[0].Value)
}

// readChangesTopic reads every record of trending.changes, checking that
// key, time and id header agree with the value.
func readChangesTopic(t *testing.T, l eventlog.Log) ([]*eventlog.Record, []trending.Change) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tp := eventlog.TopicPartition{Topic: schema.TopicTrendingChanges}
	o, err := l.Offsets(ctx, tp)
	if err != nil {
		t.Fatal(err)
	}
	r, err := l.NewReader(map[eventlog.TopicPartition]int64{tp: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var recs []*eventlog.Record
	for int64(len(recs)) < o.End {
		got, err := r.Poll(ctx, 1000)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, got...)
	}
	var changes []trending.Change
	for _, rec := range recs {
		var c trending.Change
		if err := json.Unmarshal(rec.Value, &c); err != nil {
			t.Fatalf("record %d: %v: %s", rec.Offset, err, rec.Value)
		}
		id, _ := rec.Header(trending.HeaderChangeID)
		if string(rec.Key) != c.ArticleID || rec.Timestamp != c.EnteredAt || string(id) != fmt.Sprintf("%s/%s/%d", c.Window, c.ArticleID, c.EnteredAt) {
			t.Errorf("record %d: key %q, time %d, %s %q, value %s", rec.Offset, rec.Key, rec.Timestamp, trending.HeaderChangeID, id, rec.Value)
		}
		changes = append(changes, c)
	}
	return recs, changes
}

// TestTrendingChangesKcat: with Kafka, the README's kcat example (with
// -e, to stop at the end) reads the announcements from trending.changes.
func TestTrendingChangesKcat(t *testing.T) {
	kcat, broker, n := kcatNode(t)
	example := regexp.MustCompile("`(kcat -C [^`]*-t trending.changes[^`]*)`").FindStringSubmatch(readmeUsingIt(t))
	if example == nil {
		t.Fatal("README: no kcat example reading trending.changes")
	}
	shares, top := changesTop()
	path, lines := changesShares(t, time.Now().Add(-5*time.Second).UnixMilli(), shares)
	produceFile(t, n, path, lines)
	n.WaitCaughtUp(30 * time.Second)
	waitChanges(t, n, 10)
	time.Sleep(4 * time.Second) // two more looks: nothing new
	cmd := strings.Replace(strings.ReplaceAll(example[1], "127.0.0.1:9092", broker), "kcat ", kcat+" -e -q ", 1)
	out, err := exec.Command("bash", "-c", cmd).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, out)
	}
	var changes []trending.Change
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		key, value, _ := strings.Cut(line, " ")
		var c trending.Change
		if err := json.Unmarshal([]byte(value), &c); err != nil || c.ArticleID != key {
			t.Fatalf("kcat printed %q (%v)", line, err)
		}
		changes = append(changes, c)
	}
	checkAnnounced(t, "kcat", changes, shares, top)
	if total := metricSum(t, n, "newsflow_trending_changes_total"); float64(len(changes)) != total {
		t.Fatalf("kcat read %d records, the node counted %v", len(changes), total)
	}
}

// TestClusterTrendingChanges: in a cluster of three, only the owner of
// partition 0 appends to trending.changes, each top article once per
// window; a stream on another node gets the trending.entered events; when
// the owner dies, the node that takes partition 0 over announces nothing
// again, and announces an article that enters after.
func TestClusterTrendingChanges(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test skipped in -short mode")
	}
	tc := startTestCluster(t, "NEWSFLOW_HTTP_STREAM_INTERVAL=300ms")
	l, err := kafkalog.Open(context.Background(), kafkalog.Options{Brokers: tc.brokers})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	owner := func() string {
		v, _ := tc.waitView(30*time.Second, "running", clusterView.allRunning)
		return v.Partitions[0].Owner
	}
	appendedBy := func() map[string]float64 {
		out := map[string]float64{}
		for _, id := range tc.ids {
			if tc.nodes[id].Running() {
				out[id] = metricSum(t, tc.nodes[id], "newsflow_trending_changes_total")
			}
		}
		return out
	}
	first := owner()
	var other string
	for _, id := range tc.ids {
		if id != first {
			other = id
			break
		}
	}
	// A stream on a node that does not append.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, tc.nodes[other].URL("/api/v1/stream"), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	streamed := make(chan trending.Change, 100)
	go func() {
		defer close(streamed)
		sc := bufio.NewScanner(resp.Body)
		entered := false
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "event: trending.entered":
				entered = true
			case entered && strings.HasPrefix(line, "data: "):
				var c trending.Change
				if json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &c) == nil {
					streamed <- c
				}
				entered = false
			}
		}
	}()

	base := time.Now().Add(-5 * time.Second).UnixMilli()
	shares, top := changesTop()
	path, lines := changesShares(t, base, shares)
	produceFile(t, tc.nodes[other], path, lines)
	tc.WaitCaughtUp(time.Minute)
	waitChanges(t, tc.nodes[first], 10)
	time.Sleep(2 * time.Second) // more looks: nothing new
	by := appendedBy()
	_, changes := readChangesTopic(t, l)
	checkAnnounced(t, "cluster", changes, shares, top)
	var total float64
	for _, n := range by {
		total += n
	}
	if by[first] != float64(len(changes)) || total != by[first] {
		t.Fatalf("appended by node: %v; %d records; want all by %s, the owner of partition 0", by, len(changes), first)
	}
	var got []trending.Change
	for len(got) < len(changes) {
		select {
		case c, ok := <-streamed:
			if !ok {
				t.Fatalf("the stream on %s ended after %d of %d trending.entered events", other, len(got), len(changes))
			}
			got = append(got, c)
		case <-time.After(10 * time.Second):
			t.Fatalf("the stream on %s had %d of %d trending.entered events", other, len(got), len(changes))
		}
	}
	checkAnnounced(t, "stream on "+other, got, shares, top)

	// The owner of partition 0 dies: its successor reads the topic and
	// announces nothing again, then what enters (same event time: no
	// window span passes).
	tc.nodes[first].Kill()
	tc.waitView(30*time.Second, "without partitions on "+first, func(v clusterView) bool {
		return v.owns(first) == 0 && v.allRunning()
	})
	next := owner()
	time.Sleep(3 * time.Second) // ten looks
	if _, again := readChangesTopic(t, l); len(again) != len(changes) {
		t.Fatalf("after %s died, %d records, was %d: %v", first, len(again), len(changes), again[len(changes):])
	}
	shares["tc-99"] = 50
	path, lines = changesShares(t, base, map[string]uint64{"tc-99": 50})
	produceFile(t, tc.nodes[other], path, lines)
	testutil.Eventually(t, 30*time.Second, func() error {
		if by := appendedBy(); by[next] < 3 {
			return fmt.Errorf("%s, now the owner of partition 0, did not announce tc-99: %v", next, by)
		}
		return nil
	})
	time.Sleep(time.Second)
	_, after := readChangesTopic(t, l)
	checkAnnounced(t, "after the failover", after, shares, append(top, "tc-99"))
	if len(after) != len(changes)+3 {
		t.Fatalf("%d records after tc-99 entered, want %d", len(after), len(changes)+3)
	}
	t.Logf("%s appended %d records; after it died %s appended tc-99's", first, len(changes), next)
}
