// Package crawl fetches news feeds on schedule, politely, and writes their
// items to the articles.raw topic. Sources live in the metadata store
// (internal/meta); fetch, feed, polite and opml are its focused helpers.
package crawl

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/newsflow/newsflow/internal/jsontime"
	"github.com/newsflow/newsflow/internal/meta"
	"github.com/newsflow/newsflow/internal/opml"
	"github.com/newsflow/newsflow/internal/polite"
)

// Source statuses.
const (
	StatusActive = "active"
	StatusPaused = "paused" // by an operator
	StatusGone   = "gone"   // the server answered 410; not crawled again
)

// Full-text modes of a source.
const (
	FullTextAuto   = "auto"
	FullTextAlways = "always"
	FullTextNever  = "never"
)

// Duration is a time.Duration that reads and writes JSON as "5m0s".
type Duration time.Duration

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string like \"15m\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// Source is a feed newsflow crawls, with its definition (set by people) and
// its crawl state (set by the crawler).
//
// Its JSON, in the metadata store and the API, writes times in ms since
// the epoch and reads them in ms or RFC 3339, as earlier versions wrote
// them (jsontime.Millis).
type Source struct {
	ID        string  `json:"id"`
	FeedURL   string  `json:"feed_url"`
	Name      string  `json:"name"`
	Homepage  string  `json:"homepage,omitempty"`
	Category  string  `json:"category,omitempty"`
	Authority float64 `json:"authority"`
	// MinInterval and MaxInterval bound the adaptive crawl interval.
	MinInterval Duration `json:"min_interval"`
	MaxInterval Duration `json:"max_interval"`
	Status      string   `json:"status"`
	// FullText says when the crawler fetches an item's page for its full
	// text: FullTextAuto (the default) when the feed's items carry only a
	// line, FullTextAlways, or FullTextNever.
	FullText string `json:"full_text,omitempty"`
	// StatusReason says why a source is not active, e.g. "410 Gone".
	StatusReason string          `json:"status_reason,omitempty"`
	CreatedAt    jsontime.Millis `json:"created_at"`
	UpdatedAt    jsontime.Millis `json:"updated_at"`

	Crawl CrawlState `json:"crawl"`
}

// CrawlState is what the crawler keeps about a source. Its times are
// time.Time for the scheduler to compute with; MarshalJSON writes them in
// ms.
type CrawlState struct {
	ETag         string    `json:"etag,omitempty"`
	LastModified string    `json:"last_modified,omitempty"`
	Interval     Duration  `json:"interval"`
	LastCrawl    time.Time `json:"last_crawl,omitzero"`
	NextCrawl    time.Time `json:"next_crawl,omitzero"`
	// LastSuccess is when the feed was last read (answered 200 or 304).
	LastSuccess       time.Time    `json:"last_success,omitzero"`
	ConsecutiveErrors int          `json:"consecutive_errors"`
	LastError         string       `json:"last_error,omitempty"`
	LastResult        *CrawlRecord `json:"last_result,omitempty"`
	// Circuit is the breaker state (polite.BreakerState), as JSON owned by
	// the crawler.
	Circuit json.RawMessage `json:"circuit,omitempty"`
	// Claim is a random id of the latest claim (Sources.Claim): no two
	// claims write the same value.
	Claim string `json:"claim,omitempty"`
}

// crawlStateJSON is CrawlState as JSON: its times in ms since the epoch.
type crawlStateJSON struct {
	crawlStateFields
	LastCrawl   jsontime.Millis `json:"last_crawl,omitzero"`
	NextCrawl   jsontime.Millis `json:"next_crawl,omitzero"`
	LastSuccess jsontime.Millis `json:"last_success,omitzero"`
}

// OnTime reports whether the source's feed was read within twice its
// interval before now, or the source is younger than that (the crawl
// coverage objective).
func (s *Source) OnTime(now time.Time) bool {
	window := 2 * time.Duration(max(s.Crawl.Interval, s.MinInterval))
	last := s.Crawl.LastSuccess
	if r := s.Crawl.LastResult; last.IsZero() && r != nil && (r.Outcome == "ok" || r.Outcome == "not_modified") {
		last = s.Crawl.LastCrawl // a state stored before LastSuccess was kept
	}
	if last.IsZero() {
		last = s.CreatedAt.Time
	}
	return now.Sub(last) <= window
}

