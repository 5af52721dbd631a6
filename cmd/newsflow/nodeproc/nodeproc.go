// Package nodeproc runs `newsflow run` as a subprocess, for the tests and
// benchmarks that need the real binary: start, kill, restart, wait until it
// is ready or has committed everything in its log, read its progress and
// peak memory. Its output goes to a file, shown when the test fails.
//
// It is the one process harness of the module (cmd/newsflow's process
// tests and bench/ both use it).
package nodeproc

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The tokens a node started here accepts: the admin token, and the
// ingestion token (events for any user, articles).
const (
	AdminToken  = "test-admin-token"
	IngestToken = "test-ingest-token"
)

var built struct {
	once sync.Once
	dir  string // temporary directory holding the binary
	bin  string
	root string // module root
	err  error
}

// BinaryEnv names a newsflow binary the process tests and benchmarks run
// instead of building one from the checkout: another release's, to
// measure it beside this one.
const BinaryEnv = "NEWSFLOW_TEST_BINARY"

// Build builds ./cmd/newsflow once per test process, from the module root
// (found with go env GOMOD), and returns the binary's path and the root;
// with BinaryEnv set it uses that binary instead. Call Remove when the
// tests are done (TestMain).
func Build() (bin, root string, err error) {
	built.once.Do(func() {
		if b := os.Getenv(BinaryEnv); b != "" {
			// A binary built elsewhere (another release, to compare with).
			built.bin, built.err = b, nil
			if _, err := os.Stat(b); err != nil {
				built.err = fmt.Errorf("%s: %w", BinaryEnv, err)
			}
			out, err := exec.Command("go", "env", "GOMOD").Output()
			if err == nil {
				built.root = filepath.Dir(strings.TrimSpace(string(out)))
			}
			return
		}
		out, err := exec.Command("go", "env", "GOMOD").Output()
		if err != nil {
			built.err = fmt.Errorf("go env GOMOD: %w", err)
			return
		}
		gomod := strings.TrimSpace(string(out))
		if gomod == "" || gomod == os.DevNull {
			built.err = errors.New("not inside a Go module")
			return
		}
		built.root = filepath.Dir(gomod)
		if built.dir, err = os.MkdirTemp("", "newsflow-bin"); err != nil {
			built.err = err
			return
		}
		built.bin = filepath.Join(built.dir, "newsflow")
		cmd := exec.Command("go", "build", "-o", built.bin, "./cmd/newsflow")
		cmd.Dir = built.root
		if out, err := cmd.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build ./cmd/newsflow: %v\n%s", err, out)
		}
	})
	return built.bin, built.root, built.err
}

// Binary is Build for a test, which fails if the build does.
func Binary(tb testing.TB) (bin, root string) {
	tb.Helper()
	bin, root, err := Build()
	if err != nil {
		tb.Fatal(err)
	}
	return bin, root
}

// Remove deletes the binary Binary built.
func Remove() {
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
}

