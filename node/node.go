package node

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"github.com/newsflow/newsflow/cluster"
	"github.com/newsflow/newsflow/crawl"
	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/engine/eventlog/embedded"
	"github.com/newsflow/newsflow/engine/eventlog/kafkalog"
	"github.com/newsflow/newsflow/internal/classify"
	"github.com/newsflow/newsflow/internal/fetch"
	"github.com/newsflow/newsflow/internal/meta"
	"github.com/newsflow/newsflow/internal/opml"
	"github.com/newsflow/newsflow/internal/option"
	"github.com/newsflow/newsflow/internal/redact"
	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/internal/tick"
	"github.com/newsflow/newsflow/internal/tracing"
	"github.com/newsflow/newsflow/node/slo"
	"github.com/newsflow/newsflow/operators/articles"
	"github.com/newsflow/newsflow/operators/idempotency"
	"github.com/newsflow/newsflow/operators/interest"
	"github.com/newsflow/newsflow/operators/readstate"
	"github.com/newsflow/newsflow/operators/search"
	"github.com/newsflow/newsflow/operators/story"
	"github.com/newsflow/newsflow/operators/trending"
	"github.com/newsflow/newsflow/operators/webhook"
	"github.com/newsflow/newsflow/query"
	"github.com/newsflow/newsflow/query/auth"
	"github.com/newsflow/newsflow/state"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"
)

// Node is one running newsflow process: log, state, engine, operators and
// the HTTP server, wired from a Config. Open it, Run it, Close it.
type Node struct {
	cfg      Config
	opts     Options
	ownLog   bool // the node opened the log and closes it
	logger   *slog.Logger
	reg      *prometheus.Registry
	log      eventlog.Log
	db       *state.DB
	engine   *engine.Engine
	trending *trending.Operator
	keys     *idempotency.Operator
	reads    *readstate.Operator
	articles *articles.Operator
	stories  *story.Operator
	search   *search.Operator
	interest *interest.Operator
	auth     *auth.Store
	limiter  *auth.Limiter
	webhooks *webhook.Store
	outbox   *webhook.Operator // the webhooks stage; nil when not registered
	sources  *crawl.Sources
	crawler  *crawl.Crawler // nil when crawling is disabled
	disk     *diskGuard
	slo      *slo.Evaluator // reads reg
	cluster  *cluster.Node  // nil unless the node is a cluster member
	tracing  *tracing.Tracing
	// notify is the crawler once it exists: the cluster's state machine
	// tells it of sources added or changed through other nodes.
	notify atomic.Pointer[crawl.Crawler]
	left   atomic.Bool // the node left its cluster (newsflow leave)
	// weights are the partitions' weights for the cluster's assignment
	// (engine.PartitionWeights), once the operators are registered.
	weights atomic.Pointer[[]int]
}

// NewLogger returns the logger the logging section configures, writing
// to standard error. Every record is masked of credentials first
// (redact.Handler): URLs' userinfo, secret query parameters,
// Authorization values and attributes named like secrets.
func NewLogger(c LoggingConfig) (*slog.Logger, error) { return newLogger(os.Stderr, c) }

func newLogger(w io.Writer, c LoggingConfig) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(c.Level)); err != nil {
		return nil, fmt.Errorf("config: logging.level %q: %w", c.Level, err)
	}
	ho := &slog.HandlerOptions{Level: lvl}
	switch c.Format {
	case "text", "":
		return slog.New(redact.NewHandler(slog.NewTextHandler(w, ho))), nil
	case "json":
		return slog.New(redact.NewHandler(slog.NewJSONHandler(w, ho))), nil
	}
	return nil, fmt.Errorf("config: logging.format %q: want text or json", c.Format)
}

func openLog(ctx context.Context, cfg Config, logger *slog.Logger) (eventlog.Log, error) {
	if cfg.Log.Backend == "kafka" {
		return kafkalog.Open(ctx, cfg.kafkaOptions(logger))
	}
	o := cfg.Log.Embedded
	o.Dir, o.Logger = filepath.Join(cfg.DataDir, "log"), logger
	return embedded.Open(o)
}

