package searchindex

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/keyword"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/document"
	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/mapping"
	"github.com/blevesearch/bleve/v2/search/query"
	bleveindex "github.com/blevesearch/bleve_index_api"
)

var (
	// ErrBadRequest wraps every error Search returns for a request that
	// can never succeed (bad limit, query too long, bad cursor, ...). The
	// HTTP layer answers it with 400.
	ErrBadRequest = errors.New("bad search request")
	// ErrInvalidDoc wraps the error Apply returns for a document it cannot
	// index (missing or oversized id). Nothing of the batch is applied.
	ErrInvalidDoc = errors.New("invalid search document")
	// ErrClosed is returned by calls on a closed Index.
	ErrClosed = errors.New("search index closed")
	// ErrIncompatible is returned by Open for an index written with a
	// different schema. The caller destroys it and rebuilds it by replay.
	ErrIncompatible = errors.New("incompatible search index")
)

// Field names in the Bleve index.
const (
	fieldTitle    = "title"
	fieldSummary  = "summary"
	fieldContent  = "content"
	fieldURL      = "url"
	fieldSource   = "source"
	fieldSourceID = "source_id"
	fieldTopics   = "topics"
	fieldStoryID  = "story_id"
	// fieldPublished is the published time as a sortable key (see
	// publishedKey): one term per document, with doc values for sorting.
	fieldPublished = "published"
	// fieldPublishedHour is the published time truncated to the hour, for
	// range filters. Bleve indexes a date as 16 terms of decreasing
	// precision; at full precision most of them are unique per document and
	// made the date cost a third of all indexing time. Truncated, they are
	// shared by every document of the hour.
	fieldPublishedHour = "published_hour"
	// fieldTraceParent is the trace context of the article's indexing,
	// stored only, on the documents of traced articles alone.
	fieldTraceParent = "traceparent"
	// fieldSeen is the article's first-seen time as a sortable key (see
	// publishedKey), indexed and stored, by which retention ages the
	// document. Documents indexed before first-seen times have none (their
	// published time stands in); like fieldTraceParent it needs no
	// mapping, so indexes created before it take it as they are.
	fieldSeen = "first_seen"
)

// schemaVersion names the mapping and document layout below. Change it when
// either changes: Open then refuses old indexes with ErrIncompatible.
// (Fields that are stored only and optional, like fieldTraceParent, are
// the exception: an index created before one existed takes and returns it
// as well; only its saved mapping, which no query reads, lacks it.)
const schemaVersion = 1

// markerFile is written, durably, once an index has been created whole. An
// index directory without it is the remains of an interrupted Open and is
// recreated.
const markerFile = "newsflow-search.json"

// bleveFiles are the entries Bleve keeps in an index directory.
var bleveFiles = map[string]bool{"index_meta.json": true, "index_meta.json_temp": true, "store": true}

// maxPublishedKey and maxSeenKey are the internal keys of
// Index.maxPublished and Index.maxSeen.
var (
	maxPublishedKey = []byte("newsflow.max_published")
	maxSeenKey      = []byte("newsflow.max_seen")
	// legacyKey holds Index.legacyMax while it is set.
	legacyKey = []byte("newsflow.legacy_max_published")
)

const maxIDBytes = 256 // ids, topics and source ids longer than this are refused

// Indexed and queried dates are kept within [minTime, maxTime]. Bleve
// represents dates as Unix nanoseconds in an int64 (years 1678–2262), and
// its numeric range search degenerates into enumerating millions of terms
// when a bound lies within 2^60 ns of the int64 limits; these bounds keep
// clear of both.
var (
	minTime = time.Date(1800, 1, 1, 0, 0, 0, 0, time.UTC)
	maxTime = time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)
)

