package node

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/newsflow/newsflow/operators/trending"
	"github.com/newsflow/newsflow/operators/trending/sketch"
	"go.yaml.in/yaml/v3"
)

// Config is the whole node configuration. configs/newsflow.yaml documents
// every field; environment variables NEWSFLOW_<SECTION>_<FIELD> (e.g.
// NEWSFLOW_HTTP_ADDR) override the file and command-line flags override both.
type Config struct {
	DataDir  string         `yaml:"data_dir"`
	HTTP     HTTPConfig     `yaml:"http"`
	Log      LogConfig      `yaml:"log"`
	Engine   EngineConfig   `yaml:"engine"`
	Trending TrendingConfig `yaml:"trending"`
	Crawl    CrawlConfig    `yaml:"crawl"`
	Articles ArticlesConfig `yaml:"articles"`
	Stories  StoriesConfig  `yaml:"stories"`
	Search   SearchConfig   `yaml:"search"`
	Interest InterestConfig `yaml:"interest"`
	Auth     AuthConfig     `yaml:"auth"`
	Logging  LoggingConfig  `yaml:"logging"`
	Cluster  ClusterConfig  `yaml:"cluster"`

	// unknownEnv lists NEWSFLOW_* variables that name no setting; they are
	// reported as warnings (another tool may own them).
	unknownEnv []string
}

type HTTPConfig struct {
	Addr           string        `yaml:"addr"`
	RatePerIP      float64       `yaml:"rate_per_ip"`
	BurstPerIP     int           `yaml:"burst_per_ip"`
	RatePerUser    float64       `yaml:"rate_per_user"`
	BurstPerUser   int           `yaml:"burst_per_user"`
	ExemptLoopback bool          `yaml:"rate_exempt_loopback"`
	MaxBodyBytes   int           `yaml:"max_body_bytes"`
	MaxFuture      time.Duration `yaml:"max_future"`
	IdempotencyTTL time.Duration `yaml:"idempotency_ttl"`
	// Live updates (/api/v1/stream): at most MaxStreams open at once,
	// checked every StreamInterval, a heartbeat every StreamHeartbeat.
	MaxStreams      int           `yaml:"max_streams"`
	StreamInterval  time.Duration `yaml:"stream_interval"`
	StreamHeartbeat time.Duration `yaml:"stream_heartbeat"`
}

type LogConfig struct {
	Backend        string        `yaml:"backend"`
	Brokers        []string      `yaml:"brokers"`
	Partitions     int32         `yaml:"partitions"`
	Fsync          string        `yaml:"fsync"`
	SyncInterval   time.Duration `yaml:"sync_interval"`
	RetentionAge   time.Duration `yaml:"retention_age"`
	RetentionBytes int64         `yaml:"retention_bytes"`
}

type EngineConfig struct {
	MaxBatch        int           `yaml:"max_batch"`
	CommitInterval  time.Duration `yaml:"commit_interval"`
	DeadLetterTopic string        `yaml:"dead_letter_topic"`
}

type WindowConfig struct {
	Name    string        `yaml:"name"`
	Size    time.Duration `yaml:"size"`
	Buckets int           `yaml:"buckets"`
}

type TrendingConfig struct {
	Windows []WindowConfig `yaml:"windows"`
	// Lateness is no longer used: a share counts in every window that
	// holds its timestamp, whatever its arrival order. A configuration
	// that still sets it gets a warning.
	Lateness         time.Duration `yaml:"lateness"`
	MaxK             int           `yaml:"max_k"`
	SnapshotInterval time.Duration `yaml:"snapshot_interval"`
	MaxFuture        time.Duration `yaml:"max_future"`
	// A share without a category waits up to ParkFor (event time) for its
	// article's topics; at most MaxParked wait per task.
	ParkFor   time.Duration `yaml:"park_for"`
	MaxParked int           `yaml:"max_parked"`
	// ExactMaxBytes is the memory budget of each partition's exact counts;
	// over it the node warns (log, metrics, /health/detailed) and keeps
	// counting exactly.
	ExactMaxBytes int64 `yaml:"exact_max_bytes"`
	// Counter is exact or cms (a Count-Min Sketch configured by CMS).
	Counter string    `yaml:"counter"`
	CMS     CMSConfig `yaml:"cms"`
	// Changes is the trending.changes topic (query.ChangesOptions).
	Changes TrendingChangesConfig `yaml:"changes"`
}