// Options are what a program that embeds a node may give it beyond the
// configuration. The zero value is what newsflow run uses.
type Options struct {
	// Logger receives the node's logs (default: discarded).
	Logger *slog.Logger
	// Now is the clock of accounts, sessions, sources and the login
	// limiter (default time.Now).
	Now func() time.Time
	// Log, if set, is the log the node runs on instead of opening the
	// configured one; the caller closes it after the node.
	Log eventlog.Log
	// Meta, if set, holds the metadata (sources, accounts, sessions)
	// instead of the node's state store.
	Meta meta.Store
	// Console is where the node prints what is for whoever started it
	// and never goes into the log: the one-time setup link (default
	// standard error).
	Console io.Writer
	// Operators, if set, names the operators to register (as newsflow
	// topology lists them: trending, articles, stories, search,
	// reads-enrich, interest); default all. The query server answers 404
	// or 503 for what the node does not run.
	Operators []string
}

// Open opens the log and the state and registers the operators. The
// caller closes the node.
func Open(ctx context.Context, cfg Config, opts Options) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	for _, name := range opts.Operators {
		if !slices.Contains(operatorNames, name) {
			return nil, fmt.Errorf("node: operator %q: want one of %v", name, operatorNames)
		}
	}
	cfg.MemoryPlan().apply(&cfg)
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	logger := cmp.Or(opts.Logger, slog.New(slog.DiscardHandler))
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	n := &Node{cfg: cfg, opts: opts, logger: logger, reg: prometheus.NewRegistry(), log: opts.Log}
	n.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), nodeCollector{n})
	var err error
	if n.slo, err = slo.New(n.reg, slo.Options{Now: now, Logger: logger}); err != nil {
		return nil, err
	}
	if n.log == nil {
		if n.log, err = openLog(ctx, cfg, logger); err != nil {
			return nil, fmt.Errorf("open log: %w", err)
		}
		n.ownLog = true
	}
	so := cfg.State
	so.Logger = logger
	if n.db, err = state.Open(filepath.Join(cfg.DataDir, "state"), so); err != nil {
		n.closeLog()
		return nil, err
	}
	store := cmp.Or[meta.Store](opts.Meta, meta.NewLocal(n.db))
	if cfg.Clustered() {
		onMeta := func(collection, key string) {
			switch c := n.notify.Load(); {
			case c == nil:
			case collection == crawl.Collection:
				c.Notify(key)
			case collection == "":
				c.Kick() // a snapshot replaced every source
			}
		}
		// The partitions' weights are known once the operators are
		// registered, below.
		weights := func() []int {
			if w := n.weights.Load(); w != nil {
				return *w
			}
			return nil
		}
		if n.cluster, err = startCluster(ctx, cfg, n.db, logger, onMeta, weights); err != nil {
			n.db.Close()
			n.closeLog()
			return nil, err
		}
		store = n.cluster.Meta()
	}
	n.sources = crawl.NewSources(store, opts.Now)
	n.sources.SetMinIntervalFloor(cfg.Crawl.MinIntervalFloor)
	if n.auth, err = auth.NewStore(store, now, cfg.Auth.Options); err != nil {
		n.Close()
		return nil, fmt.Errorf("auth: %w", err)
	}
	if n.limiter, err = auth.NewLimiter(cfg.Auth.Limiter, now); err != nil {
		n.Close()
		return nil, err
	}
	n.webhooks = webhook.NewStore(store, now, cfg.Webhooks.AllowHTTP)
	fail := func(err error) (*Node, error) {
		n.Close()
		return nil, err
	}
	to := cfg.Tracing
	to.InstanceID = cfg.Cluster.ID
	if n.tracing, err = tracing.Open(to, logger); err != nil {
		return fail(err)
	}
	eo := cfg.Engine
	eo.Partitions, eo.Cluster, eo.Logger, eo.Registerer = cfg.Log.Partitions, eo.Cluster || n.cluster != nil, logger, n.reg
	eo.Tracer = n.tracing.Engine()
	n.engine, err = engine.New(n.log, n.db, eo)
	if err != nil {
		return fail(err)
	}
	if err := n.registerOperators(cfg); err != nil {
		return fail(err)
	}
	weights := n.engine.PartitionWeights()
	n.weights.Store(&weights)
	dc := cfg.Disk
	option.Fill(&dc, DefaultDiskConfig())
	if n.disk, err = newDiskGuard(cfg.DataDir, dc, logger, n.reg,
		func(reason string) { n.engine.Hold("disk", reason) }, func() { n.engine.Release("disk") }); err != nil {
		return fail(err)
	}
	n.disk.start()
	if cfg.Crawl.Enabled {
		if n.crawler, err = newCrawler(cfg.Crawl, n, logger); err != nil {
			return fail(err)
		}
		n.notify.Store(n.crawler)
	}
	return n, nil
}

