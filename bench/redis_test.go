package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/newsflow/newsflow/cmd/newsflow/nodeproc"
	"github.com/newsflow/newsflow/internal/testutil"
)

// BenchmarkTrendingVsRedis serves the same trending answer from newsflow and
// from Redis, side by side in one run, on this machine.
//
// Both are loaded with the same shares: 2,000,000 (NEWSFLOW_BENCH_REDIS_SHARES)
// over 200,000 articles, Zipf-skewed (s = 1.1), event times spread evenly
// over the last 90 minutes, so about two thirds fall into the 1h window.
//
//   - newsflow: the real binary (`newsflow run`, embedded log, the default
//     configuration), loaded with `newsflow produce shares`; the answer is
//     GET /api/v1/trending?window=1h&k=100 over HTTP/1.1 keep-alive,
//     measured with wrk.
//   - Redis: redis-server on a loopback port with persistence off (no RDB,
//     no AOF), loaded with the same shares as one sorted set per minute of
//     event time (ZINCRBY shares:m:<minute> 1 <article>, pipelined in
//     batches of 10,000). The 1h top is precomputed once, as a Redis user
//     precomputes it on a timer: ZUNIONSTORE trending:1h over the 60 minute
//     sets the window covers. Two cached answers are measured, with
//     redis-benchmark (Redis's own C client, no pipelining):
//   - zrange: ZREVRANGE trending:1h 0 99 WITHSCORES, reading the
//     precomputed union: what a Redis user serves when the union is
//     cached but the top-k is read per request;
//   - get: GET trending:1h:k100, a string holding the answer already
//     serialised as JSON (the items in newsflow's shape, built from the
//     ZREVRANGE above): the cheapest cached answer Redis can give, and
//     the closest to what newsflow does (precomputed bytes).
//
// What is compared is one request/response over a kept-alive loopback
// connection at the same concurrency (16 and 64 connections) with the same
// number of load-generator threads (NEWSFLOW_BENCH_REDIS_THREADS, default 1:
// on two cores a second load thread mostly takes CPU from the server under
// test). newsflow's response carries HTTP headers and is an HTTP/1.1
// exchange; Redis's is RESP. Neither side is given a warm cache it would not
// have in production: newsflow's answer is rebuilt when its snapshots
// change (here they do not, as in Redis, where the union is computed once).
//
// Each sub-benchmark runs newsflow, zrange and get in turn, 3 times
// (NEWSFLOW_BENCH_REDIS_RUNS) for 10 s each (NEWSFLOW_BENCH_REDIS_SECONDS),
// after a 2 s warm-up of each, and reports the medians: qps and p99-ms per
// server and the ratios newsflow/Redis of the median qps (x-zrange, x-get).
// A table is printed as well.
//
// It needs wrk, redis-server and redis-benchmark, and skips without them:
//
//	apt-get install -y wrk redis-server   # redis-benchmark comes with redis-tools
//	go test -run '^$' -bench TrendingVsRedis -benchtime 1x ./bench
func BenchmarkTrendingVsRedis(b *testing.B) {
	var tools [3]string
	for i, name := range []string{"wrk", "redis-server", "redis-benchmark"} {
		p, err := exec.LookPath(name)
		if err != nil {
			skip(b, name+" is not installed (apt-get install -y wrk redis-server): skipping the comparison with Redis")
		}
		tools[i] = p
	}
	wrk, redisServer, redisBench := tools[0], tools[1], tools[2]
	nShares := testutil.EnvInt(b, "NEWSFLOW_BENCH_REDIS_SHARES", 2_000_000)
	runs := testutil.EnvInt(b, "NEWSFLOW_BENCH_REDIS_RUNS", 3)
	secs := testutil.EnvInt(b, "NEWSFLOW_BENCH_REDIS_SECONDS", 10)
	threads := testutil.EnvInt(b, "NEWSFLOW_BENCH_REDIS_THREADS", 1)

	shares := genZipfShares(nShares, vsRedisArticles, vsRedisSpan, 11)

	// newsflow: the real binary, loaded with newsflow produce.
	n := startNode(b)
	n.WaitReady(time.Minute)
	n.produceAll(shares.writeNDJSON(b), nShares)
	n.WaitCaughtUp(10 * time.Minute)
	nfURL := n.URL("/api/v1/trending?window=1h&k=100")

	// Redis: the same shares per minute, the 1h union precomputed.
	rd := startRedis(b, redisServer)
	top, asOf := rd.load(b, shares)
	answer, err := json.Marshal(map[string]any{"window": "1h", "items": top, "as_of": asOf})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := rd.do("SET", "trending:1h:k100", string(answer)); err != nil {
		b.Fatal(err)
	}
	checkSameTop(b, nfURL, top)

	type side struct {
		name string
		run  func(conns int, d time.Duration) (wrkResult, error)
	}
	sides := []side{
		{"newsflow", func(c int, d time.Duration) (wrkResult, error) {
			return runWrkFor(context.Background(), wrk, wrkLoad{threads: threads, connections: c}, d, nfURL, "")
		}},
		{"zrange", func(c int, d time.Duration) (wrkResult, error) {
			return runRedisBenchmark(redisBench, rd.addr, threads, c, d, "ZREVRANGE", "trending:1h", "0", "99", "WITHSCORES")
		}},
		{"get", func(c int, d time.Duration) (wrkResult, error) {
			return runRedisBenchmark(redisBench, rd.addr, threads, c, d, "GET", "trending:1h:k100")
		}},
	}
	for _, conns := range []int{16, 64} {
		b.Run(fmt.Sprintf("c%d", conns), func(b *testing.B) {
			results := make([][]wrkResult, len(sides))
			for b.Loop() {
				for _, s := range sides {
					if _, err := s.run(conns, 2*time.Second); err != nil { // warm-up
						b.Fatalf("%s: %v", s.name, err)
					}
				}
				for range runs {
					for i, s := range sides {
						r, err := s.run(conns, time.Duration(secs)*time.Second)
						if err != nil {
							b.Fatalf("%s: %v", s.name, err)
						}
						if r.errors > 0 {
							b.Fatalf("%s: %d errors", s.name, r.errors)
						}
						results[i] = append(results[i], r)
					}
				}
			}
			med := make([]wrkResult, len(sides))
			for i, s := range sides {
				med[i] = medianResult(results[i])
				b.ReportMetric(med[i].qps, s.name+"-qps")
				b.ReportMetric(durMS(med[i].p99), s.name+"-p99-ms")
			}
			// The ratios of the medians, and the medians of the ratios of
			// runs made one after the other (less sensitive to the
			// machine's drift).
			b.ReportMetric(med[0].qps/med[1].qps, "x-zrange")
			b.ReportMetric(med[0].qps/med[2].qps, "x-get")
			pairs := func(i int) float64 {
				var rs []float64
				for j, r := range results[0] {
					rs = append(rs, r.qps/results[i][j].qps)
				}
				slices.Sort(rs)
				return rs[len(rs)/2]
			}
			fmt.Printf("trending 1h top-100, %d connections, %d load thread(s), median of %d × %ds (load average %s):\n", conns, threads, runs, secs, loadAverage())
			for i, s := range sides {
				var all []string
				for _, r := range results[i] {
					all = append(all, fmt.Sprintf("%.0f/s %.2fms", r.qps, durMS(r.p99)))
				}
				fmt.Printf("  %-9s %8.0f req/s  p99 %6.2f ms   runs: %s\n", s.name, med[i].qps, durMS(med[i].p99), strings.Join(all, ", "))
			}
			fmt.Printf("  newsflow/zrange %.2f× (median of pairs %.2f×), newsflow/get %.2f× (median of pairs %.2f×)\n",
				med[0].qps/med[1].qps, pairs(1), med[0].qps/med[2].qps, pairs(2))
		})
	}
}

