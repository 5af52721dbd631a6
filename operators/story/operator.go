package story

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/internal/option"
	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/state"
	"github.com/prometheus/client_golang/prometheus"
)

// Name is the operator's name in the topology.
const Name = "stories"

// OperatorOptions configure the stories operator. The zero value is valid.
type OperatorOptions struct {
	Builder Options `yaml:",inline"`
	// ViewWindow is how long after its latest article a story stays in
	// story lists (default 48h of event time).
	ViewWindow time.Duration `yaml:"view_window"`
	// MaxLimit caps the page size of story lists (default 100).
	MaxLimit int `yaml:"-"`
	// Model is the learned story model the stage decides with (learned.go):
	// "builtin" for the one shipped in the binary, or the path of a model
	// file from newsflow stories train; empty decides by the similarity
	// thresholds. The stories' state records the model, and a node given
	// another refuses it until the stories are replayed.
	Model string `yaml:"model"`
}

// DefaultOperatorOptions returns the defaults the zero value stands for.
func DefaultOperatorOptions() OperatorOptions {
	return OperatorOptions{Builder: DefaultOptions(), ViewWindow: 48 * time.Hour, MaxLimit: 100}
}

// Validate reports invalid option values.
func (o OperatorOptions) Validate() error {
	if err := o.Builder.Validate(); err != nil {
		return err
	}
	if o.ViewWindow < 0 || o.MaxLimit < 0 {
		return errors.New("stories: view window and max limit must not be negative")
	}
	return nil
}

func (o OperatorOptions) withDefaults() OperatorOptions {
	o.Builder = o.Builder.withDefaults()
	option.Fill(&o, DefaultOperatorOptions())
	return o
}

// Operator groups the article stream into stories. Clustering needs one
// total order of all articles, so the operator is a singleton
// (engine.Spec.Singleton): one task, reading partition 0 of the articles
// topic, where the articles operator writes every article.
type Operator struct {
	opts       OperatorOptions
	partitions int32

	// view is the published query view; reader reads committed state.
	view   atomic.Pointer[view]
	views  atomic.Uint64 // views published
	reader atomic.Pointer[state.Reader]

	assigned *prometheus.CounterVec
	openGa   prometheus.Gauge
	expired  prometheus.Counter
}

// New returns the operator for a topology of the given partition count.
func New(opts OperatorOptions, partitions int32, reg prometheus.Registerer) (*Operator, error) {
	if opts.Model != "" {
		m, err := LoadModel(opts.Model)
		if err != nil {
			return nil, fmt.Errorf("stories.model: %w", err)
		}
		opts.Builder.Cluster.Model = m
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	o := &Operator{opts: opts.withDefaults(), partitions: partitions}
	o.assigned = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "newsflow_story_assignments_total",
		Help: "Articles assigned to stories, by kind: new story, joined, near-duplicate, edit.",
	}, []string{"kind"})
	o.openGa = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "newsflow_stories_open", Help: "Stories open for new articles.",
	})
	o.expired = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "newsflow_stories_expired_total",
		Help: "Stories deleted with their articles because their latest article is older than the retention age (merged stories included).",
	})
	if reg != nil {
		for _, c := range []prometheus.Collector{o.assigned, o.openGa, o.expired} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("stories: register metrics: %w", err)
			}
		}
	}
	o.storeView(&view{stories: map[uint64]*Story{}})
	return o, nil
}

// Spec implements engine.Operator.
func (o *Operator) Spec() engine.Spec {
	return engine.Spec{
		Name:        Name,
		Description: "near-duplicates (SimHash/LSH, MinHash) and story clustering (TF-IDF), story aggregates and breaking news",
		Inputs:      []engine.Input{{Topic: schema.TopicArticles, Key: "all articles, in partition 0"}},
		Outputs:     []string{schema.TopicArticlesIndexed, schema.TopicStoriesBreaking},
		Stores:      []string{"clusterer (vocabulary, open story centroids)", "articles in the window", "stories", "story members", "closed stories and articles by time, for retention"},
		Options:     o.opts,
		Singleton:   true,
		Standby:     true,
		// The single story task is always caught up at the design's rate,
		// so without a minimum it committed (an output append, a state
		// commit, a changelog transaction in a cluster) after every poll:
		// about a third of its busy time at 5,000 articles a second. The
		// views lag by up to this much more, well within a commit interval.
		MinCommitInterval: minCommitInterval,
	}
}

