package query

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/newsflow/newsflow/cluster"

	"github.com/fasthttp/router"
	"github.com/newsflow/newsflow/crawl"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/internal/option"
	"github.com/newsflow/newsflow/internal/tracing"
	"github.com/newsflow/newsflow/operators/idempotency"
	"github.com/newsflow/newsflow/operators/readstate"
	"github.com/newsflow/newsflow/operators/webhook"
	"github.com/newsflow/newsflow/query/auth"
	"github.com/newsflow/newsflow/query/httpkit"
	"github.com/newsflow/newsflow/query/images"
	"github.com/newsflow/newsflow/query/rank"
	"github.com/newsflow/newsflow/query/stream"
	"github.com/newsflow/newsflow/query/web"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"
	"github.com/valyala/fastjson"
)

// Options configures the server. The zero value is valid.
type Options struct {
	// Addr is the listen address (default 127.0.0.1:8080).
	Addr string `yaml:"addr"`
	// OpsAddr, if set, is a listen address of its own for /metrics and
	// /health/detailed (with /health/live and /health/ready); Addr then
	// answers 404 to those two. OpsListener, if set, is that listener
	// (for tests and embedders; OpsAddr is then not listened on).
	// OpsToken, if set, is the bearer token /metrics and /health/detailed
	// need, wherever they are served (ops.go).
	OpsAddr     string       `yaml:"ops_addr"`
	OpsListener net.Listener `yaml:"-"`
	OpsToken    string       `yaml:"ops_token"`
	// MaxBodyBytes caps the body of a batch (articles, share and read
	// batches, the OPML import; default 32 MiB), MaxAuthBodyBytes the body
	// of login, register and setup (default 4 KiB), MaxSmallBodyBytes the
	// body of every other route (default 1 MiB). A larger body gets 413
	// before it is read (bodylimit.go).
	MaxBodyBytes      int           `yaml:"max_body_bytes"`
	MaxAuthBodyBytes  int           `yaml:"max_auth_body_bytes"`
	MaxSmallBodyBytes int           `yaml:"max_small_body_bytes"`
	ReadTimeout       time.Duration `yaml:"-"` // default 30s
	WriteTimeout      time.Duration `yaml:"-"` // default 30s
	IdleTimeout       time.Duration `yaml:"-"` // default 2m
	// PeerTimeout bounds a request to another cluster node (default 2s).
	PeerTimeout time.Duration `yaml:"-"`
	// FailoverTimeout is how long a per-key query waits for the owner of
	// its partition while the partition has none that answers (its owner
	// died and the cluster moves it, or it restores on its new owner)
	// before it answers 503 (default 10s; each request to a node is still
	// bounded by PeerTimeout).
	FailoverTimeout time.Duration `yaml:"-"`
	// MetaTimeout bounds each handler's call to the metadata store
	// (accounts, sessions, API keys, preferences, sources, webhooks):
	// a write that no leader takes within it answers 503 with
	// Retry-After (default 4s, so that it answers within 5s).
	MetaTimeout time.Duration `yaml:"-"`
	// OnLeave, if set, is called after the node left its cluster
	// (POST /api/v1/admin/cluster/leave), to stop the process.
	OnLeave func() `yaml:"-"`
	// MaxFuture and MaxPast bound an ingested event's timestamp relative to
	// the server clock (defaults 5m and 23h45m: the default 24h window less
	// one bucket, trending.OperatorOptions.MaxPast).
	MaxFuture time.Duration `yaml:"max_future"`
	MaxPast   time.Duration `yaml:"-"`
	// IdempotencyTTL is how long an Idempotency-Key is remembered (default 24h).
	IdempotencyTTL time.Duration `yaml:"idempotency_ttl"`
	// IdempotencyMaxKeys is no longer used: the keys are the
	// idempotency-keys operator's state, on disk, for IdempotencyTTL. A
	// configuration that still sets it gets a warning.
	IdempotencyMaxKeys int          `yaml:"idempotency_max_keys,omitempty"`
	Logger             *slog.Logger `yaml:"-"`
	// Registerer and Gatherer: where HTTP metrics go and what /metrics serves.
	Registerer prometheus.Registerer `yaml:"-"`
	Gatherer   prometheus.Gatherer   `yaml:"-"`
	Now        func() time.Time      `yaml:"-"`
	// Tracing, if set, traces ingestion and search requests.
	Tracing *tracing.Tracing `yaml:"-"`
	// AdminToken, if set, is a bearer token that grants the admin role
	// without an account, for automation (the CLI, monitoring).
	AdminToken string `yaml:"-"`
	// IngestToken, if set, is a bearer token for trusted services: it may
	// write read and share events for any user and ingest articles. It is
	// separate from the admin token.
	IngestToken string `yaml:"-"`
	// CookieSecure marks the session cookie Secure also on plain HTTP
	// connections (a node behind a TLS-terminating proxy).
	CookieSecure bool `yaml:"-"`
	// ReadersAddSources lets readers add sources by subscribing to a new
	// feed URL through the client APIs (admins always may).
	ReadersAddSources bool `yaml:"-"`
	// TrustedOrigins are origins (scheme://host[:port]) besides the node's
	// own whose pages may send cookie-authenticated state-changing requests.
	TrustedOrigins []string `yaml:"-"`
	// TrustedProxies are CIDRs (or addresses) of reverse proxies whose
	// X-Forwarded-For is believed: the client address of every limit and
	// of the idempotency scope is then the rightmost address in it that is
	// not a trusted proxy (clientaddr.go). Empty: the peer is the client.
	TrustedProxies []string `yaml:"trusted_proxies"`
	// RateLimits bound requests per client address and per user (the zero
	// value: no limits).
	RateLimits RateLimits `yaml:",inline"`
	// Rank tunes the feed ranking.
	Rank rank.Options `yaml:"-"`
	// DataDir, if set, is the node's data directory, whose stores the
	// admin stats measure.
	DataDir string `yaml:"-"`
	// SetupToken, if set, is a one-time token (NewSetupToken) with which
	// POST /api/v1/setup/admin creates the first admin account while none
	// exists; the node prints its SetupURL at start.
	SetupToken string `yaml:"-"`
	// Images configures the image proxy (GET /api/v1/image/{id}); its
	// cache defaults to <DataDir>/image-cache.
	Images images.Options `yaml:"-"`
	// MaxStreams bounds the open /api/v1/stream connections (default
	// 1000); more are answered 503. StreamInterval is how often the
	// streams' state is computed (default 2s), StreamHeartbeat how often
	// an idle stream gets a comment (default 15s). See query/stream.
	MaxStreams      int           `yaml:"max_streams"`
	StreamInterval  time.Duration `yaml:"stream_interval"`
	StreamHeartbeat time.Duration `yaml:"stream_heartbeat"`
	// TrendingChanges configures the trending.entered stream events
	// (changes.go).
	TrendingChanges ChangesOptions `yaml:"-"`
}

