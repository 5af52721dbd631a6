// Package articles is the first operator of the article pipeline: it turns
// raw crawled items into clean, deduplicated, classified articles.
//
// Every raw item is keyed by the hash of its canonical URL (internal/canon),
// whatever key its producer gave it, so re-crawls, tracking-parameter
// variants and syndicated copies under one URL are one article. The task
// keeps, per article, its version and a hash of its text: an item whose text
// did not change is dropped, an item with an edited title or summary becomes
// the article's next version. Text is stripped of markup, repaired to valid
// UTF-8 and truncated; items without a usable URL or title are dead-lettered
// with the reason. An optional image_url (the lead image) must be an
// absolute http or https URL; it is carried on, and an image that changes
// makes a new version like edited text.
//
// Each article goes out with the features of its title and summary that
// the story stage uses and that do not depend on other articles (SimHash,
// MinHash signature, index terms with their counts; see
// operators/internal/features), so that the single stories task need not
// compute them: the articles tasks share the work, one per partition.
//
// First-seen and retention: each article carries the time the node first
// saw it (schema.Article.FirstSeen): the log time of the raw record of its
// first version, kept for its later versions. It comes from the record,
// not the wall clock, so a replay gives the same times. The task forgets an
// article (its version and text hash) once it was first seen longer than
// the retention age before the partition's newest first-seen time
// (Options.Retention, default 30 days); the later stages age it the same
// way. The publish date plays no part: an item published years ago is a
// valid article like any other and is never refused for its age. A record
// whose own log time is already behind the retention cutoff (a producer's
// clock, a replay of an old topic) counts as first seen at the partition's
// newest first-seen time, so no valid item is refused or forgotten on
// arrival. An article forgotten by retention and sent again becomes a new
// article; the crawler remembers the items of each feed it has appended
// and does not send them again.
package articles

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/internal/canon"
	"github.com/newsflow/newsflow/internal/classify"
	"github.com/newsflow/newsflow/internal/feed"
	"github.com/newsflow/newsflow/internal/option"
	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/internal/text"
	"github.com/newsflow/newsflow/operators/internal/features"
	"github.com/newsflow/newsflow/operators/internal/timeindex"
	"github.com/newsflow/newsflow/state"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fastjson"
)

// Name is the operator's name in the topology.
const Name = "articles"

// Options configure the operator. The zero value is valid.
type Options struct {
	// MaxTitleBytes, MaxSummaryBytes and MaxContentBytes cap the cleaned
	// text fields (defaults 512, 2000 and 32 KiB).
	MaxTitleBytes   int `yaml:"-"`
	MaxSummaryBytes int `yaml:"-"`
	MaxContentBytes int `yaml:"max_content_bytes"`
	// MaxRecordBytes is the largest raw record accepted (default 16 MiB);
	// larger ones are dead-lettered.
	MaxRecordBytes int `yaml:"-"`
	// Retention is how long, in first-seen time behind the partition's
	// newest article, an article's version is kept (default
	// schema.DefaultRetention; negative keeps every version). The node
	// sets it from retention.articles.
	Retention time.Duration `yaml:"-"`
}

// DefaultOptions returns the defaults the zero value stands for.
func DefaultOptions() Options {
	return Options{MaxTitleBytes: feed.MaxTitleBytes, MaxSummaryBytes: feed.MaxSummaryBytes, MaxContentBytes: 32 << 10, MaxRecordBytes: 16 << 20,
		Retention: schema.DefaultRetention}
}

// Validate reports invalid option values.
func (o Options) Validate() error {
	if o.MaxTitleBytes < 0 || o.MaxSummaryBytes < 0 || o.MaxContentBytes < 0 || o.MaxRecordBytes < 0 {
		return errors.New("articles: size limits must not be negative")
	}
	return nil
}

// SourceInfo returns the display name and authority of a source; ok is
// false for unknown sources. It must be safe for concurrent use.
type SourceInfo func(sourceID string) (name string, authority float64, ok bool)

// DefaultAuthority is the authority of articles from unknown sources.
const DefaultAuthority = 0.5

// Operator is the articles operator.
type Operator struct {
	opts     Options
	cls      classify.Classifier
	sources  SourceInfo
	outcomes *prometheus.CounterVec
	expired  prometheus.Counter
	parsers  fastjson.ParserPool // for route, called concurrently
}

// New returns the operator. cls labels topics; sources may be nil.
// Topics lists every topic the classifier can label, sorted.
func (o *Operator) Topics() []string {
	t := o.cls.Topics()
	slices.Sort(t)
	return t
}

