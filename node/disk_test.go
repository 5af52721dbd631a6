package node

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// fakeDisk is a file system whose free space the test sets; the ballast
// file, when it exists, takes its size from it.
type fakeDisk struct {
	dir  string
	free atomic.Int64
}

func (d *fakeDisk) statfs(string) (uint64, uint64, error) {
	free := d.free.Load()
	if st, err := os.Stat(filepath.Join(d.dir, BallastFile)); err == nil {
		free -= st.Size()
	}
	return uint64(max(free, 0)), 1 << 40, nil
}

// TestDiskGuard: the guard holds the node's writers when free space falls
// below the floor, deletes its ballast then, refuses ingestion with the
// reason, and resumes (making the ballast again) only once the floor, the
// ballast and a margin are free; Allow counts what it lets through
// between readings.
func TestDiskGuard(t *testing.T) {
	const mb = 1 << 20
	d := &fakeDisk{dir: t.TempDir()}
	d.free.Store(100 * mb)
	var held atomic.Pointer[string]
	g, err := newDiskGuard(d.dir, DiskConfig{MinFreeBytes: 20 * mb, BallastBytes: 8 * mb, CheckInterval: time.Hour},
		slog.New(slog.DiscardHandler), prometheus.NewRegistry(),
		func(r string) { held.Store(&r) }, func() { held.Store(nil) })
	if err != nil {
		t.Fatal(err)
	}
	g.statfs = d.statfs
	g.start()
	ballast := filepath.Join(d.dir, BallastFile)
	if st, err := os.Stat(ballast); err != nil || st.Size() != 8*mb {
		t.Fatalf("ballast after start: %v, %v", st, err)
	}
	if err := g.Allow(1 * mb); err != nil {
		t.Fatalf("a write with 92 MiB free: %v", err)
	}
	// Writes Allow lets through count against the last reading: 4x their
	// size, so 18 MiB of requests bring 92 MiB down past the floor.
	for range 17 {
		if err := g.Allow(1 * mb); err != nil {
			t.Fatalf("refused early: %v", err)
		}
	}
	d.free.Store(27 * mb) // what those writes took, read at the next check
	err = g.Allow(1 * mb)
	if !errors.Is(err, ErrDiskFull) || !strings.Contains(err.Error(), "below disk.min_free_bytes (20.0 MiB)") {
		t.Fatalf("a write below the floor: %v", err)
	}
	if r := held.Load(); r == nil || !strings.Contains(*r, "disk nearly full") {
		t.Fatalf("the stages were not held: %v", r)
	}
	if _, err := os.Stat(ballast); !os.IsNotExist(err) {
		t.Errorf("the ballast is still there below the floor: %v", err)
	}
	// Some space returns, not enough: still held.
	d.free.Store(29 * mb)
	g.check()
	if _, low := g.Held(); !low || held.Load() == nil {
		t.Fatal("resumed below floor + ballast + margin")
	}
	d.free.Store(31 * mb) // 20 + 8 + 2 = 30
	g.check()
	if reason, low := g.Held(); low || held.Load() != nil {
		t.Fatalf("still held with 31 MiB free: %q", reason)
	}
	if st, err := os.Stat(ballast); err != nil || st.Size() != 8*mb {
		t.Errorf("ballast after resuming: %v, %v", st, err)
	}
	if err := g.Allow(100); err != nil {
		t.Errorf("a write after resuming: %v", err)
	}
}

// A node that starts on a disk already below the floor starts held: it
// makes no ballast and refuses ingestion, but opens.
func TestDiskGuardStartsLow(t *testing.T) {
	d := &fakeDisk{dir: t.TempDir()}
	d.free.Store(5 << 20)
	held := false
	g, err := newDiskGuard(d.dir, DiskConfig{MinFreeBytes: 20 << 20, BallastBytes: 8 << 20, CheckInterval: time.Hour},
		slog.New(slog.DiscardHandler), prometheus.NewRegistry(), func(string) { held = true }, func() { held = false })
	if err != nil {
		t.Fatal(err)
	}
	g.statfs = d.statfs
	g.start()
	if !held || g.Allow(1) == nil {
		t.Fatalf("held %v; a write was allowed below the floor", held)
	}
	if _, err := os.Stat(filepath.Join(d.dir, BallastFile)); !os.IsNotExist(err) {
		t.Errorf("a ballast was made below the floor: %v", err)
	}
}