// minCommitInterval is the least time between two commits of the story
// task.
const minCommitInterval = 100 * time.Millisecond

// NewTask implements engine.Operator.
func (o *Operator) NewTask(tc engine.TaskContext) (engine.Task, error) {
	if tc.Partition != engine.SingletonPartition {
		return nil, fmt.Errorf("stories: a singleton has no task for partition %d", tc.Partition)
	}
	log := tc.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &task{op: o, log: log, changed: map[uint64]struct{}{}}, nil
}

type task struct {
	op      *Operator
	log     *slog.Logger
	b       *Builder
	r       state.Reader        // committed state
	changed map[uint64]struct{} // stories changed since the last publish
	removed []uint64            // stories merged or deleted since the last publish
}

func (t *task) Restore(r state.Reader) error {
	b, err := RestoreBuilder(t.op.opts.Builder, r)
	if err != nil {
		return err
	}
	t.b, t.r = b, r
	t.op.reader.Store(&r)
	// Publish every story in memory.
	v := &view{stories: make(map[uint64]*Story, len(b.stories))}
	for num, st := range b.stories {
		v.add(num, st)
	}
	t.publish(v)
	return nil
}

func (t *task) Process(pc *engine.ProcessContext, rec *eventlog.Record) error {
	d := inputDecoders.Get().(*inputDecoder)
	defer inputDecoders.Put(d)
	a, err := d.decode(rec.Value)
	if err != nil {
		return engine.Invalid("article: %v", err)
	}
	res, err := t.b.ApplyFeatures(a.Article, a.features)
	if err != nil {
		return engine.Invalid("article: %v", err)
	}
	switch {
	case res.Update:
		t.op.assigned.WithLabelValues("edit").Inc()
	case res.NewStory:
		t.op.assigned.WithLabelValues("new").Inc()
	case res.DuplicateOf != "":
		t.op.assigned.WithLabelValues("near-duplicate").Inc()
	default:
		t.op.assigned.WithLabelValues("joined").Inc()
	}
	t.changed[res.StoryNum] = struct{}{}
	t.removed = append(t.removed, res.MergedNums...)

	// The article goes on as it came, without the features only this task
	// reads, with its story in headers.
	key := []byte(a.ID)
	out := &eventlog.Record{Topic: schema.TopicArticlesIndexed, Partition: eventlog.PartitionFor(key, t.op.partitions),
		Key: key, Value: a.forward, Timestamp: a.Seen()}
	out.Headers = append(out.Headers, eventlog.Header{Key: schema.HeaderStoryID, Value: []byte(res.Story)})
	if res.DuplicateOf != "" {
		out.Headers = append(out.Headers, eventlog.Header{Key: schema.HeaderDuplicateOf, Value: []byte(res.DuplicateOf)})
	}
	pc.Emit(out)
	if res.BecameBreaking {
		t.emitBreaking(pc, res.StoryNum, rec, a.Seen())
	}
	return nil
}

// Episode is a record of schema.TopicStoriesBreaking: a story that began
// a breaking episode, as it was then.
type Episode struct {
	Story Ranked `json:"story"`
	// Offset is the offset, in partition 0 of schema.TopicArticles, of the
	// article that began the episode. Offsets grow with every episode, and
	// an episode emitted again (the stories task applying its records
	// again after a crash, or the stage replayed from the log) has the
	// offset it had: a reader that takes only episodes past the last
	// offset it took takes each once.
	Offset int64 `json:"articles_offset"`
}

