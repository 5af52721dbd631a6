package interest

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/state"
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
