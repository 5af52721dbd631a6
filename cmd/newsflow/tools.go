package main

import (
	"bufio"
	"bytes"
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
	"strings"
	"text/tabwriter"
	"time"

	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/operators/trending"
)

func setScalarString(dst *[]string, v string) error {
	*dst = splitList(v)
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
	cfg, err := cf.load()
	if err != nil {
		return err
	}
	// The topology is static: no log or state is opened.
	e, err := engine.New(nil, nil, engine.Options{Partitions: cfg.Log.Partitions, DeadLetterTopic: cfg.Engine.DeadLetterTopic})
	if err != nil {
		return err
	}
	op, err := trending.New(trending.OperatorOptions{}, e.Partitions(), nil)
	if err != nil {
		return err
	}
	if err := e.Register(op); err != nil {
		return err
	}
	stages := e.Topology()
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

// cmdProduce sends an NDJSON file of events to a running node in batches.
// Each batch carries an Idempotency-Key, so batches retried after a
// connection error or a node restart are applied exactly once.
func cmdProduce(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	paths := map[string]string{"shares": "/api/v1/events/share/batch", "reads": "/api/v1/events/read/batch", "articles": "/api/v1/articles"}
	if len(args) < 2 || paths[args[0]] == "" {
		return errors.New("usage: newsflow produce shares|reads|articles FILE [--addr URL] [--batch N] [--token TOKEN]")
	}
	kind, file := args[0], args[1]
	fs := flag.NewFlagSet("produce", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "http://127.0.0.1:8080", "base URL of a running node")
	batch := fs.Int("batch", 5000, "events per request (default 500 for articles)")
	retryFor := fs.Duration("retry-for", 5*time.Minute, "how long to keep retrying a batch while the node is unavailable")
	token := fs.String("token", os.Getenv("NEWSFLOW_INGEST_TOKEN"),
		"the node's ingestion token (auth.ingest_token), needed for reads and articles (default $NEWSFLOW_INGEST_TOKEN)")
	if err := fs.Parse(args[2:]); err != nil {
		return err
	}
	if *batch <= 0 {
		return errors.New("--batch must be positive")
	}
	if kind == "articles" && !flagSet(fs, "batch") {
		*batch = 500
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
	p := &producer{url: strings.TrimRight(*addr, "/") + paths[kind], runID: hex.EncodeToString(runID[:]),
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

type producer struct {
	url                string
	token              string
	runID              string
	retryFor           time.Duration
	client             *http.Client
	stderr             io.Writer
	seq                int
	accepted, rejected int
}

func (p *producer) send(ctx context.Context, body []byte, firstLine int) error {
	p.seq++
	key := fmt.Sprintf("produce-%s-%d", p.runID, p.seq)
	deadline := time.Now().Add(p.retryFor)
	backoff := 100 * time.Millisecond
	for {
		status, resp, err := p.post(ctx, key, body)
		if err == nil && status != http.StatusServiceUnavailable && status != http.StatusConflict && status < 500 {
			var res struct {
				Accepted int    `json:"accepted"`
				Rejected int    `json:"rejected"`
				Error    string `json:"error"`
				Errors   []struct {
					Line  int    `json:"line"`
					Error string `json:"error"`
				} `json:"errors"`
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
			return nil
		}
		if err == nil {
			err = fmt.Errorf("status %d: %s", status, bytes.TrimSpace(resp))
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("batch at line %d: giving up: %w", firstLine, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

func (p *producer) post(ctx context.Context, key string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/x-ndjson")
	req.Header.Set("Idempotency-Key", key)
	if p.token != "" {
		req.Header.Set("Authorization", "Bearer "+p.token)
	}
	resp, err := p.client.Do(req)
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
	n, err := cf.openNode(ctx)
	if err != nil {
		return err
	}
	defer n.close()
	start := time.Now()
	ops := splitList(*op)
	if len(ops) == 0 {
		return errors.New("replay: --operator names no operator")
	}
	for _, name := range ops {
		if err := n.engine.Replay(ctx, name, func(tp eventlog.TopicPartition) (int64, error) { return from(ctx, n.log, tp) }); err != nil {
			return err
		}
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- n.engine.Run(rctx) }()
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
		ok, err := n.engine.CaughtUp(ctx)
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

// flagSet reports whether the flag was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