// emitBreaking emits the story numbered num, which began a breaking
// episode with the article of rec, to TopicStoriesBreaking.
func (t *task) emitBreaking(pc *engine.ProcessContext, num uint64, rec *eventlog.Record, seen int64) {
	st := t.b.Story(num)
	if st == nil {
		return
	}
	c := st.public()
	v, err := json.Marshal(Episode{Story: Ranked{Story: &c, Score: RankScore(&c, c.LastSeen)}, Offset: rec.Offset})
	if err != nil {
		return
	}
	pc.Emit(&eventlog.Record{Topic: schema.TopicStoriesBreaking, Partition: 0, Key: []byte(c.ID), Value: v, Timestamp: seen})
}

func (t *task) Flush(w state.Writer) error {
	if err := t.b.Persist(w, t.r); err != nil {
		return err
	}
	t.removed = append(t.removed, t.b.deleted...)
	t.op.expired.Add(float64(len(t.b.deleted)))
	return nil
}

// Committed publishes the changed stories to the query view.
func (t *task) Committed(engine.CommitInfo) {
	if len(t.changed) == 0 && len(t.removed) == 0 {
		return
	}
	old := t.op.view.Load()
	v := &view{stories: make(map[uint64]*Story, len(old.stories)+len(t.changed)), watermark: old.watermark}
	for num, st := range old.stories {
		v.stories[num] = st
	}
	for _, num := range t.removed {
		delete(v.stories, num)
	}
	for num := range t.changed {
		if st := t.b.stories[num]; st != nil {
			v.add(num, st)
			continue
		}
		// Closed since it changed: its final record is committed (or it
		// is gone, deleted by retention).
		raw, ok, err := t.r.Get(storyNumKey(num))
		if err == nil && !ok {
			delete(v.stories, num)
		} else if err == nil {
			err = v.apply(num, eventlog.Change{Key: storyNumKey(num), Value: raw})
		}
		if err != nil {
			t.log.Error("publish a closed story", "story", num, "err", err)
		}
	}
	t.publish(v)
	clear(t.changed)
	t.removed = t.removed[:0]
}

// publish prunes v to the view window and makes it the view queries read.
func (t *task) publish(v *view) {
	v.prune(t.op.opts.ViewWindow)
	t.op.storeView(v)
	t.op.openGa.Set(float64(t.b.c.Open()))
}

func (t *task) Close() error { return nil }

// public returns a copy of the story's public fields, sharing nothing
// with the builder.
func (st *Story) public() Story {
	c := Story{
		ID: st.ID, Representative: st.Representative, Title: st.Title, URL: st.URL,
		SourceID: st.SourceID, Source: st.Source, Authority: st.Authority, Image: st.Image,
		Articles: st.Articles, Sources: slices.Clone(st.Sources), FirstSeen: st.FirstSeen, LastSeen: st.LastSeen,
		Topics: slices.Clone(st.Topics), Velocity: st.Velocity, Breaking: st.Breaking, BreakingAt: st.BreakingAt, BreakingSince: st.BreakingSince,
		DecayClass: st.DecayClass, Lambda: st.Lambda, MergedFrom: slices.Clone(st.MergedFrom), MergedInto: st.MergedInto,
	}
	return c
}

// storeView publishes v, numbered after the views before it.
func (o *Operator) storeView(v *view) {
	v.seq = o.views.Add(1)
	o.view.Store(v)
}

// ViewVersion numbers the published views: it changes whenever the stories
// that lists, the feed and topics read change.
func (o *Operator) ViewVersion() uint64 { return o.view.Load().seq }

// view is an immutable snapshot of the recent stories.
type view struct {
	stories   map[uint64]*Story
	watermark int64  // latest event time seen
	seq       uint64 // the view's number (storeView)

	rankOnce sync.Once
	ranked   []Ranked

	topicOnce sync.Once
	byTopic   map[string][]*Story // ranked, per topic
}

// add puts a copy of story st, number num, in v.
func (v *view) add(num uint64, st *Story) {
	c := st.public()
	v.stories[num] = &c
	v.watermark = max(v.watermark, st.LastSeen)
}

func (v *view) prune(window time.Duration) {
	limit := v.watermark - window.Milliseconds()
	for num, st := range v.stories {
		if st.LastSeen < limit {
			delete(v.stories, num)
		}
	}
}

