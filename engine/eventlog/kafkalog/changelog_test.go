package kafkalog_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/engine/eventlog/kafkalog"
	"github.com/twmb/franz-go/pkg/kgo"
)

func restoreAll(t *testing.T, c eventlog.Changelog, from int64) (map[string]string, int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got := map[string]string{}
	next, err := c.Restore(ctx, from, func(ch eventlog.Change) error {
		if ch.Delete {
			delete(got, string(ch.Key))
		} else {
			got[string(ch.Key)] = string(ch.Value)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("restore from %d: %v", from, err)
	}
	return got, next
}

func TestChangelogClaimCommitRestore(t *testing.T) {
	l, c := newTestLog(t)
	ctx := context.Background()
	const topic = "newsflow-op-changelog"
	n, err := l.EnsureChangelogTopic(ctx, topic, 4)
	if err != nil || n != 4 {
		t.Fatalf("ensure changelog topic: %d %v", n, err)
	}
	if n, err := l.EnsureChangelogTopic(ctx, topic, 8); err != nil || n != 4 {
		t.Fatalf("ensure existing changelog topic: %d %v, want 4", n, err)
	}
	tp := eventlog.TopicPartition{Topic: topic, Partition: 2}

	a, err := l.OpenChangelog(ctx, tp, "newsflow-op-2")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if got, _ := restoreAll(t, a, 0); len(got) != 0 {
		t.Fatalf("fresh changelog restored %v", got)
	}
	if _, err := a.Commit(ctx, []eventlog.Change{{Key: []byte("x"), Value: []byte("1")}, {Key: []byte("y"), Value: []byte("1")}, {Key: []byte("e"), Value: []byte{}}}); err != nil {
		t.Fatal(err)
	}
	posA, err := a.Commit(ctx, []eventlog.Change{{Key: []byte("x"), Value: []byte("2")}, {Key: []byte("y"), Delete: true}})
	if err != nil {
		t.Fatal(err)
	}

	// A second writer of the same name claims the partition: it restores
	// everything the first committed, and the first can no longer commit.
	b, err := l.OpenChangelog(ctx, tp, "newsflow-op-2")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	got, posB := restoreAll(t, b, 0)
	if fmt.Sprint(got) != "map[e: x:2]" {
		t.Fatalf("restored %v, want x=2, e empty and y deleted", got)
	}
	if _, err := a.Commit(ctx, []eventlog.Change{{Key: []byte("x"), Value: []byte("stale")}}); !errors.Is(err, eventlog.ErrFenced) {
		t.Fatalf("commit by a fenced writer: %v, want ErrFenced", err)
	}
	if _, err := b.Commit(ctx, []eventlog.Change{{Key: []byte("z"), Value: []byte("3")}}); err != nil {
		t.Fatal(err)
	}

	// A third claim restoring from the second's position sees only what
	// came after; from the first's position it sees the later changes too.
	c3, err := l.OpenChangelog(ctx, tp, "newsflow-op-2")
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	if got, _ := restoreAll(t, c3, posB); fmt.Sprint(got) != "map[z:3]" {
		t.Fatalf("restore from %d: %v, want only z", posB, got)
	}
	if got, _ := restoreAll(t, c3, posA); fmt.Sprint(got) != "map[z:3]" {
		t.Fatalf("restore from %d: %v, want only z (the stale commit must not appear)", posA, got)
	}
	if got, _ := restoreAll(t, c3, 0); fmt.Sprint(got) != "map[e: x:2 z:3]" {
		t.Fatalf("full restore: %v", got)
	}
	// Other partitions are untouched.
	other, err := l.OpenChangelog(ctx, eventlog.TopicPartition{Topic: topic, Partition: 1}, "newsflow-op-1")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if got, _ := restoreAll(t, other, 0); len(got) != 0 {
		t.Fatalf("partition 1 restored %v", got)
	}
	c.Compact()
	if got, _ := restoreAll(t, c3, 0); fmt.Sprint(got) != "map[e: x:2 z:3]" {
		t.Fatalf("full restore after compaction: %v", got)
	}
}

// A writer that dies in the middle of a commit leaves an open transaction;
// the next claim aborts it and the restore never shows its changes.
func TestChangelogCrashMidCommit(t *testing.T) {
	l, c := newTestLog(t)
	ctx := context.Background()
	const topic = "newsflow-crash-changelog"
	if _, err := l.EnsureChangelogTopic(ctx, topic, 1); err != nil {
		t.Fatal(err)
	}
	tp := eventlog.TopicPartition{Topic: topic}
	a, err := l.OpenChangelog(ctx, tp, "w")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Commit(ctx, []eventlog.Change{{Key: []byte("k"), Value: []byte("committed")}}); err != nil {
		t.Fatal(err)
	}
	a.Close()
	// A raw transactional producer of the same id writes half a commit
	// and vanishes.
	raw, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.TransactionalID("w"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := raw.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte("k"), Value: []byte("half")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	raw.Close()

	b, err := l.OpenChangelog(ctx, tp, "w")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if got, _ := restoreAll(t, b, 0); fmt.Sprint(got) != "map[k:committed]" {
		t.Fatalf("restored %v, want only the committed value", got)
	}
}

// follower follows a changelog partition in the background, applying
// batches to a map and recording each state it reached.
type follower struct {
	batches chan followed
	done    chan error
}

// followed is a batch and the state after it.
type followed struct {
	eventlog.ChangelogBatch
	state string
}

func follow(t *testing.T, l *kafkalog.Log, tp eventlog.TopicPartition, from int64) *follower {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	f := &follower{batches: make(chan followed, 100), done: make(chan error, 1)}
	state := map[string]string{}
	go func() {
		f.done <- l.FollowChangelog(ctx, tp, from, func(b eventlog.ChangelogBatch) error {
			for _, ch := range b.Changes {
				if ch.Delete {
					delete(state, string(ch.Key))
				} else {
					state[string(ch.Key)] = string(ch.Value)
				}
			}
			f.batches <- followed{b, fmt.Sprint(state)}
			return nil
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-f.done; err != nil {
			t.Errorf("follow: %v", err)
		}
	})
	return f
}

// next waits for the follower's next batch and returns it with the state
// after it.
func (f *follower) next(t *testing.T) (eventlog.ChangelogBatch, string) {
	t.Helper()
	select {
	case b := <-f.batches:
		return b.ChangelogBatch, b.state
	case err := <-f.done:
		t.Fatalf("follow ended: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("no batch from the follower within 10s")
	}
	return eventlog.ChangelogBatch{}, ""
}

// until reads batches until one is caught up at position pos, checking
// that each leaves a state in allowed, and returns the state there.
func (f *follower) until(t *testing.T, pos int64, allowed ...string) string {
	t.Helper()
	for {
		b, st := f.next(t)
		if !slices.Contains(allowed, st) {
			t.Fatalf("follower state %s after a batch (next %d), want one a commit left: %v", st, b.Next, allowed)
		}
		if b.Next > pos {
			t.Fatalf("follower went past %d to %d", pos, b.Next)
		}
		if b.Next == pos && b.CaughtUp {
			return st
		}
	}
}

// TestChangelogFollow: a follower that does not claim the partition sees
// whole commits only, as they are committed, with their wall time; never
// a commit cut short; and continues from the position a batch gives.
func TestChangelogFollow(t *testing.T) {
	l, c := newTestLog(t)
	ctx := context.Background()
	const topic = "newsflow-follow-changelog"
	if _, err := l.EnsureChangelogTopic(ctx, topic, 1); err != nil {
		t.Fatal(err)
	}
	tp := eventlog.TopicPartition{Topic: topic}

	// Following an empty partition: caught up at once.
	empty := follow(t, l, tp, 0)
	if b, st := empty.next(t); !b.CaughtUp || st != "map[]" || b.Next != 0 {
		t.Fatalf("follower of an empty changelog: %+v %s, want caught up at 0", b, st)
	}

	w, err := l.OpenChangelog(ctx, tp, "w")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	before := time.Now().Add(-time.Second)
	commit := func(changes ...eventlog.Change) int64 {
		t.Helper()
		pos, err := w.Commit(ctx, changes)
		if err != nil {
			t.Fatal(err)
		}
		return pos
	}
	set := func(k, v string) eventlog.Change { return eventlog.Change{Key: []byte(k), Value: []byte(v)} }
	commit(set("a", "1"), set("b", "1"))
	pos2 := commit(set("a", "2"), eventlog.Change{Key: []byte("b"), Delete: true})
	states := []string{"map[]", "map[a:1 b:1]", "map[a:2]"}

	// The follower started before the commits sees them as they come.
	var last eventlog.ChangelogBatch
	for last.Next != pos2 {
		var st string
		last, st = empty.next(t)
		if !slices.Contains(states, st) {
			t.Fatalf("live follower: state %s at %d, want one a commit left", st, last.Next)
		}
	}
	if !last.CaughtUp {
		t.Errorf("live follower at the end (%d) not caught up", pos2)
	}
	if last.Committed.Before(before) || last.Committed.After(time.Now()) {
		t.Errorf("commit time %v, want about now", last.Committed)
	}

	// A follower from the start reads to the same state.
	f := follow(t, l, tp, 0)
	if st := f.until(t, pos2, states...); st != "map[a:2]" {
		t.Fatalf("follower from 0: %s", st)
	}

	// A writer dies in the middle of a commit: nothing of it is applied,
	// and the next writer's claim and commits come through.
	raw, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.TransactionalID("w"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := raw.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte("a"), Value: []byte("half")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	w2, err := l.OpenChangelog(ctx, tp, "w")
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	pos3, err := w2.Commit(ctx, []eventlog.Change{set("c", "3")})
	if err != nil {
		t.Fatal(err)
	}
	states = append(states, "map[a:2 c:3]")
	if st := f.until(t, pos3, states...); st != "map[a:2 c:3]" {
		t.Fatalf("after a crash mid-commit and a new writer: %s, want a=2 c=3", st)
	}

	// From a batch's position only what came after it.
	g := follow(t, l, tp, pos2)
	if st := g.until(t, pos3, "map[]", "map[c:3]"); st != "map[c:3]" {
		t.Fatalf("follower from %d: %s", pos2, st)
	}
	// From the end: caught up at once.
	h := follow(t, l, tp, pos3)
	if b, st := h.next(t); !b.CaughtUp || st != "map[]" {
		t.Fatalf("follower from the end: %+v %s", b, st)
	}

	// After compaction a follower from the start still reaches the last
	// committed state, and the restore skips the commit marks.
	c.Compact()
	k := follow(t, l, tp, 0)
	if st := k.until(t, pos3, "map[]", "map[a:2]", "map[c:3]", "map[a:2 c:3]"); st != "map[a:2 c:3]" {
		t.Fatalf("follower after compaction: %s", st)
	}
	w3, err := l.OpenChangelog(ctx, tp, "w")
	if err != nil {
		t.Fatal(err)
	}
	defer w3.Close()
	if got, _ := restoreAll(t, w3, 0); fmt.Sprint(got) != "map[a:2 c:3]" {
		t.Fatalf("restore: %v", got)
	}
}