// DefaultOptions returns the defaults the zero value stands for.
func DefaultOptions() Options {
	return Options{
		Addr: "127.0.0.1:8080", MaxBodyBytes: 32 << 20, MaxAuthBodyBytes: defaultMaxAuthBody, MaxSmallBodyBytes: defaultMaxSmallBody,
		ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute, PeerTimeout: peerTimeoutDefault,
		FailoverTimeout: 10 * time.Second, MetaTimeout: defaultMetaTimeout,
		MaxFuture: 5 * time.Minute, MaxPast: 23*time.Hour + 45*time.Minute, IdempotencyTTL: 24 * time.Hour,
		MaxStreams: stream.DefaultMax, StreamInterval: stream.DefaultInterval, StreamHeartbeat: stream.DefaultHeartbeat,
	}
}

// Validate reports invalid option values.
func (o Options) Validate() error {
	if o.MaxBodyBytes < 0 || o.MaxAuthBodyBytes < 0 || o.MaxSmallBodyBytes < 0 || o.ReadTimeout < 0 || o.WriteTimeout < 0 || o.IdleTimeout < 0 ||
		o.MaxFuture < 0 || o.MaxPast < 0 || o.IdempotencyTTL < 0 || o.IdempotencyMaxKeys < 0 ||
		o.MaxStreams < 0 || o.StreamInterval < 0 || o.StreamHeartbeat < 0 {
		return errors.New("query: sizes and durations must not be negative")
	}
	if o.OpsAddr != "" && o.OpsAddr == o.Addr {
		return errors.New("query: ops_addr must differ from addr")
	}
	if _, err := parseProxies(o.TrustedProxies); err != nil {
		return err
	}
	if err := o.Images.Validate(); err != nil {
		return err
	}
	return o.Rank.Validate()
}

