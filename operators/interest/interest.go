package interest

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync/atomic"
	"time"

	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/internal/option"
	"github.com/newsflow/newsflow/operators/internal/dedup"
	"github.com/newsflow/newsflow/state"
	"github.com/prometheus/client_golang/prometheus"
)

// Name is the interest operator's name in the topology.
const Name = "interest"

// Options configure the interest operator. The zero value is valid.
type Options struct {
	// Alpha is the weight of a new read in the moving average (default 0.1).
	Alpha float64 `yaml:"alpha"`
	// DailyDecay multiplies the vector per day without reads (default 0.95).
	DailyDecay float64 `yaml:"daily_decay"`
	// History is how many of the latest reads are kept (default 100).
	History int `yaml:"history"`
	// HistoryAge is how long, in event time behind the reader's newest
	// read, a read stays in the history (default 90 days; negative: as
	// long as it is among the History latest). The node sets it from
	// retention.history.
	HistoryAge time.Duration `yaml:"-"`
	// DedupWindow is how many of the latest distinct (article, session)
	// pairs are remembered to drop repeated reads (default 1000).
	DedupWindow int `yaml:"dedup_window"`
	// DedupHorizon is how long, in event time behind the task's newest read,
	// the event ids of applied reads are remembered (default 24h5m: the
	// largest trending window plus the accepted clock skew). A read whose
	// event_id was applied within it changes nothing, and a read older than
	// it goes to the dead-letter topic.
	DedupHorizon time.Duration `yaml:"-"`
}

// DefaultOptions returns the defaults the zero value stands for.
func DefaultOptions() Options {
	return Options{Alpha: 0.1, DailyDecay: 0.95, History: 100, HistoryAge: 90 * 24 * time.Hour, DedupWindow: 1000, DedupHorizon: 24*time.Hour + 5*time.Minute}
}

// Validate reports invalid option values.
func (o Options) Validate() error {
	switch {
	case o.Alpha < 0 || o.Alpha > 1 || math.IsNaN(o.Alpha):
		return errors.New("interest: alpha must be from 0 to 1")
	case o.DailyDecay < 0 || o.DailyDecay > 1 || math.IsNaN(o.DailyDecay):
		return errors.New("interest: daily decay must be from 0 to 1")
	case o.History < 0 || o.DedupWindow < 0 || o.DedupHorizon < 0:
		return errors.New("interest: history, dedup window and dedup horizon must not be negative")
	}
	return nil
}

// Weight is one topic of an interest vector.
type Weight struct {
	Topic  string  `json:"topic"`
	Weight float64 `json:"weight"`
}

// HistoryEntry is one read in a user's history.
type HistoryEntry struct {
	ArticleID string `json:"article_id"`
	SessionID string `json:"session_id,omitempty"`
	Timestamp int64  `json:"timestamp"`
	DwellMS   int64  `json:"dwell_ms,omitempty"`
}

// Profile is the state of one user.
type Profile struct {
	UserID string `json:"user_id"`
	// Topics is the interest vector, heaviest first, as of Updated.
	Topics []Weight `json:"topics"`
	// Updated is the event time of the latest read (ms).
	Updated int64 `json:"updated"`
	// Reads counts distinct reads.
	Reads int `json:"reads"`
	// History holds the latest reads, newest first.
	History []HistoryEntry `json:"history"`
	// Seen lists recent (article, session) pairs, oldest first.
	Seen []string `json:"seen,omitempty"`
}

// DecayedTopics returns the interest vector decayed to event time now.
func (p *Profile) DecayedTopics(dailyDecay float64, now int64) []Weight {
	f := decayFactor(dailyDecay, p.Updated, now)
	out := make([]Weight, len(p.Topics))
	for i, w := range p.Topics {
		out[i] = Weight{Topic: w.Topic, Weight: w.Weight * f}
	}
	return out
}

func decayFactor(daily float64, from, to int64) float64 {
	if to <= from {
		return 1
	}
	days := float64(to-from) / float64(24*time.Hour/time.Millisecond)
	return math.Pow(daily, days)
}