// TrendingChangesConfig: when Enabled, each article that enters the top K
// of a window is announced on trending.changes and the live stream.
type TrendingChangesConfig struct {
	Enabled bool `yaml:"enabled"`
	K       int  `yaml:"k"`
}

// CMSConfig sizes the sketch of trending.counter: cms (sketch.Options).
type CMSConfig struct {
	Epsilon        float64 `yaml:"epsilon"`
	Delta          float64 `yaml:"delta"`
	Width          int     `yaml:"width"`
	Depth          int     `yaml:"depth"`
	CandidatesPerK int     `yaml:"candidates_per_k"`
	MaxCategories  int     `yaml:"max_categories"`
}

// operatorOptions are the trending operator's options.
func (c TrendingConfig) operatorOptions() trending.OperatorOptions {
	o := trending.OperatorOptions{MaxK: c.MaxK, SnapshotInterval: c.SnapshotInterval, MaxFuture: c.MaxFuture,
		ParkFor: c.ParkFor, MaxParked: c.MaxParked, ExactMaxBytes: c.ExactMaxBytes, Counter: c.Counter,
		CMS: sketch.Options{Epsilon: c.CMS.Epsilon, Delta: c.CMS.Delta, Width: c.CMS.Width, Depth: c.CMS.Depth,
			CandidatesPerK: c.CMS.CandidatesPerK, MaxCategories: c.CMS.MaxCategories}}
	for _, w := range c.Windows {
		o.Counts.Windows = append(o.Counts.Windows, trending.WindowSpec{Name: w.Name, Size: w.Size, Buckets: w.Buckets})
	}
	return o
}

type ArticlesConfig struct {
	TopicsRules     string  `yaml:"topics_rules"`
	TopicsModel     string  `yaml:"topics_model"`
	MinConfidence   float64 `yaml:"min_confidence"`
	MaxLabels       int     `yaml:"max_labels"`
	MaxContentBytes int     `yaml:"max_content_bytes"`
}

type StoriesConfig struct {
	Window          time.Duration `yaml:"window"`
	Decay           float64       `yaml:"decay"`
	Threshold       float64       `yaml:"threshold"`
	ThresholdLong   float64       `yaml:"threshold_long"`
	NearDupK        int           `yaml:"near_dup_k"`
	NearDupWindow   time.Duration `yaml:"near_dup_window"`
	BreakingWindow  time.Duration `yaml:"breaking_window"`
	BreakingRate    float64       `yaml:"breaking_rate"`
	BreakingSources int           `yaml:"breaking_sources"`
	EvergreenTopics []string      `yaml:"evergreen_topics"`
	ViewWindow      time.Duration `yaml:"view_window"`
}

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
	TrustedOrigins     []string      `yaml:"trusted_origins"`
	LoginBurstPerIP    int           `yaml:"login_burst_per_ip"`
	LoginIntervalIP    time.Duration `yaml:"login_interval_per_ip"`
	LoginBurstPerUser  int           `yaml:"login_burst_per_user"`
	LoginIntervalUser  time.Duration `yaml:"login_interval_per_user"`
	BcryptCost         int           `yaml:"bcrypt_cost"`
	SessionTTL         time.Duration `yaml:"session_ttl"`
	MaxSessionsPerUser int           `yaml:"max_sessions_per_user"`
}

type InterestConfig struct {
	Alpha       float64       `yaml:"alpha"`
	DailyDecay  float64       `yaml:"daily_decay"`
	History     int           `yaml:"history"`
	DedupWindow int           `yaml:"dedup_window"`
	ParkFor     time.Duration `yaml:"park_for"`
}

type SearchConfig struct {
	CommitInterval time.Duration `yaml:"commit_interval"`
}