// loadAverage is the first three fields of /proc/loadavg: on a shared
// machine, whether something else ran meanwhile.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

// Shape of the shares of BenchmarkTrendingVsRedis.
const (
	vsRedisArticles = 200_000
	vsRedisSpan     = 90 * time.Minute
)

func durMS(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// zipfShares are n shares: share i is of article article[i] at ts[i].
type zipfShares struct {
	article []int32
	ts      []int64
}

// genZipfShares draws n shares of articles Zipf-distributed over articles
// (popularity ranks scattered over ids by a multiplicative permutation, as
// gen does), with event times rising evenly over span up to now.
func genZipfShares(n, articles int, span time.Duration, seed uint64) zipfShares {
	rng := rand.New(rand.NewPCG(seed, 1))
	z := rand.NewZipf(rng, zipfS, 1, uint64(articles-1))
	start := time.Now().Add(-span).UnixMilli()
	s := zipfShares{article: make([]int32, n), ts: make([]int64, n)}
	for i := range n {
		s.article[i] = int32((z.Uint64()*7919 + 13) % uint64(articles))
		s.ts[i] = start + int64(i)*span.Milliseconds()/int64(n)
	}
	return s
}

func articleName(a int32) string { return fmt.Sprintf("art-%06d", a) }

// writeNDJSON writes the shares as an NDJSON file for newsflow produce.
func (s zipfShares) writeNDJSON(b *testing.B) string {
	b.Helper()
	return writeSharesFile(b, func(w *bufio.Writer) {
		var line []byte
		for i, a := range s.article {
			line = append(line[:0], `{"event_id":"vr-`...)
			line = strconv.AppendInt(line, int64(i), 10)
			line = append(line, `","article_id":"`...)
			line = append(line, articleName(a)...)
			line = append(line, `","user_id":"u-`...)
			line = strconv.AppendInt(line, int64(i), 10) // a user a share: Redis counts every one
			line = append(line, `","share_type":"link","category":"`...)
			line = append(line, categories[int(a)%len(categories)]...)
			line = append(line, `","timestamp":`...)
			line = strconv.AppendInt(line, s.ts[i], 10)
			line = append(line, "}\n"...)
			w.Write(line)
		}
	})
}

// redisProc is a redis-server subprocess on a loopback port, without
// persistence, and one client connection to it.
type redisProc struct {
	addr  string
	cmd   *exec.Cmd
	waitc chan error
	conn  net.Conn
	r     *bufio.Reader
	w     *bufio.Writer
}

func startRedis(b *testing.B, bin string) *redisProc {
	b.Helper()
	dir := b.TempDir()
	addr := nodeproc.FreeAddr(b, "")
	_, port, _ := net.SplitHostPort(addr)
	rd := &redisProc{addr: addr, waitc: make(chan error, 1)}
	rd.cmd = exec.Command(bin, "--bind", "127.0.0.1", "--port", port, "--save", "", "--appendonly", "no",
		"--dir", dir, "--daemonize", "no", "--logfile", filepath.Join(dir, "redis.log"))
	if err := rd.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	go func() { rd.waitc <- rd.cmd.Wait() }()
	b.Cleanup(func() {
		if rd.conn != nil {
			rd.conn.Close()
		}
		_ = rd.cmd.Process.Signal(syscall.SIGKILL)
		<-rd.waitc
	})
	testutil.Eventually(b, 10*time.Second, func() error {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			rd.conn, rd.r, rd.w = c, bufio.NewReaderSize(c, 1<<16), bufio.NewWriterSize(c, 1<<16)
			if _, err = rd.do("PING"); err == nil {
				return nil
			}
			c.Close()
		}
		log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
		return fmt.Errorf("redis-server not answering on %s: %v\n%s", addr, err, log)
	})
	return rd
}

