// Package interest turns read events into per-user interest vectors and
// reading histories.
//
// A read names an article; the interest of a user is over topics. Reads
// are keyed by user and articles by article id, so the topics are joined
// to the reads in two steps, through the log:
//
//  1. The enrich operator co-locates each read with its article (a Route on
//     article_id) and keeps every article's topics from articles.indexed.
//     A read of a known article is emitted at once with the topics to
//     reads.enriched, keyed by user; a read of an article not seen yet is
//     parked in the task's state until the article arrives, or is emitted
//     without topics once the watermark is ParkFor past it.
//  2. The interest operator (keyed by user) applies enriched reads to the
//     user's state: duplicate (user, article, session) reads are dropped,
//     the topic vector moves by an exponential moving average, and the
//     latest reads are kept as the history.
package interest

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/operators/internal/timeindex"
	"github.com/newsflow/newsflow/state"
	"github.com/valyala/fastjson"
)

// TopicReadsEnriched carries reads with their article's topics, keyed and
// partitioned by user id.
const TopicReadsEnriched = "reads.enriched"

// EnrichName is the enrich operator's name in the topology.
const EnrichName = "reads-enrich"

// Enriched is a read with the topics of its article.
type Enriched struct {
	schema.Read
	Topics []schema.Label `json:"topics,omitempty"`
	// Known is false when the article was never seen within ParkFor.
	Known bool `json:"known"`
}

// EnrichOptions configure the enrich operator. The zero value is valid.
type EnrichOptions struct {
	// ParkFor is how long (event time) a read of an unknown article waits
	// for the article before it goes on without topics (default 10m).
	ParkFor time.Duration `yaml:"park_for"`
	// Retention is how long, in event time behind the newest article the
	// task has seen, an article's topics are kept (default
	// schema.DefaultRetention; negative keeps them all). The node sets it
	// from retention.articles. A read of an article older than that goes
	// on without topics, as one of an article never seen.
	Retention time.Duration `yaml:"-"`
}

// EnrichOperator joins reads with article topics.
type EnrichOperator struct {
	opts       EnrichOptions
	partitions int32
	parsers    fastjson.ParserPool // for route, called concurrently
}

// DefaultEnrichOptions returns the defaults the zero value stands for.
func DefaultEnrichOptions() EnrichOptions {
	return EnrichOptions{ParkFor: 10 * time.Minute, Retention: schema.DefaultRetention}
}

// NewEnrich returns the enrich operator for a topology of the given
// partition count.
func NewEnrich(opts EnrichOptions, partitions int32) (*EnrichOperator, error) {
	if opts.ParkFor < 0 {
		return nil, errors.New("reads-enrich: park time must not be negative")
	}
	opts.ParkFor = cmp.Or(opts.ParkFor, DefaultEnrichOptions().ParkFor)
	opts.Retention = cmp.Or(opts.Retention, DefaultEnrichOptions().Retention)
	return &EnrichOperator{opts: opts, partitions: partitions}, nil
}

// Spec implements engine.Operator.
func (o *EnrichOperator) Spec() engine.Spec {
	return engine.Spec{
		Name:        EnrichName,
		Description: "join reads with the topics of their article",
		Inputs: []engine.Input{
			{Topic: schema.TopicReads, Key: "article_id (from the value)", Route: o.route},
			{Topic: schema.TopicArticlesIndexed, Key: "article_id"},
		},
		Outputs: []string{TopicReadsEnriched},
		Stores:  []string{"article topics", "reads waiting for their article"},
		Options: o.opts,
	}
}

func (o *EnrichOperator) route(rec *eventlog.Record) ([]byte, bool) {
	p := o.parsers.Get()
	id, ok := schema.ArticleIDOf(p, rec.Value)
	o.parsers.Put(p)
	return []byte(id), ok
}

// NewTask implements engine.Operator.
func (o *EnrichOperator) NewTask(engine.TaskContext) (engine.Task, error) {
	return &enrichTask{op: o, topics: map[string]articleTopics{}, parked: map[string][]parked{}, newest: noTime}, nil
}

// articleTopics is what the task keeps of an article: its topics and its
// first-seen time (noTime in state written before it was kept).
type articleTopics struct {
	T      int64          `json:"t"`
	Topics []schema.Label `json:"topics"`
}

// noTime marks an unknown time: of an article stored without one (never
// forgotten), or the newest before any article.
const noTime = math.MinInt64

type parked struct {
	read schema.Read
	seq  uint64 // arrival order, for deterministic keys
}