// crawlStateFields is CrawlState without its JSON methods; crawlStateJSON's
// times stand for its own.
type crawlStateFields CrawlState

// MarshalJSON writes the crawl state with its times in ms since the epoch.
func (st CrawlState) MarshalJSON() ([]byte, error) {
	return json.Marshal(crawlStateJSON{crawlStateFields(st), jsontime.Millis{Time: st.LastCrawl}, jsontime.Millis{Time: st.NextCrawl}, jsontime.Millis{Time: st.LastSuccess}})
}

// UnmarshalJSON reads the crawl state with its times in ms or RFC 3339. A
// circuit an earlier version stored, with RFC 3339 times, is rewritten in
// ms, so that the API answers one format.
func (st *CrawlState) UnmarshalJSON(b []byte) error {
	j := crawlStateJSON{crawlStateFields(*st), jsontime.Millis{Time: st.LastCrawl}, jsontime.Millis{Time: st.NextCrawl}, jsontime.Millis{Time: st.LastSuccess}}
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*st = CrawlState(j.crawlStateFields)
	st.LastCrawl, st.NextCrawl, st.LastSuccess = j.LastCrawl.Time, j.NextCrawl.Time, j.LastSuccess.Time
	if len(st.Circuit) > 0 {
		// The crawler reads a circuit it cannot decode as a closed one:
		// such a circuit is kept as it is.
		var br polite.BreakerState
		if json.Unmarshal(st.Circuit, &br) == nil {
			if c, err := json.Marshal(br); err == nil {
				st.Circuit = c
			}
		}
	}
	return nil
}

// CrawlRecord describes one crawl of a source.
type CrawlRecord struct {
	At        time.Time `json:"at"`
	Outcome   string    `json:"outcome"` // ok, not_modified, error, rate_limited, gone, skipped
	Status    int       `json:"status,omitempty"`
	Duration  Duration  `json:"duration"`
	Bytes     int64     `json:"bytes"`
	ItemsSeen int       `json:"items_seen"`
	ItemsNew  int       `json:"items_new"`
	// FullText counts the new items whose page was fetched for its full
	// text, and FullTextFailed those whose page could not be (robots.txt,
	// an error, no article text): they keep the feed's text.
	FullText       int    `json:"full_text,omitempty"`
	FullTextFailed int    `json:"full_text_failed,omitempty"`
	Error          string `json:"error,omitempty"`
	// Class is "permanent" for an error that retrying cannot fix (see
	// Class): the source is tried again after its max interval.
	Class string `json:"class,omitempty"`
}

// crawlRecordJSON is CrawlRecord as JSON: its time in ms since the epoch.
type crawlRecordJSON struct {
	crawlRecordFields
	At jsontime.Millis `json:"at"`
}

// crawlRecordFields is CrawlRecord without its JSON methods.
type crawlRecordFields CrawlRecord

// MarshalJSON writes the record with its time in ms since the epoch.
func (r CrawlRecord) MarshalJSON() ([]byte, error) {
	return json.Marshal(crawlRecordJSON{crawlRecordFields(r), jsontime.Millis{Time: r.At}})
}

// UnmarshalJSON reads the record with its time in ms or RFC 3339.
func (r *CrawlRecord) UnmarshalJSON(b []byte) error {
	j := crawlRecordJSON{crawlRecordFields(*r), jsontime.Millis{Time: r.At}}
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*r = CrawlRecord(j.crawlRecordFields)
	r.At = j.At.Time
	return nil
}

// Defaults and limits of source definitions.
const (
	DefaultMinInterval = 5 * time.Minute
	DefaultMaxInterval = 60 * time.Minute
	DefaultAuthority   = 0.5
	MinIntervalFloor   = time.Minute
	MaxIntervalCeiling = 24 * time.Hour
)