// send writes one command in RESP (not flushed).
func (rd *redisProc) send(args ...string) {
	fmt.Fprintf(rd.w, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(rd.w, "$%d\r\n%s\r\n", len(a), a)
	}
}

// do sends one command and reads its reply.
func (rd *redisProc) do(args ...string) (any, error) {
	rd.send(args...)
	if err := rd.w.Flush(); err != nil {
		return nil, err
	}
	return readReply(rd.r)
}

// readReply reads one RESP2 reply: a string, an int64, nil, a []any, or an
// error for an error reply.
func readReply(r *bufio.Reader) (any, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return nil, errors.New("redis: empty reply line")
	}
	switch line[0] {
	case '+':
		return line[1:], nil
	case '-':
		return nil, errors.New("redis: " + line[1:])
	case ':':
		return strconv.ParseInt(line[1:], 10, 64)
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return nil, err
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return nil, err
		}
		out := make([]any, n)
		for i := range out {
			if out[i], err = readReply(r); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("redis: unexpected reply %q", line)
}

// redisItem is one entry of the Redis answer, in newsflow's item shape.
type redisItem struct {
	Rank      int    `json:"rank"`
	ArticleID string `json:"article_id"`
	Count     uint64 `json:"count"`
}

// load writes the shares as per-minute sorted sets (pipelined ZINCRBY),
// precomputes the 1h union over the 60 minutes up to the newest share's
// (newsflow's 1h window at its watermark: 60 one-minute buckets) and
// returns its top 100 and the watermark.
func (rd *redisProc) load(b *testing.B, s zipfShares) ([]redisItem, int64) {
	b.Helper()
	start := time.Now()
	const batch = 10_000
	var wm int64
	for from := 0; from < len(s.article); from += batch {
		to := min(from+batch, len(s.article))
		for i := from; i < to; i++ {
			wm = max(wm, s.ts[i])
			rd.send("ZINCRBY", "shares:m:"+strconv.FormatInt(s.ts[i]/60_000, 10), "1", articleName(s.article[i]))
		}
		if err := rd.w.Flush(); err != nil {
			b.Fatal(err)
		}
		for range to - from {
			if _, err := readReply(rd.r); err != nil {
				b.Fatal(err)
			}
		}
	}
	loaded := time.Since(start)
	last := wm / 60_000
	args := []string{"ZUNIONSTORE", "trending:1h", "60"}
	for m := last - 59; m <= last; m++ {
		args = append(args, "shares:m:"+strconv.FormatInt(m, 10))
	}
	start = time.Now()
	if _, err := rd.do(args...); err != nil {
		b.Fatal(err)
	}
	union := time.Since(start)
	v, err := rd.do("ZREVRANGE", "trending:1h", "0", "99", "WITHSCORES")
	if err != nil {
		b.Fatal(err)
	}
	flat, _ := v.([]any)
	var top []redisItem
	for i := 0; i+1 < len(flat); i += 2 {
		id, _ := flat[i].(string)
		score, _ := flat[i+1].(string)
		c, err := strconv.ParseUint(score, 10, 64)
		if err != nil {
			b.Fatalf("redis score %q: %v", score, err)
		}
		top = append(top, redisItem{Rank: len(top) + 1, ArticleID: id, Count: c})
	}
	b.Logf("redis: %d ZINCRBY in %s, ZUNIONSTORE of 60 minutes in %s", len(s.article), loaded.Round(time.Millisecond), union.Round(time.Microsecond))
	return top, wm
}