// Doc is one article as the index sees it.
type Doc struct {
	ID      string // article id; required, at most 256 bytes
	Title   string
	Summary string
	Content string // indexed up to Options.MaxContentBytes, never stored
	URL     string
	// SourceID is the source's id (a keyword filter); Source is the
	// publisher's display name (stored only).
	SourceID, Source string
	Topics           []string
	StoryID          string
	// TraceParent, if set, is the W3C trace context of the article's
	// indexing (stored only): a search that finds it links to its trace.
	TraceParent string
	// PublishedAt orders newest-first results and the From/To filter. A zero
	// time is indexed as the Unix epoch, so such articles come last; times
	// outside the years 1800–2199 are clamped into them.
	PublishedAt time.Time
	// FirstSeen is when the node first saw the article, by which
	// retention ages it (SeenBefore, Hit.FirstSeen); zero, PublishedAt
	// stands in. Clamped as PublishedAt.
	FirstSeen time.Time
}

// Index is the search index of one partition: a Bleve (scorch) index in its
// own directory.
//
// Concurrency: Search and Count may be called from any number of goroutines,
// concurrently with Apply. Apply may be called from any goroutine, but calls
// are serialized; the intended caller is the partition's task, its single
// writer. The hits of a Search come from one point between Applies, never
// half a batch. Close waits for calls in progress; calls after it return
// ErrClosed. Lock order: writeMu, then mu.
type Index struct {
	dir     string
	opts    Options
	bi      bleve.Index
	en      analysis.Analyzer // title, summary, content
	keyword analysis.Analyzer // topics, source_id, story_id
	hl      *highlighter
	writeMu sync.Mutex // serializes Apply

	// bleveOnly makes relevance searches take Bleve's path, which scores
	// every match, instead of the top-k path (tests compare the two).
	bleveOnly bool

	// maxPublished is the latest published time (Unix ns) ever indexed,
	// math.MinInt64 for none; newest-first searches start there. Apply keeps
	// it in the index (internal key maxPublishedKey) in the same batch.
	maxPublished atomic.Int64
	// maxSeen is the latest first-seen time (Unix ns) ever indexed (a
	// document without one counts its published time), math.MinInt64 for
	// none; kept like maxPublished (internal key maxSeenKey).
	maxSeen atomic.Int64
	// legacyMax is the latest published time (Unix ns) of the documents
	// without a first-seen time the index may hold (indexed before
	// first-seen times, or given none), math.MinInt64 for none: while
	// there may be some, SeenBefore also looks for them by their published
	// time, a query that reads every first-seen term. Kept like
	// maxPublished (legacyKey); cleared by the Apply after a SeenBefore
	// that found the last of them (legacyClear).
	legacyMax   atomic.Int64
	legacyClear atomic.Int64 // the legacyMax a SeenBefore found exhausted
	legacySaved atomic.Bool  // legacyKey holds legacyMax

	mu struct {
		sync.RWMutex // held for reading by every call, for writing by Close
		closed       bool
	}
}

