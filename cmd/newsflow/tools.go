package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/node"
	"github.com/newsflow/newsflow/operators/trending"
)

func setScalarString(dst *[]string, v string) error {
	*dst = node.SplitList(v)
	if len(*dst) == 0 {
		return errors.New("--brokers is empty")
	}
	return nil
}

func cmdTopology(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("topology", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf commonFlags
	cf.register(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	stages, err := cf.topology()
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(stages)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STAGE\tKIND\tTASKS\tKEY\tINPUTS\tOUTPUTS")
	for _, s := range stages {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", s.Name, s.Kind, s.Tasks, s.Key, strings.Join(s.Inputs, ","), strings.Join(s.Outputs, ","))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range stages {
		fmt.Fprintf(stdout, "\n%s: %s\n", s.Name, s.Description)
		for _, st := range s.Stores {
			fmt.Fprintf(stdout, "  store %s\n", st)
		}
	}
	return nil
}

// topology is the topology a node with the flags' configuration runs.
func (c *commonFlags) topology() ([]engine.Stage, error) {
	cfg, err := c.load()
	if err != nil {
		return nil, err
	}
	return node.Topology(cfg)
}

// produceRetryFor is how long newsflow produce keeps retrying while the
// node cannot be reached or is unavailable, unless --retry-for says.
const produceRetryFor = 30 * time.Second

// cmdProduce sends an NDJSON file of events to a running node in batches.
// Each batch carries an Idempotency-Key, so batches retried after a
// connection error or a node restart are applied exactly once.
func cmdProduce(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	paths := map[string]string{"shares": "/api/v1/events/share/batch", "reads": "/api/v1/events/read/batch", "articles": "/api/v1/articles"}
	if len(args) < 2 || paths[args[0]] == "" {
		return errors.New("usage: newsflow produce shares|reads|articles FILE [--addr URL] [--batch N] [--token TOKEN] [--retry-for D]")
	}
	kind, file := args[0], args[1]
	fs := flag.NewFlagSet("produce", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "http://127.0.0.1:8080", "base URL of a running node")
	batch := fs.Int("batch", 5000, "events per request (default 500 for articles)")
	retryFor := fs.Duration("retry-for", produceRetryFor,
		"how long to keep retrying while the node cannot be reached or is unavailable before giving up (exit status 1)")
	token := fs.String("token", os.Getenv("NEWSFLOW_INGEST_TOKEN"),
		"the node's ingestion token (auth.ingest_token), needed for reads; articles take it or an admin token "+
			"(default $NEWSFLOW_INGEST_TOKEN, for articles else $NEWSFLOW_ADMIN_TOKEN)")
	if err := fs.Parse(args[2:]); err != nil {
		return err
	}
	if *batch <= 0 {
		return errors.New("--batch must be positive")
	}
	if *retryFor < 0 {
		return errors.New("--retry-for must not be negative")
	}
	if kind == "articles" && !flagSet(fs, "batch") {
		*batch = 500
	}
	if kind == "articles" && *token == "" {
		*token = os.Getenv("NEWSFLOW_ADMIN_TOKEN")
	}
	var in io.Reader = os.Stdin
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	var runID [8]byte
	if _, err := rand.Read(runID[:]); err != nil {
		return err
	}
	base := strings.TrimRight(*addr, "/")
	p := &producer{base: base, path: paths[kind], runID: hex.EncodeToString(runID[:]),
		retryFor: *retryFor, token: *token, client: &http.Client{Timeout: time.Minute}, stderr: stderr}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	var buf bytes.Buffer
	lines, firstLine, line := 0, 1, 0
	for sc.Scan() {
		line++
		buf.Write(sc.Bytes())
		buf.WriteByte('\n')
		lines++
		if lines == *batch {
			if err := p.send(ctx, buf.Bytes(), firstLine); err != nil {
				return err
			}
			buf.Reset()
			lines, firstLine = 0, line+1
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read %s line %d: %w", file, line+1, err)
	}
	if lines > 0 {
		if err := p.send(ctx, buf.Bytes(), firstLine); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "accepted %d, rejected %d\n", p.accepted, p.rejected)
	if p.rejected > 0 {
		return fmt.Errorf("%d events rejected", p.rejected)
	}
	return nil
}

// producer sends the batches of newsflow produce. While the node cannot
// be reached or is unavailable it retries, and says so on stderr: at the
// first failure, every report interval after, and when the node answers
// again; after retryFor without an answer it gives up.
type producer struct {
	base, path         string // the node and the batch endpoint
	token              string
	runID              string
	retryFor           time.Duration
	report             time.Duration // between "still" lines; default 5s
	client             *http.Client
	stderr             io.Writer
	seq                int
	accepted, rejected int

	down     time.Time // when the node stopped answering; zero while it answers
	reported time.Time // the last line about it
}

func (p *producer) send(ctx context.Context, body []byte, firstLine int) error {
	p.seq++
	key := fmt.Sprintf("produce-%s-%d", p.runID, p.seq)
	backoff := 100 * time.Millisecond
	for {
		status, resp, err := p.post(ctx, key, body)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err == nil && status != http.StatusServiceUnavailable && status != http.StatusConflict && status < 500 {
			p.answered()
			return p.result(status, resp, firstLine)
		}
		problem := fmt.Sprintf("the node at %s answered %d %s: %s", p.base, status, http.StatusText(status), errorText(resp))
		if err != nil {
			problem = unreachable(p.base, err).Error()
		}
		now := time.Now()
		switch {
		case p.down.IsZero():
			p.down, p.reported = now, now
			fmt.Fprintf(p.stderr, "produce: %s; retrying for up to %s (--retry-for)\n", problem, p.retryFor)
		case now.Sub(p.down) >= p.retryFor:
			return fmt.Errorf("giving up after %s (--retry-for; the batch at line %d is not sent, %d events before it were accepted): %s",
				now.Sub(p.down).Round(time.Second), firstLine, p.accepted, problem)
		case now.Sub(p.reported) >= cmp.Or(p.report, 5*time.Second):
			p.reported = now
			fmt.Fprintf(p.stderr, "produce: still retrying (%s left): %s\n", (p.retryFor - now.Sub(p.down)).Round(time.Second), problem)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(backoff, max(0, p.retryFor-now.Sub(p.down)))):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// answered notes that the node answered, after an outage if there was one.
func (p *producer) answered() {
	if !p.down.IsZero() {
		fmt.Fprintf(p.stderr, "produce: the node at %s answers again after %s\n", p.base, time.Since(p.down).Round(100*time.Millisecond))
		p.down = time.Time{}
	}
}

// result takes the node's answer to a batch: counts, or an error.
func (p *producer) result(status int, resp []byte, firstLine int) error {
	if status == http.StatusUnauthorized {
		return fmt.Errorf("batch at line %d: %d %s: %s\nhint: %s", firstLine, status, http.StatusText(status), errorText(resp),
			authHint(p.path, p.token != ""))
	}
	var res struct {
		Accepted int    `json:"accepted"`
		Rejected int    `json:"rejected"`
		Error    string `json:"error"`
		Errors   []struct {
			Line  int    `json:"line"`
			Error string `json:"error"`
		} `json:"errors"`
		Truncated bool `json:"errors_truncated"`
	}
	if jerr := json.Unmarshal(resp, &res); jerr != nil {
		return fmt.Errorf("batch at line %d: status %d: %s", firstLine, status, resp)
	}
	if res.Error != "" {
		return fmt.Errorf("batch at line %d: %s", firstLine, res.Error)
	}
	p.accepted += res.Accepted
	p.rejected += res.Rejected
	for _, e := range res.Errors {
		fmt.Fprintf(p.stderr, "line %d: %s\n", firstLine+e.Line-1, e.Error)
	}
	if res.Truncated {
		fmt.Fprintf(p.stderr, "batch at line %d: %d more rejected lines not listed by the node\n", firstLine, res.Rejected-len(res.Errors))
	}
	return nil
}

func (p *producer) post(ctx context.Context, key string, body []byte) (int, []byte, error) {
	c := nodeClient{base: p.base, ingest: p.token, http: p.client}
	resp, err := c.send(ctx, http.MethodPost, p.path, "application/x-ndjson", body, http.Header{"Idempotency-Key": {key}})
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	return resp.StatusCode, b, err
}

// cmdReplay rebuilds the trending operator's state from the log, then exits.
func cmdReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf commonFlags
	cf.register(fs)
	fromOffset := fs.Int64("from-offset", -1, "replay every source partition from this offset")
	fromTime := fs.String("from-time", "", "replay from the first record at or after this RFC 3339 time")
	op := fs.String("operator", trending.Name, "operators to rebuild, comma-separated (e.g. stories,search)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if (*fromOffset >= 0) == (*fromTime != "") {
		return errors.New("replay: give exactly one of --from-offset N or --from-time T")
	}
	var from func(ctx context.Context, l eventlog.Log, tp eventlog.TopicPartition) (int64, error)
	if *fromOffset >= 0 {
		from = func(ctx context.Context, l eventlog.Log, tp eventlog.TopicPartition) (int64, error) {
			o, err := l.Offsets(ctx, tp)
			if err != nil {
				return 0, err
			}
			return max(*fromOffset, o.Start), nil
		}
	} else {
		t, err := time.Parse(time.RFC3339, *fromTime)
		if err != nil {
			return fmt.Errorf("replay: --from-time: %w", err)
		}
		from = func(ctx context.Context, l eventlog.Log, tp eventlog.TopicPartition) (int64, error) {
			return l.OffsetForTime(ctx, tp, t.UnixMilli())
		}
	}
	ops := node.SplitList(*op)
	if err := checkOperators(cf, ops); err != nil {
		return err
	}
	n, err := cf.openNode(ctx)
	if err != nil {
		return err
	}
	defer n.Close()
	start := time.Now()
	for _, name := range ops {
		if err := n.Engine().Replay(ctx, name, func(tp eventlog.TopicPartition) (int64, error) { return from(ctx, n.Log(), tp) }); err != nil {
			return err
		}
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- n.Engine().Run(rctx) }()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case err := <-done:
			if err == nil {
				err = errors.New("engine stopped before catching up")
			}
			return err
		case <-ctx.Done():
			cancel()
			<-done
			return ctx.Err()
		case <-t.C:
		}
		ok, err := n.Engine().CaughtUp(ctx)
		if err != nil {
			cancel()
			<-done
			return err
		}
		if ok {
			cancel()
			if err := <-done; err != nil {
				return err
			}
			fmt.Fprintf(stdout, "replayed %s in %s\n", *op, time.Since(start).Round(time.Millisecond))
			return nil
		}
	}
}

// checkOperators returns an error naming the node's operators unless
// every name in ops is one of them.
func checkOperators(cf commonFlags, ops []string) error {
	stages, err := cf.topology()
	if err != nil {
		return err
	}
	var valid []string
	for _, s := range stages {
		if s.Kind == "operator" {
			valid = append(valid, s.Name)
		}
	}
	if len(ops) == 0 {
		return fmt.Errorf("replay: --operator names no operator; the operators are %s", strings.Join(valid, ", "))
	}
	for _, name := range ops {
		if !slices.Contains(valid, name) {
			return fmt.Errorf("replay: --operator %q: no such operator; the operators are %s", name, strings.Join(valid, ", "))
		}
	}
	return nil
}

// flagSet reports whether the flag was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