type CrawlConfig struct {
	Enabled           bool          `yaml:"enabled"`
	SeedOPML          string        `yaml:"seed_opml"`
	UserAgent         string        `yaml:"user_agent"`
	Timeout           time.Duration `yaml:"timeout"`
	MaxBodyBytes      int64         `yaml:"max_body_bytes"`
	MaxRedirects      int           `yaml:"max_redirects"`
	AllowPrivate      bool          `yaml:"allow_private"`
	AllowCIDRs        []string      `yaml:"allow_cidrs"`
	IgnoreRobots      bool          `yaml:"ignore_robots"`
	GlobalConcurrency int           `yaml:"global_concurrency"`
	HostConcurrency   int           `yaml:"host_concurrency"`
	HostRate          float64       `yaml:"host_rate"`
	// MinIntervalFloor is the shortest min_interval a source may be given.
	MinIntervalFloor time.Duration  `yaml:"min_interval_floor"`
	FullText         FullTextConfig `yaml:"full_text"`
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
	// Bootstrap starts a new cluster; Join lists members' HTTP addresses to
	// ask for admission. Either makes the node a cluster member, and so
	// does Raft state left in the data directory by an earlier run.
	Bootstrap bool     `yaml:"bootstrap"`
	Join      []string `yaml:"join"`
	// Secret authenticates the nodes' internal requests to each other;
	// every member needs the same one.
	Secret string `yaml:"secret"`
	// DownAfter is how long the leader waits without a heartbeat before it
	// moves a node's partitions.
	DownAfter time.Duration `yaml:"down_after"`
	// Lease is how long a follower keeps its partitions without hearing
	// from the leader; keep it below down_after, so that a node cut off
	// stops before its partitions start elsewhere.
	Lease time.Duration `yaml:"lease"`
	// QueryTimeout bounds a query's requests to other nodes.
	QueryTimeout time.Duration `yaml:"query_timeout"`
}

type LoggingConfig struct {
	Level  string `yaml:"level"`
	Format string `yaml:"format"`
}

// Default is the default configuration; configs/newsflow.yaml says the same.
func Default() Config {
	return Config{
		DataDir: "data",
		HTTP: HTTPConfig{Addr: "127.0.0.1:8080", MaxBodyBytes: 32 << 20, MaxFuture: 5 * time.Minute, IdempotencyTTL: 24 * time.Hour,
			RatePerIP: 200, BurstPerIP: 400, RatePerUser: 50, BurstPerUser: 100, ExemptLoopback: true,
			MaxStreams: 1000, StreamInterval: 2 * time.Second, StreamHeartbeat: 15 * time.Second},
		Log: LogConfig{Backend: "embedded", Partitions: 8, Fsync: "always", SyncInterval: 100 * time.Millisecond,
			RetentionAge: 7 * 24 * time.Hour},
		Engine: EngineConfig{MaxBatch: 20000, CommitInterval: 250 * time.Millisecond, DeadLetterTopic: "newsflow-deadletter"},
		Trending: TrendingConfig{
			Windows: []WindowConfig{
				{Name: "1m", Size: time.Minute, Buckets: 60},
				{Name: "1h", Size: time.Hour, Buckets: 60},
				{Name: "24h", Size: 24 * time.Hour, Buckets: 96},
			},
			MaxK: 100, SnapshotInterval: 200 * time.Millisecond, MaxFuture: 5 * time.Minute,
			ParkFor: 10 * time.Minute, MaxParked: 100_000, ExactMaxBytes: trending.DefaultExactMaxBytes,
			Counter: trending.CounterExact,
			CMS: CMSConfig{Epsilon: sketch.DefaultEpsilon, Delta: sketch.DefaultDelta,
				CandidatesPerK: sketch.DefaultCandidatesPerK, MaxCategories: sketch.DefaultMaxCategories},
			Changes: TrendingChangesConfig{Enabled: true, K: 10},
		},
		Crawl: CrawlConfig{Enabled: true, SeedOPML: "configs/sources.opml", UserAgent: "newsflow/1.0 (+https://github.com/newsflow/newsflow)",
			Timeout: 30 * time.Second, MaxBodyBytes: 10 << 20, MaxRedirects: 5, GlobalConcurrency: 64, HostConcurrency: 2, HostRate: 1,
			MinIntervalFloor: time.Minute, FullText: FullTextConfig{Enabled: true, MinWords: 25, MaxPerCrawl: 10}},
		Articles: ArticlesConfig{MaxContentBytes: 32 << 10},
		Stories: StoriesConfig{Window: 72 * time.Hour, Decay: 0.1, Threshold: 0.1, ThresholdLong: 0.3, NearDupK: 3, NearDupWindow: 6 * time.Hour,
			BreakingWindow: 30 * time.Minute, BreakingRate: 2, BreakingSources: 5, EvergreenTopics: []string{"science", "health"}, ViewWindow: 48 * time.Hour},
		Search: SearchConfig{CommitInterval: time.Second},
		Auth: AuthConfig{BcryptCost: 12, SessionTTL: 7 * 24 * time.Hour, MaxSessionsPerUser: 20,
			LoginBurstPerIP: 10, LoginIntervalIP: 6 * time.Second, LoginBurstPerUser: 5, LoginIntervalUser: 30 * time.Second},
		Interest: InterestConfig{Alpha: 0.1, DailyDecay: 0.95, History: 100, DedupWindow: 1000, ParkFor: 10 * time.Minute},
		Logging:  LoggingConfig{Level: "info", Format: "text"},
		Cluster:  ClusterConfig{RaftAddr: "127.0.0.1:7000", DownAfter: 2 * time.Second, Lease: 1500 * time.Millisecond, QueryTimeout: 2 * time.Second},
	}
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
		if len(c.Log.Brokers) == 0 {
			c.Log.Brokers = nil // "brokers: []" means none, like the default
		}
		if len(c.Crawl.AllowCIDRs) == 0 {
			c.Crawl.AllowCIDRs = nil
		}
		if len(c.Cluster.Join) == 0 {
			c.Cluster.Join = nil
		}
		if len(c.Auth.TrustedOrigins) == 0 {
			c.Auth.TrustedOrigins = nil
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
		tag := strings.Split(t.Field(i).Tag.Get("yaml"), ",")[0]
		name := prefix + "_" + strings.ToUpper(tag)
		f := v.Field(i)
		if f.Kind() == reflect.Struct && f.Type() != reflect.TypeFor[time.Duration]() {
			if err := walkFields(f, name, fn); err != nil {
				return err
			}
			continue
		}
		if f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Struct {
			continue // lists of objects are file-only
		}
		if err := fn(name, f); err != nil {
			return err
		}
	}
	return nil
}