// SourceID is the id a feed URL gets when it is added; it does not change
// when a permanent redirect later updates the URL.
func SourceID(feedURL string) string {
	h := sha256.Sum256([]byte(feedURL))
	return "src-" + hex.EncodeToString(h[:6])
}

// Validate fills defaults and checks a source definition, with
// MinIntervalFloor as the shortest min_interval.
func (s *Source) Validate() error { return s.validate(MinIntervalFloor) }

func (s *Source) validate(floor time.Duration) error {
	u, err := url.Parse(strings.TrimSpace(s.FeedURL))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("feed_url %q must be an absolute http or https URL", s.FeedURL)
	}
	s.FeedURL = u.String()
	if s.Homepage != "" {
		if h, err := url.Parse(s.Homepage); err != nil || (h.Scheme != "http" && h.Scheme != "https") {
			return fmt.Errorf("homepage %q must be an http or https URL", s.Homepage)
		}
	}
	s.Name = strings.TrimSpace(s.Name)
	if s.Name == "" {
		s.Name = u.Host
	}
	if len(s.Name) > 200 {
		return errors.New("name longer than 200 bytes")
	}
	s.Category = strings.ToLower(strings.TrimSpace(s.Category))
	if len(s.Category) > 64 {
		return errors.New("category longer than 64 bytes")
	}
	if s.Authority == 0 {
		s.Authority = DefaultAuthority
	}
	if s.Authority < 0 || s.Authority > 1 {
		return fmt.Errorf("authority %v must be from 0 to 1", s.Authority)
	}
	if s.MinInterval == 0 {
		s.MinInterval = Duration(DefaultMinInterval)
	}
	if s.MaxInterval == 0 {
		s.MaxInterval = Duration(max(DefaultMaxInterval, time.Duration(s.MinInterval)))
	}
	switch {
	case time.Duration(s.MinInterval) < floor:
		return fmt.Errorf("min_interval %s below %s", time.Duration(s.MinInterval), floor)
	case time.Duration(s.MaxInterval) > MaxIntervalCeiling:
		return fmt.Errorf("max_interval %s above %s", time.Duration(s.MaxInterval), MaxIntervalCeiling)
	case s.MinInterval > s.MaxInterval:
		return fmt.Errorf("min_interval %s above max_interval %s", time.Duration(s.MinInterval), time.Duration(s.MaxInterval))
	}
	switch s.FullText {
	case "":
		s.FullText = FullTextAuto
	case FullTextAuto, FullTextAlways, FullTextNever:
	default:
		return fmt.Errorf("full_text %q: want auto, always or never", s.FullText)
	}
	switch s.Status {
	case "":
		s.Status = StatusActive
	case StatusActive, StatusPaused, StatusGone:
	default:
		return fmt.Errorf("status %q: want active, paused or gone", s.Status)
	}
	return nil
}

// Errors of the source store.
var (
	ErrSourceExists   = errors.New("a source with this feed URL exists")
	ErrSourceNotFound = errors.New("source not found")
)

// Collection is the metadata collection that holds sources.
const Collection = "sources"

// Sources is the typed view of the sources in a metadata store. Updates
// are read-modify-write under one lock, so the crawler's crawl-state
// updates and people's edits do not overwrite each other.
type Sources struct {
	store meta.Store
	now   func() time.Time
	floor atomic.Int64 // the shortest min_interval
	// mu serialises read-modify-write updates over a store that cannot
	// compare and swap (or create); with one that can, nothing is held
	// across a write, which in a cluster may wait for the leader.
	mu sync.Mutex
}

// NewSources returns the sources of store.
func NewSources(store meta.Store, now func() time.Time) *Sources {
	if now == nil {
		now = time.Now
	}
	ss := &Sources{store: store, now: now}
	ss.floor.Store(int64(MinIntervalFloor))
	return ss
}

// stamp is the time of a change made now, as the store keeps it.
func (ss *Sources) stamp() jsontime.Millis { return jsontime.Of(ss.now()) }

