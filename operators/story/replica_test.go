package story

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"testing"
	"time"

	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/state"
	"github.com/newsflow/newsflow/state/statetest"
)

// captureWriter writes a flush to a batch and records it as the changelog
// would carry it.
type captureWriter struct {
	t       *testing.T
	b       *state.Batch
	changes []eventlog.Change
}

func (w *captureWriter) Set(k, v []byte) error {
	w.changes = append(w.changes, eventlog.Change{Key: append([]byte(nil), k...), Value: append([]byte(nil), v...)})
	return w.b.Set(k, v)
}

func (w *captureWriter) Delete(k []byte) error {
	w.changes = append(w.changes, eventlog.Change{Key: append([]byte(nil), k...), Delete: true})
	return w.b.Delete(k)
}

func (w *captureWriter) DeleteRange(_, _ []byte) error {
	w.t.Fatal("the story task deletes keys one by one: a changelog carries no ranges")
	return nil
}

// TestReplicaAnswersAsTheWriter runs the stories task over the UCI
// headlines (with a short window and retention, so that stories close,
// merge and are deleted) and applies each commit's changes, as the
// changelog carries them, to a replica over another store. After every
// commit the replica answers every story query exactly as the writer
// does: lists, breaking, topics, story pages, articles, images and merges;
// and so does a replica loaded afresh from the copy halfway (a node that
// restarts, or whose writer moved away).
func TestReplicaAnswersAsTheWriter(t *testing.T) {
	docs := byTime(loadLabelled(t, "uci_dev.ndjson"))
	opts := OperatorOptions{Builder: Options{Cluster: ClusterOptions{Window: 2 * time.Hour}, Retention: 12 * time.Hour}}
	writer, err := New(opts, 8, nil)
	if err != nil {
		t.Fatal(err)
	}
	replica, err := New(opts, 8, nil)
	if err != nil {
		t.Fatal(err)
	}
	db := statetest.Open(t)
	wns, rns := db.Namespace("writer"), db.Namespace("replica")
	task, err := writer.NewTask(engine.TaskContext{Partition: engine.SingletonPartition, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := task.Restore(wns); err != nil {
		t.Fatal(err)
	}
	if err := replica.Follow(0, rns, nil); err != nil {
		t.Fatal(err)
	}
	topics := []string{"politics", "business", "science", "sport"}
	var ids []string
	commit := func() {
		t.Helper()
		w := &captureWriter{t: t, b: wns.NewBatch()}
		if err := task.Flush(w); err != nil {
			t.Fatal(err)
		}
		if err := w.b.Commit(); err != nil {
			t.Fatal(err)
		}
		task.Committed(engine.CommitInfo{})
		rb := rns.NewBatch()
		for _, ch := range w.changes {
			if ch.Delete {
				_ = rb.Delete(ch.Key)
			} else {
				_ = rb.Set(ch.Key, ch.Value)
			}
		}
		if err := rb.Commit(); err != nil {
			t.Fatal(err)
		}
		if err := replica.Follow(0, rns, w.changes); err != nil {
			t.Fatal(err)
		}
	}
	var pc engine.ProcessContext
	loaded := false
	for i, d := range docs {
		a := schema.Article{ID: d.ID, SourceID: fmt.Sprint("s", i%7), Source: fmt.Sprint("Outlet ", i%7), Authority: float64(i%5) / 5,
			Title: d.Title, Summary: d.Body, PublishedAt: d.Time, Version: 1,
			Topics: []schema.Label{{Topic: topics[i%len(topics)], Confidence: 0.8}}}
		if i%3 == 0 {
			a.ImageURL = fmt.Sprintf("https://img.example/%d.jpg", i%40)
		}
		v, _ := json.Marshal(a)
		if err := task.Process(&pc, &eventlog.Record{Topic: schema.TopicArticles, Value: v}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, d.ID)
		if i%97 != 96 && i != len(docs)-1 {
			continue
		}
		commit()
		if !loaded && i > len(docs)/2 {
			// A replica that starts from the copy as it is.
			loaded = true
			if replica, err = New(opts, 8, nil); err != nil {
				t.Fatal(err)
			}
			if err := replica.Follow(0, rns, nil); err != nil {
				t.Fatal(err)
			}
		}
		sameAnswers(t, writer, replica, ids, topics, i)
	}
	if stories, _ := writer.Recent(); len(stories) < 20 {
		t.Fatalf("only %d stories in the view at the end: the stream did not exercise the view", len(stories))
	}
}

// sameAnswers compares every query's answer of the writer and the replica.
func sameAnswers(t *testing.T, w, r *Operator, ids, topics []string, at int) {
	t.Helper()
	same := func(what string, a, b any) {
		t.Helper()
		if !reflect.DeepEqual(a, b) {
			ja, _ := json.Marshal(a)
			jb, _ := json.Marshal(b)
			i := 0
			for i < min(len(ja), len(jb)) && ja[i] == jb[i] {
				i++
			}
			lo := max(0, i-300)
			t.Fatalf("after article %d, %s differs at byte %d:\nwriter  …%s\nreplica …%s", at, what, i, ja[lo:min(len(ja), i+200)], jb[lo:min(len(jb), i+200)])
		}
	}
	for _, q := range append([]string{""}, topics...) {
		wl, err1 := w.List(ListQuery{Topic: q, Limit: 100})
		rl, err2 := r.List(ListQuery{Topic: q, Limit: 100})
		same("list "+q+" error", err1, err2)
		same("list "+q, wl, rl)
	}
	same("breaking", w.Breaking(), r.Breaking())
	same("topics", w.Topics(), r.Topics())
	ws, wm := w.Recent()
	rs, rm := r.Recent()
	same("recent", ws, rs)
	same("watermark", wm, rm)
	wp, _ := w.Preselect(50, 10, topics[:2])
	rp, _ := r.Preselect(50, 10, topics[:2])
	same("preselect", wp, rp)
	for i := len(ids) - 1; i >= 0 && i >= len(ids)-300; i -= 7 {
		wa, wst, wok := w.Article(ids[i])
		ra, rst, rok := r.Article(ids[i])
		same("article "+ids[i], []any{wa, wst, wok}, []any{ra, rst, rok})
		if !wok {
			continue
		}
		wd, err1 := w.Get(wst)
		rd, err2 := r.Get(rst)
		same("story "+wst, []any{wd, err1}, []any{rd, err2})
		for _, m := range wd.MergedFrom {
			same("resolve "+m, w.Resolve(m), r.Resolve(m))
		}
	}
	for i := range 40 {
		id := ImageID(fmt.Sprintf("https://img.example/%d.jpg", i))
		wu, wok := w.ImageURL(id)
		ru, rok := r.ImageURL(id)
		same("image", []any{wu, wok}, []any{ru, rok})
	}
}