// Ranked is a story with its non-personal score.
type Ranked struct {
	*Story
	Score float64 `json:"score"`
}

// RankScore is the non-personal ranking of a story as of event time now:
// size (distinct sources, log-scaled), representative authority,
// freshness (exp(-λ·hours since the latest article), λ by decay class)
// and velocity (articles in the last hour), weighted 0.35, 0.2, 0.3 and
// 0.15; breaking stories get ×1.3.
func RankScore(st *Story, now int64) float64 {
	size := math.Log1p(float64(len(st.Sources))) / math.Log1p(50)
	h := max(0, float64(now-st.LastSeen)/float64(time.Hour.Milliseconds()))
	fresh := math.Exp(-st.Lambda * h)
	vel := min(1, st.Velocity/60)
	s := 0.35*min(1, size) + 0.2*st.Authority + 0.3*fresh + 0.15*vel
	if st.Breaking {
		s *= 1.3
	}
	return s
}

func (v *view) rank() []Ranked {
	v.rankOnce.Do(func() {
		v.ranked = make([]Ranked, 0, len(v.stories))
		for _, st := range v.stories {
			v.ranked = append(v.ranked, Ranked{Story: st, Score: RankScore(st, v.watermark)})
		}
		slices.SortFunc(v.ranked, compareRanked)
	})
	return v.ranked
}

func compareRanked(a, b Ranked) int {
	if c := cmp.Compare(b.Score, a.Score); c != 0 {
		return c
	}
	return cmp.Compare(a.ID, b.ID)
}

// ListQuery selects a page of ranked stories.
type ListQuery struct {
	Topic string
	// Since drops stories whose latest article is older (ms; 0 = all).
	Since int64
	Limit int
	// After continues after the story with this score and id.
	After *Ranked
}

// ListResult is one page of ranked stories.
type ListResult struct {
	Stories []Ranked `json:"stories"`
	// AsOf is the event time the freshness scores are computed at (ms).
	AsOf int64 `json:"as_of"`
	// More is true when a next page exists.
	More bool `json:"-"`
}

// ErrBadQuery wraps invalid query parameters.
var ErrBadQuery = errors.New("bad query")

// List returns recent stories ranked by RankScore.
func (o *Operator) List(q ListQuery) (ListResult, error) {
	if q.Limit < 0 || q.Limit > o.opts.MaxLimit {
		return ListResult{}, fmt.Errorf("%w: limit must be from 1 to %d", ErrBadQuery, o.opts.MaxLimit)
	}
	if q.Limit == 0 {
		q.Limit = 20
	}
	v := o.view.Load()
	res := ListResult{AsOf: v.watermark, Stories: []Ranked{}}
	for _, r := range v.rank() {
		if q.After != nil && compareRanked(r, *q.After) <= 0 {
			continue
		}
		if r.LastSeen < q.Since || (q.Topic != "" && !hasTopic(r.Story, q.Topic)) {
			continue
		}
		if len(res.Stories) == q.Limit {
			res.More = true
			break
		}
		res.Stories = append(res.Stories, r)
	}
	return res, nil
}

func hasTopic(st *Story, topic string) bool {
	for _, l := range st.Topics {
		if l.Topic == topic {
			return true
		}
	}
	return false
}

// Breaking returns the stories breaking as of the latest event time,
// ranked.
func (o *Operator) Breaking() ListResult {
	v := o.view.Load()
	res := ListResult{AsOf: v.watermark, Stories: []Ranked{}}
	window := o.opts.Builder.Breaking.Window.Milliseconds()
	for _, r := range v.rank() {
		if r.Breaking && r.BreakingAt >= v.watermark-window {
			res.Stories = append(res.Stories, r)
		}
	}
	return res
}

// TopicCount is the number of recent stories and their articles under a
// topic.
type TopicCount struct {
	Topic    string `json:"topic"`
	Stories  int    `json:"stories"`
	Articles int    `json:"articles"`
}