// SetMinIntervalFloor sets the shortest min_interval a source added or
// edited from now on may have (default MinIntervalFloor); lower it only
// for feeds you own.
func (ss *Sources) SetMinIntervalFloor(d time.Duration) { ss.floor.Store(int64(d)) }

// lock takes mu unless the store compares and swaps; the returned func
// releases what was taken.
func (ss *Sources) lock() func() {
	if _, ok := ss.store.(meta.Swapper); ok {
		return func() {}
	}
	ss.mu.Lock()
	return ss.mu.Unlock
}

// Add validates and stores a new source; its id derives from its feed URL.
//
// With a store that can create atomically (a cluster's), a source that
// exists is never overwritten, also when another node adds it at the same
// time or this node's replica does not have it yet.
func (ss *Sources) Add(ctx context.Context, s Source) (Source, error) {
	if err := s.validate(time.Duration(ss.floor.Load())); err != nil {
		return Source{}, err
	}
	s.ID = SourceID(s.FeedURL)
	exists := fmt.Errorf("%w: %s", ErrSourceExists, s.ID)
	now := ss.stamp()
	s.CreatedAt, s.UpdatedAt = now, now
	s.Crawl = CrawlState{Interval: s.MinInterval, NextCrawl: now.Time}
	b, err := json.Marshal(s)
	if err != nil {
		return Source{}, err
	}
	if c, ok := ss.store.(meta.Creator); ok {
		if err := c.Create(ctx, Collection, s.ID, b); errors.Is(err, meta.ErrExists) {
			return Source{}, exists
		} else if err != nil {
			return Source{}, err
		}
		return s, nil
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if _, ok, err := ss.store.Get(ctx, Collection, s.ID); err != nil {
		return Source{}, err
	} else if ok {
		return Source{}, exists
	}
	return s, ss.store.Put(ctx, Collection, s.ID, b)
}

// Get returns one source.
func (ss *Sources) Get(ctx context.Context, id string) (Source, error) {
	_, s, err := ss.get(ctx, id)
	return s, err
}

// get returns one source and its stored encoding.
func (ss *Sources) get(ctx context.Context, id string) ([]byte, Source, error) {
	b, ok, err := ss.store.Get(ctx, Collection, id)
	if err != nil {
		return nil, Source{}, err
	}
	if !ok {
		return nil, Source{}, fmt.Errorf("%w: %s", ErrSourceNotFound, id)
	}
	var s Source
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, Source{}, fmt.Errorf("decode source %s: %w", id, err)
	}
	return b, s, nil
}