// Close stops the cluster member and closes the state and the log (if the
// node opened it). It returns every error it met, and logs them too.
func (n *Node) Close() error {
	var errs []error
	report := func(what string, err error) {
		if err != nil {
			n.logger.Error(what, "err", err)
			errs = append(errs, fmt.Errorf("%s: %w", what, err))
		}
	}
	// The cluster's state machine writes to the state store: stop it first.
	if n.cluster != nil {
		report("close cluster member", n.cluster.Close())
		if n.left.Load() {
			if err := markLeft(n.cfg.ClusterDir()); err != nil {
				report("remove the Raft state of the cluster the node left", err)
			} else {
				n.logger.Info("left the cluster; removed its Raft state", "dir", n.cfg.ClusterDir())
			}
		}
	}
	if n.db != nil {
		report("close state", n.db.Close())
	}
	report("close log", n.closeLog())
	// Last: the spans of the engine's final commits have ended.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	report("shut down tracing", n.tracing.Shutdown(ctx))
	cancel()
	return errors.Join(errs...)
}

// closeLog closes the log if the node opened it.
func (n *Node) closeLog() error {
	if n.log != nil && n.ownLog {
		return n.log.Close()
	}
	return nil
}

// ensureTopics makes the topics that producers may write before any
// operator reads them, and trending.changes with one partition (one order
// for every consumer) before the engine would make it with its count.
func (n *Node) ensureTopics(ctx context.Context) error {
	topics := map[string]int32{schema.TopicShares: n.engine.Partitions(), schema.TopicReads: n.engine.Partitions(),
		schema.TopicArticlesRaw: n.engine.Partitions(), idempotency.Topic: n.engine.Partitions(), readstate.Topic: n.engine.Partitions(), schema.TopicTrendingChanges: 1}
	for topic, parts := range topics {
		if _, err := eventlog.EnsureTopic(ctx, n.log, topic, parts); err != nil {
			return fmt.Errorf("ensure topic %s: %w", topic, err)
		}
	}
	return nil
}

