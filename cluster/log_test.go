package cluster

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Raft's warnings and errors reach slog at their own level, with their
// fields; its info and debug lines do not.
func TestRaftLoggerLevels(t *testing.T) {
	var mu sync.Mutex
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	rl := raftLogger(l)
	rl.Debug("heartbeat sent", "peer", "b")
	rl.Info("entering follower state", "leader", "a")
	rl.Warn("heartbeat timeout reached", "last-leader-addr", "10.0.0.1:7000")
	rl.Error("failed to contact", "server-id", "c", "error", "dial tcp: refused")
	rl.Named("snapshot").Warn("slow")

	mu.Lock()
	out := buf.String()
	mu.Unlock()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3 (warn, error, named warn):\n%s", len(lines), out)
	}
	for i, want := range []string{
		`level=WARN msg="raft: heartbeat timeout reached" last-leader-addr=10.0.0.1:7000`,
		`level=ERROR msg="raft: failed to contact" server-id=c error="dial tcp: refused"`,
		`level=WARN msg="raft.snapshot: slow"`,
	} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("line %d: %s\nwant it to contain %s", i, lines[i], want)
		}
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

// Close may be called from several goroutines at once: one closes, the
// others wait for it and get the same result.
func TestNodeCloseConcurrently(t *testing.T) {
	dir := t.TempDir()
	m := startMember(t, "a", dir, "127.0.0.1:0", "127.0.0.1:0", true)
	n := m.node
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() { errs[i] = n.Close() })
	}
	wg.Wait()
	for i, err := range errs[1:] {
		if err != errs[0] {
			t.Errorf("Close %d: %v, the first returned %v", i+1, err, errs[0])
		}
	}
	m.srv.Close()
	m.db.Close()
	m.node = nil
}

// A Raft log line that repeats (a heartbeat to a member that is down) is
// logged once, then once per repeatInterval with how often it came.
func TestRaftLogRepeatsOnce(t *testing.T) {
	var buf bytes.Buffer
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := &slogSink{l: slog.New(slog.NewTextHandler(&buf, nil)), now: func() time.Time { return now }, seen: map[string]*repeated{}}
	for range 60 { // every 500ms for 30s
		s.Accept("raft", hclog.Error, "failed to heartbeat to", "peer", "10.0.0.3:7000")
		now = now.Add(500 * time.Millisecond)
	}
	s.Accept("raft", hclog.Warn, "another line")
	s.Accept("raft", hclog.Error, "failed to heartbeat to", "peer", "10.0.0.3:7000")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines logged, want 3:\n%s", len(lines), buf.String())
	}
	if strings.Contains(lines[0], "repeated") || !strings.Contains(lines[1], "another line") || !strings.Contains(lines[2], "repeated=59") {
		t.Errorf("lines:\n%s", buf.String())
	}
	s.Accept("raft", hclog.Info, "an info line")
	if strings.Count(buf.String(), "\n") != 3 {
		t.Error("an info line was logged")
	}
}