// checkSameTop fails unless newsflow's 1h top 100 has the counts of
// Redis's (both are exact; ties may be listed in another order: newsflow
// breaks them by article id ascending, ZREVRANGE descending).
func checkSameTop(b *testing.B, url string, top []redisItem) {
	b.Helper()
	resp, err := http.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var res struct {
		Items []redisItem `json:"items"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		b.Fatal(err)
	}
	counts := func(items []redisItem) []uint64 {
		var out []uint64
		for _, it := range items {
			out = append(out, it.Count)
		}
		return out
	}
	if got, want := counts(res.Items), counts(top); !slices.Equal(got, want) {
		b.Fatalf("newsflow and Redis disagree on the 1h top 100 counts:\nnewsflow %v\nredis    %v", got, want)
	}
}

// runRedisBenchmark runs redis-benchmark with the command for about d:
// redis-benchmark counts requests, not time, so a short run first
// measures the rate and the run asks for d's worth of requests.
func runRedisBenchmark(bin, addr string, threads, conns int, d time.Duration, command ...string) (wrkResult, error) {
	probe, err := redisBenchmarkN(bin, addr, threads, conns, 20_000, command)
	if err != nil {
		return probe, err
	}
	return redisBenchmarkN(bin, addr, threads, conns, max(20_000, int(probe.qps*d.Seconds())), command)
}

func redisBenchmarkN(bin, addr string, threads, conns, n int, command []string) (wrkResult, error) {
	host, port, _ := net.SplitHostPort(addr)
	args := []string{"-h", host, "-p", port, "-c", strconv.Itoa(conns), "-n", strconv.Itoa(n), "--csv"}
	if threads > 1 {
		args = append(args, "--threads", strconv.Itoa(threads))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, append(args, command...)...).Output()
	if err != nil {
		return wrkResult{}, fmt.Errorf("redis-benchmark: %v\n%s", err, out)
	}
	return parseRedisBenchmarkCSV(out)
}

// parseRedisBenchmarkCSV reads redis-benchmark --csv output: a header
// ("test","rps","avg_latency_ms",...,"p99_latency_ms",...) and a row.
func parseRedisBenchmarkCSV(out []byte) (wrkResult, error) {
	rows, err := csv.NewReader(bytes.NewReader(out)).ReadAll()
	if err != nil || len(rows) < 2 {
		return wrkResult{}, fmt.Errorf("redis-benchmark output %q: %v", out, err)
	}
	col := func(name string) (float64, error) {
		i := slices.Index(rows[0], name)
		if i < 0 || i >= len(rows[1]) {
			return 0, fmt.Errorf("redis-benchmark output has no %s column: %q", name, out)
		}
		return strconv.ParseFloat(rows[1][i], 64)
	}
	var r wrkResult
	msd := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	rps, err1 := col("rps")
	p50, err2 := col("p50_latency_ms")
	p99, err3 := col("p99_latency_ms")
	if err := errors.Join(err1, err2, err3); err != nil {
		return r, err
	}
	r.qps, r.p50, r.p99 = rps, msd(p50), msd(p99)
	return r, nil
}

// medianResult is the median of runs' qps and, separately, of their p99.
func medianResult(runs []wrkResult) wrkResult {
	qps := make([]float64, len(runs))
	p99 := make([]time.Duration, len(runs))
	for i, r := range runs {
		qps[i], p99[i] = r.qps, r.p99
	}
	slices.Sort(qps)
	slices.Sort(p99)
	return wrkResult{qps: qps[len(qps)/2], p99: p99[len(p99)/2]}
}

func TestParseRedisBenchmarkCSV(t *testing.T) {
	out := `"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
"GET trending:1h:k100","31250.00","0.503","0.120","0.479","0.703","0.815","2.119"
`
	r, err := parseRedisBenchmarkCSV([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if r.qps != 31250 || r.p50 != 479*time.Microsecond || r.p99 != 815*time.Microsecond {
		t.Fatalf("%+v", r)
	}
	if _, err := parseRedisBenchmarkCSV([]byte("ERROR\n")); err == nil {
		t.Fatal("no error for output without results")
	}
}