func New(opts Options, cls classify.Classifier, sources SourceInfo, reg prometheus.Registerer) (*Operator, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if cls == nil {
		return nil, errors.New("articles: no classifier")
	}
	option.Fill(&opts, DefaultOptions())
	o := &Operator{opts: opts, cls: cls, sources: sources}
	o.outcomes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "newsflow_articles_total",
		Help: "Raw articles by outcome: new, edited (a new version), unchanged (dropped repeat).",
	}, []string{"outcome"})
	o.expired = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "newsflow_articles_expired_total",
		Help: "Article versions deleted because the article is older than the retention age.",
	})
	if reg != nil {
		for _, c := range []prometheus.Collector{o.outcomes, o.expired} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("articles: register metrics: %w", err)
			}
		}
	}
	return o, nil
}

// Spec implements engine.Operator.
func (o *Operator) Spec() engine.Spec {
	return engine.Spec{
		Name:        Name,
		Description: "dedup by canonical URL, clean text, label topics",
		Inputs:      []engine.Input{{Topic: schema.TopicArticlesRaw, Key: "article_id (hash of the canonical URL)", Route: o.route}},
		Outputs:     []string{schema.TopicArticles},
		Stores:      []string{"article versions, text hashes and first-seen times", "articles by first-seen time, for retention"},
		Options:     o.opts,
	}
}

// route keys a raw record by the article id of its URL.
func (o *Operator) route(rec *eventlog.Record) ([]byte, bool) {
	if len(rec.Value) > o.opts.MaxRecordBytes {
		return nil, false
	}
	p := o.parsers.Get()
	defer o.parsers.Put(p)
	v, err := p.ParseBytes(rec.Value)
	if err != nil {
		return nil, false
	}
	c, err := canon.Canonical(string(v.GetStringBytes("url")), nil)
	if err != nil {
		return nil, false
	}
	return []byte(canon.ArticleID(c)), true
}

// NewTask implements engine.Operator.
func (o *Operator) NewTask(tc engine.TaskContext) (engine.Task, error) {
	return &task{op: o, dirty: map[string]version{}, ext: features.NewExtractor()}, nil
}

// version is what the task keeps per article.
type version struct {
	n    uint32
	hash uint64
	// published is the article's publish time.
	published int64
	// seen is its first-seen time, by which retention ages it; noTime for
	// a version stored before retention, which is kept.
	seen int64
	// stored is the time of the committed t entry, noTime if none.
	stored int64
}

// noTime marks a version without a time.
const noTime = math.MaxInt64

// State keys of a task:
//
//	v <article id>         version (4 bytes), text hash (8), publish time (8; absent
//	                       in versions stored before retention), first-seen time (8;
//	                       absent in versions stored before first-seen times, whose
//	                       publish time stands in for it)
//	t <time:8> <article id> nothing: the articles by first-seen time (sign bit flipped,
//	                       so that it sorts), for retention
//	m                      the partition's newest first-seen time (8 bytes); the newest
//	                       publish time in state written before first-seen times
var keyWatermark = []byte("m")

type task struct {
	op    *Operator
	r     state.Reader
	dirty map[string]version
	wm    int64 // the newest first-seen time applied
	ext   *features.Extractor
}

func (t *task) Restore(r state.Reader) error {
	t.r = r
	clear(t.dirty)
	t.wm = math.MinInt64
	v, ok, err := r.Get(keyWatermark)
	if err != nil {
		return err
	}
	if ok {
		if len(v) != 8 {
			return errors.New("articles: corrupt watermark")
		}
		t.wm = int64(binary.BigEndian.Uint64(v))
	}
	return nil
}

func versionKey(id string) []byte { return append([]byte("v"), id...) }

func timeKey(seen int64, id string) []byte { return timeindex.Key('t', seen, id) }

// cutoff returns the first-seen time before which articles are forgotten,
// and false when retention is off or nothing was applied yet.
func (t *task) cutoff() (int64, bool) {
	if t.op.opts.Retention < 0 || t.wm == math.MinInt64 {
		return 0, false
	}
	return t.wm - t.op.opts.Retention.Milliseconds(), true
}

// lookup returns the version of article id; an article older than the
// retention age has none, whether or not a commit has deleted it yet.
func (t *task) lookup(id string) (version, error) {
	v, ok := t.dirty[id]
	if !ok {
		var err error
		if v, err = t.stored(id); err != nil {
			return v, err
		}
	}
	if cut, on := t.cutoff(); on && v.seen != noTime && v.seen < cut {
		return version{published: noTime, seen: noTime, stored: v.stored}, nil
	}
	return v, nil
}

