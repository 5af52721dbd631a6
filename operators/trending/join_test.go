package trending

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/state"
)

// joinHarness runs one trending task over records given one by one, with
// commits and crashes (what was applied since the last commit is delivered
// again), as the engine would.
type joinHarness struct {
	t           *testing.T
	o           *Operator
	ns          state.Namespace
	task        engine.Task
	uncommitted []*eventlog.Record
	deadLetters []string
}

func newJoinHarness(t *testing.T, opts OperatorOptions) *joinHarness {
	t.Helper()
	o, err := New(opts, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, ns := openNS(t)
	h := &joinHarness{t: t, o: o, ns: ns}
	h.start()
	t.Cleanup(func() { h.task.Close() })
	return h
}

func (h *joinHarness) start() {
	h.t.Helper()
	tk, err := h.o.NewTask(engine.TaskContext{Partition: 0, Partitions: 1})
	if err != nil {
		h.t.Fatal(err)
	}
	if err := tk.Restore(h.ns); err != nil {
		h.t.Fatal(err)
	}
	h.task = tk
}

func (h *joinHarness) deliver(rec *eventlog.Record) {
	h.t.Helper()
	h.uncommitted = append(h.uncommitted, rec)
	var pc engine.ProcessContext
	if err := h.task.Process(&pc, rec); err != nil {
		reason, ok := engine.IsInvalid(err)
		if !ok {
			h.t.Fatal(err)
		}
		h.deadLetters = append(h.deadLetters, reason)
	}
}

func (h *joinHarness) commit() {
	h.t.Helper()
	flush(h.t, h.task, h.ns)
	h.uncommitted = h.uncommitted[:0]
	h.task.Committed(engine.CommitInfo{CaughtUp: true})
}

// crash loses what was applied since the last commit and delivers it again.
func (h *joinHarness) crash() {
	h.t.Helper()
	h.task.Close()
	h.start()
	again := slices.Clone(h.uncommitted)
	h.uncommitted = h.uncommitted[:0]
	for _, r := range again {
		h.deliver(r)
	}
}

// categoryCount is an article's count in category (the global one for "")
// in window w, as the query path reads it.
func (h *joinHarness) categoryCount(w, category, article string) uint64 {
	h.t.Helper()
	pt := h.o.parts[0].Load()
	pt.rebuild(h.o)
	res, err := h.o.Top(w, category, h.o.opts.MaxK)
	if err != nil {
		h.t.Fatal(err)
	}
	for _, it := range res.Items {
		if it.ArticleID == article {
			return it.Count
		}
	}
	return 0
}

func shareRec(id, article, category string, ts int64) *eventlog.Record {
	m := map[string]any{"event_id": id, "article_id": article, "user_id": "u-" + id, "timestamp": ts}
	if category != "" {
		m["category"] = category
	}
	v, _ := json.Marshal(m)
	return &eventlog.Record{Topic: schema.TopicShares, Key: []byte(article), Value: v, Timestamp: ts}
}

func articleRec(id string, published int64, topics ...string) *eventlog.Record {
	a := schema.Article{ID: id, URL: "https://example.com/" + id, SourceID: "s", Title: "title " + id, PublishedAt: published, Version: 1}
	for _, tp := range topics {
		a.Topics = append(a.Topics, schema.Label{Topic: tp, Confidence: 0.5})
	}
	v, _ := json.Marshal(a)
	return &eventlog.Record{Topic: schema.TopicArticlesIndexed, Key: []byte(id), Value: v, Timestamp: published}
}

const joinT0 = int64(1_763_700_000_000)

// TestShareCountsUnderArticleTopics: a share without a category counts
// under its article's topics whether the article came before it or after
// (within ParkFor); one with a category keeps it; one whose article comes
// too late, or never, counts globally only.
func TestShareCountsUnderArticleTopics(t *testing.T) {
	h := newJoinHarness(t, OperatorOptions{ParkFor: 10 * time.Minute})
	h.deliver(articleRec("before", joinT0-time.Hour.Milliseconds(), "science", "tech"))
	h.deliver(shareRec("e1", "before", "", joinT0))
	h.deliver(shareRec("e2", "before", "sports", joinT0))
	h.deliver(shareRec("e3", "after", "", joinT0+1000))
	h.deliver(shareRec("e4", "after", "", joinT0+1500))
	h.deliver(shareRec("e5", "toolate", "", joinT0+2000))
	h.deliver(shareRec("e6", "never", "", joinT0+2000))
	h.deliver(shareRec("e7", "bare", "", joinT0+2000))
	h.deliver(articleRec("bare", joinT0)) // no topics
	h.commit()
	h.deliver(articleRec("after", joinT0, "science"))
	h.crash() // the waiting shares and the article come again
	// The watermark moves 11 minutes on: "toolate"'s share waited too long.
	h.deliver(shareRec("e8", "other", "x", joinT0+11*time.Minute.Milliseconds()))
	h.deliver(articleRec("toolate", joinT0, "science"))
	h.deliver(shareRec("e9", "pending", "", joinT0+11*time.Minute.Milliseconds()))
	h.commit()
	h.crash()

	want := map[string]map[string]uint64{
		"":        {"before": 2, "after": 2, "toolate": 1, "never": 1, "bare": 1, "other": 1, "pending": 1},
		"science": {"before": 1, "after": 2},
		"tech":    {"before": 1},
		"sports":  {"before": 1},
	}
	for cat, arts := range want {
		for _, a := range []string{"before", "after", "toolate", "never", "bare", "other", "pending"} {
			if got := h.categoryCount("1h", cat, a); got != arts[a] {
				t.Errorf("1h category %q article %s: %d, want %d", cat, a, got, arts[a])
			}
		}
	}
	if len(h.deadLetters) > 0 {
		t.Fatalf("dead letters: %v", h.deadLetters)
	}
	// "never" waited 10 minutes of event time in vain; "pending" waits,
	// in committed state, after a restart.
	if j := h.task.(*task).join; j.entries != 1 || len(j.parked["pending"]) != 1 {
		t.Fatalf("waiting: %v", j.parked)
	}
}

// TestArticleTopicsInAnyOrder: whatever the interleaving of the shares and
// the articles (each article within ParkFor of its shares), with commits
// and crashes, the counts per category are the same, and match counting
// every share under its article's topics.
func TestArticleTopicsInAnyOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	topics := map[string][]string{}
	var articles, shares []*eventlog.Record
	for i := range 40 {
		id := fmt.Sprintf("a%02d", i)
		tps := [][]string{{"science"}, {"science", "tech"}, {}, {"world", "tech", "health"}}[i%4]
		topics[id] = tps
		articles = append(articles, articleRec(id, joinT0, tps...))
	}
	exact := map[string]map[string]uint64{}
	for i := range 3000 {
		a := fmt.Sprintf("a%02d", rng.IntN(40))
		ts := joinT0 + int64(i)*300 - rng.Int64N(120_000) // 15 minutes, 2 minutes out of order
		cat := ""
		if rng.IntN(4) == 0 {
			cat = "explicit"
		}
		shares = append(shares, shareRec(fmt.Sprintf("e%d", i), a, cat, ts))
		cats := topics[a]
		if cat != "" {
			cats = []string{cat}
		}
		for _, c := range append([]string{""}, cats...) {
			if exact[c] == nil {
				exact[c] = map[string]uint64{}
			}
			exact[c][a]++
		}
	}
	run := func(seed uint64) *joinHarness {
		h := newJoinHarness(t, OperatorOptions{})
		r := rand.New(rand.NewPCG(seed, 3))
		// Each article comes at a random point of the first quarter of the
		// shares: before some of its shares and after others.
		at := map[int][]*eventlog.Record{}
		for _, a := range articles {
			i := r.IntN(len(shares) / 4)
			at[i] = append(at[i], a)
		}
		for i, s := range shares {
			for _, a := range at[i] {
				h.deliver(a)
			}
			h.deliver(s)
			switch r.IntN(200) {
			case 0:
				h.commit()
			case 1:
				h.crash()
			}
		}
		h.commit()
		return h
	}
	for seed := range uint64(3) {
		h := run(seed)
		for cat, arts := range exact {
			for a, n := range arts {
				if got := h.categoryCount("24h", cat, a); got != n {
					t.Fatalf("seed %d: category %q article %s: %d, want %d", seed, cat, a, got, n)
				}
			}
		}
		if len(h.deadLetters) > 0 {
			t.Fatalf("dead letters: %v", h.deadLetters)
		}
	}
}