// Open opens the index in dir, creating it if dir does not exist or is
// empty. Open returns ErrIncompatible for an index of another schema
// version.
func Open(dir string, opts Options) (*Index, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	created, err := prepareDir(dir)
	if err != nil {
		return nil, fmt.Errorf("open search index %s: %w", dir, err)
	}
	var bi bleve.Index
	if created {
		bi, err = create(dir)
	} else {
		bi, err = bleve.OpenUsing(dir, scorchConfig())
	}
	if err != nil {
		return nil, fmt.Errorf("open search index %s: %w", dir, err)
	}
	ix := &Index{dir: dir, opts: opts, bi: bi}
	m := bi.Mapping()
	ix.en = m.AnalyzerNamed(en.AnalyzerName)
	ix.keyword = m.AnalyzerNamed(keyword.Name)
	if ix.en == nil || ix.keyword == nil {
		_ = bi.Close()
		return nil, fmt.Errorf("open search index %s: analyzers missing", dir)
	}
	ix.hl = newHighlighter(ix.en, opts.FragmentSize)
	ix.maxPublished.Store(math.MinInt64)
	v, err := bi.GetInternal(maxPublishedKey)
	if err != nil {
		_ = bi.Close()
		return nil, fmt.Errorf("open search index %s: %w", dir, err)
	}
	if len(v) == 8 {
		ix.maxPublished.Store(int64(binary.BigEndian.Uint64(v)))
	}
	// An index written before first-seen times: its documents' published
	// times stand in for theirs.
	ix.maxSeen.Store(ix.maxPublished.Load())
	if v, err = bi.GetInternal(maxSeenKey); err != nil {
		_ = bi.Close()
		return nil, fmt.Errorf("open search index %s: %w", dir, err)
	}
	if len(v) == 8 {
		ix.maxSeen.Store(int64(binary.BigEndian.Uint64(v)))
	}
	ix.legacyMax.Store(math.MinInt64)
	ix.legacyClear.Store(math.MinInt64)
	if len(v) != 8 {
		ix.legacyMax.Store(ix.maxPublished.Load()) // every document has none
	}
	if v, err = bi.GetInternal(legacyKey); err != nil {
		_ = bi.Close()
		return nil, fmt.Errorf("open search index %s: %w", dir, err)
	}
	if len(v) == 8 {
		ix.legacyMax.Store(int64(binary.BigEndian.Uint64(v)))
	}
	ix.legacySaved.Store(len(v) == 8 || ix.legacyMax.Load() == math.MinInt64)
	return ix, nil
}

// prepareDir decides whether dir holds a complete index (false) or a new
// one must be created there (true). It removes what an interrupted creation
// left behind, and refuses directories that hold anything else.
func prepareDir(dir string) (create bool, err error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	marker := false
	for _, e := range entries {
		switch {
		case e.Name() == markerFile:
			marker = true
		case !bleveFiles[e.Name()]:
			return false, fmt.Errorf("%s is not a search index: it holds %s", dir, e.Name())
		}
	}
	if marker {
		return false, checkMarker(dir)
	}
	// No marker: an earlier Open stopped before it finished creating the
	// index, so nothing was ever applied to it.
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return false, err
		}
	}
	return true, nil
}

type marker struct {
	Schema int `json:"schema"`
}

func checkMarker(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, markerFile))
	if err != nil {
		return err
	}
	var m marker
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("schema marker: %w", err)
	}
	if m.Schema != schemaVersion {
		return fmt.Errorf("schema %d, want %d: %w", m.Schema, schemaVersion, ErrIncompatible)
	}
	return nil
}

// create makes a new index in dir and writes the marker once everything
// Bleve wrote is on disk.
func create(dir string) (bleve.Index, error) {
	bi, err := bleve.NewUsing(dir, newMapping(), scorch.Name, scorch.Name, scorchConfig())
	if err != nil {
		return nil, err
	}
	// NewUsing stored the mapping with a durable batch; make the meta file
	// and the directory entries durable too before declaring the index whole.
	err = errors.Join(
		syncPath(filepath.Join(dir, "index_meta.json")),
		syncPath(filepath.Join(dir, "store")),
		writeFileSync(filepath.Join(dir, markerFile), fmt.Appendf(nil, `{"schema":%d}`+"\n", schemaVersion)),
		syncPath(dir),
		syncPath(filepath.Dir(filepath.Clean(dir))),
	)
	if err != nil {
		_ = bi.Close()
		return nil, err
	}
	return bi, nil
}

// scorchConfig is the store configuration, both saved at creation and given
// at every open.
func scorchConfig() map[string]any {
	return map[string]any{
		// Batch returns only once the batch is persisted and fsynced (the
		// default, spelled out because Apply's contract depends on it).
		"unsafe_batch": false,
		// Fail instead of waiting forever if another Index holds the store.
		"bolt_timeout": "5s",
	}
}

