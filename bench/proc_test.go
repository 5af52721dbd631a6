package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/newsflow/newsflow/cmd/newsflow/nodeproc"
	"github.com/newsflow/newsflow/internal/testutil"
	"golang.org/x/sync/errgroup"
)

// nodeProc is a `newsflow run` subprocess (nodeproc.Proc: the default
// configuration, an embedded log in its own data directory, a loopback
// HTTP port) with the benchmarks' own helpers.
type nodeProc struct {
	*nodeproc.Proc
	b *testing.B
}

func startNode(b *testing.B) *nodeProc {
	b.Helper()
	n := newNode(b)
	n.Start()
	return n
}

// newNode returns the nodeProc startNode starts, not started yet.
func newNode(b *testing.B) *nodeProc {
	b.Helper()
	return &nodeProc{Proc: nodeproc.New(b, nodeproc.Options{Env: benchEnv}), b: b}
}

// benchEnv is the benchmark nodes' environment: they log many users in
// from one address.
var benchEnv = []string{"NEWSFLOW_AUTH_LOGIN_BURST_PER_IP=1000000"}

// waitIngesting waits until the trending tasks have committed shares
// beyond what they had when it was called, i.e. until ingestion is under
// way, and returns the progress then.
func (n *nodeProc) waitIngesting(timeout time.Duration) nodeproc.Progress {
	n.b.Helper()
	base, err := n.Progress()
	if err != nil {
		n.Fatalf("progress: %v", err)
	}
	var p nodeproc.Progress
	testutil.Eventually(n.b, timeout, func() error {
		if p, err = n.Progress(); err != nil {
			n.Fatalf("progress: %v", err)
		}
		if p.Applied() <= base.Applied() {
			return fmt.Errorf("no ingestion under way: %d shares committed", p.Applied())
		}
		return nil
	})
	return p
}

// writeStream writes a stream as an NDJSON file for `newsflow produce`.
func writeStream(b *testing.B, s stream) string {
	b.Helper()
	return writeSharesFile(b, func(w *bufio.Writer) {
		g := s.gen(3)
		var buf []byte
		for from := 0; from < s.n; from += batchSize {
			buf = g.ndjson(buf[:0], from, min(from+batchSize, s.n))
			w.Write(buf)
		}
	})
}

// writeSharesFile creates shares.ndjson in a temporary directory, has
// write fill it through a 1 MiB buffer and returns its path.
func writeSharesFile(b *testing.B, write func(w *bufio.Writer)) string {
	b.Helper()
	path := filepath.Join(b.TempDir(), "shares.ndjson")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	write(w)
	if err := errors.Join(w.Flush(), f.Close()); err != nil {
		b.Fatal(err)
	}
	return path
}

// produce starts `newsflow produce shares FILE` against the node. Its
// output is collected in out.
func (n *nodeProc) produce(ctx context.Context, file string, out *bytes.Buffer) (*exec.Cmd, error) {
	cmd := n.Command(ctx, "produce", "shares", file, "--addr", "http://"+n.Addr)
	cmd.Stdout, cmd.Stderr = out, out
	return cmd, cmd.Start()
}

// produceAll runs newsflow produce shares on file to the end and fails
// the benchmark unless the node accepted all want events and rejected none.
func (n *nodeProc) produceAll(file string, want int) {
	var out bytes.Buffer
	cmd, err := n.produce(context.Background(), file, &out)
	if err == nil {
		err = cmd.Wait()
	}
	if err != nil || !strings.Contains(out.String(), fmt.Sprintf("accepted %d, rejected 0", want)) {
		n.Fatalf("produce: %v\n%s", err, out.String())
	}
}

// ingestHTTP sends the stream to the node as NDJSON batches of batchSize
// lines from workers goroutines, generating each batch as it goes (so that
// 10,000,000 events need not be held in memory).
func (n *nodeProc) ingestHTTP(ctx context.Context, s stream, workers int) error {
	batches := (s.n + batchSize - 1) / batchSize
	return ingestBatches(ctx, n.URL("/api/v1/events/share/batch"), time.Minute, workers, batches, func(w int) func([]byte, int) []byte {
		gn := s.gen(uint64(100 + w))
		return func(dst []byte, i int) []byte {
			return gn.ndjson(dst, i*batchSize, min((i+1)*batchSize, s.n))
		}
	})
}

// ingestBatches posts batches NDJSON batches to url from workers
// goroutines, in order of batch number, through a client whose requests
// time out after timeout. Each worker calls newWorker(w) once and appends
// batch i to an emptied buffer with the function it returns.
func ingestBatches(ctx context.Context, url string, timeout time.Duration, workers, batches int, newWorker func(w int) func(dst []byte, i int) []byte) error {
	client := &http.Client{Timeout: timeout, Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	defer client.CloseIdleConnections()
	var next atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	for w := range workers {
		g.Go(func() error {
			batch := newWorker(w)
			var body []byte
			for {
				i := int(next.Add(1) - 1)
				if i >= batches {
					return nil
				}
				body = batch(body[:0], i)
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