// TestMaxParked: beyond MaxParked waiting entries a share of an unknown
// article counts without topics; shares at one time share an entry.
func TestMaxParked(t *testing.T) {
	h := newJoinHarness(t, OperatorOptions{MaxParked: 2})
	h.deliver(shareRec("e1", "a", "", joinT0))
	h.deliver(shareRec("e2", "a", "", joinT0+10)) // the same second: one entry
	h.deliver(shareRec("e3", "b", "", joinT0+1000))
	h.deliver(shareRec("e4", "c", "", joinT0+2000)) // full
	for _, id := range []string{"a", "b", "c"} {
		h.deliver(articleRec(id, joinT0, "science"))
	}
	for a, want := range map[string]uint64{"a": 2, "b": 1, "c": 0} {
		if got := h.categoryCount("1h", "science", a); got != want {
			t.Errorf("science %s: %d, want %d", a, got, want)
		}
	}
}

// An article's topics are forgotten once it is older than the retention
// age behind the newest article: a lookup at once, the state at the next
// commit, whatever the commit points and crashes; an article indexed again
// with a later time keeps its topics past its first time.
func TestArticleTopicsRetention(t *testing.T) {
	const day = int64(24 * time.Hour / time.Millisecond)
	t0 := int64(1_780_000_000_000)
	var states []map[string]string
	for _, every := range []int{1, 3, 1000} {
		h := newJoinHarness(t, OperatorOptions{Retention: 5 * 24 * time.Hour})
		for i := range 20 { // one article a day
			h.deliver(articleRec(fmt.Sprint("a", i), t0+int64(i)*day, "science"))
			if i == 2 {
				h.deliver(articleRec("a0", t0+2*day, "science")) // indexed again, later
			}
			if i%every == every-1 {
				h.commit()
				h.crash() // nothing to deliver again: a restore from the commit
			}
		}
		j := h.task.(*task).join
		for i := range 20 {
			_, known, err := j.lookup(fmt.Sprint("a", i))
			if err != nil {
				t.Fatal(err)
			}
			if want := i >= 14; known != want {
				t.Errorf("commit every %d: article of day %d known %v, want %v", every, i, known, want)
			}
		}
		h.commit()
		st := map[string]string{}
		if err := h.ns.Scan([]byte{topicsPrefix}, []byte{topicsPrefix + 1}, func(k, v []byte) error { st[string(k)] = string(v); return nil }); err != nil {
			t.Fatal(err)
		}
		if err := h.ns.Scan([]byte{timesPrefix}, []byte{timesPrefix + 1}, func(k, v []byte) error { st[string(k)] = string(v); return nil }); err != nil {
			t.Fatal(err)
		}
		for i := range 20 {
			if _, ok := st[string(topicsKey(fmt.Sprint("a", i)))]; ok != (i >= 14) {
				t.Errorf("commit every %d: topics of day %d stored %v", every, i, ok)
			}
		}
		if len(st) != 2*6 {
			t.Errorf("commit every %d: %d topic and index keys, want 12", every, len(st))
		}
		states = append(states, st)
	}
	for i := 1; i < len(states); i++ {
		if !maps.Equal(states[i], states[0]) {
			t.Errorf("state differs with the commit points")
		}
	}
	h := newJoinHarness(t, OperatorOptions{Retention: 5 * 24 * time.Hour})
	h.deliver(articleRec("x", t0, "sport"))
	h.commit()
	h.deliver(articleRec("x", t0+4*day, "sport"))
	h.deliver(articleRec("y", t0+8*day, "sport"))
	h.commit()
	h.commit()
	if _, known, _ := h.task.(*task).join.lookup("x"); !known {
		t.Error("article indexed again on day 4 forgotten on day 8 with 5 days of retention")
	}
	// A share of a forgotten article counts without its topics.
	h.deliver(shareRec("s1", "a-old", "", t0+8*day))
	h.deliver(articleRec("a-old", t0, "sport")) // too old to be remembered
	h.commit()
	if _, known, _ := h.task.(*task).join.lookup("a-old"); known {
		t.Error("an article older than the retention age was remembered")
	}
}
