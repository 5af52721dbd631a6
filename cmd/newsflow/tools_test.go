package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/cmd/newsflow/nodeproc"
	"github.com/newsflow/newsflow/engine"
)

// newsflow topology lists the stages a node with the same configuration
// runs: the same list, in the same order, as the node's
// /api/v1/admin/topology, and its table names every one.
func TestTopologyIsTheNodes(t *testing.T) {
	data := t.TempDir()
	n := runNode(t, data, nil)
	var running []engine.Stage
	if err := getJSON(n.URL("/api/v1/admin/topology"), &running); err != nil {
		t.Fatal(err)
	}
	if len(running) < 9 {
		t.Fatalf("the node runs %d stages, want at least 9", len(running))
	}
	args := []string{"topology", "--config", "../../configs/newsflow.yaml", "--data", data}
	out, err := exec.Command(binPath, append(args, "--json")...).Output()
	if err != nil {
		t.Fatalf("topology --json: %v", err)
	}
	var listed []engine.Stage
	if err := json.Unmarshal(out, &listed); err != nil {
		t.Fatal(err)
	}
	// Compare as JSON: Options decode to maps on both sides.
	a, _ := json.Marshal(listed)
	b, _ := json.Marshal(running)
	if !bytes.Equal(a, b) {
		t.Fatalf("newsflow topology lists\n%s\nthe node runs\n%s", a, b)
	}
	table, err := exec.Command(binPath, args...).Output()
	if err != nil {
		t.Fatalf("topology: %v", err)
	}
	for _, s := range running {
		if !bytes.Contains(table, []byte("\n"+s.Name+" ")) {
			t.Errorf("newsflow topology does not list %s %s:\n%s", s.Kind, s.Name, table)
		}
	}
}

// newsflow replay --operator with a name that is no operator says which
// names are, before it opens anything.
func TestReplayUnknownOperator(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"replay", "--from-offset", "0", "--operator", "trending,bogus",
		"--config", "../../configs/newsflow.yaml", "--data", t.TempDir()}, &stdout, &stderr)
	if err == nil {
		t.Fatal("replay of an unknown operator succeeded")
	}
	for _, want := range []string{`"bogus"`, "trending, trending-changes, articles, stories, search, reads-enrich, interest"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}

// newsflow produce with no node to reach says so on stderr at once (the
// address and the error), keeps saying so while it retries, and gives up
// after --retry-for with a non-zero exit.
func TestProduceNodeUnreachable(t *testing.T) {
	file := filepath.Join(t.TempDir(), "shares.ndjson")
	if err := os.WriteFile(file, []byte(`{"event_id":"e1","article_id":"a1","user_id":"u1","timestamp":1}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := "http://" + nodeproc.FreeAddr(t, "") // nothing listens there
	start := time.Now()
	cmd := exec.Command(binPath, "produce", "shares", file, "--addr", addr, "--retry-for", "2s")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	took := time.Since(start)
	if err == nil {
		t.Fatal("produce succeeded without a node")
	}
	if took > 10*time.Second {
		t.Fatalf("produce took %s to give up with --retry-for 2s", took)
	}
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	if len(lines) < 2 || !strings.Contains(lines[0], "cannot reach the node at "+addr) || !strings.Contains(lines[0], "connection refused") ||
		!strings.Contains(lines[0], "retrying for up to 2s") || !strings.Contains(lines[len(lines)-1], "giving up after 2s") {
		t.Fatalf("stderr:\n%s", stderr.String())
	}
	// The default is short and said in the usage.
	if !strings.Contains(usage, "--retry-for (30s)") || produceRetryFor != 30*time.Second {
		t.Fatalf("the usage does not give --retry-for's default of %s", produceRetryFor)
	}

	// While it retries it says so at every report interval.
	var msgs bytes.Buffer
	p := &producer{base: addr, path: "/api/v1/events/share/batch", retryFor: 700 * time.Millisecond, report: 100 * time.Millisecond,
		client: &http.Client{Timeout: time.Second}, stderr: &msgs}
	if err := p.send(context.Background(), []byte("{}\n"), 1); err == nil || !strings.Contains(err.Error(), "cannot reach the node at "+addr) {
		t.Fatalf("send: %v", err)
	}
	if n := strings.Count(msgs.String(), "still retrying"); n < 2 {
		t.Fatalf("%d reports while retrying:\n%s", n, msgs.String())
	}
}
