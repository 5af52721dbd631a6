package articles

import (
	"encoding/binary"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/state"
	"github.com/newsflow/newsflow/state/statetest"
	dto "github.com/prometheus/client_model/go"
)

var day0 = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

// raw is a raw article record published h hours after day0.
func raw(url string, h float64, title string) *eventlog.Record {
	p := day0.Add(time.Duration(h * float64(time.Hour))).UnixMilli()
	return &eventlog.Record{Value: fmt.Appendf(nil, `{"url":%q,"title":%q,"published_at":"%d"}`, url, title, p), Timestamp: p}
}

// articleTask is the task of partition 0 over a fresh namespace.
type articleTask struct {
	t  *testing.T
	ns state.Namespace
	op *Operator
	tk engine.Task
}

func newArticleTask(t *testing.T, opts Options) *articleTask {
	at := &articleTask{t: t, ns: statetest.Open(t).Namespace("articles/0")}
	at.restart(opts)
	return at
}

func (at *articleTask) restart(opts Options) {
	at.op = newOp(at.t, opts)
	tk, err := at.op.NewTask(engine.TaskContext{Operator: Name})
	if err != nil {
		at.t.Fatal(err)
	}
	if err := tk.Restore(at.ns); err != nil {
		at.t.Fatal(err)
	}
	at.tk = tk
}

// process applies rec and returns the versions it emitted, and the
// dead-letter reason if it was refused.
func (at *articleTask) process(rec *eventlog.Record) (emitted int, invalid string) {
	before := at.made()
	if err := at.tk.Process(&engine.ProcessContext{}, rec); err != nil {
		reason, ok := engine.IsInvalid(err)
		if !ok {
			at.t.Fatal(err)
		}
		return 0, reason
	}
	return int(at.made() - before), ""
}

// made counts the versions the operator emitted, new and edited.
func (at *articleTask) made() float64 {
	var n float64
	for _, outcome := range []string{"new", "edited"} {
		var m dto.Metric
		if err := at.op.outcomes.WithLabelValues(outcome).Write(&m); err != nil {
			at.t.Fatal(err)
		}
		n += m.GetCounter().GetValue()
	}
	return n
}

func (at *articleTask) commit() { statetest.Commit(at.t, at.tk, at.ns) }

// versions returns the publish times of the stored versions by article.
func (at *articleTask) versions() map[string]int64 {
	out := map[string]int64{}
	err := at.ns.Scan([]byte("v"), []byte("w"), func(k, v []byte) error {
		out[string(k[1:])] = int64(binary.BigEndian.Uint64(v[12:]))
		return nil
	})
	if err != nil {
		at.t.Fatal(err)
	}
	return out
}

// TestRetentionForgetsOldArticles: over 14 days of an article an hour,
// with 48h retention, the task keeps the versions of the last 48h, all of
// them, refuses an article older than that, and a re-crawl of a forgotten
// article is refused too.
func TestRetentionForgetsOldArticles(t *testing.T) {
	opts := Options{Retention: 48 * time.Hour}
	at := newArticleTask(t, opts)
	const hours = 14 * 24
	var sizes []int
	for h := range hours {
		if n, reason := at.process(raw(fmt.Sprintf("https://news.example/%d", h), float64(h), fmt.Sprint("Story ", h))); n != 1 || reason != "" {
			t.Fatalf("hour %d: emitted %d, refused %q", h, n, reason)
		}
		if h%5 == 4 {
			at.commit()
		}
		if h%10 == 0 && h > 0 {
			at.commit()
			at.restart(opts) // restores change nothing
		}
		if h%24 == 23 {
			at.commit()
			sizes = append(sizes, len(at.versions()))
		}
	}
	at.commit()
	vs := at.versions()
	newest := day0.Add((hours - 1) * time.Hour).UnixMilli()
	cut := newest - (48 * time.Hour).Milliseconds()
	for h := range hours {
		p := day0.Add(time.Duration(h) * time.Hour).UnixMilli()
		_, kept := vs[articleID(t, fmt.Sprintf("https://news.example/%d", h))]
		if kept != (p >= cut) {
			t.Errorf("hour %d (published %d, cutoff %d): kept %v", h, p, cut, kept)
		}
	}
	for d := 3; d < len(sizes); d++ {
		if sizes[d] != sizes[2] {
			t.Errorf("day %d: %d versions kept, day 3: %d", d+1, sizes[d], sizes[2])
		}
	}
	// The time index holds exactly the kept versions.
	n := 0
	if err := at.ns.Scan([]byte("t"), []byte("u"), func(k, _ []byte) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	if n != len(vs) {
		t.Errorf("%d time index entries for %d versions", n, len(vs))
	}
	// A record whose log time is already behind the cutoff is kept: it
	// counts as first seen at the newest first-seen time. So is a re-send
	// of a forgotten article, as a new article. A repeat of a kept one is
	// dropped as unchanged.
	if n, reason := at.process(raw("https://news.example/late", hours-50, "Late")); n != 1 || reason != "" {
		t.Errorf("a record with an old log time: emitted %d, refused %q", n, reason)
	}
	if n, reason := at.process(raw("https://news.example/0", 0, "Story 0")); n != 1 || reason != "" {
		t.Errorf("a re-send of a forgotten article: emitted %d, refused %q", n, reason)
	}
	if n, reason := at.process(raw(fmt.Sprintf("https://news.example/%d", hours-2), hours-2, fmt.Sprint("Story ", hours-2))); n != 0 || reason != "" {
		t.Errorf("repeat of a kept article: emitted %d, refused %q", n, reason)
	}
	at.commit()
	if got := at.seen(articleID(t, "https://news.example/late")); got != newest {
		t.Errorf("late record first seen at %d, want the newest first-seen time %d", got, newest)
	}
}

// seen returns the stored first-seen time of article id, or 0.
func (at *articleTask) seen(id string) int64 {
	v, ok, err := at.ns.Get(append([]byte("v"), id...))
	if err != nil {
		at.t.Fatal(err)
	}
	if !ok || len(v) != 28 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(v[20:]))
}