// Operator keeps the interest profiles, partitioned by user.
type Operator struct {
	opts       Options
	partitions int32
	readers    []atomic.Pointer[state.Reader]
	dropped    prometheus.Counter
	dups       prometheus.Counter
}

// New returns the interest operator.
func New(opts Options, partitions int32, reg prometheus.Registerer) (*Operator, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	option.Fill(&opts, DefaultOptions())
	o := &Operator{opts: opts, partitions: partitions, readers: make([]atomic.Pointer[state.Reader], partitions)}
	o.dropped = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "newsflow_interest_duplicate_reads_total", Help: "Reads dropped as repeats of (user, article, session).",
	})
	o.dups = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "newsflow_duplicate_events_total", Help: "Events whose event_id was already applied, dropped.",
		ConstLabels: prometheus.Labels{"operator": Name},
	})
	if reg != nil {
		for _, c := range []prometheus.Collector{o.dropped, o.dups} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("interest: register metrics: %w", err)
			}
		}
	}
	return o, nil
}

// Options returns the operator's options with defaults applied.
func (o *Operator) Options() Options { return o.opts }

// Spec implements engine.Operator.
func (o *Operator) Spec() engine.Spec {
	return engine.Spec{
		Name:        Name,
		Description: "per-user topic interest (EMA with daily decay), reading history, duplicate reads dropped",
		Inputs:      []engine.Input{{Topic: TopicReadsEnriched, Key: "user_id"}},
		Stores:      []string{"profile per user", "event ids: the reads applied within the dedup horizon, by fingerprint"},
		Options:     o.opts,
	}
}

// NewTask implements engine.Operator.
func (o *Operator) NewTask(tc engine.TaskContext) (engine.Task, error) {
	if int(tc.Partition) >= len(o.readers) {
		return nil, fmt.Errorf("interest: partition %d beyond %d", tc.Partition, len(o.readers))
	}
	seen := dedup.New(dedup.Options{Horizon: o.opts.DedupHorizon, Prefix: dedupPrefix})
	return &task{op: o, p: tc.Partition, dirty: map[string]*Profile{}, seen: seen}, nil
}

// Keys in a task's namespace: 'u' + user id for profiles, dedupPrefix for
// the event ids of applied reads.
const dedupPrefix = 'e'

func profileKey(user string) []byte { return append([]byte("u"), user...) }

func loadProfile(r state.Reader, user string) (*Profile, bool, error) {
	v, ok, err := r.Get(profileKey(user))
	if err != nil || !ok {
		return nil, false, err
	}
	var p Profile
	if err := json.Unmarshal(v, &p); err != nil {
		return nil, false, fmt.Errorf("interest: corrupt profile of %s: %w", user, err)
	}
	return &p, true, nil
}

type task struct {
	op    *Operator
	p     int32
	r     state.Reader
	dirty map[string]*Profile
	seen  *dedup.Set
}

func (t *task) Restore(r state.Reader) error {
	if err := t.seen.Load(r); err != nil {
		return err
	}
	t.r = r
	clear(t.dirty)
	t.op.readers[t.p].Store(&r)
	return nil
}

func (t *task) Process(_ *engine.ProcessContext, rec *eventlog.Record) error {
	var e Enriched
	if err := json.Unmarshal(rec.Value, &e); err != nil {
		return engine.Invalid("enriched read: malformed JSON: %v", err)
	}
	if e.UserID == "" || e.ArticleID == "" {
		return engine.Invalid("enriched read: missing user_id or article_id")
	}
	if t.seen.TooOld(e.Timestamp) {
		return engine.Invalid("read: timestamp %s is older than the dedup horizon (%s) behind the partition's newest read",
			time.UnixMilli(e.Timestamp).UTC().Format(time.RFC3339Nano), t.op.opts.DedupHorizon)
	}
	if e.EventID != "" {
		added, err := t.seen.Add(dedup.FingerprintOf(e.EventID), e.Timestamp)
		if err != nil {
			return err
		}
		if !added {
			t.op.dups.Inc()
			return nil
		}
	}
	p, ok := t.dirty[e.UserID]
	if !ok {
		loaded, found, err := loadProfile(t.r, e.UserID)
		if err != nil {
			return err
		}
		if !found {
			loaded = &Profile{UserID: e.UserID}
		}
		p = loaded
		t.dirty[e.UserID] = p
	}
	if !t.op.apply(p, e) {
		t.op.dropped.Inc()
	}
	return nil
}