// Topics counts the recent stories per topic, most stories first.
func (o *Operator) Topics() []TopicCount {
	v := o.view.Load()
	m := map[string]*TopicCount{}
	for _, st := range v.stories {
		for _, l := range st.Topics {
			tc := m[l.Topic]
			if tc == nil {
				tc = &TopicCount{Topic: l.Topic}
				m[l.Topic] = tc
			}
			tc.Stories++
			tc.Articles += st.Articles
		}
	}
	out := make([]TopicCount, 0, len(m))
	for _, tc := range m {
		out = append(out, *tc)
	}
	slices.SortFunc(out, func(a, b TopicCount) int {
		if c := cmp.Compare(b.Stories, a.Stories); c != 0 {
			return c
		}
		return cmp.Compare(a.Topic, b.Topic)
	})
	return out
}

// Detail is a story with all its articles.
type Detail struct {
	Story
	Articles []ArticleRecord `json:"articles"`
}

// ErrNotFound is returned for unknown stories.
var ErrNotFound = errors.New("not found")

// MaxDetailArticles caps the articles listed by Get.
const MaxDetailArticles = 1000

// Head returns a story without its articles, from committed state; a
// story merged into another is answered with the story it is part of now.
func (o *Operator) Head(id string) (*Story, error) {
	rp := o.reader.Load()
	if rp == nil {
		return nil, ErrNotFound
	}
	rec, err := loadCurrent(*rp, id)
	if err != nil {
		return nil, err
	}
	return &rec.Story, nil
}

// Get returns a story and its articles, in arrival order, from committed
// state. A story merged into another is answered with the story it is
// part of now.
func (o *Operator) Get(id string) (*Detail, error) {
	rp := o.reader.Load()
	if rp == nil {
		return nil, ErrNotFound
	}
	r := *rp
	rec, err := loadCurrent(r, id)
	if err != nil {
		return nil, err
	}
	d := &Detail{Story: rec.Story, Articles: []ArticleRecord{}}
	nums := []uint64{rec.Num}
	for _, m := range rec.MergedFrom {
		raw, ok, err := r.Get(storyIDKey(m))
		if err != nil {
			return nil, err
		}
		if ok && len(raw) == 8 {
			nums = append(nums, binary.BigEndian.Uint64(raw))
		}
	}
	for _, num := range nums {
		err := scanMembers(r, num, func(_ []byte, ar *ArticleRecord) error {
			if len(d.Articles) >= MaxDetailArticles {
				return errStop
			}
			if ar != nil {
				d.Articles = append(d.Articles, *ar)
			}
			return nil
		})
		if err != nil && !errors.Is(err, errStop) {
			return nil, err
		}
	}
	slices.SortStableFunc(d.Articles, func(a, b ArticleRecord) int { return cmp.Compare(a.Published, b.Published) })
	return d, nil
}

var errStop = errors.New("stop")

// Preselect returns, for ranking a personal feed, the best n stories by
// the non-personal score and the best perTopic stories of each of topics,
// without repeats, in that order, and the latest event time.
func (o *Operator) Preselect(n, perTopic int, topics []string) ([]*Story, int64) {
	v := o.view.Load()
	ranked := v.rank()
	seen := make(map[string]bool, n+perTopic*len(topics))
	out := make([]*Story, 0, n+perTopic*len(topics))
	for _, r := range ranked[:min(n, len(ranked))] {
		seen[r.ID] = true
		out = append(out, r.Story)
	}
	v.topicOnce.Do(func() {
		v.byTopic = map[string][]*Story{}
		for _, r := range ranked {
			for _, l := range r.Topics {
				v.byTopic[l.Topic] = append(v.byTopic[l.Topic], r.Story)
			}
		}
	})
	for _, t := range topics {
		list := v.byTopic[t]
		for _, st := range list[:min(perTopic, len(list))] {
			if !seen[st.ID] {
				seen[st.ID] = true
				out = append(out, st)
			}
		}
	}
	return out, v.watermark
}

// Watermark returns the latest event time of the query view.
func (o *Operator) Watermark() int64 { return o.view.Load().watermark }

