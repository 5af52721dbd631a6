package node

import (
	"bytes"
	"cmp"
	"encoding"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/newsflow/newsflow/cluster"
	"github.com/newsflow/newsflow/crawl"
	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/eventlog/embedded"
	"github.com/newsflow/newsflow/engine/eventlog/kafkalog"
	"github.com/newsflow/newsflow/internal/classify"
	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/internal/tracing"
	"github.com/newsflow/newsflow/operators/articles"
	"github.com/newsflow/newsflow/operators/interest"
	"github.com/newsflow/newsflow/operators/search"
	"github.com/newsflow/newsflow/operators/story"
	"github.com/newsflow/newsflow/operators/trending"
	"github.com/newsflow/newsflow/operators/webhook"
	"github.com/newsflow/newsflow/query"
	"github.com/newsflow/newsflow/query/auth"
	"github.com/newsflow/newsflow/state"
	"go.yaml.in/yaml/v3"
)

// Config is the whole node configuration. configs/newsflow.yaml documents
// every field; environment variables NEWSFLOW_<SECTION>_<FIELD> (e.g.
// NEWSFLOW_HTTP_ADDR) override the file and command-line flags override both.
//
// Most sections are the options of the package they configure, with yaml
// tags on the fields a file may set (fields tagged "-" are for programs,
// e.g. a test's clock): Default takes each package's DefaultOptions, so a
// default lives in one place, the package.
type Config struct {
	DataDir string `yaml:"data_dir"`
	// ShutdownTimeout bounds a stop: after a signal the node drains and
	// closes, and exits (status 3) if that has not ended by then
	// (default 30s).
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// MemoryLimit is the node's memory limit in bytes (MemoryPlan): 0
	// is DefaultCMSMemoryLimit with trending.counter cms and none with
	// exact, a negative value none.
	MemoryLimit int64                 `yaml:"memory_limit"`
	HTTP        query.Options         `yaml:"http"`
	Log         LogConfig             `yaml:"log"`
	State       state.Options         `yaml:"state"`
	Disk        DiskConfig            `yaml:"disk"`
	Engine      engine.Options        `yaml:"engine"`
	Trending    TrendingConfig        `yaml:"trending"`
	Crawl       CrawlConfig           `yaml:"crawl"`
	Articles    ArticlesConfig        `yaml:"articles"`
	Stories     story.OperatorOptions `yaml:"stories"`
	Search      search.Options        `yaml:"search"`
	Interest    InterestConfig        `yaml:"interest"`
	Retention   RetentionConfig       `yaml:"retention"`
	Auth        AuthConfig            `yaml:"auth"`
	Webhooks    webhook.Options       `yaml:"webhooks"`
	Logging     LoggingConfig         `yaml:"logging"`
	Tracing     tracing.Options       `yaml:"tracing"`
	Cluster     ClusterConfig         `yaml:"cluster"`

	// unknownEnv lists NEWSFLOW_* variables that name no setting; they are
	// reported as warnings (another tool may own them).
	unknownEnv []string
}

// LogConfig chooses the log backend; Embedded configures the embedded one,
// Kafka the connections to Brokers.
type LogConfig struct {
	Backend    string           `yaml:"backend"`
	Brokers    []string         `yaml:"brokers"`
	Partitions int32            `yaml:"partitions"`
	Kafka      KafkaConfig      `yaml:"kafka"`
	Embedded   embedded.Options `yaml:",inline"`
}

// KafkaConfig secures the connections to the brokers (kafkalog.Options'
// TLS and SASL). The password is best given in the environment
// (NEWSFLOW_LOG_KAFKA_SASL_PASSWORD).
type KafkaConfig struct {
	TLS  kafkalog.TLSOptions  `yaml:"tls"`
	SASL kafkalog.SASLOptions `yaml:"sasl"`
}

// kafkaOptions are the options of the node's Kafka log.
func (c Config) kafkaOptions(logger *slog.Logger) kafkalog.Options {
	return kafkalog.Options{Brokers: c.Log.Brokers, Logger: logger, TLS: c.Log.Kafka.TLS, SASL: c.Log.Kafka.SASL}
}