// Run serves until ctx is done: first the HTTP server stops taking
// requests, then the engine commits its last batches, then the node closes.
func (n *Node) Run(ctx context.Context, ln net.Listener) error {
	// After newsflow leave the node has no partitions and no membership:
	// it stops.
	ctx, leave := context.WithCancel(ctx)
	defer leave()
	if err := n.ensureTopics(ctx); err != nil {
		return err
	}
	setupToken, err := n.setupToken(ctx)
	if err != nil {
		return err
	}
	ownLn := ln == nil && setupToken != ""
	if ownLn {
		// Listen here, so that the setup link names the address served.
		if ln, err = net.Listen("tcp", n.cfg.HTTP.Addr); err != nil {
			return fmt.Errorf("query: listen %s: %w", n.cfg.HTTP.Addr, err)
		}
	}
	qo := n.cfg.HTTP
	a := n.cfg.Auth
	qo.AdminToken, qo.IngestToken, qo.CookieSecure, qo.TrustedOrigins = a.AdminToken, a.IngestToken, a.CookieSecure, a.TrustedOrigins
	qo.ReadersAddSources = a.ReadersAddSources
	qo.MaxPast = n.cfg.Trending.MaxPast()
	qo.Logger, qo.Registerer, qo.Gatherer, qo.DataDir = n.logger, n.reg, n.reg, n.cfg.DataDir
	qo.PeerTimeout, qo.OnLeave, qo.SetupToken = n.cfg.Cluster.QueryTimeout, func() { n.left.Store(true); leave() }, setupToken
	qo.FailoverTimeout = n.cfg.Cluster.FailoverTimeout
	qo.Images.Fetch = n.cfg.Crawl.fetchOptions(n.logger)
	qo.Tracing = n.tracing
	qo.TrendingChanges = query.ChangesOptions{Disabled: !n.cfg.Trending.Changes.Enabled}
	srv, err := query.New(n.Deps(), qo)
	if err != nil {
		if ownLn {
			ln.Close()
		}
		return err
	}
	if setupToken != "" {
		n.announceSetup(cmp.Or[io.Writer](n.opts.Console, os.Stderr), "http://"+Dialable(ln.Addr().String()), setupToken)
	}
	// The tasks' restores scan their state once: keep those reads from
	// filling the block cache, until the node is ready.
	releaseCache := n.db.HoldCache()
	defer releaseCache()
	engineCtx, stopEngine := context.WithCancel(context.Background())
	defer stopEngine()
	var engineErr error
	engineDone := make(chan struct{})
	go func() {
		defer close(engineDone)
		engineErr = n.engine.Run(engineCtx)
	}()
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return srv.Run(gctx, ln) })
	if n.crawler != nil {
		if err := n.seedSources(ctx); err != nil {
			n.logger.Warn("seed sources", "err", err)
		}
		g.Go(func() error { return n.crawler.Run(gctx) })
	}
	g.Go(func() error { return n.sweepSessions(gctx) })
	g.Go(func() error { n.migrateReads(gctx); return nil })
	g.Go(func() error { return n.disk.Run(gctx) })
	g.Go(func() error { return n.slo.Run(gctx) })
	if n.outbox != nil {
		d, err := n.webhookDispatcher()
		if err != nil {
			return err
		}
		g.Go(func() error { return d.Run(gctx) })
	}
	if n.cluster != nil {
		g.Go(func() error { n.followAssignments(gctx); return nil })
	}
	g.Go(func() error {
		select {
		case <-engineDone:
			if engineErr != nil {
				return fmt.Errorf("engine: %w", engineErr)
			}
			return errors.New("engine stopped")
		case <-gctx.Done():
			return nil
		}
	})
	start := time.Now()
	go func() {
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for !n.engine.Ready() {
			select {
			case <-gctx.Done():
				return
			case <-t.C:
			}
		}
		releaseCache()
		n.logger.Info("ready", "restore", time.Since(start).Round(time.Millisecond))
	}()
	err = g.Wait()
	// Phase two: the server has stopped taking requests; let the engine
	// commit what it has applied, then close.
	stopEngine()
	select {
	case <-engineDone:
		if err == nil && engineErr != nil {
			err = engineErr
		}
	case <-time.After(30 * time.Second):
		n.logger.Error("engine did not stop within 30s")
	}
	return err
}

// setupToken returns a new one-time setup token when no account has the
// admin role and no admin token is configured (whoever holds it creates
// the first admin with it), else "".
func (n *Node) setupToken(ctx context.Context) (string, error) {
	if n.cfg.Auth.AdminToken != "" {
		return "", nil
	}
	if ok, err := n.auth.HasAdmin(ctx); ok || err != nil {
		return "", err
	}
	return query.NewSetupToken()
}