// stored reads the committed version of article id.
func (t *task) stored(id string) (version, error) {
	v := version{published: noTime, seen: noTime, stored: noTime}
	b, ok, err := t.r.Get(versionKey(id))
	if err != nil || !ok {
		return v, err
	}
	if len(b) != 12 && len(b) != 20 && len(b) != 28 {
		return v, fmt.Errorf("articles: corrupt version of %s", id)
	}
	v.n, v.hash = binary.BigEndian.Uint32(b), binary.BigEndian.Uint64(b[4:])
	if len(b) >= 20 {
		v.published = int64(binary.BigEndian.Uint64(b[12:]))
		v.seen = v.published // state written before first-seen times
	}
	if len(b) == 28 {
		v.seen = int64(binary.BigEndian.Uint64(b[20:]))
	}
	v.stored = v.seen
	return v, nil
}

func (t *task) Process(pc *engine.ProcessContext, rec *eventlog.Record) error {
	a, err := t.op.Clean(rec.Value, rec.Timestamp)
	if err != nil {
		return engine.Invalid("raw article: %v", err)
	}
	prev, err := t.lookup(a.ID)
	if err != nil {
		return err
	}
	a.FirstSeen = prev.seen
	if prev.n == 0 || prev.seen == noTime {
		a.FirstSeen = t.arrival(rec, a)
	}
	t.wm = max(t.wm, a.FirstSeen)
	h := xxhash.New()
	for _, s := range []string{a.Title, a.Summary, a.Content} {
		h.WriteString(s)
		h.Write([]byte{0})
	}
	if a.ImageURL != "" {
		// Only when set: articles without an image hash as they did
		// before images were carried, so their repeats stay unchanged.
		h.WriteString(a.ImageURL)
	}
	sum := h.Sum64()
	if prev.n > 0 && prev.hash == sum {
		t.op.outcomes.WithLabelValues("unchanged").Inc()
		return nil
	}
	a.Version = int(prev.n) + 1
	t.dirty[a.ID] = version{n: prev.n + 1, hash: sum, published: a.PublishedAt, seen: a.FirstSeen, stored: prev.stored}
	if prev.n > 0 {
		t.op.outcomes.WithLabelValues("edited").Inc()
	} else {
		t.op.outcomes.WithLabelValues("new").Inc()
	}
	for _, l := range t.op.cls.Classify(classify.Document{Title: a.Title, Summary: a.Summary, Content: a.Content}) {
		a.Topics = append(a.Topics, schema.Label{Topic: l.Topic, Confidence: l.Confidence})
	}
	a.Source = a.SourceID
	if t.op.sources != nil {
		if name, auth, ok := t.op.sources(a.SourceID); ok {
			a.Source, a.Authority = name, auth
		}
	}
	// The story stage's features of the text travel with the record: this
	// task is one of many, the stories task is one.
	val, err := json.Marshal(schema.ProcessedArticle{Article: a, Features: t.ext.Compute(a.Title, a.Summary)})
	if err != nil {
		return err
	}
	// The record's time is the article's first-seen time, as the raw
	// record's was its arrival: the log's own retention and replays by
	// time see old news as recent arrivals, not as years-old records.
	pc.Emit(&eventlog.Record{Topic: schema.TopicArticles, Partition: 0, Key: []byte(a.ID), Value: val, Timestamp: a.FirstSeen})
	return nil
}

// arrival returns the first-seen time of a new article: the log time of
// its raw record (the crawl or the request that brought it), else its
// fetch time; a time already behind the retention cutoff becomes the
// partition's newest first-seen time, so a valid item is never forgotten
// on arrival.
func (t *task) arrival(rec *eventlog.Record, a schema.Article) int64 {
	seen := rec.Timestamp
	if seen <= 0 {
		seen = a.FetchedAt
	}
	if cut, on := t.cutoff(); on && seen < cut {
		seen = t.wm
	}
	return seen
}

