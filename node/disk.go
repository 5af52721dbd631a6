package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/newsflow/newsflow/internal/tick"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"
)

// DiskConfig keeps a free-space floor under the data directory, so that a
// full disk is an operating condition, not a crash: Pebble, under the
// embedded log and the state, cannot survive a write that finds no space
// (it stops the process), so the node stops writing before that.
type DiskConfig struct {
	// MinFreeBytes is the free space of the data directory's file system
	// below which the node stops writing (default 256 MiB; negative: no
	// floor): ingestion answers 507 with the reason, the crawler appends
	// nothing, every stage holds (its tasks commit what they applied and
	// wait), and reads keep answering. Writing resumes on its own once
	// MinFreeBytes plus BallastBytes plus a tenth of MinFreeBytes are free.
	MinFreeBytes int64 `yaml:"min_free_bytes"`
	// BallastBytes is the size of a reserve file (EMERGENCY_BALLAST in the
	// data directory) kept while there is room for it, in the manner of
	// CockroachDB's ballast: when free space falls below the floor the node
	// deletes it, so that the writes already under way (memtable flushes,
	// compactions, the tasks' last commits) have room, and makes it again
	// once space returns. Default 64 MiB; negative: none.
	BallastBytes int64 `yaml:"ballast_bytes"`
	// CheckInterval is how often free space is read (default 1s); between
	// reads, ingestion counts what it writes against it.
	CheckInterval time.Duration `yaml:"check_interval"`
}

// DefaultDiskConfig returns the defaults the zero value stands for.
func DefaultDiskConfig() DiskConfig {
	return DiskConfig{MinFreeBytes: 256 << 20, BallastBytes: 64 << 20, CheckInterval: time.Second}
}

// Validate reports invalid values.
func (c DiskConfig) Validate() error {
	if c.CheckInterval < 0 {
		return errors.New("config: disk.check_interval must not be negative")
	}
	return nil
}

// BallastFile is the name of the reserve file in the data directory.
const BallastFile = "EMERGENCY_BALLAST"

// writeAmplification is how many bytes of disk a byte of ingested request
// takes at most before the next free-space reading: the log's WAL and
// memtable flush, the stages' state and outputs.
const writeAmplification = 4

// ErrDiskFull is the error of a write refused for want of disk space; its
// message says how much is free and what the floor is.
var ErrDiskFull = errors.New("insufficient storage")

// diskGuard watches the data directory's free space and holds the node's
// writers while it is below the floor. Allow and Held are safe for
// concurrent use; Run owns the periodic check.
type diskGuard struct {
	dir    string
	cfg    DiskConfig
	log    *slog.Logger
	statfs func(dir string) (free, size uint64, err error)
	hold   func(reason string)
	resume func()

	// free is the last reading less what Allow let through since.
	free atomic.Int64
	// low is the reason writes are held, nil while they are not.
	low   atomic.Pointer[string]
	gauge prometheus.Gauge

	mu sync.Mutex // serializes the transitions
}

func newDiskGuard(dir string, cfg DiskConfig, log *slog.Logger, reg prometheus.Registerer, hold func(string), resume func()) (*diskGuard, error) {
	g := &diskGuard{dir: dir, cfg: cfg, log: log, statfs: DiskSpace, hold: hold, resume: resume}
	g.gauge = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "newsflow_disk_low",
		Help: "1 while the data directory's free space is below disk.min_free_bytes and the node holds its writes (ingestion 507, crawler and stages waiting).",
	})
	if err := reg.Register(g.gauge); err != nil {
		return nil, fmt.Errorf("disk guard: register metrics: %w", err)
	}
	g.free.Store(1 << 62)
	return g, nil
}

