package query

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/operators/trending"
)

// The trending.changes topic is written by the trending-changes operator
// (operators/trending/changes.go): one record each time an article enters
// a window's global top K. Every node follows the topic and hands each
// new record to its open streams as a trending.entered event (stream.go),
// so streams on any node of a cluster get them.
//
// Goroutine: run, owned by Server.Run; the follower's fields are its own.

// Defaults of the follower.
const (
	// changesRetry spaces the attempts of a follower whose read failed.
	changesRetry = 2 * time.Second
	// changesLogEvery spaces the warnings of a follower that keeps failing.
	changesLogEvery = time.Minute
)

// ChangesOptions configures the trending.entered stream events.
type ChangesOptions struct {
	// Disabled turns the follower off (the node runs no trending-changes
	// operator then).
	Disabled bool
}

// changesFollower reads trending.changes from its end and hands what is
// appended to the open streams.
type changesFollower struct {
	log      eventlog.Log
	announce func(values [][]byte)
	logger   *slog.Logger
	// next is the next offset to read per partition, once known: a read
	// that failed resumes there, so no record is skipped.
	next     map[eventlog.TopicPartition]int64
	failing  bool
	loggedAt time.Time
	// started is set once the follower has a position (for tests).
	started atomic.Bool
}

func newChangesFollower(l eventlog.Log, announce func([][]byte), logger *slog.Logger) *changesFollower {
	return &changesFollower{log: l, announce: announce, logger: logger}
}

// run follows the topic until ctx is done, trying again every
// changesRetry after a failure.
func (f *changesFollower) run(ctx context.Context) {
	for {
		err := f.follow(ctx)
		if ctx.Err() != nil {
			return
		}
		if !f.failing || time.Since(f.loggedAt) >= changesLogEvery {
			f.failing, f.loggedAt = true, time.Now()
			f.logger.Warn("trending.changes: cannot follow the topic; streams get no trending.entered events until it can", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(changesRetry):
		}
	}
}

// follow reads the topic from where it stopped (the first time: its end)
// and hands each batch of records to the streams, until ctx is done or a
// read fails.
func (f *changesFollower) follow(ctx context.Context) error {
	parts, err := eventlog.EnsureTopic(ctx, f.log, schema.TopicTrendingChanges, 1)
	if err != nil {
		return err
	}
	first := f.next == nil
	if first {
		f.next = map[eventlog.TopicPartition]int64{}
	}
	pos := make(map[eventlog.TopicPartition]int64, parts)
	for p := range parts {
		tp := eventlog.TopicPartition{Topic: schema.TopicTrendingChanges, Partition: p}
		o, err := f.log.Offsets(ctx, tp)
		if err != nil {
			return fmt.Errorf("read %s: %w", tp, err)
		}
		next, ok := f.next[tp]
		if !ok {
			next = o.End // a partition met now starts at its end
			if !first {
				next = o.Start
			}
		}
		pos[tp] = max(next, o.Start) // retention may have passed it
		f.next[tp] = pos[tp]
	}
	r, err := f.log.NewReader(pos)
	if err != nil {
		return fmt.Errorf("read %s: %w", schema.TopicTrendingChanges, err)
	}
	defer r.Close()
	f.started.Store(true)
	if f.failing {
		f.failing = false
		f.logger.Info("trending.changes: following again")
	}
	for {
		recs, err := r.Poll(ctx, 1000)
		if err != nil {
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return err
			}
			return fmt.Errorf("read %s: %w", schema.TopicTrendingChanges, err)
		}
		values := make([][]byte, 0, len(recs))
		for _, rec := range recs {
			f.next[eventlog.TopicPartition{Topic: rec.Topic, Partition: rec.Partition}] = rec.Offset + 1
			var c trending.Change
			if json.Unmarshal(rec.Value, &c) != nil || c.Window == "" || c.ArticleID == "" {
				continue // not ours to read
			}
			values = append(values, rec.Value)
		}
		if len(values) > 0 {
			f.announce(values)
		}
	}
}