// Flush stages the deletion of the articles older than the retention age
// first, then the new versions, so that a version made again since keeps
// its new value. Which articles are kept depends only on the records
// applied, not on where commits fell.
func (t *task) Flush(w state.Writer) error {
	cut, on := t.cutoff()
	if on {
		n := 0
		err := timeindex.Expired(t.r, 't', cut, func(k []byte, _ int64, id string) error {
			n++
			if err := w.Delete(k); err != nil {
				return err
			}
			return w.Delete(versionKey(id))
		})
		if err != nil {
			return err
		}
		t.op.expired.Add(float64(n))
	}
	var buf [28]byte
	for id, v := range t.dirty {
		if v.stored != noTime && v.stored != v.seen {
			if err := w.Delete(timeKey(v.stored, id)); err != nil {
				return err
			}
		}
		if on && v.seen < cut { // expired since it was applied
			if err := w.Delete(versionKey(id)); err != nil {
				return err
			}
			continue
		}
		binary.BigEndian.PutUint32(buf[:], v.n)
		binary.BigEndian.PutUint64(buf[4:], v.hash)
		binary.BigEndian.PutUint64(buf[12:], uint64(v.published))
		binary.BigEndian.PutUint64(buf[20:], uint64(v.seen))
		if err := w.Set(versionKey(id), buf[:]); err != nil {
			return err
		}
		if err := w.Set(timeKey(v.seen, id), nil); err != nil {
			return err
		}
	}
	clear(t.dirty)
	if t.wm == math.MinInt64 {
		return nil
	}
	return w.Set(keyWatermark, binary.BigEndian.AppendUint64(nil, uint64(t.wm)))
}

func (t *task) Committed(engine.CommitInfo) {}
func (t *task) Close() error                { return nil }

// Clean decodes a raw article and returns it cleaned, without topics,
// source details or version. recordTime (ms) stands in for missing publish
// and fetch times.
func (o *Operator) Clean(value []byte, recordTime int64) (schema.Article, error) {
	var a schema.Article
	if len(value) > o.opts.MaxRecordBytes {
		return a, fmt.Errorf("record of %d bytes exceeds %d", len(value), o.opts.MaxRecordBytes)
	}
	var raw schema.RawArticle
	if err := json.Unmarshal(value, &raw); err != nil {
		return a, fmt.Errorf("malformed JSON: %w", err)
	}
	if strings.TrimSpace(raw.URL) == "" {
		return a, errors.New("missing url")
	}
	u, err := canon.Canonical(raw.URL, nil)
	if err != nil {
		return a, fmt.Errorf("url: %w", err)
	}
	a.URL, a.ID = u, canon.ArticleID(u)
	a.Title, a.Summary, a.Content = o.CleanText(raw.Title, raw.Summary, raw.Content)
	if a.Title == "" {
		return a, errors.New("missing title")
	}
	a.Author = text.Clean(raw.Author, 256)
	if raw.ImageURL != "" {
		if a.ImageURL, err = feed.ImageURL(raw.ImageURL, nil); err != nil {
			return a, fmt.Errorf("image_url: %w", err)
		}
	}
	a.SourceID = text.Clean(raw.SourceID, 256)
	a.Authority = DefaultAuthority
	if a.FetchedAt, err = parseTime(raw.FetchedAt); err != nil {
		return a, fmt.Errorf("fetched_at: %w", err)
	}
	if a.PublishedAt, err = parseTime(raw.PublishedAt); err != nil {
		return a, fmt.Errorf("published_at: %w", err)
	}
	switch {
	case a.PublishedAt == 0 && a.FetchedAt != 0:
		a.PublishedAt = a.FetchedAt
	case a.PublishedAt == 0:
		a.PublishedAt = recordTime
	}
	if a.FetchedAt == 0 {
		a.FetchedAt = recordTime
	}
	// A time far ahead of the record's is a wrong clock or a typo, and
	// would move every stage's watermark (and with it the story window and
	// retention) past everything else: it becomes the latest time a feed
	// item may have (feed.MaxFutureSkew after the record's).
	if recordTime > 0 {
		limit := recordTime + feed.MaxFutureSkew.Milliseconds()
		a.PublishedAt, a.FetchedAt = min(a.PublishedAt, limit), min(a.FetchedAt, limit)
	}
	return a, nil
}

// CleanText strips markup from an article's title, summary and content,
// repairs them to valid UTF-8 and truncates them to the configured sizes.
func (o *Operator) CleanText(title, summary, content string) (string, string, string) {
	return text.Clean(title, o.opts.MaxTitleBytes), text.Clean(summary, o.opts.MaxSummaryBytes), text.Clean(content, o.opts.MaxContentBytes)
}

func parseTime(v schema.Time) (int64, error) {
	s := string(v)
	if s == "" {
		return 0, nil
	}
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return ms, nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return 0, errors.New("not an RFC 3339 time or ms since the epoch")
	}
	return t.UnixMilli(), nil
}