func setScalar(f reflect.Value, v string) error {
	if f.Type() == reflect.TypeFor[time.Duration]() {
		d, err := time.ParseDuration(v)
		if err != nil {
			return err
		}
		f.SetInt(int64(d))
		return nil
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
		f.Set(reflect.ValueOf(SplitList(v)))
	default:
		return fmt.Errorf("unsupported kind %s", f.Kind())
	}
	return nil
}

// Validate checks values the components do not check themselves.
func (c Config) Validate() error {
	switch c.Log.Backend {
	case "embedded":
	case "kafka":
		if len(c.Log.Brokers) == 0 {
			return errors.New("config: log.backend is kafka but log.brokers is empty")
		}
	default:
		return fmt.Errorf("config: log.backend %q: want embedded or kafka", c.Log.Backend)
	}
	if c.DataDir == "" {
		return errors.New("config: data_dir is empty")
	}
	if c.Crawl.FullText.MinWords < 0 || c.Crawl.FullText.MaxPerCrawl < 0 {
		return errors.New("config: crawl.full_text.min_words and max_per_crawl must not be negative")
	}
	if c.Crawl.MinIntervalFloor <= 0 {
		return errors.New("config: crawl.min_interval_floor must be positive")
	}
	if err := c.Trending.operatorOptions().Validate(); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if maxK := cmp.Or(c.Trending.MaxK, trending.DefaultOperatorOptions().MaxK); c.Trending.Changes.K < 1 || c.Trending.Changes.K > maxK {
		return fmt.Errorf("config: trending.changes.k %d: want 1 to trending.max_k (%d)", c.Trending.Changes.K, maxK)
	}
	if cc := c.Cluster; c.Clustered() {
		switch {
		case c.Log.Backend != "kafka":
			return errors.New("config: a cluster needs the kafka log backend (--brokers)")
		case cc.Bootstrap && len(cc.Join) > 0:
			return errors.New("config: cluster.bootstrap and cluster.join exclude each other")
		case cc.Secret == "":
			return errors.New("config: cluster.secret is empty (set NEWSFLOW_CLUSTER_SECRET; every member needs the same one)")
		case cc.RaftAddr == "":
			return errors.New("config: cluster.raft_addr is empty")
		case cc.DownAfter <= 0 || cc.Lease <= 0 || cc.QueryTimeout <= 0:
			return errors.New("config: cluster.down_after, cluster.lease and cluster.query_timeout must be positive")
		case cc.Lease >= cc.DownAfter:
			return fmt.Errorf("config: cluster.lease %s must be shorter than cluster.down_after %s", cc.Lease, cc.DownAfter)
		}
	}
	return nil
}

// Warnings lists settings that are accepted but have no effect.
func (c Config) Warnings() []string {
	var out []string
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