func (o Options) withDefaults() Options {
	d := DefaultOptions()
	option.Fill(&o, d)
	// Made here, not in DefaultOptions (where a node's configuration
	// starts): each server has a registry of its own.
	option.Fill(&o, Options{Logger: slog.New(slog.DiscardHandler), Registerer: prometheus.NewRegistry(), Now: time.Now})
	return o
}

// Deps are the parts of a node the server answers from.
type Deps struct {
	Log      eventlog.Log
	Engine   Engine
	Trending Trending
	// Keys, if set, keeps the Idempotency-Keys of ingestion requests
	// (operators/idempotency); without it a request with a key is
	// answered 503.
	Keys *idempotency.Operator
	// Reads, if set with Auth, keeps the readers' marks, stars,
	// subscriptions and folders (operators/readstate); without it they
	// are kept in the metadata store, as before that operator.
	Reads *readstate.Operator
	// Sources, if set, enables the source admin API.
	Sources *crawl.Sources
	// Crawler, if set, is told about source changes and crawls on demand.
	Crawler Crawler
	// Articles and Stories, if set, enable article ingestion and the story
	// API.
	Articles Articles
	Stories  Stories
	// Search, if set, enables /api/v1/search.
	Search Search
	// Interest, if set, enables the interest profiles.
	Interest Interest
	// Auth and Limiter, if set, enable accounts, sessions, preferences and
	// personalized feeds.
	Auth    *auth.Store
	Limiter *auth.Limiter
	// Webhooks, if set with Auth, enables the breaking-news webhooks.
	Webhooks *webhook.Store
	// Cluster, if set, serves the nodes' internal API and the cluster
	// admin view.
	Cluster Cluster
	// SLO, if set, serves GET /api/v1/admin/slo.
	SLO SLO
	// State, if set, is checked by /health/detailed.
	State StateStore
	// Disk, if set, guards event and article ingestion against a nearly
	// full disk (507).
	Disk Disk
}

// Cluster is what the server asks of the node's cluster membership.
type Cluster interface {
	ID() string
	Leader() string
	State() (cluster.State, <-chan struct{})
	// Leave gives up the node's partitions and membership.
	Leave(ctx context.Context) error
	// PeerToken authenticates query requests between members
	// (HeaderPeer); it is the same on every member.
	PeerToken() string
}

// Crawler is what the admin API asks of the crawler.
type Crawler interface {
	Kick()
	CrawlNow(ctx context.Context, id string) (crawl.CrawlRecord, error)
	Resolve(ctx context.Context, raw string) (crawl.Resolved, error)
}