// announceSetup tells, once at start, where to create the first admin:
// the link with its token only on w (standard error) for whoever started
// the node; the log says only that it was printed, since logs are
// collected and kept where the token must not go.
func (n *Node) announceSetup(w io.Writer, base, token string) {
	url := query.SetupURL(base, token)
	n.logger.Warn("no admin account exists yet: a one-time link to create the first one was printed on standard error " +
		"(valid until an admin exists or the node stops)")
	fmt.Fprintf(w, `
newsflow: no admin account exists yet. Create the first one here (the link works once, until the node stops):

    %s

  or from a shell:  newsflow user add --admin --setup-token %s NAME

`, url, token)
}

// operatorNames are the operators a node can run, as topology names them.
var operatorNames = []string{trending.Name, trending.ChangesName, articles.Name, story.Name, search.Name, interest.EnrichName, interest.Name, idempotency.Name, readstate.Name}

// registerOperators registers the operators of a node on n.engine (all,
// unless Options.Operators names some): trending, then the article
// pipeline. newsflow topology registers the same, so it lists what a node
// runs.
func (n *Node) registerOperators(cfg Config) error {
	want := func(name string) bool { return len(n.opts.Operators) == 0 || slices.Contains(n.opts.Operators, name) }
	var ops []engine.Operator
	var err error
	if want(trending.Name) {
		to := cfg.Trending.OperatorOptions
		to.Retention = cfg.Retention.Articles
		if cfg.Trending.Changes.Enabled {
			to.PublishTops = cfg.Trending.Changes.K
		}
		if n.trending, err = trending.New(to, n.engine.Partitions(), n.reg); err != nil {
			return err
		}
		ops = append(ops, n.trending)
	}
	if want(trending.ChangesName) && cfg.Trending.Changes.Enabled {
		changes, err := trending.NewChanges(cfg.Trending.OperatorOptions, cfg.Trending.Changes.K, n.reg)
		if err != nil {
			return err
		}
		ops = append(ops, changes)
	}
	if want(articles.Name) {
		if n.articles, err = n.newArticles(cfg); err != nil {
			return err
		}
		ops = append(ops, n.articles)
	}
	if want(story.Name) {
		so := cfg.Stories
		so.Builder.Retention = cfg.Retention.Articles
		if n.stories, err = story.New(so, n.engine.Partitions(), n.reg); err != nil {
			return err
		}
		ops = append(ops, n.stories)
	}
	if want(search.Name) {
		so := cfg.Search
		so.Retention = cfg.Retention.Articles
		if n.search, err = search.New(filepath.Join(cfg.DataDir, "search"), so, n.engine.Partitions()); err != nil {
			return err
		}
		ops = append(ops, n.search)
	}
	if want(interest.EnrichName) {
		eo := cfg.Interest.Enrich
		eo.Retention = cfg.Retention.Articles
		enrich, err := interest.NewEnrich(eo, n.engine.Partitions())
		if err != nil {
			return err
		}
		ops = append(ops, enrich)
	}
	if want(interest.Name) {
		io := cfg.Interest.Options
		io.DedupHorizon = cfg.Trending.DedupHorizon()
		io.HistoryAge = cfg.Retention.History
		if n.interest, err = interest.New(io, n.engine.Partitions(), n.reg); err != nil {
			return err
		}
		ops = append(ops, n.interest)
	}
	if want(idempotency.Name) {
		if n.keys, err = idempotency.New(idempotency.Options{TTL: cfg.HTTP.IdempotencyTTL}, n.engine.Partitions(), n.log); err != nil {
			return err
		}
		ops = append(ops, n.keys)
	}
	if want(readstate.Name) {
		n.reads = readstate.NewOperator(n.engine.Partitions(), n.log)
		ops = append(ops, n.reads)
	}
	if want(webhook.Name) {
		n.outbox = webhook.NewOperator(cfg.Webhooks, n.webhooks)
		ops = append(ops, n.outbox)
	}
	for _, op := range ops {
		if err := n.engine.Register(op); err != nil {
			return err
		}
	}
	return nil
}

