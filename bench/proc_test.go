package bench

import (
	"bufio"
	"bytes"
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
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
)

// The newsflow binary, built once per test process by binary and removed
// by cleanupBinary.
var built struct {
	once sync.Once
	dir  string // temporary directory holding the binary
	bin  string
	root string // module root
	err  error
}

// binary builds ./cmd/newsflow from the module root (found with go env
// GOMOD) and returns the binary's path and the root.
func binary(b *testing.B) (bin, root string) {
	b.Helper()
	built.once.Do(func() {
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
		if built.dir, err = os.MkdirTemp("", "newsflow-bench-bin"); err != nil {
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
	if built.err != nil {
		b.Fatal(built.err)
	}
	return built.bin, built.root
}

func cleanupBinary() {
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
}

// childEnv is the environment of the newsflow subprocesses: this process's
// without the benchmarks' own NEWSFLOW_BENCH_* variables, which newsflow
// would reject as unknown settings.
// benchAdminToken is the admin token benchmark nodes accept, and
// benchIngestToken their ingestion token (reads for any user, articles).
const (
	benchAdminToken  = "bench-admin-token"
	benchIngestToken = "bench-ingest-token"
)

func childEnv() []string {
	// The benchmarks log many users in from one address.
	env := []string{"NEWSFLOW_AUTH_ADMIN_TOKEN=" + benchAdminToken, "NEWSFLOW_AUTH_INGEST_TOKEN=" + benchIngestToken,
		"NEWSFLOW_AUTH_LOGIN_BURST_PER_IP=1000000"}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "NEWSFLOW_BENCH_") {
			env = append(env, kv)
		}
	}
	return env
}

// freeAddr returns a loopback address with a port nothing listens on.
func freeAddr(b *testing.B) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// nodeProc is a `newsflow run` subprocess with the default configuration,
// an embedded log in its own data directory and a loopback HTTP port. Its
// output goes to a file, shown when a benchmark fails.
type nodeProc struct {
	b       *testing.B
	bin     string
	args    []string
	addr    string
	logPath string
	// env is added to the child's environment (childEnv).
	env []string

	cmd   *exec.Cmd
	waitc chan error
}

func startNode(b *testing.B) *nodeProc {
	b.Helper()
	n := newNode(b)
	n.start()
	return n
}

// newNode returns the nodeProc startNode starts, not started yet.
func newNode(b *testing.B) *nodeProc {
	b.Helper()
	bin, root := binary(b)
	dir := b.TempDir()
	n := &nodeProc{b: b, bin: bin, addr: freeAddr(b), logPath: filepath.Join(dir, "node.log")}
	n.args = []string{"run", "--data", filepath.Join(dir, "data"), "--http", n.addr,
		"--config", filepath.Join(root, "configs", "newsflow.yaml"), "--log-level", "warn"}
	b.Cleanup(n.kill)
	return n
}

func (n *nodeProc) start() {
	n.b.Helper()
	logf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		n.b.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(n.bin, n.args...)
	cmd.Env = append(childEnv(), n.env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		n.b.Fatal(err)
	}
	n.cmd, n.waitc = cmd, make(chan error, 1)
	go func() { n.waitc <- cmd.Wait() }()
}

// kill sends SIGKILL and waits until the process is gone.
func (n *nodeProc) kill() {
	if n.cmd == nil {
		return
	}
	_ = n.cmd.Process.Signal(syscall.SIGKILL)
	<-n.waitc
	n.cmd = nil
}

func (n *nodeProc) url(path string) string { return "http://" + n.addr + path }

// fatalf fails the benchmark with the tail of the node's log.
func (n *nodeProc) fatalf(format string, args ...any) {
	n.b.Helper()
	log, _ := os.ReadFile(n.logPath)
	if len(log) > 3000 {
		log = log[len(log)-3000:]
	}
	n.b.Fatalf("%s\nnode log tail:\n%s", fmt.Sprintf(format, args...), log)
}

// waitReady polls /health/ready every 5ms until it answers 200 and
// returns how long that took.
func (n *nodeProc) waitReady(timeout time.Duration) time.Duration {
	n.b.Helper()
	start := time.Now()
	client := &http.Client{Timeout: time.Second}
	for time.Since(start) < timeout {
		resp, err := client.Get(n.url("/health/ready"))
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return time.Since(start)
			}
		}
		select {
		case err := <-n.waitc:
			n.waitc <- err
			n.fatalf("node exited while starting: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	n.fatalf("node not ready after %s", timeout)
	return 0
}

// progress is the part of /api/v1/admin/progress the benchmarks read.
type progress struct {
	Ready    bool `json:"ready"`
	CaughtUp bool `json:"caught_up"`
	Inputs   []struct {
		Stage     string `json:"stage"`
		Topic     string `json:"topic"`
		Committed int64  `json:"committed"`
	} `json:"inputs"`
}

// applied is the number of shares the trending tasks have committed from
// their own source partitions (everything, when producers use murmur2).
func (p progress) applied() int64 {
	var n int64
	for _, in := range p.Inputs {
		if in.Stage == "trending" && in.Topic == "shares" {
			n += in.Committed
		}
	}
	return n
}

func (n *nodeProc) progress() (progress, error) {
	var p progress
	req, err := http.NewRequest(http.MethodGet, n.url("/api/v1/admin/progress"), nil)
	if err != nil {
		return p, err
	}
	req.Header.Set("Authorization", "Bearer "+benchAdminToken)
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

// waitCaughtUp polls the progress endpoint until the node has committed
// everything in its log.
func (n *nodeProc) waitCaughtUp(timeout time.Duration) progress {
	n.b.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if p, err := n.progress(); err == nil && p.CaughtUp {
			return p
		}
		select {
		case err := <-n.waitc:
			n.waitc <- err
			n.fatalf("node exited: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	n.fatalf("node not caught up after %s", timeout)
	return progress{}
}

// waitIngesting waits until the trending tasks have committed shares
// beyond what they had when it was called, i.e. until ingestion is under
// way, and returns the progress then.
func (n *nodeProc) waitIngesting(timeout time.Duration) progress {
	n.b.Helper()
	base, err := n.progress()
	if err != nil {
		n.fatalf("progress: %v", err)
	}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		p, err := n.progress()
		if err != nil {
			n.fatalf("progress: %v", err)
		}
		if p.applied() > base.applied() {
			return p
		}
	}
	n.fatalf("no ingestion under way after %s", timeout)
	return base
}

// peakRSSMB returns the process's peak resident set size (VmHWM) in MB.
func (n *nodeProc) peakRSSMB() float64 {
	n.b.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", n.cmd.Process.Pid))
	if err != nil {
		n.b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				n.b.Fatalf("parse VmHWM %q: %v", rest, err)
			}
			return kb * 1024 / 1e6
		}
	}
	n.b.Fatal("no VmHWM in /proc/PID/status")
	return 0
}

// writeStream writes a stream as an NDJSON file for `newsflow produce`.
func writeStream(b *testing.B, s stream) string {
	b.Helper()
	path := filepath.Join(b.TempDir(), "shares.ndjson")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	g := s.gen(3)
	var buf []byte
	for from := 0; from < s.n; from += batchSize {
		buf = g.ndjson(buf[:0], from, min(from+batchSize, s.n))
		w.Write(buf)
	}
	if err := errors.Join(w.Flush(), f.Close()); err != nil {
		b.Fatal(err)
	}
	return path
}

// produce starts `newsflow produce shares FILE` against the node. Its
// output is collected in out.
func (n *nodeProc) produce(ctx context.Context, file string, out *bytes.Buffer) (*exec.Cmd, error) {
	cmd := exec.CommandContext(ctx, n.bin, "produce", "shares", file, "--addr", "http://"+n.addr)
	cmd.Env = append(childEnv(), n.env...)
	cmd.Stdout, cmd.Stderr = out, out
	return cmd, cmd.Start()
}

// ingestHTTP sends the stream to the node as NDJSON batches of batchSize
// lines from workers goroutines, generating each batch as it goes (so that
// 10,000,000 events need not be held in memory).
func (n *nodeProc) ingestHTTP(ctx context.Context, s stream, workers int) error {
	url := n.url("/api/v1/events/share/batch")
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	defer client.CloseIdleConnections()
	batches := (s.n + batchSize - 1) / batchSize
	var next atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	for w := range workers {
		g.Go(func() error {
			gn := s.gen(uint64(100 + w))
			var body []byte
			for {
				i := int(next.Add(1) - 1)
				if i >= batches {
					return nil
				}
				body = gn.ndjson(body[:0], i*batchSize, min((i+1)*batchSize, s.n))
				if err := postBatch(gctx, client, url, body, i); err != nil {
					return err
				}
			}
		})
	}
	return g.Wait()
}

// postBatch posts NDJSON batch number i to url and expects 202.
func postBatch(ctx context.Context, client *http.Client, url string, body []byte, i int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-ndjson")
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("batch %d: %w", i, err)
	}
	rb, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("batch %d: status %d: %.300s", i, resp.StatusCode, rb)
	}
	return nil
}