// Server is the HTTP API of one node.
type Server struct {
	opts    Options
	deps    Deps
	srv     *fasthttp.Server
	idem    *keyGuard
	parsers fastjson.ParserPool
	m       *httpMetrics

	feeds   *feedCache
	reads   *readstate.Store // nil without accounts
	covers  coverageCache
	rates   rateMeter
	sizes   storeSizes
	openapi []byte
	router  *router.Router

	partsMu sync.Mutex
	parts   map[string]int32 // partition count per topic, cached

	peers      *fasthttp.Client // requests to other cluster nodes
	peerErrors prometheus.Counter
	// settle tracks the partitions fanned-out queries miss (untilComplete).
	settle settling

	setup     *setupGate   // the one-time setup token (setup.go)
	adminSeen atomic.Int64 // when an admin was last seen to exist (unix ns)

	images *images.Proxy // the image proxy (query/images); nil without the story API

	stream *stream.Hub // GET /api/v1/stream (query/stream); nil without the story API

	trend *trendingCache // precomputed trending answers (trending_cache.go)

	changes *stream.Follower // follows trending.changes for the streams (query/stream); nil when disabled

	stopping atomic.Bool // Run is shutting the server down (health.go)

	ops     *fasthttp.Server // the ops listener's (ops.go); nil without one
	shares  *limiters        // anonymous share events per client address (ratelimit.go)
	proxies []netip.Prefix   // Options.TrustedProxies (clientaddr.go)
}

// New returns a server; call Run to serve.
func New(deps Deps, opts Options) (*Server, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if deps.Log == nil || deps.Engine == nil || deps.Trending == nil {
		return nil, errors.New("query: log, engine and trending are required")
	}
	opts = opts.withDefaults()
	s := &Server{opts: opts, deps: deps, parts: map[string]int32{}, feeds: newFeedCache(), setup: newSetupGate(opts.SetupToken),
		trend: newTrendingCache(deps.Trending)}
	var err error
	if s.m, err = newHTTPMetrics(opts.Registerer); err != nil {
		return nil, err
	}
	s.peerErrors = s.m.peerErrs
	s.peers = &fasthttp.Client{Name: "newsflow-peer", MaxConnsPerHost: 64, ReadTimeout: opts.PeerTimeout, WriteTimeout: opts.PeerTimeout}
	if s.proxies, err = parseProxies(opts.TrustedProxies); err != nil {
		return nil, err
	}
	rl := opts.RateLimits
	s.shares = newLimiters(rl.SharesPerIP, rl.BurstSharesIP, rl.MaxKeys, rl.IdleAfter)
	var keys idempotencyKeys
	if deps.Keys != nil {
		keys = deps.Keys
	}
	s.idem = newKeyGuard(keys, opts.IdempotencyTTL, opts.Now, opts.Logger)
	switch {
	case deps.Auth != nil && deps.Reads != nil:
		s.reads = deps.Reads.Store(deps.Auth.Meta(), opts.Now)
	case deps.Auth != nil:
		s.reads = readstate.New(deps.Auth.Meta(), opts.Now)
	}
	r := router.New()
	s.router = r
	var metrics fasthttp.RequestHandler
	if opts.Gatherer != nil {
		metrics = fasthttpadaptor.NewFastHTTPHandler(promhttp.HandlerFor(opts.Gatherer, promhttp.HandlerOpts{}))
	}
	ops := s.opsRoutes(metrics)
	s.registerOps(r, ops, false)
	if s.separateOps() {
		s.ops = s.newOpsServer(ops)
	}
	if deps.Stories != nil {
		s.stream = stream.NewHub(s.streamSource(), stream.Options{Interval: opts.StreamInterval, Heartbeat: opts.StreamHeartbeat, WriteTimeout: opts.WriteTimeout, Max: opts.MaxStreams}, s.m.streams)
		if s.images, err = images.New(opts.Images, opts.DataDir, opts.Now, opts.Registerer); err != nil {
			return nil, err
		}
	}
	if deps.Auth != nil && deps.Limiter == nil {
		return nil, errors.New("query: auth needs a login limiter")
	}
	routes := s.routes()
	httpkit.Register(r, routes, s.instrument)
	s.openapi = openAPIDocument(append(routes, ops...))
	if !opts.TrendingChanges.Disabled && s.stream != nil && deps.Log != nil {
		s.changes = stream.NewFollower(deps.Log, s.stream.Entered, opts.Logger)
	}
	ui, uiGroup, otherGroup := web.Handler(), s.groupCounter("ui"), s.groupCounter("other")
	r.NotFound = func(ctx *fasthttp.RequestCtx) {
		// Everything outside the API, health and metrics is the web UI
		// (its client-side routes included).
		if p := ctx.Path(); ctx.IsGet() && !bytes.HasPrefix(p, []byte("/api/")) && !bytes.HasPrefix(p, []byte("/health/")) {
			ui(ctx)
			uiGroup(ctx.Response.StatusCode())
			return
		}
		writeError(ctx, fasthttp.StatusNotFound, "no route for "+string(ctx.Method())+" "+string(ctx.Path()))
		otherGroup(fasthttp.StatusNotFound)
	}
	r.MethodNotAllowed = func(ctx *fasthttp.RequestCtx) {
		writeError(ctx, fasthttp.StatusMethodNotAllowed, "method "+string(ctx.Method())+" not allowed on "+string(ctx.Path()))
	}
	r.PanicHandler = func(ctx *fasthttp.RequestCtx, v any) {
		opts.Logger.Error("handler panic", "path", string(ctx.Path()), "panic", v)
		writeError(ctx, fasthttp.StatusInternalServerError, "internal error")
	}
	s.srv = &fasthttp.Server{
		Handler:            s.readBody(s.resolveClient(s.secure(s.crossSite(s.rateLimit(s.guardAdmin(r.Handler)))))),
		Name:               "newsflow",
		MaxRequestBodySize: opts.MaxBodyBytes,
		// Bodies are limited per route before they are read (readBody;
		// bodyConfig for the 8 KiB fasthttp reads first).
		HeaderReceived:    s.bodyConfig,
		StreamRequestBody: true,
		// No handler reads multipart forms: a body is not parsed (nor
		// spooled to disk) before its route has looked at it.
		DisablePreParseMultipartForm: true,
		ReadTimeout:                  opts.ReadTimeout,
		WriteTimeout:                 opts.WriteTimeout,
		IdleTimeout:                  opts.IdleTimeout,
		NoDefaultDate:                true,
		Logger:                       fasthttpLogger{opts.Logger},
		ErrorHandler:                 s.handleTransportError,
		// A response up to this size goes out in one write: with the
		// default 4 KiB, a trending top 100 (about 8 KiB with 32-hex ids)
		// took two write system calls. The buffer is kept per open
		// connection.
		WriteBufferSize: responseWriteBuffer,
	}
	return s, nil
}

