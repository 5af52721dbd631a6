// Package search keeps the search index of each partition from the stream
// of clustered articles (topic articles.indexed).
//
// A partition's index is a Bleve index in its own directory
// (operators/searchindex). It is not part of the task's Pebble batch, so the task
// makes each batch durable in the index before the engine commits the
// batch's offsets: after a crash the batch is applied again, and since a
// document is keyed by article id the second application leaves the same
// index. The task's Pebble state holds only a marker that the index belongs
// to the committed offsets; when the marker is missing (a fresh node, or a
// replay that cleared the state) the index is rebuilt from scratch.
//
// Retention: each commit also deletes the documents first seen more than
// the retention age (Options.Retention, default 30 days) before the
// newest first-seen time of the partition (schema.Article.FirstSeen, the
// publish time for records written before it), in the same Bleve batch,
// and indexes no document already that old. The publish date plays no
// part: old news is searchable like any other article. Which documents
// are kept depends only on the records applied, not on where commits
// fell. Searches never show a document first seen longer than the
// retention age before the newest first-seen time of any partition of the
// node, deleted yet or not; while a partition holds such documents that
// no commit has deleted yet, its page of a search may be short by them.
package search

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/operators/searchindex"
	"github.com/newsflow/newsflow/state"
)

// Name is the operator's name in the topology.
const Name = "search"

// Options configure the operator. The zero value is valid.
type Options struct {
	Index searchindex.Options `yaml:"-"`
	// CommitInterval is the least time between two commits of a task
	// (default 1s). Each commit makes a batch durable in Bleve first, and
	// Bleve indexes large batches much more cheaply than small ones; new
	// articles become searchable up to this much later.
	CommitInterval time.Duration `yaml:"commit_interval"`
	// Retention is how long, in event time behind the partition's newest
	// document, a document is kept (default schema.DefaultRetention;
	// negative keeps every document). The node sets it from
	// retention.articles.
	Retention time.Duration `yaml:"-"`
}

// Validate reports invalid option values.
func (o Options) Validate() error {
	if o.CommitInterval < 0 {
		return errors.New("search: commit interval must not be negative")
	}
	return o.Index.Validate()
}

// Operator indexes articles for search and answers searches over all its
// partitions.
type Operator struct {
	dir   string
	opts  Options
	parts []atomic.Pointer[searchindex.Index]
}

// DefaultOptions returns the defaults the zero value stands for.
func DefaultOptions() Options {
	return Options{Index: searchindex.DefaultOptions(), CommitInterval: time.Second, Retention: schema.DefaultRetention}
}

// New returns the operator; partition p's index lives in dir/p.
func New(dir string, opts Options, partitions int32) (*Operator, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts.CommitInterval = cmp.Or(opts.CommitInterval, DefaultOptions().CommitInterval)
	opts.Retention = cmp.Or(opts.Retention, DefaultOptions().Retention)
	return &Operator{dir: dir, opts: opts, parts: make([]atomic.Pointer[searchindex.Index], partitions)}, nil
}

// Spec implements engine.Operator.
func (o *Operator) Spec() engine.Spec {
	return engine.Spec{
		Name:        Name,
		Description: "Bleve search index per partition (title boosted, summary, content; topic, source and date filters)",
		Inputs:      []engine.Input{{Topic: schema.TopicArticlesIndexed, Key: "article_id"}},
		Stores:      []string{"Bleve index in " + o.dir + "/<partition>", "index marker"},
		Options:     o.opts,

		MinCommitInterval: o.opts.CommitInterval,
		// The index is rebuilt from articles.indexed where it is missing.
		LocalState: true,
	}
}

// NewTask implements engine.Operator.
func (o *Operator) NewTask(tc engine.TaskContext) (engine.Task, error) {
	if int(tc.Partition) >= len(o.parts) {
		return nil, fmt.Errorf("search: partition %d beyond %d", tc.Partition, len(o.parts))
	}
	return &task{op: o, p: tc.Partition, pending: map[string]int{}}, nil
}

var markerKey = []byte("indexed")

type task struct {
	op      *Operator
	p       int32
	ix      *searchindex.Index
	marked  bool
	docs    []searchindex.Doc
	pending map[string]int // article id → position in docs
	// expiring is set while expired documents are left to delete.
	expiring bool
}

// maxExpire bounds the documents one commit deletes; the rest go with
// the next ones (and searches hide them meanwhile).
const maxExpire = 50000

func (t *task) dir() string { return filepath.Join(t.op.dir, strconv.Itoa(int(t.p))) }

func (t *task) Restore(r state.Reader) error {
	_, ok, err := r.Get(markerKey)
	if err != nil {
		return err
	}
	if !ok {
		// No committed state: whatever the directory holds is from before a
		// replay or a lost state store. Start over.
		if err := searchindex.Destroy(t.dir()); err != nil {
			return err
		}
	}
	t.marked = ok
	ix, err := searchindex.Open(t.dir(), t.op.opts.Index)
	if err != nil {
		return err
	}
	t.ix = ix
	t.op.parts[t.p].Store(ix)
	return nil
}

