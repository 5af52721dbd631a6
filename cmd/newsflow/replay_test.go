package main

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"reflect"
	"syscall"
	"testing"
	"time"

	"github.com/newsflow/newsflow/engine/eventlog"
)

// answers is everything the trending API says about a stream.
type answers struct {
	Top    map[string]json.RawMessage
	Shares map[string]map[string]uint64
}

func collectAnswers(t *testing.T, n *nodeProc, ids []string) answers {
	t.Helper()
	a := answers{Top: map[string]json.RawMessage{}, Shares: map[string]map[string]uint64{}}
	for _, w := range []string{"1m", "1h", "24h"} {
		for _, cat := range []string{"", "tech", "sports"} {
			var res struct {
				Items json.RawMessage `json:"items"`
			}
			if err := getJSON(n.URL("/api/v1/trending?k=100&window="+w+"&category="+cat), &res); err != nil {
				t.Fatal(err)
			}
			a.Top[w+"/"+cat] = res.Items
		}
	}
	for _, id := range ids {
		var sh struct {
			Counts map[string]uint64 `json:"counts"`
		}
		if err := getJSON(n.URL("/api/v1/articles/"+id+"/shares"), &sh); err != nil {
			t.Fatal(err)
		}
		a.Shares[id] = sh.Counts
	}
	return a
}

// stopClean sends SIGTERM and expects a clean exit.
func stopClean(t *testing.T, n *nodeProc) {
	t.Helper()
	if err := n.Stop(syscall.SIGTERM); err != nil {
		t.Fatalf("node exited with %v after SIGTERM", err)
	}
}

// TestReplay: after a graceful stop, `newsflow replay --from-offset 0`
// rebuilds the trending state into fresh state with identical answers in
// every window, and `--from-time T` counts exactly the records from the
// first one at or after T in each partition.
func TestReplay(t *testing.T) {
	if testing.Short() {
		t.Skip("process test skipped in -short mode")
	}
	stream := genShares(200_000, 2000, 45)
	file := stream.writeFile(t)
	data := t.TempDir()
	n := runNode(t, data, nil)
	if out, err := exec.Command(binPath, "produce", "shares", file, "--addr", "http://"+n.Addr).CombinedOutput(); err != nil {
		t.Fatalf("produce: %v\n%s", err, out)
	}
	n.WaitCaughtUp(time.Minute)
	ids := make([]string, 0, len(stream.counts))
	for id := range stream.counts {
		ids = append(ids, id)
	}
	verifyCounts(t, n, stream.counts) // waits for fresh snapshots too
	before := collectAnswers(t, n, ids)

	// A graceful stop commits everything: a restart answers the same.
	stopClean(t, n)
	n.Start()
	n.WaitReady(30 * time.Second)
	if got := collectAnswers(t, n, ids); !reflect.DeepEqual(got, before) {
		t.Fatal("answers changed across a graceful restart")
	}
	stopClean(t, n)

	replay := func(args ...string) {
		t.Helper()
		cmd := exec.Command(binPath, append([]string{"replay", "--config", "../../configs/newsflow.yaml", "--data", data, "--log-level", "warn"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil || !bytes.Contains(out, []byte("replayed trending")) {
			t.Fatalf("replay %v: %v\n%s", args, err, out)
		}
	}
	replay("--from-offset", "0")
	n.Start()
	n.WaitReady(30 * time.Second)
	n.WaitCaughtUp(time.Minute)
	verifyCounts(t, n, stream.counts)
	after := collectAnswers(t, n, ids)
	for k := range before.Top {
		if !bytes.Equal(before.Top[k], after.Top[k]) {
			t.Fatalf("trending %s differs after replay:\nbefore %s\nafter  %s", k, before.Top[k], after.Top[k])
		}
	}
	if !reflect.DeepEqual(before.Shares, after.Shares) {
		t.Fatal("per-article counts differ after replay")
	}
	stopClean(t, n)

	// From a time in the middle: each partition from its first record at
	// or after T. The node appended the records of each partition in file
	// order, so the expected counts follow from the file.
	var tsMid int64
	{
		var ev struct {
			Timestamp int64 `json:"timestamp"`
		}
		json.Unmarshal(stream.lines[len(stream.lines)/2], &ev)
		tsMid = ev.Timestamp
	}
	want := map[string]uint64{}
	started := map[int32]bool{}
	for _, l := range stream.lines {
		var ev struct {
			ArticleID string `json:"article_id"`
			Timestamp int64  `json:"timestamp"`
		}
		json.Unmarshal(l, &ev)
		p := eventlog.PartitionFor([]byte(ev.ArticleID), 8)
		if !started[p] && ev.Timestamp >= tsMid {
			started[p] = true
		}
		if started[p] {
			want[ev.ArticleID]++
		}
	}
	replay("--from-time", time.UnixMilli(tsMid).UTC().Format(time.RFC3339Nano))
	n.Start()
	n.WaitReady(30 * time.Second)
	n.WaitCaughtUp(time.Minute)
	for _, id := range ids {
		var sh struct {
			Counts map[string]uint64 `json:"counts"`
		}
		if err := getJSON(n.URL("/api/v1/articles/"+id+"/shares"), &sh); err != nil {
			t.Fatal(err)
		}
		if sh.Counts["24h"] != want[id] {
			t.Fatalf("after replay --from-time: %s counts %d, want %d", id, sh.Counts["24h"], want[id])
		}
	}
}

// `newsflow sources import` and `export` round-trip the default list
// through a running node.
func TestSourcesCLI(t *testing.T) {
	n := runNode(t, t.TempDir(), nil)
	out, err := exec.Command(binPath, "sources", "import", "../../configs/sources.opml", "--addr", "http://"+n.Addr, "--token", testAdminToken).CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte(`"added":50`)) {
		t.Fatalf("import: %v\n%s", err, out)
	}
	out, err = exec.Command(binPath, "sources", "import", "../../configs/sources.opml", "--addr", "http://"+n.Addr, "--token", testAdminToken).CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte(`"added":0,"skipped":50`)) {
		t.Fatalf("second import: %v\n%s", err, out)
	}
	exp, err := exec.Command(binPath, "sources", "export", "--addr", "http://"+n.Addr, "--token", testAdminToken).Output()
	if err != nil || bytes.Count(exp, []byte("xmlUrl=")) != 50 {
		t.Fatalf("export: %v\n%s", err, exp)
	}
}