// newMapping describes the documents Apply builds, for query analysis and
// for tools that inspect the index. Apply builds documents directly
// (document fields below must agree with it); nothing is mapped dynamically.
func newMapping() *mapping.IndexMappingImpl {
	text := func(store, vectors bool) *mapping.FieldMapping {
		f := mapping.NewTextFieldMapping()
		f.Analyzer = en.AnalyzerName
		f.Store = store
		f.IncludeTermVectors = vectors
		f.IncludeInAll = false
		f.DocValues = false
		return f
	}
	kw := func() *mapping.FieldMapping {
		f := mapping.NewKeywordFieldMapping()
		f.IncludeTermVectors = false
		f.IncludeInAll = false
		f.DocValues = false
		return f
	}
	storedOnly := func() *mapping.FieldMapping {
		f := mapping.NewTextFieldMapping()
		f.Index = false
		f.IncludeTermVectors = false
		f.IncludeInAll = false
		f.DocValues = false
		return f
	}
	published := kw()
	published.DocValues = true
	hour := mapping.NewDateTimeFieldMapping()
	hour.Store = false
	hour.DocValues = false
	hour.IncludeInAll = false

	dm := mapping.NewDocumentStaticMapping()
	dm.AddFieldMappingsAt(fieldTitle, text(true, true))
	dm.AddFieldMappingsAt(fieldSummary, text(true, false))
	dm.AddFieldMappingsAt(fieldContent, text(false, false))
	dm.AddFieldMappingsAt(fieldTopics, kw())
	dm.AddFieldMappingsAt(fieldSourceID, kw())
	dm.AddFieldMappingsAt(fieldStoryID, kw())
	dm.AddFieldMappingsAt(fieldURL, storedOnly())
	dm.AddFieldMappingsAt(fieldSource, storedOnly())
	dm.AddFieldMappingsAt(fieldTraceParent, storedOnly())
	dm.AddFieldMappingsAt(fieldPublished, published)
	dm.AddFieldMappingsAt(fieldPublishedHour, hour)

	m := mapping.NewIndexMapping()
	m.DefaultMapping = dm
	m.DefaultAnalyzer = en.AnalyzerName
	m.DefaultField = fieldTitle
	m.StoreDynamic = false
	m.IndexDynamic = false
	m.DocValuesDynamic = false
	return m
}

// Indexing options of the document fields; see newMapping. Only the title
// keeps term vectors (positions), for the phrase boost; highlighting
// re-analyzes the stored text instead (see highlighter), which spares the
// summary's term vectors, a fifth of the indexing time.
const (
	optTitle         = bleveindex.IndexField | bleveindex.StoreField | bleveindex.IncludeTermVectors
	optSummary       = bleveindex.IndexField | bleveindex.StoreField
	optContent       = bleveindex.IndexField
	optKeyword       = bleveindex.IndexField | bleveindex.StoreField
	optStoredOnly    = bleveindex.StoreField
	optPublished     = bleveindex.IndexField | bleveindex.StoreField | bleveindex.DocValues
	optPublishedHour = bleveindex.IndexField
	optSeen          = bleveindex.IndexField | bleveindex.StoreField
)

