// Command newsflow runs the newsflow news aggregation engine and its tools.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/newsflow/newsflow/node"
)

const usage = `newsflow: a news aggregator built as a partitioned stream processor.

Usage:
  newsflow run      [flags] [--bootstrap | --join ADDRS] [--node-id ID] [--raft ADDR]
                                            run a node (embedded log unless --brokers);
                                            --bootstrap/--join make it a cluster member
  newsflow status   [--addr URL] [--json]   a node's status: alone, its stages and partitions with lag,
                                            stores and dead letters; in a cluster, the nodes, the leader
                                            and every partition with owner, lag and state size
  newsflow leave    [--addr URL]            the node gives up its partitions and stops
  newsflow stage    list | pause STAGE | resume STAGE [--addr URL]
                                            a node's stages (tasks, paused, lag); pause a stage's tasks on
                                            that node (they commit and wait; lag grows) or resume them
  newsflow topology [flags] [--json]        list the operators, stages and topics a node with this
                                            configuration runs (as its /api/v1/admin/topology)
  newsflow produce  shares|reads|articles FILE [--addr URL] [--token T] [--retry-for D]
                                            send NDJSON share events or raw articles to a running node;
                                            while it cannot be reached, retry for --retry-for (30s), then fail
  newsflow replay   --from-offset N | --from-time T [--operator NAMES] [flags]
                                            rebuild operators' state from the log (node stopped)
  newsflow sources  add URL | import FILE | export [--addr URL]
                                            manage a running node's sources (OPML); add checks that URL
                                            is a feed, or a page naming one, that the crawler may fetch
                                            (--no-discover: take it as given; --name, --category)
  newsflow feedfarm [DIR] [--addr ADDR] [--faults]
                                            serve feed files, generated feeds and faults over HTTP
  newsflow demo     [--http ADDR] [--data DIR] [--farm ADDR] [--users N] [--rate R]
                                            a node fed by generated news and simulated readers (offline)
  newsflow topics   train | eval [flags]     train or evaluate a topic classifier
  newsflow user     add [--admin] [--password-file FILE] NAME | hash | import FILE
                                            create accounts (node stopped; passwords from stdin)
  newsflow cluster  --input FILE [--output FILE] [--truth]
                                            run dedup and story clustering offline (id<TAB>story_id)
  newsflow stories  train | eval [flags]     train or evaluate the learned story model (story-grouped folds)
  newsflow version

Common flags (after the command):
  --config FILE     YAML configuration (default: configs/newsflow.yaml if present)
  --data DIR        data directory (data_dir)
  --http ADDR       HTTP listen address (http.addr)
  --brokers LIST    comma-separated Kafka brokers; selects the kafka log backend
  --partitions N    partitions per topic (log.partitions)
  --log-level LVL   debug, info, warn or error (logging.level)

Commands that call a running node (status, leave, stage, sources) take --addr (default
http://127.0.0.1:8080) and --token: the node's admin token (its auth.admin_token,
e.g. NEWSFLOW_AUTH_ADMIN_TOKEN=... when it starts) or an admin account's session
token; --token defaults to $NEWSFLOW_ADMIN_TOKEN. produce takes --token for the
ingestion token (auth.ingest_token; default $NEWSFLOW_INGEST_TOKEN).

Environment variables NEWSFLOW_<SECTION>_<FIELD> (e.g. NEWSFLOW_HTTP_ADDR)
override the file; flags override both.
`

var version = "dev"

// commands are the commands that write to standard output and error only.
var commands = map[string]func(ctx context.Context, args []string, stdout, stderr io.Writer) error{
	"topology": cmdTopology, "produce": cmdProduce, "replay": cmdReplay, "sources": cmdSources,
	"feedfarm": cmdFeedfarm, "demo": cmdDemo, "topics": cmdTopics, "cluster": cmdCluster, "stories": cmdStories,
	"status": cmdStatus, "leave": cmdLeave, "stage": cmdStage,
}

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "newsflow:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("no command")
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd, args := args[0], args[1:]
	switch cmd {
	case "run":
		return cmdRun(ctx, args, stderr)
	case "user":
		return cmdUser(ctx, args, os.Stdin, stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, "newsflow", version)
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	if f, ok := commands[cmd]; ok {
		return f(ctx, args, stdout, stderr)
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", cmd)
}

// commonFlags are the flags every node-opening command takes.
type commonFlags struct {
	config, data, http, brokers, logLevel string
	partitions                            int

	// newsflow run only
	bootstrap              bool
	join, nodeID, raftAddr string
}

// registerCluster adds the cluster membership flags of newsflow run.
func (c *commonFlags) registerCluster(fs *flag.FlagSet) {
	fs.BoolVar(&c.bootstrap, "bootstrap", false, "start a new cluster with this node (cluster.bootstrap)")
	fs.StringVar(&c.join, "join", "", "comma-separated HTTP addresses of cluster members to join (cluster.join)")
	fs.StringVar(&c.nodeID, "node-id", "", "this node's name in the cluster (cluster.id)")
	fs.StringVar(&c.raftAddr, "raft", "", "Raft listen address (cluster.raft_addr)")
}

func (c *commonFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.config, "config", "", "YAML configuration file")
	fs.StringVar(&c.data, "data", "", "data directory")
	fs.StringVar(&c.http, "http", "", "HTTP listen address")
	fs.StringVar(&c.brokers, "brokers", "", "comma-separated Kafka brokers (kafka backend)")
	fs.StringVar(&c.logLevel, "log-level", "", "log level")
	fs.IntVar(&c.partitions, "partitions", 0, "partitions per topic")
}