// List returns every source, ordered by id.
func (ss *Sources) List(ctx context.Context) ([]Source, error) {
	var out []Source
	err := ss.store.Scan(ctx, Collection, func(id string, b []byte) error {
		var s Source
		if err := json.Unmarshal(b, &s); err != nil {
			return fmt.Errorf("decode source %s: %w", id, err)
		}
		out = append(out, s)
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, err
}

// Update applies fn to the stored source and stores the result durably;
// fn's error aborts the update. The definition is validated again.
//
// With a store that can compare and swap (a cluster's), the result is
// stored only if the source did not change since it was read; otherwise fn
// runs again on a fresh read. So two nodes' updates of one source (the
// crawler's bookkeeping, an edit through another node) never overwrite
// each other.
func (ss *Sources) Update(ctx context.Context, id string, fn func(*Source) error) (Source, error) {
	defer ss.lock()()
	sw, _ := ss.store.(meta.Swapper)
	for attempt := 1; ; attempt++ {
		old, s, err := ss.get(ctx, id)
		if err != nil {
			return Source{}, err
		}
		before := s.MinInterval
		if err := fn(&s); err != nil {
			return s, err
		}
		s.ID = id
		// The floor applies to a new min_interval only: a source added
		// under a lower floor (another node's, or an earlier config)
		// stays valid.
		floor := time.Duration(ss.floor.Load())
		if s.MinInterval == before {
			floor = 0
		}
		if err := s.validate(floor); err != nil {
			return Source{}, err
		}
		s.UpdatedAt = ss.stamp()
		b, err := json.Marshal(s)
		if err != nil {
			return Source{}, err
		}
		if sw == nil {
			return s, ss.store.Put(ctx, Collection, id, b)
		}
		err = sw.Swap(ctx, Collection, id, old, b)
		if errors.Is(err, meta.ErrConflict) {
			// A write that was applied but whose answer was lost (the
			// leader changed) is sent again and conflicts with itself.
			// (Another writer's identical value would do no harm; two
			// claims always differ.)
			if cur, ok, gerr := ss.store.Get(ctx, Collection, id); gerr == nil && ok && bytes.Equal(cur, b) {
				return s, nil
			}
		}
		if !errors.Is(err, meta.ErrConflict) || attempt == maxSwapAttempts {
			return s, err
		}
		// Another writer won, or this replica has yet to apply a write:
		// read again shortly.
		select {
		case <-ctx.Done():
			return Source{}, ctx.Err()
		case <-time.After(time.Duration(attempt) * 10 * time.Millisecond):
		}
	}
}

// maxSwapAttempts bounds Update's retries (about half a second of waits).
const maxSwapAttempts = 10

// ErrNotDue answers Claim for a source that is not due: another node
// crawled or claimed it since this one scheduled it, or it is not active.
var ErrNotDue = errors.New("source not due for a crawl")

// Claim marks a source as being crawled before the crawler fetches it: its
// next crawl moves one interval past now, so that a node that also thinks
// the source is its own (one that has yet to learn that its partition
// moved, or reads a replica that lags) finds it not due. Claim fails with
// ErrNotDue, and returns the source as stored, when its next crawl is
// after now (unless force: a manual crawl) or it is not active.
func (ss *Sources) Claim(ctx context.Context, id string, now time.Time, force bool) (Source, error) {
	return ss.Update(ctx, id, func(s *Source) error {
		if s.Status != StatusActive || (!force && s.Crawl.NextCrawl.After(now)) {
			return ErrNotDue
		}
		s.Crawl.NextCrawl = now.Add(max(time.Duration(s.Crawl.Interval), time.Duration(s.MinInterval))).UTC()
		s.Crawl.Claim = strconv.FormatUint(rand.Uint64(), 36)
		return nil
	})
}

// Delete removes a source.
func (ss *Sources) Delete(ctx context.Context, id string) error {
	defer ss.lock()()
	if _, err := ss.Get(ctx, id); err != nil {
		return err
	}
	return ss.store.Delete(ctx, Collection, id)
}

// ImportResult reports an Import.
type ImportResult struct {
	Added   int             `json:"added"`
	Skipped int             `json:"skipped"` // already present
	Errors  []ImportFailure `json:"errors,omitempty"`
}

// ImportFailure is a feed Import could not add.
type ImportFailure struct {
	FeedURL string `json:"feed_url"`
	Error   string `json:"error"`
}

// Import adds every entry of a subscription list; feeds already present are
// skipped and invalid ones reported.
func (ss *Sources) Import(ctx context.Context, entries []opml.Entry) ImportResult {
	var res ImportResult
	for _, e := range entries {
		_, err := ss.Add(ctx, Source{FeedURL: e.FeedURL, Name: e.Title, Homepage: e.Homepage, Category: e.Category, Authority: e.Authority})
		switch {
		case err == nil:
			res.Added++
		case errors.Is(err, ErrSourceExists):
			res.Skipped++
		default:
			res.Errors = append(res.Errors, ImportFailure{e.FeedURL, err.Error()})
		}
	}
	return res
}

// Export returns the sources as a subscription list.
func (ss *Sources) Export(ctx context.Context) ([]opml.Entry, error) {
	list, err := ss.List(ctx)
	if err != nil {
		return nil, err
	}
	es := make([]opml.Entry, 0, len(list))
	for _, s := range list {
		es = append(es, opml.Entry{Title: s.Name, FeedURL: s.FeedURL, Homepage: s.Homepage, Category: s.Category, Authority: s.Authority})
	}
	return es, nil
}