// document turns d into a Bleve document.
func (ix *Index) document(d *Doc) (*document.Document, error) {
	if err := checkID(d.ID); err != nil {
		return nil, err
	}
	doc := document.NewDocument(d.ID)
	text := func(name, v string, opts bleveindex.FieldIndexingOptions, a analysis.Analyzer, pos []uint64) {
		if v == "" {
			return
		}
		doc.AddField(document.NewTextFieldCustom(name, pos, []byte(validUTF8(v)), opts, a))
	}
	text(fieldTitle, d.Title, optTitle, ix.en, nil)
	text(fieldSummary, d.Summary, optSummary, ix.en, nil)
	if n := ix.opts.MaxContentBytes; n > 0 {
		text(fieldContent, truncateUTF8(d.Content, n), optContent, ix.en, nil)
	}
	text(fieldURL, d.URL, optStoredOnly, nil, nil)
	text(fieldSource, d.Source, optStoredOnly, nil, nil)
	text(fieldTraceParent, d.TraceParent, optStoredOnly, nil, nil)
	text(fieldSourceID, d.SourceID, optKeyword, ix.keyword, nil)
	text(fieldStoryID, d.StoryID, optKeyword, ix.keyword, nil)
	for i, t := range d.Topics {
		text(fieldTopics, t, optKeyword, ix.keyword, []uint64{uint64(i)})
	}
	p := indexedTime(d.PublishedAt)
	text(fieldPublished, publishedKey(p.UnixNano()), optPublished, ix.keyword, nil)
	f, err := document.NewDateTimeFieldWithIndexingOptions(fieldPublishedHour, nil,
		p.Truncate(time.Hour), "", optPublishedHour)
	if err != nil {
		return nil, fmt.Errorf("doc %s: published time: %w", d.ID, err)
	}
	doc.AddField(f)
	if !d.FirstSeen.IsZero() {
		text(fieldSeen, publishedKey(indexedTime(d.FirstSeen).UnixNano()), optSeen, ix.keyword, nil)
	}
	return doc, nil
}

// seenNanos is the first-seen time indexed for d, in Unix ns: its
// published time when it has none.
func (d *Doc) seenNanos() int64 {
	if d.FirstSeen.IsZero() {
		return indexedTime(d.PublishedAt).UnixNano()
	}
	return indexedTime(d.FirstSeen).UnixNano()
}

func checkID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("empty id: %w", ErrInvalidDoc)
	case len(id) > maxIDBytes:
		return fmt.Errorf("id of %d bytes, limit %d: %w", len(id), maxIDBytes, ErrInvalidDoc)
	case !utf8.ValidString(id):
		return fmt.Errorf("id %q is not UTF-8: %w", id, ErrInvalidDoc)
	}
	return nil
}

// indexedTime is the time indexed for t: UTC, within [minTime, maxTime],
// the epoch for the zero time.
func indexedTime(t time.Time) time.Time {
	switch {
	case t.IsZero():
		return time.Unix(0, 0).UTC()
	case t.Before(minTime):
		return minTime
	case t.After(maxTime):
		return maxTime
	}
	return t.UTC()
}

// publishedKey encodes Unix nanoseconds as 16 hex digits that sort like
// the times they encode.
func publishedKey(ns int64) string {
	const digits = "0123456789abcdef"
	u := uint64(ns) ^ 1<<63
	var b [16]byte
	for i := 15; i >= 0; i-- {
		b[i] = digits[u&15]
		u >>= 4
	}
	return string(b[:])
}

// parsePublishedKey decodes publishedKey.
func parsePublishedKey(s string) (int64, bool) {
	if len(s) != 16 {
		return 0, false
	}
	var u uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case '0' <= c && c <= '9':
			u = u<<4 | uint64(c-'0')
		case 'a' <= c && c <= 'f':
			u = u<<4 | uint64(c-'a'+10)
		default:
			return 0, false
		}
	}
	return int64(u ^ 1<<63), true
}

