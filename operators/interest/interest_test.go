package interest

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/state"
	"github.com/newsflow/newsflow/state/statetest"
)

const day = 24 * 60 * 60 * 1000

func enriched(article, session string, ts int64, topics ...schema.Label) Enriched {
	return Enriched{Read: schema.Read{EventID: article + session, UserID: "u", ArticleID: article, SessionID: session, Timestamp: ts}, Topics: topics, Known: len(topics) > 0}
}

func weightOf(p *Profile, topic string) float64 {
	for _, w := range p.Topics {
		if w.Topic == topic {
			return w.Weight
		}
	}
	return 0
}

func TestApplyEMAAndDecay(t *testing.T) {
	o, err := New(Options{}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := &Profile{UserID: "u"}
	o.apply(p, enriched("a1", "s", 0, schema.Label{Topic: "world", Confidence: 0.6}, schema.Label{Topic: "politics", Confidence: 0.2}))
	if w := weightOf(p, "world"); math.Abs(w-0.1*0.75) > 1e-12 {
		t.Fatalf("world after one read %v, want %v", w, 0.1*0.75)
	}
	// A day later: decay by 0.95, then move towards sports.
	o.apply(p, enriched("a2", "s", day, schema.Label{Topic: "sports", Confidence: 1}))
	if w := weightOf(p, "world"); math.Abs(w-0.9*0.95*0.075) > 1e-12 {
		t.Errorf("world after a day and a sports read %v, want %v", w, 0.9*0.95*0.075)
	}
	if p.Topics[0].Topic != "sports" || math.Abs(p.Topics[0].Weight-0.1) > 1e-12 {
		t.Errorf("top topic %+v, want sports 0.1", p.Topics[0])
	}
	// A repeat of (article, session) changes nothing; another session counts.
	before := fmt.Sprint(p.Topics)
	if o.apply(p, enriched("a2", "s", day+1, schema.Label{Topic: "sports", Confidence: 1})) {
		t.Error("repeat applied")
	}
	if fmt.Sprint(p.Topics) != before || p.Reads != 2 {
		t.Errorf("repeat changed the profile: %v, %d reads", p.Topics, p.Reads)
	}
	if !o.apply(p, enriched("a2", "s2", day+2, schema.Label{Topic: "sports", Confidence: 1})) || p.Reads != 3 {
		t.Error("read in another session dropped")
	}
	// A read without topics goes to the history only.
	before = fmt.Sprint(p.Topics)
	o.apply(p, enriched("a3", "s", day+3))
	if fmt.Sprint(p.Topics) != before || p.History[0].ArticleID != "a3" {
		t.Errorf("topic-less read: topics %v, history %+v", p.Topics, p.History)
	}
	if got := p.DecayedTopics(0.95, p.Updated+2*day); math.Abs(got[0].Weight-p.Topics[0].Weight*0.95*0.95) > 1e-12 {
		t.Errorf("decayed %v", got)
	}
}

func TestHistoryAndDedupBounded(t *testing.T) {
	o, _ := New(Options{History: 3, DedupWindow: 5}, 1, nil)
	p := &Profile{UserID: "u"}
	for i := range 10 {
		o.apply(p, enriched(fmt.Sprint("a", i), "s", int64(1000*i)))
	}
	// Out of order: an older read lands in its place in the history.
	o.apply(p, enriched("old", "s", 8500))
	if len(p.History) != 3 || p.History[0].ArticleID != "a9" || p.History[1].ArticleID != "old" || p.History[2].ArticleID != "a8" {
		t.Errorf("history %+v", p.History)
	}
	if len(p.Seen) != 5 {
		t.Errorf("%d pairs remembered, want 5", len(p.Seen))
	}
	// a0 left the dedup window: reading it again counts.
	if !o.apply(p, enriched("a0", "s", 20000)) {
		t.Error("read outside the dedup window dropped")
	}
	if _, err := New(Options{Alpha: 2}, 1, nil); err == nil {
		t.Error("alpha 2 accepted")
	}
}

// A read whose event_id was applied changes nothing, also after the task
// restarts from its committed state and in another session; a read older
// than the dedup horizon goes to the dead-letter topic.
func TestTaskDropsRepeatedEventIDs(t *testing.T) {
	o, err := New(Options{}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	db, err := state.Open(t.TempDir(), state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ns := db.Namespace("interest/0")
	var tk engine.Task
	restart := func() {
		if tk != nil {
			tk.Close()
		}
		if tk, err = o.NewTask(engine.TaskContext{Partition: 0, Partitions: 1}); err != nil {
			t.Fatal(err)
		}
		if err := tk.Restore(ns); err != nil {
			t.Fatal(err)
		}
	}
	commit := func() {
		b := ns.NewBatch()
		if err := tk.Flush(b); err != nil {
			t.Fatal(err)
		}
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	process := func(id, article, session string, ts int64) error {
		e := enriched(article, session, ts, schema.Label{Topic: "science", Confidence: 1})
		e.EventID = id
		v, _ := json.Marshal(e)
		return tk.Process(&engine.ProcessContext{}, &eventlog.Record{Key: []byte("u"), Value: v})
	}
	const t0 = 1_780_000_000_000
	restart()
	for i, r := range []struct {
		id, article, session string
	}{{"r1", "a1", "s1"}, {"r2", "a2", "s1"}, {"r1", "a1", "s1"}, {"r1", "a3", "s2"}} {
		if err := process(r.id, r.article, r.session, t0+int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	commit()
	restart()
	if err := process("r2", "a4", "s3", t0+10); err != nil {
		t.Fatal(err)
	}
	if err := process("r5", "a5", "s3", t0+11); err != nil {
		t.Fatal(err)
	}
	commit()
	p, _, err := o.Profile("u")
	if err != nil {
		t.Fatal(err)
	}
	if p.Reads != 3 || len(p.History) != 3 {
		t.Fatalf("profile after repeated event ids: %d reads, history %+v", p.Reads, p.History)
	}
	err = process("r6", "a6", "s3", t0-25*3600_000)
	if reason, ok := engine.IsInvalid(err); !ok || !strings.Contains(reason, "older than the dedup horizon") {
		t.Fatalf("a read 25h older than the newest: %v", err)
	}
}

// TestHistoryAge: a read leaves the history once it is HistoryAge older
// than the reader's newest read, in any arrival order; a negative age
// keeps the latest History reads.
func TestHistoryAge(t *testing.T) {
	for _, c := range []struct {
		age  time.Duration
		want []string
	}{{10 * 24 * time.Hour, []string{"d20", "d15", "d10"}}, {-1, []string{"d20", "d15", "d10", "d5", "d0"}}} {
		o, err := New(Options{HistoryAge: c.age}, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		p := &Profile{UserID: "u"}
		for _, d := range []int64{5, 0, 15, 20, 10} {
			o.apply(p, enriched(fmt.Sprint("d", d), "s", d*day))
		}
		var got []string
		for _, h := range p.History {
			got = append(got, h.ArticleID)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("age %s: history %v, want %v", c.age, got, c.want)
		}
	}
}

// enrichRun feeds indexed articles to an enrich task, committing every
// `every` articles and restoring the task from what it committed after
// each commit.
type enrichRun struct {
	t    *testing.T
	op   *EnrichOperator
	ns   state.Namespace
	task *enrichTask
}

func newEnrichRun(t *testing.T, ns state.Namespace, retention time.Duration) *enrichRun {
	op, err := NewEnrich(EnrichOptions{Retention: retention}, 1)
	if err != nil {
		t.Fatal(err)
	}
	r := &enrichRun{t: t, op: op, ns: ns}
	r.restore()
	return r
}

func (r *enrichRun) restore() {
	tk, err := r.op.NewTask(engine.TaskContext{})
	if err != nil {
		r.t.Fatal(err)
	}
	r.task = tk.(*enrichTask)
	if err := r.task.Restore(r.ns); err != nil {
		r.t.Fatal(err)
	}
}

func (r *enrichRun) article(id string, published int64, topic string) {
	v, _ := json.Marshal(map[string]any{"id": id, "published_at": published, "topics": []schema.Label{{Topic: topic, Confidence: 1}}})
	var pc engine.ProcessContext
	if err := r.task.Process(&pc, &eventlog.Record{Topic: schema.TopicArticlesIndexed, Value: v}); err != nil {
		r.t.Fatal(err)
	}
}

func (r *enrichRun) commit() {
	statetest.Commit(r.t, r.task, r.ns)
	r.restore()
}

// known reports whether the task gives article id topics.
func (r *enrichRun) known(id string) bool {
	_, ok, err := r.task.lookup(id)
	if err != nil {
		r.t.Fatal(err)
	}
	return ok
}

func dumpState(t *testing.T, ns state.Namespace) map[string]string {
	out := map[string]string{}
	if err := ns.Scan(nil, nil, func(k, v []byte) error { out[string(k)] = string(v); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// The topics of an article older than the retention age behind the newest
// article are forgotten: at once for lookups, from the state at the next
// commit, whatever the commit points; an article applied again with a
// later time keeps its topics past its first time.
func TestEnrichRetention(t *testing.T) {
	const day = int64(24 * time.Hour / time.Millisecond)
	t0 := int64(1_780_000_000_000)
	db := statetest.Open(t)
	var states []map[string]string
	for _, every := range []int{1, 3, 1000} {
		r := newEnrichRun(t, db.Namespace(fmt.Sprint("enrich/", every)), 5*24*time.Hour)
		for i := range 20 { // one article a day
			r.article(fmt.Sprint("a", i), t0+int64(i)*day, "science")
			if i == 2 {
				r.article("a0", t0+2*day, "science") // a0 again, later
			}
			if i%every == every-1 {
				r.commit()
			}
		}
		// The newest is day 19: days 14 and later are kept, and a0's
		// second time (day 2) is gone too.
		for i := range 20 {
			if want := i >= 14; r.known(fmt.Sprint("a", i)) != want {
				t.Errorf("commit every %d: article of day %d known %v, want %v", every, i, !want, want)
			}
		}
		r.commit()
		st := dumpState(t, r.ns)
		for i := range 20 {
			if _, ok := st[string(topicKey(fmt.Sprint("a", i)))]; ok != (i >= 14) {
				t.Errorf("commit every %d: topics of day %d stored %v", every, i, ok)
			}
		}
		states = append(states, st)
	}
	for i := 1; i < len(states); i++ {
		if !maps.Equal(states[i], states[0]) {
			t.Errorf("state differs with the commit points: %d keys vs %d", len(states[i]), len(states[0]))
		}
	}

	// Applied again later, an article outlives its first time.
	r := newEnrichRun(t, db.Namespace("enrich/again"), 5*24*time.Hour)
	r.article("x", t0, "sport")
	r.commit()
	r.article("x", t0+4*day, "sport")
	r.article("y", t0+8*day, "sport")
	r.commit()
	r.commit()
	if !r.known("x") {
		t.Error("article applied again on day 4 forgotten on day 8 with 5 days of retention")
	}
	// Negative retention keeps everything.
	r = newEnrichRun(t, db.Namespace("enrich/all"), -1)
	r.article("old", t0, "sport")
	r.article("new", t0+400*day, "sport")
	r.commit()
	if !r.known("old") {
		t.Error("negative retention forgot an article")
	}
}
