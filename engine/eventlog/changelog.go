package eventlog

import (
	"context"
	"errors"
	"time"
)

// Change is one state change of a task: a key set to a value, or deleted.
type Change struct {
	Key    []byte
	Value  []byte
	Delete bool
}

// Changelogs is implemented by backends that keep task state in changelog
// partitions, so that a task can move between nodes (Kafka). A changelog
// partition has one writer at a time: opening it fences every earlier
// writer, whose next commit fails with ErrFenced.
type Changelogs interface {
	// EnsureChangelogTopic creates a compacted topic for changelogs unless
	// it exists, and returns its partition count.
	EnsureChangelogTopic(ctx context.Context, topic string, partitions int32) (int32, error)
	// OpenChangelog claims a changelog partition for writer (a name that
	// stays the same for the partition's task wherever it runs). It fences
	// earlier writers of the same name and aborts their open commit.
	OpenChangelog(ctx context.Context, tp TopicPartition, writer string) (Changelog, error)
	// FollowChangelog reads a changelog partition without claiming it, for
	// a standby copy of the task's state: from offset from, it calls apply
	// with the changes of each commit as the commit becomes durable, whole
	// commits only, in order, until ctx is done (then it returns nil) or
	// apply fails. A batch may hold several consecutive commits, and the
	// first ones a compacted partition yields reflect no single commit, but
	// every batch ends at a commit, and the changes applied up to it equal
	// the state as that commit left it. It returns an error wrapping
	// ErrChangelogTruncated when from is below the partition's start.
	FollowChangelog(ctx context.Context, tp TopicPartition, from int64, apply func(ChangelogBatch) error) error
}

// ChangelogBatch is what a follower of a changelog applies at once.
type ChangelogBatch struct {
	// Changes in log order; empty in the first batch when the follower
	// starts at the end.
	Changes []Change
	// Next is the position after the batch: where to follow from next time.
	Next int64
	// Committed is the wall time of the batch's last commit (zero when
	// unknown: a claim, or an empty batch).
	Committed time.Time
	// CaughtUp is true when the batch reached what the partition held
	// committed when it was read.
	CaughtUp bool
}

// Changelog is a claimed changelog partition.
type Changelog interface {
	// Restore calls apply, in log order, for every committed change from
	// offset from up to the moment the partition was claimed, and returns
	// the position to restore from next time. It returns an error wrapping
	// ErrChangelogTruncated when from is below the partition's start: the
	// caller must then start over from 0 with empty state.
	Restore(ctx context.Context, from int64, apply func(Change) error) (int64, error)
	// Commit appends changes atomically: a restore or a follower sees all
	// or none of them. It returns the position after them. After another writer
	// claimed the partition it fails with an error wrapping ErrFenced.
	Commit(ctx context.Context, changes []Change) (int64, error)
	// Close releases the claim's resources (not the claim itself).
	Close() error
}

// Changelog errors callers branch on.
var (
	ErrFenced             = errors.New("changelog claimed by a newer writer")
	ErrChangelogTruncated = errors.New("changelog truncated below the restore position")
)
