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
package articles

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
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
}

// DefaultOptions returns the defaults the zero value stands for.
func DefaultOptions() Options {
	return Options{MaxTitleBytes: feed.MaxTitleBytes, MaxSummaryBytes: feed.MaxSummaryBytes, MaxContentBytes: 32 << 10, MaxRecordBytes: 16 << 20}
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
	if reg != nil {
		if err := reg.Register(o.outcomes); err != nil {
			return nil, fmt.Errorf("articles: register metrics: %w", err)
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
		Stores:      []string{"article versions and text hashes"},
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
	return &task{op: o, dirty: map[string]version{}}, nil
}

// version is what the task keeps per article.
type version struct {
	n    uint32
	hash uint64
}

type task struct {
	op    *Operator
	r     state.Reader
	dirty map[string]version
}

func (t *task) Restore(r state.Reader) error {
	t.r = r
	clear(t.dirty)
	return nil
}

func versionKey(id string) []byte { return append([]byte("v"), id...) }

func (t *task) lookup(id string) (version, error) {
	if v, ok := t.dirty[id]; ok {
		return v, nil
	}
	b, ok, err := t.r.Get(versionKey(id))
	if err != nil || !ok {
		return version{}, err
	}
	if len(b) != 12 {
		return version{}, fmt.Errorf("articles: corrupt version of %s", id)
	}
	return version{n: binary.BigEndian.Uint32(b), hash: binary.BigEndian.Uint64(b[4:])}, nil
}

func (t *task) Process(pc *engine.ProcessContext, rec *eventlog.Record) error {
	a, err := t.op.Clean(rec.Value, rec.Timestamp)
	if err != nil {
		return engine.Invalid("raw article: %v", err)
	}
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
	prev, err := t.lookup(a.ID)
	if err != nil {
		return err
	}
	if prev.n > 0 && prev.hash == sum {
		t.op.outcomes.WithLabelValues("unchanged").Inc()
		return nil
	}
	a.Version = int(prev.n) + 1
	t.dirty[a.ID] = version{n: prev.n + 1, hash: sum}
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
	val, err := json.Marshal(a)
	if err != nil {
		return err
	}
	pc.Emit(&eventlog.Record{Topic: schema.TopicArticles, Partition: 0, Key: []byte(a.ID), Value: val, Timestamp: a.PublishedAt})
	return nil
}

func (t *task) Flush(w state.Writer) error {
	var buf [12]byte
	for id, v := range t.dirty {
		binary.BigEndian.PutUint32(buf[:], v.n)
		binary.BigEndian.PutUint64(buf[4:], v.hash)
		if err := w.Set(versionKey(id), buf[:]); err != nil {
			return err
		}
	}
	clear(t.dirty)
	return nil
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