func (t *task) Process(pc *engine.ProcessContext, rec *eventlog.Record) error {
	var a schema.Article
	if err := json.Unmarshal(rec.Value, &a); err != nil {
		return engine.Invalid("indexed article: malformed JSON: %v", err)
	}
	if a.ID == "" {
		return engine.Invalid("indexed article: missing id")
	}
	story, _ := rec.Header(schema.HeaderStoryID)
	d := searchindex.Doc{
		ID: a.ID, Title: a.Title, Summary: a.Summary, Content: a.Content, URL: a.URL,
		SourceID: a.SourceID, Source: a.Source, StoryID: string(story), PublishedAt: time.UnixMilli(a.PublishedAt).UTC(),
		FirstSeen:   time.UnixMilli(a.Seen()).UTC(),
		TraceParent: string(pc.TraceParent()),
	}
	for _, l := range a.Topics {
		d.Topics = append(d.Topics, l.Topic)
	}
	// The last version of an article in a batch wins.
	if i, ok := t.pending[a.ID]; ok {
		t.docs[i] = d
		return nil
	}
	t.pending[a.ID] = len(t.docs)
	t.docs = append(t.docs, d)
	return nil
}

func (t *task) Flush(w state.Writer) error {
	if len(t.docs) > 0 || t.expiring {
		docs, deletes, err := t.expire()
		if err != nil {
			return fmt.Errorf("search: expire in partition %d: %w", t.p, err)
		}
		if err := t.ix.Apply(docs, deletes); err != nil {
			return fmt.Errorf("search: index partition %d: %w", t.p, err)
		}
		t.docs = t.docs[:0]
		clear(t.pending)
	}
	if !t.marked {
		t.marked = true
		return w.Set(markerKey, []byte{1})
	}
	return nil
}

// expire returns the documents of the batch younger than the retention age
// and the ids of the indexed documents older than it.
func (t *task) expire() ([]searchindex.Doc, []string, error) {
	if t.op.opts.Retention < 0 {
		return t.docs, nil, nil
	}
	newest := t.ix.NewestSeen()
	for _, d := range t.docs {
		if d.FirstSeen.After(newest) {
			newest = d.FirstSeen
		}
	}
	cut := newest.Add(-t.op.opts.Retention)
	docs := t.docs[:0]
	for _, d := range t.docs {
		if !d.FirstSeen.Before(cut) {
			docs = append(docs, d)
		}
	}
	clear(t.docs[len(docs):])
	deletes, more, err := t.ix.SeenBefore(context.Background(), cut, maxExpire)
	t.expiring = more
	return docs, deletes, err
}

func (t *task) Committed(engine.CommitInfo) {}

func (t *task) Close() error {
	if t.ix == nil {
		return nil
	}
	t.op.parts[t.p].CompareAndSwap(t.ix, nil)
	return t.ix.Close()
}

// Cutoff returns the first-seen time before which documents are older
// than the retention age behind the newest document of this node's open
// partitions, and false when retention is off or nothing is indexed.
func (o *Operator) Cutoff() (time.Time, bool) {
	var newest time.Time
	for p := range o.parts {
		if ix := o.parts[p].Load(); ix != nil && ix.NewestSeen().After(newest) {
			newest = ix.NewestSeen()
		}
	}
	if o.opts.Retention < 0 || newest.IsZero() {
		return time.Time{}, false
	}
	return newest.Add(-o.opts.Retention), true
}

// hideBefore drops from res the hits first seen before cut.
func hideBefore(res *searchindex.Result, cut time.Time) {
	kept := res.Hits[:0]
	for _, h := range res.Hits {
		if h.FirstSeen.Before(cut) {
			if res.Total > 0 {
				res.Total--
			}
			continue
		}
		kept = append(kept, h)
	}
	res.Hits = kept
}

// Count returns the documents in the indexes of this node's open
// partitions, deleted by retention or not.
func (o *Operator) Count() (uint64, error) {
	var n uint64
	for p := range o.parts {
		if ix := o.parts[p].Load(); ix != nil {
			c, err := ix.Count()
			if err != nil {
				return 0, err
			}
			n += c
		}
	}
	return n, nil
}

// Result is a merged search over every partition.
type Result struct {
	*searchindex.Result
	// Partial is true when some partitions did not answer; Missing lists
	// them.
	Partial bool    `json:"partial"`
	Missing []int32 `json:"missing_partitions,omitempty"`
}

// ErrUnavailable is returned when no partition can answer.
var ErrUnavailable = errors.New("search: no partition index is open")

// Search runs r on every partition's index and merges the pages.
// Partitions whose index is not open (restoring) or that fail are listed
// in Missing.
func (o *Operator) Search(ctx context.Context, r searchindex.Request) (*Result, error) {
	cut, hide := o.Cutoff()
	results := make([]*searchindex.Result, len(o.parts))
	errs := make([]error, len(o.parts))
	var wg sync.WaitGroup
	for p := range o.parts {
		ix := o.parts[p].Load()
		if ix == nil {
			errs[p] = ErrUnavailable
			continue
		}
		wg.Go(func() {
			results[p], errs[p] = ix.Search(ctx, r)
			if errs[p] == nil && hide {
				// Hide documents older than the retention age that no
				// commit of their partition has deleted yet.
				hideBefore(results[p], cut)
			}
		})
	}
	wg.Wait()
	var ok []*searchindex.Result
	res := &Result{}
	for p, err := range errs {
		switch {
		case err == nil:
			ok = append(ok, results[p])
		case errors.Is(err, searchindex.ErrBadRequest):
			return nil, err
		default:
			res.Missing = append(res.Missing, int32(p))
		}
	}
	if len(ok) == 0 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return nil, ErrUnavailable
	}
	limit := r.Limit
	res.Result = searchindex.Merge(limit, ok...)
	res.Partial = len(res.Missing) > 0
	return res, nil
}