type enrichTask struct {
	op     *EnrichOperator
	r      state.Reader
	parser fastjson.Parser

	topics map[string]articleTopics // changed since the last Flush
	parked map[string][]parked      // by article id; in memory and in state
	fresh  []parkKey                // parked since the last Flush
	done   []parkKey                // released since the last Flush
	seq    uint64
	wm     int64 // of reads
	newest int64 // the newest article's first-seen time, for retention
}

type parkKey struct {
	article string
	seq     uint64
}

// State keys: "t" + article id → articleTopics (JSON; a JSON array of
// topics alone in state written before); "x" + first-seen time (8 bytes,
// sign bit flipped so that it sorts) + article id → nothing, the articles
// by time for retention; "p" + article id + 0 + seq (8 bytes) → parked
// read (JSON); "m" → seq, watermark, newest article (8 bytes each; the
// last is missing in state written before).
func topicKey(id string) []byte         { return append([]byte("t"), id...) }
func timeKey(t int64, id string) []byte { return timeindex.Key('x', t, id) }

// cutoff returns the first-seen time before which articles' topics are
// forgotten, and false when retention is off or no article was seen.
func (t *enrichTask) cutoff() (int64, bool) {
	if t.op.opts.Retention < 0 || t.newest == noTime {
		return 0, false
	}
	return t.newest - t.op.opts.Retention.Milliseconds(), true
}
func parkKeyBytes(k parkKey) []byte {
	b := append(append([]byte("p"), k.article...), 0)
	return binary.BigEndian.AppendUint64(b, k.seq)
}

func (t *enrichTask) Restore(r state.Reader) error {
	t.r = r
	if m, ok, err := r.Get([]byte("m")); err != nil {
		return err
	} else if ok && (len(m) == 16 || len(m) == 24) {
		t.seq, t.wm = binary.BigEndian.Uint64(m), int64(binary.BigEndian.Uint64(m[8:]))
		if len(m) == 24 {
			t.newest = int64(binary.BigEndian.Uint64(m[16:]))
		}
	}
	return r.Scan([]byte("p"), []byte("q"), func(k, v []byte) error {
		if len(k) < 10 {
			return fmt.Errorf("reads-enrich: corrupt parked key %q", k)
		}
		var rd schema.Read
		if err := json.Unmarshal(v, &rd); err != nil {
			return fmt.Errorf("reads-enrich: corrupt parked read: %w", err)
		}
		id := string(k[1 : len(k)-9])
		t.parked[id] = append(t.parked[id], parked{read: rd, seq: binary.BigEndian.Uint64(k[len(k)-8:])})
		return nil
	})
}

// storedTime returns the first-seen time of the committed topics of article
// id (noTime if none, or stored without one).
func (t *enrichTask) storedTime(id string) (int64, error) {
	v, ok, err := t.r.Get(topicKey(id))
	if err != nil || !ok || len(v) == 0 || v[0] == '[' {
		return noTime, err
	}
	var at articleTopics
	if err := json.Unmarshal(v, &at); err != nil {
		return noTime, fmt.Errorf("reads-enrich: corrupt topics of %s: %w", id, err)
	}
	return at.T, nil
}

// lookup returns the topics of article id; an article older than the
// retention age has none, whether or not a commit has deleted them yet.
func (t *enrichTask) lookup(id string) ([]schema.Label, bool, error) {
	at, ok := t.topics[id]
	if !ok {
		v, found, err := t.r.Get(topicKey(id))
		if err != nil || !found {
			return nil, false, err
		}
		at.T = noTime
		if len(v) > 0 && v[0] == '[' { // written before publish times were kept
			err = json.Unmarshal(v, &at.Topics)
		} else {
			err = json.Unmarshal(v, &at)
		}
		if err != nil {
			return nil, false, fmt.Errorf("reads-enrich: corrupt topics of %s: %w", id, err)
		}
	}
	if cut, on := t.cutoff(); on && at.T != noTime && at.T < cut {
		return nil, false, nil
	}
	return at.Topics, true, nil
}