// TrendingConfig is the trending operator's options, and the
// trending.changes topic's.
type TrendingConfig struct {
	trending.OperatorOptions `yaml:",inline"`
	// Lateness is no longer used: a share counts in every window that
	// holds its timestamp, whatever its arrival order. A configuration
	// that still sets it gets a warning.
	Lateness time.Duration `yaml:"lateness,omitempty"`
	// Changes is the trending.changes topic (trending.Changes).
	Changes TrendingChangesConfig `yaml:"changes"`
}

// TrendingChangesConfig: when Enabled, each article that enters the top K
// of a window is announced on trending.changes and the live stream.
type TrendingChangesConfig struct {
	Enabled bool `yaml:"enabled"`
	K       int  `yaml:"k"`
}

// ArticlesConfig is the articles operator's options and its classifier's.
type ArticlesConfig struct {
	Classify         classify.Options `yaml:",inline"`
	articles.Options `yaml:",inline"`
}

// InterestConfig is the interest operator's options and the reads-enrich
// operator's.
type InterestConfig struct {
	interest.Options `yaml:",inline"`
	Enrich           interest.EnrichOptions `yaml:",inline"`
}

// RetentionConfig is how long, in event time, the node keeps what it
// derives from the streams; each operator takes its part as an option.
type RetentionConfig struct {
	// Articles: an article's version (articles operator), its story,
	// counted from the story's latest article (stories operator), and its
	// search document, behind the newest article. Negative keeps them
	// forever.
	Articles time.Duration `yaml:"articles"`
	// History: a reader's reading history (interest operator), behind the
	// reader's newest read. Negative keeps it (up to interest.history
	// reads).
	History time.Duration `yaml:"history"`
}

// AuthConfig is the accounts' options, the login limiter's, and the
// server's tokens and cookie settings.
type AuthConfig struct {
	AdminToken string `yaml:"admin_token"`
	// IngestToken is the bearer token of trusted services that write
	// events for any user and articles (separate from the admin token).
	IngestToken string `yaml:"ingest_token"`
	// CookieSecure marks the session cookie Secure (for deployments behind
	// TLS); it is always Secure on a TLS connection.
	CookieSecure bool `yaml:"cookie_secure"`
	// TrustedOrigins are other origins (scheme://host[:port]) whose pages
	// may make cookie-authenticated state-changing requests.
	TrustedOrigins []string `yaml:"trusted_origins"`
	// ReadersAddSources lets readers add sources by subscribing to a new
	// feed URL through the client APIs (Miniflux, Google Reader); admins
	// always may. Off: a reader subscribes only to sources an admin added.
	ReadersAddSources bool                `yaml:"readers_add_sources"`
	Limiter           auth.LimiterOptions `yaml:",inline"`
	auth.Options      `yaml:",inline"`
}

// CrawlConfig is the crawler's options, and what the node does with them.
type CrawlConfig struct {
	Enabled       bool   `yaml:"enabled"`
	SeedOPML      string `yaml:"seed_opml"`
	crawl.Options `yaml:",inline"`
	// MinIntervalFloor is the shortest min_interval a source may be given.
	MinIntervalFloor time.Duration `yaml:"min_interval_floor"`
	// FullText: fetching article pages for their full text
	// (crawl.FullTextOptions).
	FullText FullTextConfig `yaml:"full_text"`
}

// FullTextConfig configures fetching article pages for their full text
// (see crawl.FullTextOptions).
type FullTextConfig struct {
	Enabled     bool `yaml:"enabled"`
	MinWords    int  `yaml:"min_words"`
	MaxPerCrawl int  `yaml:"max_per_crawl"`
}

