package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKcatProducer has a real Kafka client, kcat (librdkafka, whose default
// partitioner is not murmur2), write shares to the shares topic of a node in
// Kafka mode, with keys and without, every record twice; the trending
// answers equal the exact counts. Malformed records written the same way land in the dead-letter
// topic with their reason while the node keeps counting.
func TestKcatProducer(t *testing.T) {
	kcat, broker, n := kcatNode(t)

	stream := genShares(20_000, 300, 44)
	dir := t.TempDir()
	runKcat := func(args ...string) {
		t.Helper()
		cmd := exec.Command(kcat, append([]string{"-b", broker, "-q"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kcat %v: %v\n%s", args, err, out)
		}
	}
	produceFile := func(name string, b []byte, keyed bool) {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		args := []string{"-P", "-t", "shares", "-l", path}
		if keyed {
			args = append(args, "-K", "\t")
		}
		runKcat(args...)
	}
	// Events go out in time order, in chunks of ~1.5 minutes of event time,
	// alternating keyed records (key = article_id, librdkafka's CRC32
	// partitioner) and records without a key (random partition). Then
	// kcat sends every record again (unkeyed ones land in other
	// partitions): the repeated event ids count once.
	const chunks = 20
	per := len(stream.lines) / chunks
	for c := 0; c < 2*chunks; c++ {
		c := c % chunks
		var keyed, unkeyed bytes.Buffer
		for i, l := range stream.lines[c*per : (c+1)*per] {
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
		produceFile(fmt.Sprintf("keyed-%d", c), keyed.Bytes(), true)
		produceFile(fmt.Sprintf("unkeyed-%d", c), unkeyed.Bytes(), false)
	}
	now := time.Now()
	bad := strings.Join([]string{
		`{"event_id":"x1","article_id":"zz-bad",`,                                  // truncated JSON
		`{"event_id":"x2","article_id":"zz-bad","user_id":"u","timestamp":"soon"}`, // bad timestamp
		`{"event_id":"x3","article_id":"zz-bad","user_id":7,"timestamp":1}`,        // wrong type
		fmt.Sprintf(`{"event_id":"x4","article_id":"zz-bad","user_id":"u","timestamp":%d}`, now.Add(-48*time.Hour).UnixMilli()),
		fmt.Sprintf(`{"event_id":"x5","article_id":"zz-bad","user_id":"u","timestamp":%d}`, now.Add(time.Hour).UnixMilli()),
	}, "\n") + "\n"
	produceFile("bad", []byte(bad), false)
	// A 1 MiB value, from a Go client (librdkafka caps messages at 1 MB).
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.ProducerBatchMaxBytes(4<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	huge := `{"event_id":"x6","article_id":"zz-bad","user_id":"u","timestamp":1,"pad":"` + strings.Repeat("x", 1<<20) + `"}`
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: "shares", Key: []byte("zz-bad"), Value: []byte(huge)}).FirstErr(); err != nil {
		t.Fatalf("produce 1 MiB value: %v", err)
	}

	n.WaitCaughtUp(2 * time.Minute)
	verifyCounts(t, n, stream.counts)

	// The bad records are in the dead-letter topic with their reasons.
	cmd := exec.Command(kcat, "-b", broker, "-q", "-C", "-t", "newsflow-deadletter", "-e", "-f", "%h\n")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kcat consume dead letters: %v\n%s", err, out)
	}
	for _, want := range []string{"malformed JSON", `field \"timestamp\": not an RFC 3339 time`, `field \"user_id\": must be a string`,
		"in the past (limit 23h45m0s) relative to the record time", "in the future (limit 5m0s) relative to the record time",
		"event larger than 8192 bytes"} {
		if !bytes.Contains(out, []byte(want)) && !bytes.Contains(out, []byte(strings.ReplaceAll(want, `\"`, `"`))) {
			t.Errorf("dead letters lack %q:\n%s", want, out)
		}
	}
	if got := bytes.Count(out, []byte("nf-dlq-reason=")); got != 6 {
		t.Errorf("%d dead letters, want 6:\n%.3000s", got, out)
	}
}

// kcatNode skips the test in -short mode or without kcat, and otherwise
// starts a kfake cluster and a node in Kafka mode on it.
func kcatNode(t *testing.T) (kcat, broker string, n *nodeProc) {
	t.Helper()
	if testing.Short() {
		t.Skip("kcat test skipped in -short mode")
	}
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat not installed (apt-get install -y kcat); .ci/run installs it")
	}
	broker = newKfake(t).ListenAddrs()[0]
	n = runNode(t, t.TempDir(), nil, "--brokers", broker)
	return kcat, broker, n
}
