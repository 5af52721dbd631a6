package kafkalog_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/newsflow/newsflow/engine/eventlog"
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