// responseWriteBuffer is the server's write buffer per connection.
const responseWriteBuffer = 16 << 10

// Handler returns the server's request handler, for tests.
func (s *Server) Handler() fasthttp.RequestHandler { return s.srv.Handler }

// Run serves on ln (or on Options.Addr when ln is nil) until ctx is done,
// then stops accepting and waits for in-flight requests.
func (s *Server) Run(ctx context.Context, ln net.Listener) error {
	defer s.images.Close()
	var err error
	if ln == nil {
		ln, err = net.Listen("tcp", s.opts.Addr)
		if err != nil {
			return fmt.Errorf("query: listen %s: %w", s.opts.Addr, err)
		}
	}
	s.opts.Logger.Info("serving HTTP", "addr", ln.Addr().String())
	if s.deps.Cluster != nil && s.deps.Trending != nil && s.deps.Stories != nil {
		defer background(ctx, s.refreshClusterTrend)()
	}
	if s.stream != nil {
		defer background(ctx, s.stream.Run)()
	}
	if s.changes != nil {
		defer background(ctx, s.changes.Run)()
	}
	errc := make(chan error, 1)
	go func() { errc <- s.srv.Serve(ln) }()
	if s.ops != nil {
		opsLn := s.opts.OpsListener
		if opsLn == nil {
			if opsLn, err = net.Listen("tcp", s.opts.OpsAddr); err != nil {
				_ = s.srv.Shutdown()
				<-errc
				return fmt.Errorf("query: listen %s (ops_addr): %w", s.opts.OpsAddr, err)
			}
		}
		s.opts.Logger.Info("serving the ops endpoints", "addr", opsLn.Addr().String())
		opsDone := make(chan struct{})
		go func() {
			defer close(opsDone)
			if err := s.ops.Serve(opsLn); err != nil {
				s.opts.Logger.Error("stopped serving the ops endpoints", "err", err)
			}
		}()
		defer func() {
			_ = s.ops.Shutdown()
			<-opsDone
		}()
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.stopping.Store(true)
	// Streams last until they are told to end: end them first, so that
	// the server can drain.
	s.stream.Close()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.srv.ShutdownWithContext(sctx); err != nil {
		return fmt.Errorf("query: shutdown: %w", err)
	}
	return <-errc
}

// background runs f in a goroutine with a context derived from ctx. The
// stop it returns cancels that context and waits for f to return.
func background(ctx context.Context, f func(context.Context)) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); f(ctx) }()
	return func() { cancel(); <-done }
}