// apply adds a read to a profile; it reports false for a repeat.
func (o *Operator) apply(p *Profile, e Enriched) bool {
	key := e.ArticleID + "\x00" + e.SessionID
	if slices.Contains(p.Seen, key) {
		return false
	}
	p.Seen = append(p.Seen, key)
	if over := len(p.Seen) - o.opts.DedupWindow; over > 0 {
		p.Seen = slices.Delete(p.Seen, 0, over)
	}
	p.Reads++
	h := HistoryEntry{ArticleID: e.ArticleID, SessionID: e.SessionID, Timestamp: e.Timestamp, DwellMS: e.DwellMS}
	i, _ := slices.BinarySearchFunc(p.History, h, func(a, b HistoryEntry) int { return cmp.Compare(b.Timestamp, a.Timestamp) })
	p.History = slices.Insert(p.History, i, h)
	if len(p.History) > o.opts.History {
		p.History = p.History[:o.opts.History]
	}
	if o.opts.HistoryAge >= 0 {
		cut := p.History[0].Timestamp - o.opts.HistoryAge.Milliseconds()
		if i := slices.IndexFunc(p.History, func(h HistoryEntry) bool { return h.Timestamp < cut }); i >= 0 {
			p.History = p.History[:i]
		}
	}
	if len(e.Topics) == 0 {
		return true
	}
	// Decay to the read's time, then move towards the read's topics.
	f := decayFactor(o.opts.DailyDecay, p.Updated, e.Timestamp)
	var total float64
	for _, l := range e.Topics {
		total += l.Confidence
	}
	x := map[string]float64{}
	if total > 0 {
		for _, l := range e.Topics {
			x[l.Topic] += l.Confidence / total
		}
	}
	next := make([]Weight, 0, len(p.Topics)+len(x))
	for _, w := range p.Topics {
		v := (1-o.opts.Alpha)*w.Weight*f + o.opts.Alpha*x[w.Topic]
		delete(x, w.Topic)
		next = append(next, Weight{w.Topic, v})
	}
	for topic, v := range x {
		next = append(next, Weight{topic, o.opts.Alpha * v})
	}
	slices.SortFunc(next, func(a, b Weight) int {
		if c := cmp.Compare(b.Weight, a.Weight); c != 0 {
			return c
		}
		return cmp.Compare(a.Topic, b.Topic)
	})
	p.Topics = next
	p.Updated = max(p.Updated, e.Timestamp)
	return true
}

func (t *task) Flush(w state.Writer) error {
	if err := t.seen.Flush(w); err != nil {
		return err
	}
	for user, p := range t.dirty {
		v, err := json.Marshal(p)
		if err != nil {
			return err
		}
		if err := w.Set(profileKey(user), v); err != nil {
			return err
		}
	}
	clear(t.dirty)
	return nil
}

func (t *task) Committed(engine.CommitInfo) {}
func (t *task) Close() error                { return nil }

// ErrUnavailable is returned while the user's partition is not loaded.
var ErrUnavailable = errors.New("interest: partition not available")

// Profile returns a user's committed profile; found is false for a user
// without reads.
func (o *Operator) Profile(user string) (p *Profile, found bool, err error) {
	part := eventlog.PartitionFor([]byte(user), o.partitions)
	rp := o.readers[part].Load()
	if rp == nil {
		return nil, false, ErrUnavailable
	}
	p, found, err = loadProfile(*rp, user)
	if p != nil {
		p.Seen = nil
	}
	return p, found, err
}