// fetchOptions are the crawler's fetcher settings; the image proxy dials
// with the same, so it reaches exactly what the crawler may.
func (c CrawlConfig) fetchOptions(logger *slog.Logger) fetch.Options {
	o := c.Fetch
	o.Logger = logger
	return o
}

func newCrawler(c CrawlConfig, n *Node, logger *slog.Logger) (*crawl.Crawler, error) {
	o := c.Options
	o.Partitions, o.Logger, o.Registerer, o.Tracing = n.cfg.Log.Partitions, logger, n.reg, n.tracing
	o.FullText = crawl.FullTextOptions{Disabled: !c.FullText.Enabled, MinWords: c.FullText.MinWords, MaxPerCrawl: c.FullText.MaxPerCrawl,
		MaxBytes: n.cfg.Articles.MaxContentBytes}
	if n.cluster != nil {
		// A source is crawled by the node that owns its partition.
		o.Owns = func(id string) bool {
			_, ok := n.engine.Assigned()[eventlog.PartitionFor([]byte(id), n.engine.Partitions())]
			return ok
		}
	}
	o.Fetch = c.fetchOptions(logger)
	o.Hold = n.disk.Held
	return crawl.New(n.sources, n.log, n.db, o)
}

// queryCrawler keeps a nil *crawl.Crawler from becoming a non-nil interface.
func (n *Node) queryCrawler() query.Crawler {
	if n.crawler == nil {
		return nil
	}
	return n.crawler
}

// seedSources imports the seed OPML list when the node has no sources yet.
func (n *Node) seedSources(ctx context.Context) error {
	path := n.cfg.Crawl.SeedOPML
	if path == "" || (n.cluster != nil && !n.cfg.Cluster.Bootstrap) {
		// A node that joins a cluster takes the cluster's sources, which
		// its replica may not have yet.
		return nil
	}
	list, err := n.sources.List(ctx)
	if err != nil || len(list) > 0 {
		return err
	}
	entries, err := opml.ParseFile(path)
	if err != nil {
		return err
	}
	res := n.sources.Import(ctx, entries)
	n.logger.Info("seeded sources", "file", path, "added", res.Added, "invalid", len(res.Errors))
	return nil
}

// newArticles returns the articles operator (dedup, clean, classify),
// which names each article's source from the node's sources.
func (n *Node) newArticles(cfg Config) (*articles.Operator, error) {
	cls, err := classify.New(cfg.Articles.Classify)
	if err != nil {
		return nil, fmt.Errorf("articles: topic classifier: %w", err)
	}
	info := func(id string) (string, float64, bool) {
		src, err := n.sources.Get(context.Background(), id)
		if err != nil {
			return "", 0, false
		}
		return src.Name, src.Authority, true
	}
	ao := cfg.Articles.Options
	ao.Retention = cfg.Retention.Articles
	return articles.New(ao, cls, info, n.reg)
}

// sweepSessions deletes expired sessions, and the read marks retention no
// longer needs (forgetReads), every hour until ctx is done.
func (n *Node) sweepSessions(ctx context.Context) error {
	return tick.Every(ctx, time.Hour, func() {
		if deleted, err := n.auth.Sweep(ctx); err != nil {
			n.logger.Warn("sweep expired sessions", "err", err)
		} else if deleted > 0 {
			n.logger.Info("expired sessions deleted", "count", deleted)
		}
		if deleted, err := n.forgetReads(ctx, time.Now()); err != nil {
			n.logger.Warn("forget old read marks", "err", err)
		} else if deleted > 0 {
			n.logger.Info("old read marks deleted", "count", deleted)
		}
	})
}