// partitions returns the partition count of topic (cached). It does not
// take the request's context: a fasthttp.RequestCtx is reused after its
// handler returns, and a Kafka client may still hold a context derived
// from it.
func (s *Server) partitions(topic string) (int32, error) {
	s.partsMu.Lock()
	n, ok := s.parts[topic]
	s.partsMu.Unlock()
	if ok {
		return n, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := s.deps.Log.Partitions(ctx, topic)
	if err != nil {
		return 0, err
	}
	s.partsMu.Lock()
	s.parts[topic] = n
	s.partsMu.Unlock()
	return n, nil
}

// errorBody is the JSON shape of every error response.
type errorBody = httpkit.ErrorBody

func writeJSON(ctx *fasthttp.RequestCtx, status int, v any) { httpkit.WriteJSON(ctx, status, v) }

func writeRaw(ctx *fasthttp.RequestCtx, status int, body []byte) { httpkit.WriteRaw(ctx, status, body) }

func writeError(ctx *fasthttp.RequestCtx, status int, msg string) {
	httpkit.WriteError(ctx, status, msg)
}

// intArg parses an optional integer query argument.
func intArg(ctx *fasthttp.RequestCtx, name string, def, lo, hi int) (int, error) {
	raw := ctx.QueryArgs().Peek(name)
	if len(raw) == 0 {
		return def, nil
	}
	n, err := strconv.Atoi(string(raw))
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("%s must be an integer from %d to %d", name, lo, hi)
	}
	return n, nil
}

// handleTransportError answers requests fasthttp could not read, in JSON
// like every other error.
func (s *Server) handleTransportError(ctx *fasthttp.RequestCtx, err error) {
	var small *fasthttp.ErrSmallBuffer
	var status int
	var msg string
	switch {
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		status, msg = fasthttp.StatusRequestEntityTooLarge, s.bodyTooLargeMessage()
	case errors.As(err, &small):
		status, msg = fasthttp.StatusRequestHeaderFieldsTooLarge, "request headers too large"
	case isTimeout(err):
		status, msg = fasthttp.StatusRequestTimeout, "timed out reading the request"
	default:
		status, msg = fasthttp.StatusBadRequest, "cannot parse request: "+err.Error()
	}
	s.m.requests.WithLabelValues("transport", strconv.Itoa(status)).Inc()
	writeError(ctx, status, msg)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

type fasthttpLogger struct{ l *slog.Logger }

func (f fasthttpLogger) Printf(format string, args ...any) { f.l.Warn(fmt.Sprintf(format, args...)) }

// Routes lists the routes the server answers, by method.
func (s *Server) Routes() map[string][]string { return s.router.List() }
