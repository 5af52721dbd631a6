package eventlog

import (
	"context"
	"errors"
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
}

// Changelog is a claimed changelog partition.
type Changelog interface {
	// Restore calls apply, in log order, for every committed change from
	// offset from up to the moment the partition was claimed, and returns
	// the position to restore from next time. It returns an error wrapping
	// ErrChangelogTruncated when from is below the partition's start: the
	// caller must then start over from 0 with empty state.
	Restore(ctx context.Context, from int64, apply func(Change) error) (int64, error)
	// Commit appends changes atomically: a restore sees all or none of
	// them. It returns the position after them. After another writer
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