// load builds the configuration: defaults, file, environment, flags.
func (c *commonFlags) load() (node.Config, error) {
	path := c.config
	if path == "" {
		if _, err := os.Stat("configs/newsflow.yaml"); err == nil {
			path = "configs/newsflow.yaml"
		}
	}
	cfg, err := node.Load(path, os.Environ())
	if err != nil {
		return cfg, err
	}
	if c.data != "" {
		cfg.DataDir = c.data
	}
	if c.http != "" {
		cfg.HTTP.Addr = c.http
	}
	if c.brokers != "" {
		if err := setScalarString(&cfg.Log.Brokers, c.brokers); err != nil {
			return cfg, err
		}
		cfg.Log.Backend = "kafka"
	}
	if c.logLevel != "" {
		cfg.Logging.Level = c.logLevel
	}
	if c.partitions != 0 {
		cfg.Log.Partitions = int32(c.partitions)
	}
	if c.bootstrap {
		cfg.Cluster.Bootstrap = true
	}
	if c.join != "" {
		cfg.Cluster.Join = node.SplitList(c.join)
	}
	if c.nodeID != "" {
		cfg.Cluster.ID = c.nodeID
	}
	if c.raftAddr != "" {
		cfg.Cluster.RaftAddr = c.raftAddr
	}
	return cfg, cfg.Validate()
}

// openNode loads the configuration and opens a node from it.
func (c *commonFlags) openNode(ctx context.Context) (*node.Node, error) {
	cfg, err := c.load()
	if err != nil {
		return nil, err
	}
	logger, err := node.NewLogger(cfg.Logging)
	if err != nil {
		return nil, err
	}
	for _, name := range cfg.UnknownEnv() {
		logger.Warn("environment variable names no setting; ignored", "name", name)
	}
	for _, w := range cfg.Warnings() {
		logger.Warn(w)
	}
	limitMemory(cfg.MemoryPlan(), logger)
	n, err := node.Open(ctx, cfg, node.Options{Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("%w (data dir %s: is another node running on it?)", err, cfg.DataDir)
	}
	return n, nil
}

// limitMemory gives the Go runtime the plan's soft limit, unless
// GOMEMLIMIT sets one.
func limitMemory(p node.MemoryPlan, logger *slog.Logger) {
	p.Log(logger)
	switch {
	case p.GoLimit == 0:
	case os.Getenv("GOMEMLIMIT") != "":
		logger.Info("GOMEMLIMIT is set: it, not memory_limit, is the Go runtime's limit", "GOMEMLIMIT", os.Getenv("GOMEMLIMIT"))
	default:
		debug.SetMemoryLimit(p.GoLimit)
	}
}

func cmdRun(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf commonFlags
	cf.register(fs)
	cf.registerCluster(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	n, err := cf.openNode(ctx)
	if err != nil {
		return err
	}
	closed := make(chan struct{})
	defer func() {
		n.Close()
		close(closed)
	}()
	cfg, logger := n.Config(), n.Logger()
	// A signal ends the node within shutdown_timeout, whatever is stuck.
	go func() {
		select {
		case <-ctx.Done():
		case <-closed:
			return
		}
		t := time.NewTimer(cfg.ShutdownTimeout)
		defer t.Stop()
		select {
		case <-closed:
		case <-t.C:
			logger.Error("shutdown did not end within shutdown_timeout; exiting now", "shutdown_timeout", cfg.ShutdownTimeout)
			os.Exit(3)
		}
	}()
	logger.Info("newsflow starting", "version", version, "data", cfg.DataDir, "backend", cfg.Log.Backend, "partitions", cfg.Log.Partitions)
	if err := n.Run(ctx, nil); err != nil && ctx.Err() == nil {
		return err
	}
	logger.Info("newsflow stopped")
	return nil
}
