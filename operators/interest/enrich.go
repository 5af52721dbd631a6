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
	"slices"
	"time"

	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/internal/schema"
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
}

// EnrichOperator joins reads with article topics.
type EnrichOperator struct {
	opts       EnrichOptions
	partitions int32
	parsers    fastjson.ParserPool // for route, called concurrently
}

// DefaultEnrichOptions returns the defaults the zero value stands for.
func DefaultEnrichOptions() EnrichOptions { return EnrichOptions{ParkFor: 10 * time.Minute} }

// NewEnrich returns the enrich operator for a topology of the given
// partition count.
func NewEnrich(opts EnrichOptions, partitions int32) (*EnrichOperator, error) {
	if opts.ParkFor < 0 {
		return nil, errors.New("reads-enrich: park time must not be negative")
	}
	opts.ParkFor = cmp.Or(opts.ParkFor, DefaultEnrichOptions().ParkFor)
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
	return &enrichTask{op: o, topics: map[string][]schema.Label{}, parked: map[string][]parked{}}, nil
}

type parked struct {
	read schema.Read
	seq  uint64 // arrival order, for deterministic keys
}

type enrichTask struct {
	op     *EnrichOperator
	r      state.Reader
	parser fastjson.Parser

	topics map[string][]schema.Label // changed since the last Flush
	parked map[string][]parked       // by article id; in memory and in state
	fresh  []parkKey                 // parked since the last Flush
	done   []parkKey                 // released since the last Flush
	seq    uint64
	wm     int64
}

type parkKey struct {
	article string
	seq     uint64
}

// State keys: "t" + article id → topics (JSON); "p" + article id + 0 +
// seq (8 bytes) → parked read (JSON); "m" → seq, watermark.
func topicKey(id string) []byte { return append([]byte("t"), id...) }
func parkKeyBytes(k parkKey) []byte {
	b := append(append([]byte("p"), k.article...), 0)
	return binary.BigEndian.AppendUint64(b, k.seq)
}

func (t *enrichTask) Restore(r state.Reader) error {
	t.r = r
	if m, ok, err := r.Get([]byte("m")); err != nil {
		return err
	} else if ok && len(m) == 16 {
		t.seq, t.wm = binary.BigEndian.Uint64(m), int64(binary.BigEndian.Uint64(m[8:]))
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

func (t *enrichTask) lookup(id string) ([]schema.Label, bool, error) {
	if l, ok := t.topics[id]; ok {
		return l, true, nil
	}
	v, ok, err := t.r.Get(topicKey(id))
	if err != nil || !ok {
		return nil, false, err
	}
	var l []schema.Label
	if err := json.Unmarshal(v, &l); err != nil {
		return nil, false, fmt.Errorf("reads-enrich: corrupt topics of %s: %w", id, err)
	}
	return l, true, nil
}

func (t *enrichTask) Process(pc *engine.ProcessContext, rec *eventlog.Record) error {
	if rec.Topic == schema.TopicArticlesIndexed {
		var a struct {
			ID     string         `json:"id"`
			Topics []schema.Label `json:"topics"`
		}
		if err := json.Unmarshal(rec.Value, &a); err != nil || a.ID == "" {
			return engine.Invalid("indexed article: no id")
		}
		if a.Topics == nil {
			a.Topics = []schema.Label{}
		}
		t.topics[a.ID] = a.Topics
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
	for id, l := range t.topics {
		v, err := json.Marshal(l)
		if err != nil {
			return err
		}
		if err := w.Set(topicKey(id), v); err != nil {
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
	return w.Set([]byte("m"), binary.BigEndian.AppendUint64(m, uint64(t.wm)))
}

func (t *enrichTask) Committed(engine.CommitInfo) {}
func (t *enrichTask) Close() error                { return nil }
