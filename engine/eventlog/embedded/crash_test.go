package embedded

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/newsflow/newsflow/engine/eventlog"
)

const crashDirEnv = "NEWSFLOW_EMBEDDED_CRASH_DIR"

// TestCrashChild is the process TestCrashKeepsAcknowledgedRecords kills: it
// appends from several goroutines and prints every acknowledged record.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("run by TestCrashKeepsAcknowledgedRecords")
	}
	l, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := eventlog.EnsureTopic(ctx, l, "crash", 2); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				batch := make([]*eventlog.Record, 1+i%5)
				for j := range batch {
					batch[j] = &eventlog.Record{Topic: "crash", Partition: int32(w % 2),
						Value: fmt.Appendf(nil, "%d-%d-%d", w, i, j), Timestamp: int64(i)}
				}
				if err := l.Append(ctx, batch); err != nil {
					fmt.Fprintln(os.Stderr, err)
					return
				}
				mu.Lock()
				for _, r := range batch {
					fmt.Fprintf(out, "%d %d %s\n", r.Partition, r.Offset, r.Value)
				}
				out.Flush()
				mu.Unlock()
			}
		})
	}
	wg.Wait()
}

// TestCrashKeepsAcknowledgedRecords kills a process that is appending
// (fsync always) and checks that every record it saw acknowledged is there,
// at the offset it was given, after a reopen.
func TestCrashKeepsAcknowledgedRecords(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a subprocess")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	type ack struct {
		p   int32
		off int64
	}
	acked := map[string]ack{}
	sc := bufio.NewScanner(stdout)
	deadline := time.Now().Add(30 * time.Second)
	for len(acked) < 3000 && time.Now().Before(deadline) && sc.Scan() {
		var a ack
		var v string
		if _, err := fmt.Sscanf(sc.Text(), "%d %d %s", &a.p, &a.off, &v); err != nil {
			t.Fatalf("child wrote %q: %v", sc.Text(), err)
		}
		acked[v] = a
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	if err := cmd.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("child exited with %v before it was killed; stderr:\n%s", err, stderr.String())
	}
	if len(acked) < 100 {
		t.Fatalf("child acknowledged only %d records; stderr:\n%s", len(acked), stderr.String())
	}

	t.Logf("child acknowledged %d records before SIGKILL", len(acked))
	l := openTestLog(t, Options{Dir: dir})
	byValue := map[string]ack{}
	for p := int32(0); p < 2; p++ {
		for i, r := range readRange(t, l, tpOf("crash", p), 0) {
			if r.Offset != int64(i) {
				t.Fatalf("partition %d position %d has offset %d", p, i, r.Offset)
			}
			byValue[string(r.Value)] = ack{p, r.Offset}
		}
	}
	for v, a := range acked {
		if got, ok := byValue[v]; !ok || got != a {
			t.Fatalf("acknowledged record %s at %d/%d is %v after the crash (found %v)", v, a.p, a.off, got, ok)
		}
	}
	// Appending continues the numbering.
	r := &eventlog.Record{Topic: "crash", Value: []byte("after")}
	mustAppend(t, l, r)
	if o := mustOffsets(t, l, tpOf("crash", 0)); r.Offset != o.End-1 {
		t.Fatalf("append after crash got offset %d, end is %d", r.Offset, o.End)
	}
}