// crawled is a raw article record published at pub and crawled (its log
// time) at seen.
func crawled(url, title string, pub, seen time.Time) *eventlog.Record {
	return &eventlog.Record{Value: fmt.Appendf(nil, `{"url":%q,"title":%q,"published_at":%q}`, url, title, pub.Format(time.RFC3339)),
		Timestamp: seen.UnixMilli()}
}

// TestOldNewsKeptByFirstSeen: items published years before they are
// crawled become articles like any other, carry their publish date and
// their first-seen time, keep that first-seen time through edits, and are
// forgotten once the partition's newest article was first seen more than
// the retention age after them, and not before.
func TestOldNewsKeptByFirstSeen(t *testing.T) {
	opts := Options{Retention: 30 * 24 * time.Hour}
	at := newArticleTask(t, opts)
	crawl := day0
	for i := range 20 {
		pub := day0.AddDate(-3, 0, i) // three years old, a day apart
		if n, reason := at.process(crawled(fmt.Sprintf("https://blog.example/%d", i), fmt.Sprint("Old post ", i), pub, crawl)); n != 1 || reason != "" {
			t.Fatalf("old post %d: emitted %d, refused %q", i, n, reason)
		}
	}
	at.commit()
	if got := len(at.versions()); got != 20 {
		t.Fatalf("%d old posts kept, want 20", got)
	}
	id := articleID(t, "https://blog.example/3")
	// An edit a week later keeps the first-seen time.
	edit := crawl.Add(7 * 24 * time.Hour)
	if n, _ := at.process(crawled("https://blog.example/3", "Old post 3, corrected", day0.AddDate(-3, 0, 3), edit)); n != 1 {
		t.Fatal("the edit was not emitted")
	}
	at.commit()
	if got := at.seen(id); got != crawl.UnixMilli() {
		t.Errorf("edited post first seen at %d, want %d", got, crawl.UnixMilli())
	}
	// New articles up to exactly 30 days after the crawl: nothing goes.
	for d := 1; d <= 30; d++ {
		at.process(crawled(fmt.Sprintf("https://news.example/day/%d", d), fmt.Sprint("Day ", d), crawl.AddDate(0, 0, d), crawl.AddDate(0, 0, d)))
		at.commit()
	}
	if _, kept := at.versions()[id]; !kept {
		t.Fatal("an old post was forgotten 30 days after it was first seen")
	}
	// A millisecond later it is.
	late := crawl.AddDate(0, 0, 30).Add(time.Millisecond)
	at.process(crawled("https://news.example/day/31", "Day 31", late, late))
	at.commit()
	vs := at.versions()
	for i := range 20 {
		if _, kept := vs[articleID(t, fmt.Sprintf("https://blog.example/%d", i))]; kept {
			t.Errorf("old post %d kept past 30 days of first-seen time", i)
		}
	}
	if len(vs) != 31 {
		t.Errorf("%d articles kept, want the 31 of days 1 to 31", len(vs))
	}
}

// TestRetentionArticlesDeterministic: where commits fall changes nothing
// of what is kept; an article edited to a new time moves in the index.
func TestRetentionArticlesDeterministic(t *testing.T) {
	opts := Options{Retention: 10 * time.Hour}
	run := func(every int) map[string]string {
		at := newArticleTask(t, opts)
		for i := range 60 {
			h := float64(i) / 2
			at.process(raw(fmt.Sprintf("https://news.example/%d", i%40), h, fmt.Sprint("Title ", i)))
			if i%every == every-1 {
				at.commit()
			}
		}
		at.commit()
		m := map[string]string{}
		if err := at.ns.Scan(nil, nil, func(k, v []byte) error { m[string(k)] = string(v); return nil }); err != nil {
			t.Fatal(err)
		}
		return m
	}
	want := run(1000)
	for _, every := range []int{1, 3, 7} {
		if got := run(every); !maps.Equal(got, want) {
			t.Errorf("commit every %d: %d keys, want %d (one commit at the end)", every, len(got), len(want))
			for k, v := range want {
				if got[k] != v {
					t.Logf("%q: %x, want %x", k, got[k], v)
				}
			}
		}
	}
	if n := len(want); n != 2*21+1 { // 21 articles of the last 10h, with a time entry each, and the watermark
		t.Errorf("%d keys kept, want 43", n)
	}
}

func articleID(t *testing.T, url string) string {
	t.Helper()
	a, err := newOp(t, Options{}).Clean([]byte(fmt.Sprintf(`{"url":%q,"title":"t"}`, url)), 0)
	if err != nil {
		t.Fatal(err)
	}
	return a.ID
}