func (t *enrichTask) Process(pc *engine.ProcessContext, rec *eventlog.Record) error {
	if rec.Topic == schema.TopicArticlesIndexed {
		var a struct {
			ID          string         `json:"id"`
			Topics      []schema.Label `json:"topics"`
			PublishedAt int64          `json:"published_at"`
			FirstSeen   int64          `json:"first_seen"`
		}
		if err := json.Unmarshal(rec.Value, &a); err != nil || a.ID == "" {
			return engine.Invalid("indexed article: no id")
		}
		if a.Topics == nil {
			a.Topics = []schema.Label{}
		}
		// Retention ages an article's topics by its first-seen time (its
		// publish time in records written before first-seen times).
		seen := cmp.Or(a.FirstSeen, a.PublishedAt)
		t.topics[a.ID] = articleTopics{T: seen, Topics: a.Topics}
		t.newest = max(t.newest, seen)
		for _, p := range t.parked[a.ID] {
			t.emit(pc, p.read, a.Topics, true)
			t.done = append(t.done, parkKey{a.ID, p.seq})
		}
		delete(t.parked, a.ID)
		return nil
	}
	rd, err := schema.DecodeRead(&t.parser, rec.Value)
	if err != nil {
		return engine.Invalid("read: %v", err)
	}
	t.wm = max(t.wm, rd.Timestamp)
	topics, ok, err := t.lookup(rd.ArticleID)
	if err != nil {
		return err
	}
	if ok {
		t.emit(pc, rd, topics, true)
	} else {
		t.seq++
		t.parked[rd.ArticleID] = append(t.parked[rd.ArticleID], parked{read: rd, seq: t.seq})
		t.fresh = append(t.fresh, parkKey{rd.ArticleID, t.seq})
	}
	t.releaseExpired(pc)
	return nil
}

// releaseExpired emits, without topics, parked reads the watermark has
// passed by ParkFor, in parking order.
func (t *enrichTask) releaseExpired(pc *engine.ProcessContext) {
	limit := t.wm - t.op.opts.ParkFor.Milliseconds()
	type expired struct {
		id string
		p  parked
	}
	var out []expired
	for id, ps := range t.parked {
		keep := ps[:0]
		for _, p := range ps {
			if p.read.Timestamp < limit {
				out = append(out, expired{id, p})
				continue
			}
			keep = append(keep, p)
		}
		if len(keep) == 0 {
			delete(t.parked, id)
		} else {
			t.parked[id] = keep
		}
	}
	slices.SortFunc(out, func(a, b expired) int { return cmp.Compare(a.p.seq, b.p.seq) })
	for _, e := range out {
		t.emit(pc, e.p.read, nil, false)
		t.done = append(t.done, parkKey{e.id, e.p.seq})
	}
}

func (t *enrichTask) emit(pc *engine.ProcessContext, rd schema.Read, topics []schema.Label, known bool) {
	v, _ := json.Marshal(Enriched{Read: rd, Topics: topics, Known: known})
	k := []byte(rd.UserID)
	pc.Emit(&eventlog.Record{Topic: TopicReadsEnriched, Partition: eventlog.PartitionFor(k, t.op.partitions),
		Key: k, Value: v, Timestamp: rd.Timestamp})
}

func (t *enrichTask) Flush(w state.Writer) error {
	cut, on := t.cutoff()
	if on {
		// Deletions first: an article applied again is written after. An
		// index entry older than its article's topics (applied again with
		// a later time) goes alone.
		err := timeindex.Expired(t.r, 'x', cut, func(k []byte, at int64, id string) error {
			if err := w.Delete(k); err != nil {
				return err
			}
			if cur, err := t.storedTime(id); err != nil || cur > at {
				return err
			}
			return w.Delete(topicKey(id))
		})
		if err != nil {
			return err
		}
	}
	for _, id := range slices.Sorted(maps.Keys(t.topics)) {
		at := t.topics[id]
		if on && at.T < cut {
			continue // expired since it was applied
		}
		v, err := json.Marshal(at)
		if err != nil {
			return err
		}
		if err := w.Set(topicKey(id), v); err != nil {
			return err
		}
		if err := w.Set(timeKey(at.T, id), nil); err != nil {
			return err
		}
	}
	clear(t.topics)
	released := map[parkKey]bool{}
	for _, k := range t.done {
		released[k] = true
		if err := w.Delete(parkKeyBytes(k)); err != nil {
			return err
		}
	}
	for _, k := range t.fresh {
		if released[k] {
			continue
		}
		for _, p := range t.parked[k.article] {
			if p.seq == k.seq {
				v, _ := json.Marshal(p.read)
				if err := w.Set(parkKeyBytes(k), v); err != nil {
					return err
				}
			}
		}
	}
	t.fresh, t.done = t.fresh[:0], t.done[:0]
	m := binary.BigEndian.AppendUint64(nil, t.seq)
	m = binary.BigEndian.AppendUint64(m, uint64(t.wm))
	return w.Set([]byte("m"), binary.BigEndian.AppendUint64(m, uint64(t.newest)))
}

func (t *enrichTask) Committed(engine.CommitInfo) {}
func (t *enrichTask) Close() error                { return nil }