// forgetReads deletes every reader's marks on articles published longer
// ago than both retention.articles and retention.history (the stages no
// longer list them), and returns how many it deleted. Negative retention
// keeps them. In a cluster only the leader sweeps: each deletion is one
// action on the readers' topic, which every node applies.
func (n *Node) forgetReads(ctx context.Context, now time.Time) (int, error) {
	r := n.cfg.Retention
	if r.Articles < 0 || r.History < 0 || (n.cluster != nil && !n.cluster.IsLeader()) {
		return 0, nil
	}
	users, err := n.auth.ListUsers(ctx)
	if err != nil {
		return 0, err
	}
	reads := n.readStore()
	before := now.Add(-max(r.Articles, r.History)).UnixMilli()
	total := 0
	for _, u := range users {
		d, err := reads.Forget(ctx, u.ID, before)
		if err != nil {
			return total, err
		}
		total += d
	}
	return total, nil
}

// readStore is the readers' state: the readstate operator's, or the
// metadata store's on a node that does not run it.
func (n *Node) readStore() *readstate.Store {
	if n.reads != nil {
		return n.reads.Store(n.auth.Meta(), nil)
	}
	return readstate.New(n.auth.Meta(), nil)
}

// migrateReads moves the readers' state an older release kept in the
// metadata store into the readstate operator, once the engine is ready:
// on a single node, or on the cluster's leader. It tries again every
// 10 s until it has moved everything, and logs what it moved.
func (n *Node) migrateReads(ctx context.Context) {
	if n.reads == nil || n.auth == nil {
		return
	}
	for {
		for !n.engine.Ready() || (n.cluster != nil && !n.cluster.IsLeader()) {
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
		err := func() error {
			users, err := n.auth.ListUsers(ctx)
			if err != nil {
				return err
			}
			ids := make([]string, len(users))
			for i, u := range users {
				ids[i] = u.ID
			}
			moved, err := readstate.Migrate(ctx, n.auth.Meta(), n.reads.Store(n.auth.Meta(), nil), ids)
			if moved > 0 {
				n.logger.Info("moved readers' state from the metadata store to the readstate operator", "keys", moved, "users", len(ids))
			}
			return err
		}()
		if err == nil {
			return
		}
		n.logger.Warn("move readers' state to the readstate operator", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(10 * time.Second):
		}
	}
}

// webhookDispatcher delivers the webhooks stage's outbox from the node
// that runs its task, through the crawler's fetch options (its SSRF guard
// and allowed addresses); a delivery that fails its last try goes to the
// dead-letter topic with its reason. The outbox is the stage's state, so
// the node that runs the task next (after a restart, a crash, a failover)
// resumes every pending delivery.
func (n *Node) webhookDispatcher() (*webhook.Dispatcher, error) {
	f, err := fetch.New(n.cfg.Crawl.fetchOptions(n.logger))
	if err != nil {
		return nil, fmt.Errorf("webhooks: %w", err)
	}
	opts := n.cfg.Webhooks
	timeout := cmp.Or(opts.Timeout, webhook.DefaultOptions().Timeout)
	dlq := n.engine.Options().DeadLetterTopic
	dead := func(ctx context.Context, h webhook.Hook, body []byte, reason string) error {
		rec := &eventlog.Record{Topic: dlq, Partition: 0, Key: []byte(h.ID), Value: body, Timestamp: time.Now().UnixMilli(),
			Headers: []eventlog.Header{{Key: engine.HeaderDLQReason, Value: []byte(reason)}, {Key: engine.HeaderDLQStage, Value: []byte("webhook")},
				{Key: "nf-webhook-url", Value: []byte(redact.URL(h.URL))}}}
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		return n.log.Append(actx, []*eventlog.Record{rec})
	}
	report := func(ctx context.Context, e webhook.Event) error {
		return n.log.Append(ctx, []*eventlog.Record{e.Record(time.Now())})
	}
	isWriter := func() bool {
		f, ok := n.engine.Freshness(webhook.Name, engine.SingletonPartition)
		return ok && f.Source == "task"
	}
	d, err := webhook.New(opts, n.webhooks, n.outbox, f.Client(timeout), dead, report, isWriter, n.logger.With("component", "webhooks"))
	if err != nil {
		return nil, err
	}
	return d, d.Register(n.reg)
}

// Webhooks returns the node's webhook store.
func (n *Node) Webhooks() *webhook.Store { return n.webhooks }