func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// truncateUTF8 returns the longest prefix of s of at most n bytes that does
// not split a UTF-8 sequence.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Apply indexes upserts and removes deletes as one atomic batch, and returns
// only once the batch is durable on disk, so the caller can then commit the
// input offsets it covers. An upsert replaces any document with the same ID
// (whole, not field by field). Deleting an unknown ID is not an error. If an
// ID appears more than once, its last upsert wins, and a delete of it wins
// over any upsert. Applying the same batch again changes nothing, so a replay
// after a crash is harmless. A document Apply cannot index (see Doc.ID)
// fails the whole batch with ErrInvalidDoc, before anything is written.
//
// Each call costs a few milliseconds on top of its documents; batch
// generously (see the package documentation).
func (ix *Index) Apply(upserts []Doc, deletes []string) error {
	if len(upserts) == 0 && len(deletes) == 0 {
		return nil
	}
	b := ix.bi.NewBatch()
	maxPublished, maxSeen, legacyMax := int64(math.MinInt64), int64(math.MinInt64), int64(math.MinInt64)
	for i := range upserts {
		doc, err := ix.document(&upserts[i])
		if err != nil {
			return fmt.Errorf("apply: upsert %d: %w", i, err)
		}
		if err := b.IndexAdvanced(doc); err != nil {
			return fmt.Errorf("apply: upsert %d: %w", i, err)
		}
		maxPublished = max(maxPublished, indexedTime(upserts[i].PublishedAt).UnixNano())
		maxSeen = max(maxSeen, upserts[i].seenNanos())
		if upserts[i].FirstSeen.IsZero() {
			legacyMax = max(legacyMax, indexedTime(upserts[i].PublishedAt).UnixNano())
		}
	}
	for i, id := range deletes {
		if err := checkID(id); err != nil {
			return fmt.Errorf("apply: delete %d: %w", i, err)
		}
		b.Delete(id)
	}

	ix.writeMu.Lock()
	defer ix.writeMu.Unlock()
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.mu.closed {
		return ErrClosed
	}
	if maxPublished > ix.maxPublished.Load() {
		// Raised before the batch is visible: an upper bound that is too
		// high only widens a search's first window; one too low hides
		// documents.
		ix.maxPublished.Store(maxPublished)
		b.SetInternal(maxPublishedKey, binary.BigEndian.AppendUint64(nil, uint64(maxPublished)))
	}
	if maxSeen > ix.maxSeen.Load() {
		ix.maxSeen.Store(maxSeen)
		b.SetInternal(maxSeenKey, binary.BigEndian.AppendUint64(nil, uint64(maxSeen)))
	}
	cur := ix.legacyMax.Load()
	if clear := ix.legacyClear.Load(); clear != math.MinInt64 && clear == cur {
		cur = math.MinInt64 // this batch deletes the last of them
	}
	legacyMax = max(legacyMax, cur)
	if legacyMax != ix.legacyMax.Load() || !ix.legacySaved.Load() {
		if legacyMax == math.MinInt64 {
			b.DeleteInternal(legacyKey)
		} else {
			b.SetInternal(legacyKey, binary.BigEndian.AppendUint64(nil, uint64(legacyMax)))
		}
	}
	// With unsafe_batch off, scorch's Batch waits until the persister has
	// written the new segment (fsynced) and committed and fsynced root.bolt.
	if err := ix.bi.Batch(b); err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	// Scorch does not fsync the store directory, so a new segment file's
	// name could be lost in a machine crash; sync it before returning.
	if err := syncPath(filepath.Join(ix.dir, "store")); err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	ix.legacyMax.Store(legacyMax)
	ix.legacyClear.Store(math.MinInt64)
	ix.legacySaved.Store(true)
	return nil
}