// Allow returns an error wrapping ErrDiskFull, with the reason, unless a
// write of about n bytes of input may go ahead.
func (g *diskGuard) Allow(n int) error {
	if r := g.low.Load(); r != nil {
		return fmt.Errorf("%w: %s", ErrDiskFull, *r)
	}
	if g.cfg.MinFreeBytes < 0 {
		return nil
	}
	if free := g.free.Add(-writeAmplification * int64(n)); free < g.cfg.MinFreeBytes {
		// Between readings: read again now rather than guess.
		g.check()
		if r := g.low.Load(); r != nil {
			return fmt.Errorf("%w: %s", ErrDiskFull, *r)
		}
	}
	return nil
}

// Held returns the reason writes are held, and whether they are.
func (g *diskGuard) Held() (string, bool) {
	if r := g.low.Load(); r != nil {
		return *r, true
	}
	return "", false
}

// Run checks free space every CheckInterval until ctx is done. The first
// check is made by start.
func (g *diskGuard) Run(ctx context.Context) error {
	return tick.Every(ctx, g.cfg.CheckInterval, g.check)
}

// start makes the first check, and the ballast if there is room for it.
func (g *diskGuard) start() {
	g.check()
	if _, low := g.Held(); !low {
		g.makeBallast()
		g.check()
	}
}

// check reads free space and holds or resumes the writers.
func (g *diskGuard) check() {
	if g.cfg.MinFreeBytes < 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	free, _, err := g.statfs(g.dir)
	if err != nil {
		g.log.Warn("disk guard: read free space", "dir", g.dir, "err", err)
		return
	}
	g.free.Store(int64(free))
	floor := g.cfg.MinFreeBytes
	switch _, low := g.Held(); {
	case !low && int64(free) < floor:
		reason := fmt.Sprintf("disk nearly full: %s free, below disk.min_free_bytes (%s)", mib(int64(free)), mib(floor))
		g.low.Store(&reason)
		g.gauge.Set(1)
		g.hold(reason)
		removed := g.removeBallast()
		g.log.Error("disk nearly full: ingestion answers 507, crawling and every stage wait, reads go on; free space (or grow the volume) and the node resumes by itself",
			"dir", g.dir, "free", int64(free), "min_free_bytes", floor, "ballast_removed", removed)
	case low && int64(free) >= floor+max(g.cfg.BallastBytes, 0)+floor/10:
		g.low.Store(nil)
		g.gauge.Set(0)
		g.makeBallast()
		g.resume()
		g.log.Info("disk space back: writing resumes", "dir", g.dir, "free", int64(free))
	}
}

func (g *diskGuard) ballastPath() string { return filepath.Join(g.dir, BallastFile) }

// makeBallast creates the reserve file if it is missing and there is room
// for it above the floor. Called with mu held, or before Run.
func (g *diskGuard) makeBallast() {
	size := g.cfg.BallastBytes
	if size <= 0 {
		return
	}
	if st, err := os.Stat(g.ballastPath()); err == nil && st.Size() >= size {
		return
	}
	free, _, err := g.statfs(g.dir)
	if err != nil || int64(free)-size < g.cfg.MinFreeBytes {
		return
	}
	if err := allocate(g.ballastPath(), size); err != nil {
		g.log.Warn("disk guard: make the ballast file", "path", g.ballastPath(), "err", err)
		os.Remove(g.ballastPath())
	}
}

// removeBallast deletes the reserve file and reports whether there was one.
func (g *diskGuard) removeBallast() bool {
	return os.Remove(g.ballastPath()) == nil
}

// allocate makes a file of size bytes whose blocks are reserved on disk
// (not a sparse file, which would reserve nothing).
func allocate(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if err := unix.Fallocate(int(f.Fd()), 0, 0, size); err != nil {
		// A file system without fallocate: write zeros.
		if err := writeZeros(f, size); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func writeZeros(f *os.File, size int64) error {
	buf := make([]byte, 1<<20)
	for left := size; left > 0; {
		n := min(left, int64(len(buf)))
		if _, err := f.Write(buf[:n]); err != nil {
			return err
		}
		left -= n
	}
	return nil
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
