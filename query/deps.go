package query

import (
	"context"

	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/node/slo"
	"github.com/newsflow/newsflow/operators/interest"
	"github.com/newsflow/newsflow/operators/search"
	"github.com/newsflow/newsflow/operators/searchindex"
	"github.com/newsflow/newsflow/operators/story"
	"github.com/newsflow/newsflow/operators/trending"
)

// What the server reads of the operators: each interface names only the
// methods a handler calls, so a test can serve a fake in place of a whole
// node. The operators implement them (deps_test.go checks it).

// Engine is what the server reads of the node's engine: readiness,
// progress and the partitions it runs. Safe for concurrent use.
type Engine interface {
	Ready() bool
	CaughtUp(ctx context.Context) (bool, error)
	Progress() []engine.Progress
	Topology() []engine.Stage
	Options() engine.Options
	Partitions() int32
	// Assigned maps the partitions this node runs to their epochs.
	Assigned() map[int32]uint64
	PartitionStateBytes(p int32) (uint64, error)
	// HomePartition returns the partition whose owner runs the singleton
	// operator op (engine.Spec.Singleton).
	HomePartition(op string) (int32, bool)
	// Freshness says how current this node's copy of a stage partition's
	// state is (the task's own or a standby copy), false when it has none.
	Freshness(stage string, p int32) (engine.Freshness, bool)
	// StageStates says what this node does for each stage; Pause and
	// Resume hold and release a stage's tasks on this node
	// (engine.ErrUnknownStage for a name the topology lacks).
	StageStates() []engine.StageState
	Pause(stage string) error
	Resume(stage string) error
}

// Trending is what the server reads of the trending counts. Safe for
// concurrent use with the tasks that count.
type Trending interface {
	Options() trending.OperatorOptions
	WindowNames() []string
	Top(window, category string, k int) (trending.Result, error)
	// View is a consistent snapshot of every partition, reused while
	// nothing changed; the precomputed answers hang off it.
	View() *trending.View
	Shares(articleID string) (trending.Shares, error)
	ExactMemory() trending.ExactMemory
}

// Articles is what article ingestion asks of the articles operator. Safe
// for concurrent use.
type Articles interface {
	// Clean validates and cleans a submitted article as the operator would.
	Clean(value []byte, recordTime int64) (schema.Article, error)
	Topics() []string
}

// Stories is what the story API reads of the stories operator: the view
// the tasks published last. Safe for concurrent use.
type Stories interface {
	List(q story.ListQuery) (story.ListResult, error)
	Breaking() story.ListResult
	Topics() []story.TopicCount
	Head(id string) (*story.Story, error)
	Get(id string) (*story.Detail, error)
	Preselect(n, perTopic int, topics []string) ([]*story.Story, int64)
	Recent() ([]*story.Story, int64)
	Watermark() int64
	StoryOfArticle(articleID string) (string, bool)
	Article(id string) (story.ArticleRecord, string, bool)
	// ArticleByNum finds an article by its entry number.
	ArticleByNum(num uint64) (story.ArticleRecord, string, bool)
	ImageURL(id string) (string, bool)
	// Resolve follows merges: the id a story has now.
	Resolve(id string) string
	// ViewVersion changes whenever the view List, Preselect and Topics
	// read changes.
	ViewVersion() uint64
}

// Search is the search operator's query side. Safe for concurrent use.
type Search interface {
	Search(ctx context.Context, r searchindex.Request) (*search.Result, error)
}

// Interest is what the server reads of the readers' interest profiles.
// Safe for concurrent use.
type Interest interface {
	Options() interest.Options
	Profile(user string) (p *interest.Profile, found bool, err error)
}

// SLO is the node's service level objectives (node/slo): Report
// reads the node's metrics and measures every objective over its
// windows. Safe for concurrent use.
type SLO interface {
	Report() slo.Report
}

// StateStore is what /health/detailed asks of the node's state store.
// Safe for concurrent use while the store is open (the server stops
// before the node closes it).
type StateStore interface {
	// Check reports whether the store is open and answers a read.
	Check() error
}
