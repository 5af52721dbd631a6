package readstate

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/enginetest"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/internal/meta"
)

// TestStateOutlivesRestart: what readers did is in the operator's state
// after the engine stops and another starts over the same log and store;
// one action marks many articles; a deleted user's state is gone; bad
// actions go to the dead letters and change nothing.
func TestStateOutlivesRestart(t *testing.T) {
	ctx := context.Background()
	st, d := fixture()
	r := enginetest.New(t, map[string]int32{Topic: 2, "dlq": 1})
	opts := engine.Options{Partitions: 2, CommitInterval: 2 * time.Millisecond, DeadLetterTopic: "dlq"}
	op := NewOperator(2, r.Log)
	r.Start(opts, op)
	s := op.Store(meta.NewLocal(r.DB), testClock())
	arts := make([]Article, 0, 1000)
	for i := range 1000 {
		arts = append(arts, Article{ID: fmt.Sprint("x", i), StoryID: "sx", Published: int64(i)})
	}
	must(t, s.MarkArticles(ctx, "u", true, append(arts, art(d, "a1"))...))
	if _, err := s.SetStar(ctx, "u", art(d, "a2"), true); err != nil {
		t.Fatal(err)
	}
	must(t, s.MarkArticles(ctx, "gone", true, art(d, "a1")))
	must(t, s.DeleteUser(ctx, "gone"))
	end, err := r.Log.Offsets(ctx, eventlog.TopicPartition{Topic: Topic, Partition: eventlog.PartitionFor([]byte("u"), 2)})
	must(t, err)
	want := snapshot(t, s, st, d, "u")

	// Bad actions: not JSON, an unknown op, a user in the wrong partition.
	p := eventlog.PartitionFor([]byte("u"), 2)
	r.Append(
		&eventlog.Record{Topic: Topic, Partition: p, Key: []byte("u"), Value: []byte("{")},
		&eventlog.Record{Topic: Topic, Partition: p, Key: []byte("u"), Value: []byte(`{"ops":[{"op":"drop","c":"reads","k":"a:a1"}]}`)},
		&eventlog.Record{Topic: Topic, Partition: 1 - p, Key: []byte("u"), Value: []byte(`{"ops":[{"op":"clear"}]}`)},
	)
	r.Halt()
	op = NewOperator(2, r.Log)
	r.Start(opts, op)
	s = op.Store(meta.NewLocal(r.DB), testClock())
	if got := snapshot(t, s, st, d, "u"); got != want {
		t.Errorf("after a restart:\n%s\nwant:\n%s", got, want)
	}
	rs, err := s.Load(ctx, "u")
	must(t, err)
	if len(rs.marks) != 1001 {
		t.Errorf("%d marks, want 1001", len(rs.marks))
	}
	if after, _ := r.Log.Offsets(ctx, eventlog.TopicPartition{Topic: Topic, Partition: p}); after.End != end.End+2 {
		t.Errorf("the partition grew from %d to %d records", end.End, after.End)
	}
	rg, err := s.Load(ctx, "gone")
	must(t, err)
	if len(rg.marks)+len(rg.starred) != 0 {
		t.Errorf("a deleted user kept %d marks and %d stars", len(rg.marks), len(rg.starred))
	}
	dl, _ := r.Log.Offsets(ctx, eventlog.TopicPartition{Topic: "dlq"})
	if dl.End != 3 {
		t.Errorf("%d dead letters, want 3", dl.End)
	}
}

// TestFoldersAtOnce: requests that add folders at the same time through
// two stores (two nodes) get one id each.
func TestFoldersAtOnce(t *testing.T) {
	ctx := context.Background()
	r := enginetest.New(t, map[string]int32{Topic: 2})
	op := NewOperator(2, r.Log)
	r.Start(engine.Options{Partitions: 2, CommitInterval: 2 * time.Millisecond}, op)
	a, b := op.Store(meta.NewLocal(r.DB), nil), op.Store(meta.NewLocal(r.DB), nil)
	var wg sync.WaitGroup
	ids := make([]int64, 20)
	for i := range ids {
		wg.Go(func() {
			s := a
			if i%2 == 1 {
				s = b
			}
			f, err := s.AddFolder(ctx, "u", fmt.Sprint("folder ", i))
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = f.ID
		})
	}
	wg.Wait()
	folders, err := a.Folders(ctx, "u")
	must(t, err)
	seen := map[int64]bool{}
	for _, id := range ids {
		if seen[id] {
			t.Errorf("id %d given twice: %v", id, ids)
		}
		seen[id] = true
	}
	if len(folders) != len(ids)+1 {
		t.Errorf("%d folders, want %d", len(folders), len(ids)+1)
	}
}
