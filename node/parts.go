package node

import (
	"log/slog"
	"net"

	"github.com/newsflow/newsflow/crawl"
	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/operators/articles"
	"github.com/newsflow/newsflow/operators/interest"
	"github.com/newsflow/newsflow/operators/search"
	"github.com/newsflow/newsflow/operators/story"
	"github.com/newsflow/newsflow/operators/trending"
	"github.com/newsflow/newsflow/query"
	"github.com/newsflow/newsflow/query/auth"
	"github.com/newsflow/newsflow/state"
	"github.com/prometheus/client_golang/prometheus"
)

// Config returns the configuration the node was opened with.
func (n *Node) Config() Config { return n.cfg }

// Logger returns the node's logger.
func (n *Node) Logger() *slog.Logger { return n.logger }

// Log returns the node's event log.
func (n *Node) Log() eventlog.Log { return n.log }

// Engine returns the node's engine.
func (n *Node) Engine() *engine.Engine { return n.engine }

// Auth returns the node's accounts and sessions.
func (n *Node) Auth() *auth.Store { return n.auth }

// Sources returns the node's feed sources.
func (n *Node) Sources() *crawl.Sources { return n.sources }

// Registry returns the registry of the node's metrics.
func (n *Node) Registry() *prometheus.Registry { return n.reg }

// Topology returns the stages a node with cfg runs (the same as its
// /api/v1/admin/topology) without opening a log or state: the operators
// are only registered, never run.
func Topology(cfg Config) ([]engine.Stage, error) {
	e, err := engine.New(nil, nil, engine.Options{Partitions: cfg.Log.Partitions, DeadLetterTopic: cfg.Engine.DeadLetterTopic})
	if err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, logger: slog.New(slog.DiscardHandler), reg: prometheus.NewRegistry(), engine: e}
	if err := n.registerOperators(cfg); err != nil {
		return nil, err
	}
	return e.Topology(), nil
}

// UnknownEnv lists the NEWSFLOW_* environment variables Load found that
// name no setting (another tool may own them).
func (c Config) UnknownEnv() []string { return c.unknownEnv }

// Dialable is the address to reach a listen address at: loopback for an
// unspecified or empty host.
func Dialable(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// Trending returns the trending operator.
func (n *Node) Trending() *trending.Operator { return n.trending }

// Articles returns the articles operator (nil if the node does not run it).
func (n *Node) Articles() *articles.Operator { return n.articles }

// Stories returns the stories operator (nil if the node does not run it).
func (n *Node) Stories() *story.Operator { return n.stories }

// Search returns the search operator (nil if the node does not run it).
func (n *Node) Search() *search.Operator { return n.search }

// Interest returns the interest operator (nil if the node does not run it).
func (n *Node) Interest() *interest.Operator { return n.interest }

// State returns the node's state database.
func (n *Node) State() *state.DB { return n.db }

// Deps are the node's parts the query server reads. Operators the node
// does not run stay nil interfaces.
func (n *Node) Deps() query.Deps {
	d := query.Deps{Log: n.log, Engine: n.engine, Sources: n.sources, Auth: n.auth, Limiter: n.limiter, Webhooks: n.webhooks,
		Crawler: n.queryCrawler(), Cluster: n.queryCluster(), SLO: n.slo, State: n.db}
	if n.disk != nil {
		d.Disk = n.disk
	}
	if n.trending != nil {
		d.Trending = n.trending
	}
	if n.articles != nil {
		d.Articles = n.articles
	}
	if n.stories != nil {
		d.Stories = n.stories
	}
	if n.search != nil {
		d.Search = n.search
	}
	if n.interest != nil {
		d.Interest = n.interest
	}
	if n.keys != nil {
		d.Keys = n.keys
	}
	if n.reads != nil {
		d.Reads = n.reads
	}
	return d
}