// ClusterConfig makes the node a member of a cluster (Kafka backend only).
type ClusterConfig struct {
	// ID names the node, stable across restarts (default: the host name).
	ID string `yaml:"id"`
	// RaftAddr is the Raft listen address; Advertise, if set, the address
	// peers dial. Both must stay the same across restarts.
	RaftAddr  string `yaml:"raft_addr"`
	Advertise string `yaml:"advertise"`
	// HTTPAdvertise is the API address peers reach this node at (default
	// http.addr).
	HTTPAdvertise string `yaml:"http_advertise"`
	// Bootstrap starts a new cluster; Join lists members' Raft addresses to
	// ask for admission. Either makes the node a cluster member, and so
	// does Raft state left in the data directory by an earlier run.
	Bootstrap bool     `yaml:"bootstrap"`
	Join      []string `yaml:"join"`
	// Secret authenticates the nodes' internal requests to each other
	// and, unless TLS names certificate files, their Raft traffic (every
	// member derives the same Raft CA from it); every member needs the
	// same one.
	Secret string `yaml:"secret"`
	// TLS gives the Raft transport the operator's certificates instead of
	// ones derived from Secret. Raft always runs over mutual TLS.
	TLS cluster.TLSConfig `yaml:"tls"`
	// DownAfter is how long the leader waits without a heartbeat before it
	// moves a node's partitions.
	DownAfter time.Duration `yaml:"down_after"`
	// Lease is how long a follower keeps its partitions without hearing
	// from the leader; keep it below down_after, so that a node cut off
	// stops before its partitions start elsewhere.
	Lease time.Duration `yaml:"lease"`
	// QueryTimeout bounds a query's requests to other nodes.
	QueryTimeout time.Duration `yaml:"query_timeout"`
	// FailoverTimeout is how long a query for one key (an article's
	// shares, a reader's profile) waits for its partition's owner while
	// the partition moves (its owner died, or it restores on its new
	// owner) before answering 503; longer than a failover.
	FailoverTimeout time.Duration `yaml:"failover_timeout"`
}

// LoggingConfig is the node's log output.
type LoggingConfig struct {
	Level  string `yaml:"level"`
	Format string `yaml:"format"`
}

// Default is the default configuration; configs/newsflow.yaml says the
// same. Each section's defaults are its package's.
func Default() Config {
	c := Config{
		DataDir:         "data",
		ShutdownTimeout: 30 * time.Second,
		HTTP:            query.DefaultOptions(),
		Log:             LogConfig{Backend: "embedded", Partitions: engine.DefaultOptions().Partitions, Embedded: embedded.DefaultOptions()},
		State:           state.Options{}, // sized by MemoryPlan
		Disk:            DefaultDiskConfig(),
		Engine:          engine.DefaultOptions(),
		Trending: TrendingConfig{OperatorOptions: trending.DefaultOperatorOptions(),
			Changes: TrendingChangesConfig{Enabled: true, K: trending.DefaultChangesK}},
		Crawl: CrawlConfig{Enabled: true, SeedOPML: "configs/sources.opml", Options: crawl.DefaultOptions(),
			MinIntervalFloor: crawl.MinIntervalFloor},
		Articles:  ArticlesConfig{Classify: classify.DefaultOptions(), Options: articles.DefaultOptions()},
		Stories:   story.DefaultOperatorOptions(),
		Search:    search.DefaultOptions(),
		Interest:  InterestConfig{Options: interest.DefaultOptions(), Enrich: interest.DefaultEnrichOptions()},
		Retention: RetentionConfig{Articles: schema.DefaultRetention, History: interest.DefaultOptions().HistoryAge},
		Auth:      AuthConfig{Limiter: auth.DefaultLimiterOptions(), Options: auth.DefaultOptions()},
		Webhooks:  webhook.DefaultOptions(),
		Logging:   LoggingConfig{Level: "info", Format: "text"},
		Tracing:   tracing.DefaultOptions(),
		Cluster: ClusterConfig{RaftAddr: "127.0.0.1:7000", DownAfter: 2 * time.Second, Lease: 1500 * time.Millisecond, QueryTimeout: 2 * time.Second,
			FailoverTimeout: 10 * time.Second},
	}
	// Sized by MemoryPlan.
	c.Log.Embedded.MemTableSize, c.Log.Embedded.CacheSize = 0, 0
	// The server alone limits nothing; a node limits each client and user.
	c.HTTP.RateLimits = query.DefaultRateLimits()
	ft := c.Crawl.Options.FullText
	c.Crawl.FullText = FullTextConfig{Enabled: !ft.Disabled, MinWords: ft.MinWords, MaxPerCrawl: ft.MaxPerCrawl}
	return c
}

// Load reads path (if not empty) over the defaults, then applies
// environment overrides.
func Load(path string, environ []string) (Config, error) {
	c := Default()
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return c, fmt.Errorf("read config: %w", err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		dec.KnownFields(true)
		if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
			return c, fmt.Errorf("config %s: %w", path, err)
		}
	}
	if err := applyEnv(&c, environ); err != nil {
		return c, err
	}
	return c, nil
}

