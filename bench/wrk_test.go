package bench

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// wrk runs for 10 seconds, by default with two threads and 64 connections.
const wrkDuration = 10 * time.Second

// wrkLoad is wrk's thread and connection count.
type wrkLoad struct{ threads, connections int }

var defaultLoad = wrkLoad{threads: 2, connections: 64}

// wrkResult is what the benchmarks take from wrk's --latency report.
type wrkResult struct {
	p50, p90, p99 time.Duration
	qps           float64
	requests      int64
	errors        int64 // non-2xx/3xx responses plus socket errors
}

// runWrk runs wrk against url (with a Lua script unless script is "").
func runWrk(ctx context.Context, wrk string, load wrkLoad, url, script string) (wrkResult, error) {
	return runWrkFor(ctx, wrk, load, wrkDuration, url, script)
}

// runWrkFor is runWrk for d instead of wrkDuration.
func runWrkFor(ctx context.Context, wrk string, load wrkLoad, d time.Duration, url, script string) (wrkResult, error) {
	args := []string{"-t" + strconv.Itoa(load.threads), "-c" + strconv.Itoa(load.connections),
		"-d" + strconv.Itoa(int(d/time.Second)) + "s", "--latency", "--timeout", "5s"}
	if script != "" {
		args = append(args, "-s", script)
	}
	args = append(args, url)
	ctx, cancel := context.WithTimeout(ctx, d+time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, wrk, args...).CombinedOutput()
	if err != nil {
		return wrkResult{}, fmt.Errorf("wrk: %v\n%s", err, out)
	}
	res, err := parseWrk(string(out))
	if err != nil {
		return res, fmt.Errorf("%v in wrk output:\n%s", err, out)
	}
	return res, nil
}

// parseWrk reads the latency distribution, request rate and errors from
// wrk's output.
func parseWrk(out string) (wrkResult, error) {
	var r wrkResult
	var seen int
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 2 && (f[0] == "50%" || f[0] == "90%" || f[0] == "99%"):
			d, err := parseWrkDuration(f[1])
			if err != nil {
				return r, err
			}
			switch f[0] {
			case "50%":
				r.p50 = d
			case "90%":
				r.p90 = d
			case "99%":
				r.p99 = d
			}
			seen++
		case len(f) == 2 && f[0] == "Requests/sec:":
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				return r, fmt.Errorf("requests/sec %q: %v", f[1], err)
			}
			r.qps = v
			seen++
		case len(f) >= 3 && f[1] == "requests" && f[2] == "in":
			r.requests, _ = strconv.ParseInt(f[0], 10, 64)
		case len(f) == 5 && f[0] == "Non-2xx":
			n, _ := strconv.ParseInt(f[4], 10, 64)
			r.errors += n
		case len(f) >= 2 && f[0] == "Socket" && f[1] == "errors:":
			// Socket errors: connect 0, read 0, write 0, timeout 0
			for i := 2; i+1 < len(f); i += 2 {
				n, _ := strconv.ParseInt(strings.TrimSuffix(f[i+1], ","), 10, 64)
				r.errors += n
			}
		}
	}
	if seen != 4 {
		return r, fmt.Errorf("no latency distribution or request rate")
	}
	return r, nil
}

// parseWrkDuration parses wrk's times: 812.00us, 1.52ms, 2.01s, 1.00m.
func parseWrkDuration(s string) (time.Duration, error) {
	units := []struct {
		suffix string
		unit   time.Duration
	}{{"us", time.Microsecond}, {"ms", time.Millisecond}, {"s", time.Second}, {"m", time.Minute}, {"h", time.Hour}}
	for _, u := range units {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, fmt.Errorf("wrk time %q: %v", s, err)
			}
			return time.Duration(math.Round(f * float64(u.unit))), nil
		}
	}
	return 0, fmt.Errorf("wrk time %q: unknown unit", s)
}

// benchWrk runs wrk in a b.Loop (once, as one run takes 10s) and reports
// the result.
func benchWrk(b *testing.B, wrk string, load wrkLoad, url, script string) {
	b.Helper()
	var res wrkResult
	for b.Loop() {
		r, err := runWrk(b.Context(), wrk, load, url, script)
		if err != nil {
			b.Fatal(err)
		}
		res = r
	}
	res.report(b)
}

// report reports a wrk run's latency percentiles, throughput and errors.
func (r wrkResult) report(b *testing.B) {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(r.p50), "p50-ms")
	b.ReportMetric(ms(r.p90), "p90-ms")
	b.ReportMetric(ms(r.p99), "p99-ms")
	b.ReportMetric(r.qps, "qps")
	b.ReportMetric(float64(r.errors), "errors")
}

// mixedScript writes a wrk Lua script whose requests rotate over the
// windows, categories and two values of k.
func mixedScript(b *testing.B) string {
	b.Helper()
	var cats []string
	for _, c := range categories {
		cats = append(cats, strconv.Quote(c))
	}
	script := `-- trending queries rotating over windows, categories and k
local paths = {}
for _, w in ipairs({"1m", "1h", "24h"}) do
  for _, c in ipairs({"", ` + strings.Join(cats, ", ") + `}) do
    for _, k in ipairs({10, 50}) do
      local p = "/api/v1/trending?window=" .. w .. "&k=" .. k
      if c ~= "" then p = p .. "&category=" .. c end
      table.insert(paths, p)
    end
  end
end
local i = 0
request = function()
  i = i + 1
  return wrk.format("GET", paths[i % #paths + 1])
end
`
	path := filepath.Join(b.TempDir(), "mixed.lua")
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		b.Fatal(err)
	}
	return path
}

func TestParseWrk(t *testing.T) {
	out := `Running 10s test @ http://127.0.0.1:8080/api/v1/trending?window=1h&k=10
  2 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     1.57ms  481.96us   3.65ms   68.87%
    Req/Sec     1.25k   122.24     1.42k    50.00%
  Latency Distribution
     50%  812.00us
     75%    1.85ms
     90%    2.17ms
     99%    1.02s
  1248 requests in 1.00s, 3.39MB read
  Socket errors: connect 0, read 2, write 0, timeout 3
  Non-2xx or 3xx responses: 7
Requests/sec:   1246.85
Transfer/sec:      3.38MB
`
	r, err := parseWrk(out)
	if err != nil {
		t.Fatal(err)
	}
	want := wrkResult{p50: 812 * time.Microsecond, p90: 2170 * time.Microsecond, p99: 1020 * time.Millisecond,
		qps: 1246.85, requests: 1248, errors: 12}
	if r != want {
		t.Fatalf("got %+v, want %+v", r, want)
	}
	if _, err := parseWrk("unable to connect to 127.0.0.1:1 Connection refused\n"); err == nil {
		t.Fatal("no error for output without results")
	}
}