// FreeAddr returns an address of the local IP ip (127.0.0.1 if empty) with
// a port nothing listens on.
func FreeAddr(tb testing.TB, ip string) string {
	tb.Helper()
	freeAddrs.Lock()
	defer freeAddrs.Unlock()
	for {
		ln, err := net.Listen("tcp", net.JoinHostPort(cmp.Or(ip, "127.0.0.1"), "0"))
		if err != nil {
			tb.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		// A port closed again may be given out again: one address for a
		// node's HTTP and Raft listeners made it fail to start.
		if !freeAddrs.given[addr] {
			freeAddrs.given[addr] = true
			return addr
		}
	}
}

// freeAddrs are the addresses FreeAddr handed out in this process.
var freeAddrs = struct {
	sync.Mutex
	given map[string]bool
}{given: map[string]bool{}}

// Options says how to run a node.
type Options struct {
	// DataDir is the node's data directory (default: a new temporary one).
	DataDir string
	// Listen is the HTTP address the node listens on, and Addr the one
	// the test reaches it at (both default to a free loopback port).
	Listen, Addr string
	// Env is added to the node's environment, after the defaults: the
	// tokens above, crawling off, this process's environment without
	// NEWSFLOW_BENCH_* (which the node would reject as unknown settings).
	Env []string
	// Wrap runs the node (e.g. ip netns exec NAME), if set.
	Wrap []string
	// Args are added to the run command's.
	Args []string
	// Binary runs this newsflow binary instead of Build's: another
	// release's, to measure it beside this one in the same test.
	Binary string
}

// Proc is a `newsflow run` subprocess with the default configuration.
type Proc struct {
	tb      testing.TB
	bin     string
	Args    []string // the command line after the binary
	Env     []string
	Wrap    []string
	Addr    string // where the test reaches the node's HTTP API
	DataDir string
	LogPath string

	mu    sync.Mutex
	cmd   *exec.Cmd
	waitc chan error
}

// New returns a node, not started yet; it is killed when the test ends.
func New(tb testing.TB, opts Options) *Proc {
	tb.Helper()
	bin, root := Binary(tb)
	// This checkout's configs/newsflow.yaml states exactly its defaults
	// (node.TestShippedConfigMatchesDefaults), so a binary built from
	// elsewhere runs without it, on its own defaults: an older release
	// refuses to start on a file naming settings it does not know.
	config := []string{"--config", filepath.Join(root, "configs", "newsflow.yaml")}
	if opts.Binary != "" {
		bin = opts.Binary
	}
	if opts.Binary != "" || os.Getenv(BinaryEnv) != "" {
		config = nil
	}
	dir := tb.TempDir()
	if opts.Addr == "" {
		opts.Addr = FreeAddr(tb, "")
	}
	n := &Proc{tb: tb, bin: bin, Env: opts.Env, Wrap: opts.Wrap, Addr: opts.Addr,
		DataDir: cmp.Or(opts.DataDir, filepath.Join(dir, "data")), LogPath: filepath.Join(dir, "node.log")}
	n.Args = append(append(append([]string{"run"}, config...), "--data", n.DataDir,
		"--http", cmp.Or(opts.Listen, opts.Addr), "--log-level", "warn"), opts.Args...)
	tb.Cleanup(func() {
		n.Kill()
		if tb.Failed() {
			log, _ := os.ReadFile(n.LogPath)
			tb.Logf("node %s: warnings and errors (last 40, without Raft's own):\n%s", n.Addr, Problems(string(log), 40))
			tb.Logf("node %s: log tail:\n%s", n.Addr, n.LogTail(4000))
		}
	})
	return n
}

// Start is New and Start.
func Start(tb testing.TB, opts Options) *Proc {
	tb.Helper()
	n := New(tb, opts)
	n.Start()
	return n
}

// env is the environment of a node: this process's without the
// benchmarks' NEWSFLOW_BENCH_* variables, the tokens, no crawling (the
// tests are about the stream, not the internet), the request and share
// limits off for the node's own host (the tests and benchmarks are load
// generators on it, not clients to limit; a test of the limits passes
// NEWSFLOW_HTTP_RATE_EXEMPT_LOOPBACK=false), then extra.
func env(extra []string) []string {
	var e []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "NEWSFLOW_BENCH_") {
			e = append(e, kv)
		}
	}
	e = append(e, "NEWSFLOW_CRAWL_ENABLED=false", "NEWSFLOW_AUTH_ADMIN_TOKEN="+AdminToken,
		"NEWSFLOW_AUTH_INGEST_TOKEN="+IngestToken, "NEWSFLOW_HTTP_RATE_EXEMPT_LOOPBACK=true")
	return append(e, extra...)
}

// Start starts the process.
func (n *Proc) Start() {
	n.tb.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	logf, err := os.OpenFile(n.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		n.tb.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(n.bin, n.Args...)
	if len(n.Wrap) > 0 {
		cmd = exec.Command(n.Wrap[0], append(append(n.Wrap[1:len(n.Wrap):len(n.Wrap)], n.bin), n.Args...)...)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = env(n.Env)
	if err := cmd.Start(); err != nil {
		n.tb.Fatal(err)
	}
	n.cmd, n.waitc = cmd, make(chan error, 1)
	go func() { n.waitc <- cmd.Wait() }()
}

// Kill sends SIGKILL and waits until the process is gone.
func (n *Proc) Kill() { _ = n.Stop(syscall.SIGKILL) }

// Stop sends sig and waits until the process is gone (after SIGTERM: once
// it has committed and closed everything), and returns how it exited. It
// fails the test if the process is still running after two minutes.
func (n *Proc) Stop(sig syscall.Signal) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return nil
	}
	_ = n.cmd.Process.Signal(sig)
	var err error
	select {
	case err = <-n.waitc:
	case <-time.After(2 * time.Minute):
		n.tb.Fatalf("node still running 2m after %v\nnode log tail:\n%s", sig, n.LogTail(3000))
	}
	n.cmd = nil
	return err
}

// Running reports whether the process was started and has not been
// stopped.
func (n *Proc) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd != nil
}

// Pid returns the process id (0 when not running).
func (n *Proc) Pid() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

// URL returns the node's URL of path.
func (n *Proc) URL(path string) string { return "http://" + n.Addr + path }

// Fatalf fails the test with the tail of the node's log.
func (n *Proc) Fatalf(format string, args ...any) {
	n.tb.Helper()
	n.tb.Fatalf("%s\nnode log tail:\n%s", fmt.Sprintf(format, args...), n.LogTail(3000))
}

// LogTail returns the last limit bytes of the node's log.
func (n *Proc) LogTail(limit int) string {
	b, _ := os.ReadFile(n.LogPath)
	return string(b[len(b)-min(len(b), limit):])
}