// Newest returns the latest published time ever indexed, the zero time
// if nothing was.
func (ix *Index) Newest() time.Time {
	ns := ix.maxPublished.Load()
	if ns == math.MinInt64 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// NewestSeen returns the latest first-seen time ever indexed (see
// Doc.FirstSeen), the zero time if nothing was.
func (ix *Index) NewestSeen() time.Time {
	ns := ix.maxSeen.Load()
	if ns == math.MinInt64 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// SeenBefore returns the ids of up to limit documents first seen before t
// (as indexed: see Doc.FirstSeen; a document without a first-seen time by
// its published time), in no particular order, and whether more are
// left: the documents a retention age expires, for the deletes of the
// next Apply.
func (ix *Index) SeenBefore(ctx context.Context, t time.Time, limit int) (ids []string, more bool, err error) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.mu.closed {
		return nil, false, ErrClosed
	}
	if !t.After(minTime) {
		return nil, false, nil
	}
	seen := bleve.NewTermRangeQuery(publishedKey(minTime.UnixNano()), publishedKey(indexedTime(t).UnixNano()))
	seen.SetField(fieldSeen)
	var q query.Query = seen
	legacy := ix.legacyMax.Load()
	if legacy != math.MinInt64 {
		anySeen := bleve.NewTermRangeInclusiveQuery(publishedKey(minTime.UnixNano()), publishedKey(maxTime.UnixNano()), ptrTrue, ptrTrue)
		anySeen.SetField(fieldSeen)
		old := bleve.NewBooleanQuery()
		old.AddMust(timeRange(time.Time{}, indexedTime(t)))
		old.AddMustNot(anySeen)
		q = bleve.NewDisjunctionQuery(seen, old)
	}
	if ids, more, err = ix.matching(ctx, q, limit); err != nil {
		return nil, false, fmt.Errorf("seen before: %w", err)
	}
	if legacy != math.MinInt64 && !more && indexedTime(t).UnixNano() > legacy {
		// Every document without a first-seen time was published before
		// t: once the next Apply deletes these, none is left.
		ix.legacyClear.Store(legacy)
	}
	return ids, more, nil
}

var ptrTrue = func() *bool { t := true; return &t }()

// PublishedBefore returns the ids of up to limit documents published
// before t (as indexed: see Doc.PublishedAt), in no particular order, and
// whether more are left.
func (ix *Index) PublishedBefore(ctx context.Context, t time.Time, limit int) (ids []string, more bool, err error) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.mu.closed {
		return nil, false, ErrClosed
	}
	if !t.After(minTime) {
		return nil, false, nil
	}
	if ids, more, err = ix.matching(ctx, timeRange(time.Time{}, indexedTime(t)), limit); err != nil {
		return nil, false, fmt.Errorf("published before: %w", err)
	}
	return ids, more, nil
}

// matching returns the ids of up to limit documents q matches, unscored,
// and whether more match. Called with mu held for reading.
func (ix *Index) matching(ctx context.Context, q query.Query, limit int) (ids []string, more bool, err error) {
	req := bleve.NewSearchRequestOptions(q, limit+1, 0, false)
	req.Score = "none"
	res, err := ix.bi.SearchInContext(ctx, req)
	if err != nil {
		return nil, false, err
	}
	for _, h := range res.Hits[:min(limit, len(res.Hits))] {
		ids = append(ids, h.ID)
	}
	return ids, len(res.Hits) > limit, nil
}

// Count returns the number of documents in the index.
func (ix *Index) Count() (uint64, error) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ix.mu.closed {
		return 0, ErrClosed
	}
	n, err := ix.bi.DocCount()
	if err != nil {
		return 0, fmt.Errorf("count: %w", err)
	}
	return n, nil
}

// Close waits for calls in progress and closes the index. Every applied
// batch is already durable. Closing twice is not an error.
func (ix *Index) Close() error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.mu.closed {
		return nil
	}
	ix.mu.closed = true
	if err := ix.bi.Close(); err != nil {
		return fmt.Errorf("close search index %s: %w", ix.dir, err)
	}
	return nil
}

// Destroy removes the index in dir, which must not be open. A missing dir is
// not an error; a directory holding anything but an index is refused.
func Destroy(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("destroy search index: %w", err)
	}
	for _, e := range entries {
		if e.Name() != markerFile && !bleveFiles[e.Name()] {
			return fmt.Errorf("destroy search index: %s is not a search index: it holds %s", dir, e.Name())
		}
	}
	// Remove the marker first: if removal stops half way, Open sees an
	// unfinished index and recreates it.
	if err := os.Remove(filepath.Join(dir, markerFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("destroy search index: %w", err)
	}
	if err := syncPath(dir); err != nil {
		return fmt.Errorf("destroy search index: %w", err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("destroy search index: %w", err)
	}
	return nil
}

// syncPath fsyncs a file or directory.
func syncPath(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	return nil
}

// writeFileSync writes a new file durably (the caller syncs the directory).
func writeFileSync(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
