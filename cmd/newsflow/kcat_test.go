package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestKcatProducer has a real Kafka client, kcat (librdkafka, whose default
// partitioner is not murmur2), write shares to the shares topic of a node in
// Kafka mode, with keys and without; the trending answers equal the exact
// counts. Malformed records written the same way land in the dead-letter
// topic with their reason while the node keeps counting.
func TestKcatProducer(t *testing.T) {
	if testing.Short() {
		t.Skip("kcat test skipped in -short mode")
	}
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat not installed (apt-get install -y kcat); .ci/run installs it")
	}
	cluster := newKfake(t)
	broker := cluster.ListenAddrs()[0]
	n := startNode(t, t.TempDir(), "--brokers", broker)
	n.waitReady(30 * time.Second)

	stream := genShares(20_000, 300, 44)
	dir := t.TempDir()
	var keyed, unkeyed bytes.Buffer
	for i, l := range stream.lines {
		if i%3 == 0 {
			unkeyed.Write(l)
			unkeyed.WriteByte('\n')
			continue
		}
		keyed.Write(articleIDOf(l))
		keyed.WriteByte('\t')
		keyed.Write(l)
		keyed.WriteByte('\n')
	}
	bad := strings.Join([]string{
		`{"event_id":"x1","article_id":"zz-bad",`,                                  // truncated JSON
		`{"event_id":"x2","article_id":"zz-bad","user_id":"u","timestamp":"soon"}`, // bad timestamp
		`{"event_id":"x3","article_id":"zz-bad","user_id":7,"timestamp":1}`,        // wrong type
	}, "\n") + "\n"
	files := map[string][]byte{"keyed": keyed.Bytes(), "unkeyed": unkeyed.Bytes(), "bad": []byte(bad)}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	runKcat := func(args ...string) {
		t.Helper()
		cmd := exec.Command(kcat, append([]string{"-b", broker, "-q"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kcat %v: %v\n%s", args, err, out)
		}
	}
	runKcat("-P", "-t", "shares", "-K", "\t", "-l", filepath.Join(dir, "keyed"))
	runKcat("-P", "-t", "shares", "-l", filepath.Join(dir, "unkeyed"))
	runKcat("-P", "-t", "shares", "-l", filepath.Join(dir, "bad"))

	n.waitCaughtUp(2 * time.Minute)
	verifyCounts(t, n, stream.counts)

	// The three bad records are in the dead-letter topic with reasons.
	cmd := exec.Command(kcat, "-b", broker, "-q", "-C", "-t", "newsflow-deadletter", "-e", "-f", "%h\n")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kcat consume dead letters: %v\n%s", err, out)
	}
	for _, want := range []string{"malformed JSON", `field \"timestamp\": not an RFC 3339 time`, `field \"user_id\": must be a string`} {
		if !bytes.Contains(out, []byte(want)) && !bytes.Contains(out, []byte(strings.ReplaceAll(want, `\"`, `"`))) {
			t.Errorf("dead letters lack %q:\n%s", want, out)
		}
	}
	if got := bytes.Count(out, []byte("nf-dlq-reason=")); got != 3 {
		t.Errorf("%d dead letters, want 3:\n%s", got, out)
	}
}