// applyEnv sets scalar and list fields from NEWSFLOW_* variables.
func applyEnv(c *Config, environ []string) error {
	env := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, "NEWSFLOW_") {
			env[k] = v
		}
	}
	if len(env) == 0 {
		return nil
	}
	known := map[string]bool{}
	err := walkFields(reflect.ValueOf(c).Elem(), "NEWSFLOW", func(name string, f reflect.Value) error {
		known[name] = true
		v, ok := env[name]
		if !ok {
			return nil
		}
		if err := setScalar(f, v); err != nil {
			return fmt.Errorf("environment %s=%q: %w", name, v, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for k := range env {
		if !known[k] {
			c.unknownEnv = append(c.unknownEnv, k)
		}
	}
	sort.Strings(c.unknownEnv)
	return nil
}

func walkFields(v reflect.Value, prefix string, fn func(name string, f reflect.Value) error) error {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		tag, opts, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if tag == "-" || !t.Field(i).IsExported() {
			continue
		}
		f := v.Field(i)
		if opts == "inline" {
			if err := walkFields(f, prefix, fn); err != nil {
				return err
			}
			continue
		}
		name := prefix + "_" + strings.ToUpper(tag)
		if f.Kind() == reflect.Struct && f.Type() != reflect.TypeFor[time.Duration]() {
			if err := walkFields(f, name, fn); err != nil {
				return err
			}
			continue
		}
		if f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Struct && !reflect.PointerTo(f.Type().Elem()).Implements(textUnmarshaler) {
			continue // lists of objects are file-only
		}
		if err := fn(name, f); err != nil {
			return err
		}
	}
	return nil
}

var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()

func setScalar(f reflect.Value, v string) error {
	if f.Type() == reflect.TypeFor[time.Duration]() {
		d, err := time.ParseDuration(v)
		if err != nil {
			return err
		}
		f.SetInt(int64(d))
		return nil
	}
	if u, ok := f.Addr().Interface().(encoding.TextUnmarshaler); ok {
		return u.UnmarshalText([]byte(v))
	}
	switch f.Kind() {
	case reflect.String:
		f.SetString(v)
	case reflect.Float64:
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return err
		}
		f.SetFloat(x)
	case reflect.Int, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(v, 10, f.Type().Bits())
		if err != nil {
			return err
		}
		f.SetInt(n)
	case reflect.Bool:
		b, err := strconv.ParseBool(v)
		if err != nil {
			return err
		}
		f.SetBool(b)
	case reflect.Slice:
		items := SplitList(v)
		out := reflect.MakeSlice(f.Type(), len(items), len(items))
		for i, item := range items {
			if err := setScalar(out.Index(i), item); err != nil {
				return err
			}
		}
		f.Set(out)
	default:
		return fmt.Errorf("unsupported kind %s", f.Kind())
	}
	return nil
}

// Validate checks values the components do not check themselves.
func (c Config) Validate() error {
	if err := c.validateLog(); err != nil {
		return err
	}
	if c.DataDir == "" {
		return errors.New("config: data_dir is empty")
	}
	if err := c.Disk.Validate(); err != nil {
		return err
	}
	if c.ShutdownTimeout <= 0 {
		return errors.New("config: shutdown_timeout must be positive")
	}
	if c.Crawl.FullText.MinWords < 0 || c.Crawl.FullText.MaxPerCrawl < 0 {
		return errors.New("config: crawl.full_text.min_words and max_per_crawl must not be negative")
	}
	if c.Crawl.MinIntervalFloor <= 0 {
		return errors.New("config: crawl.min_interval_floor must be positive")
	}
	if err := c.Trending.OperatorOptions.Validate(); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if err := c.Tracing.Validate(); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if err := c.HTTP.Validate(); err != nil {
		return fmt.Errorf("config: http: %w", err)
	}
	if maxK := cmp.Or(c.Trending.MaxK, trending.DefaultOperatorOptions().MaxK); c.Trending.Changes.K < 1 || c.Trending.Changes.K > maxK {
		return fmt.Errorf("config: trending.changes.k %d: want 1 to trending.max_k (%d)", c.Trending.Changes.K, maxK)
	}
	if c.Clustered() {
		return c.validateCluster()
	}
	return nil
}

// validateLog checks the log backend's settings.
func (c Config) validateLog() error {
	switch c.Log.Backend {
	case "embedded":
		return nil
	case "kafka":
		return c.validateKafka()
	}
	return fmt.Errorf("config: log.backend %q: want embedded or kafka", c.Log.Backend)
}

// validateKafka checks the kafka log backend's brokers, TLS and SASL
// settings.
func (c Config) validateKafka() error {
	if len(c.Log.Brokers) == 0 {
		return errors.New("config: log.backend is kafka but log.brokers is empty")
	}
	if sa := c.Log.Kafka.SASL; sa.On() && sa.Password == "" {
		return fmt.Errorf("config: log.kafka.sasl.mechanism is %s but the password is empty (set NEWSFLOW_LOG_KAFKA_SASL_PASSWORD)", sa.Mechanism)
	}
	if err := c.Log.Kafka.TLS.Validate(); err != nil {
		return fmt.Errorf("config: log.kafka.%w", err)
	}
	if err := c.Log.Kafka.SASL.Validate(); err != nil {
		return fmt.Errorf("config: log.kafka.%w", err)
	}
	return nil
}

// validateCluster checks the settings of a cluster member.
func (c Config) validateCluster() error {
	cc := c.Cluster
	switch {
	case c.Log.Backend != "kafka":
		return errors.New("config: a cluster needs the kafka log backend (--brokers)")
	case cc.Bootstrap && len(cc.Join) > 0:
		return errors.New("config: cluster.bootstrap and cluster.join exclude each other")
	case cc.Secret == "":
		return errors.New("config: cluster.secret is empty (set NEWSFLOW_CLUSTER_SECRET; every member needs the same one)")
	case cc.RaftAddr == "":
		return errors.New("config: cluster.raft_addr is empty")
	case cc.DownAfter <= 0 || cc.Lease <= 0 || cc.QueryTimeout <= 0 || cc.FailoverTimeout <= 0:
		return errors.New("config: cluster.down_after, cluster.lease and cluster.query_timeout must be positive")
	case cc.Lease >= cc.DownAfter:
		return fmt.Errorf("config: cluster.lease %s must be shorter than cluster.down_after %s", cc.Lease, cc.DownAfter)
	}
	if err := cc.TLS.Validate(); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	return nil
}

// minSecretLen is the cluster secret length under which Warnings warns.
const minSecretLen = 16

// Warnings lists settings that are accepted but have no effect, or weaken
// the node's security.
func (c Config) Warnings() []string {
	var out []string
	if k := c.Log.Kafka; c.Log.Backend != "kafka" && (k.TLS.On() || k.SASL.On()) {
		out = append(out, "log.kafka is ignored: log.backend is "+c.Log.Backend)
	}
	if sa := c.Log.Kafka.SASL; c.Log.Backend == "kafka" && strings.EqualFold(sa.Mechanism, kafkalog.SASLPlain) && !c.Log.Kafka.TLS.On() {
		out = append(out, "log.kafka.sasl.mechanism PLAIN without log.kafka.tls sends the Kafka password in clear text")
	}
	if s := c.Cluster.Secret; s != "" && len(s) < minSecretLen && c.Cluster.TLS.CertFile == "" {
		out = append(out, fmt.Sprintf("cluster.secret is shorter than %d bytes: the Raft certificates are derived from it, and a short secret can be guessed offline; use a long random one (openssl rand -hex 32)", minSecretLen))
	}
	if c.HTTP.IdempotencyMaxKeys != 0 {
		out = append(out, "http.idempotency_max_keys is no longer used and is ignored: the idempotency keys are kept on disk for http.idempotency_ttl")
	}
	if c.Trending.Lateness != 0 {
		out = append(out, "trending.lateness is no longer used and is ignored: a share counts in every window that holds its timestamp, in any arrival order")
	}
	return out
}

// ClusterDir holds the node's Raft state.
func (c Config) ClusterDir() string { return filepath.Join(c.DataDir, "cluster") }

// Clustered reports whether the node runs as a cluster member: asked to
// bootstrap or join, or a member already (Raft state in the data dir).
func (c Config) Clustered() bool {
	if c.Cluster.Bootstrap || len(c.Cluster.Join) > 0 {
		return true
	}
	_, err := os.Stat(c.ClusterDir())
	return err == nil
}

// SplitList splits a comma-separated list, dropping empty items.
func SplitList(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