// Problems returns the last warning and error lines of a node's log,
// leaving out Raft's connection complaints, which drown everything else
// while a peer is down.
func Problems(log string, last int) string {
	var out []string
	for l := range strings.Lines(log) {
		if (strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR")) && !strings.Contains(l, "component=cluster") {
			out = append(out, strings.TrimSuffix(l, "\n"))
		}
	}
	return strings.Join(out[max(0, len(out)-last):], "\n")
}

// exited fails the test if the process has exited.
func (n *Proc) exited(doing string) {
	n.tb.Helper()
	select {
	case err := <-n.waitc:
		n.waitc <- err
		n.Fatalf("node exited %s: %v", doing, err)
	default:
	}
}

// WaitReady polls /health/ready every 5ms until it answers 200 and returns
// how long that took; it fails the test if the node exits first.
func (n *Proc) WaitReady(timeout time.Duration) time.Duration {
	n.tb.Helper()
	start := time.Now()
	client := &http.Client{Timeout: time.Second}
	for time.Since(start) < timeout {
		resp, err := client.Get(n.URL("/health/ready"))
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return time.Since(start)
			}
		}
		n.exited("while starting")
		time.Sleep(5 * time.Millisecond)
	}
	n.Fatalf("node not ready after %s", timeout)
	return 0
}

// Progress is the part of /api/v1/admin/progress the tests read.
type Progress struct {
	Ready    bool `json:"ready"`
	CaughtUp bool `json:"caught_up"`
	Inputs   []struct {
		Stage     string `json:"stage"`
		Topic     string `json:"topic"`
		Committed int64  `json:"committed"`
	} `json:"inputs"`
}

// Applied is the number of shares the trending tasks have committed from
// their own source partitions (everything, when producers use murmur2).
func (p Progress) Applied() int64 {
	var n int64
	for _, in := range p.Inputs {
		if in.Stage == "trending" && in.Topic == "shares" {
			n += in.Committed
		}
	}
	return n
}

// Progress reads the node's progress.
func (n *Proc) Progress() (Progress, error) {
	var p Progress
	req, err := http.NewRequest(http.MethodGet, n.URL("/api/v1/admin/progress"), nil)
	if err != nil {
		return p, err
	}
	req.Header.Set("Authorization", "Bearer "+AdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return p, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return p, err
	}
	if resp.StatusCode != http.StatusOK {
		return p, fmt.Errorf("progress: %d %s", resp.StatusCode, body)
	}
	return p, json.Unmarshal(body, &p)
}

// WaitCaughtUp polls the progress until the node has committed everything
// in its log, and returns it.
func (n *Proc) WaitCaughtUp(timeout time.Duration) Progress {
	n.tb.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if p, err := n.Progress(); err == nil && p.CaughtUp {
			return p
		}
		n.exited("before catching up")
		time.Sleep(20 * time.Millisecond)
	}
	n.Fatalf("node not caught up after %s", timeout)
	return Progress{}
}

// PeakRSSMB returns the process's peak resident set size (VmHWM) in MB.
func (n *Proc) PeakRSSMB() float64 {
	n.tb.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", n.Pid()))
	if err != nil {
		n.tb.Fatalf("peak RSS: %v", err)
	}
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				n.tb.Fatalf("peak RSS: %q: %v", line, err)
			}
			return kb * 1024 / 1e6
		}
	}
	n.tb.Fatal("peak RSS: no VmHWM in /proc/PID/status")
	return 0
}

// CPUSeconds returns the user and system CPU time the process has used
// (from /proc/PID/stat, in clock ticks of 1/100 s).
func (n *Proc) CPUSeconds() float64 {
	n.tb.Helper()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", n.Pid()))
	if err != nil {
		n.tb.Fatal(err)
	}
	// The fields after the command, which is in parentheses: state is
	// field 3, utime 14 and stime 15.
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(f) < 13 {
		n.tb.Fatalf("short /proc/PID/stat: %q", stat)
	}
	utime, err1 := strconv.ParseFloat(f[11], 64)
	stime, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		n.tb.Fatalf("parse /proc/PID/stat %q: %v %v", stat, err1, err2)
	}
	return (utime + stime) / 100
}

// Command returns the binary run with args and the node's environment
// (for the CLI commands that talk to a node: produce, sources, status).
func (n *Proc) Command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, n.bin, args...)
	cmd.Env = env(n.Env)
	return cmd
}

// WaitExit waits up to timeout for the process to exit on its own (after
// `newsflow leave`, say) and returns how it exited; exited is false if it
// is still running.
func (n *Proc) WaitExit(timeout time.Duration) (err error, exited bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return nil, true
	}
	select {
	case err := <-n.waitc:
		n.cmd = nil
		return err, true
	case <-time.After(timeout):
		return nil, false
	}
}