// Recent returns the stories of the query view (those with an article in
// the view window) and the latest event time. The stories are shared and
// must not be modified.
func (o *Operator) Recent() ([]*Story, int64) {
	v := o.view.Load()
	out := make([]*Story, 0, len(v.stories))
	for _, st := range v.stories {
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b *Story) int { return cmp.Compare(a.ID, b.ID) })
	return out, v.watermark
}

// StoryOfArticle returns the id of the story an article is in now.
func (o *Operator) StoryOfArticle(articleID string) (string, bool) {
	_, storyID, ok := o.Article(articleID)
	return storyID, ok
}

// Article returns an article from committed state and the id of the story
// it is in now.
func (o *Operator) Article(id string) (ArticleRecord, string, bool) {
	rp := o.reader.Load()
	if rp == nil {
		return ArticleRecord{}, "", false
	}
	raw, ok, err := (*rp).Get(articleKey(id))
	if err != nil || !ok {
		return ArticleRecord{}, "", false
	}
	var ar ArticleRecord
	if err := json.Unmarshal(raw, &ar); err != nil {
		return ArticleRecord{}, "", false
	}
	v, ok, err := (*rp).Get(storyNumKey(ar.Story))
	if err != nil || !ok {
		return ArticleRecord{}, "", false
	}
	var rec storyRecord
	if err := json.Unmarshal(v, &rec); err != nil {
		return ArticleRecord{}, "", false
	}
	return ar, o.Resolve(rec.ID), true
}

// ArticleByNum returns the article whose entry number (ArticleRecord.Num,
// given in arrival order) is num, from committed state, and the id of the
// story it is in now.
func (o *Operator) ArticleByNum(num uint64) (ArticleRecord, string, bool) {
	rp := o.reader.Load()
	if rp == nil {
		return ArticleRecord{}, "", false
	}
	id, ok, err := (*rp).Get(numKey(num))
	if err != nil || !ok {
		return ArticleRecord{}, "", false
	}
	ar, storyID, ok := o.Article(string(id))
	if !ok || ar.Num != num {
		return ArticleRecord{}, "", false // applied again since, under another number
	}
	return ar, storyID, true
}

// ImageURL returns the URL of the image with id (ImageID) when an article
// the story stage applied had that image, from committed state.
func (o *Operator) ImageURL(id string) (string, bool) {
	rp := o.reader.Load()
	if rp == nil || !ValidImageID(id) {
		return "", false
	}
	v, ok, err := (*rp).Get(imageKey(id))
	if err != nil || !ok {
		return "", false
	}
	url, _ := parseImage(v)
	return url, true
}

// Resolve returns the id of the story that story id is part of now: id
// itself, or the story it was merged into. Unknown ids resolve to
// themselves.
func (o *Operator) Resolve(id string) string {
	rp := o.reader.Load()
	if rp == nil {
		return id
	}
	for hops := 0; hops < 64; hops++ {
		rec, err := loadRecord(*rp, id)
		if err != nil || rec.MergedInto == "" {
			return id
		}
		id = rec.MergedInto
	}
	return id
}

// loadCurrent loads story id, following merges to the story it is part of
// now.
func loadCurrent(r state.Reader, id string) (*storyRecord, error) {
	rec, err := loadRecord(r, id)
	if err != nil {
		return nil, err
	}
	for hops := 0; rec.MergedInto != "" && hops < 64; hops++ {
		if rec, err = loadRecord(r, rec.MergedInto); err != nil {
			return nil, err
		}
	}
	return rec, nil
}

func loadRecord(r state.Reader, id string) (*storyRecord, error) {
	raw, ok, err := r.Get(storyIDKey(id))
	if err != nil {
		return nil, err
	}
	if !ok || len(raw) != 8 {
		return nil, ErrNotFound
	}
	v, ok, err := r.Get(storyNumKey(binary.BigEndian.Uint64(raw)))
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, ErrNotFound
	}
	var rec storyRecord
	if err := json.Unmarshal(v, &rec); err != nil {
		return nil, fmt.Errorf("stories: corrupt story %s: %w", id, err)
	}
	return &rec, nil
}
