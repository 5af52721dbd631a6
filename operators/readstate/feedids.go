package readstate

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/newsflow/newsflow/internal/meta"
)

// Feed numbers: the client APIs name feeds by integer (Miniflux) where
// newsflow names sources by string. A source gets the next number the
// first time a client API names it, and keeps it: "feed-ids" maps source
// ids to numbers and "feed-nums" numbers (decimal) to source ids. Numbers
// are created atomically: two nodes numbering sources at once give them
// different numbers (one source numbered twice at the same instant keeps
// one; the other number still names it).

const (
	colFeedIDs  = "feed-ids"
	colFeedNums = "feed-nums"
)

// FeedNum returns the number of a source, giving it one if it has none.
func (s *Store) FeedNum(ctx context.Context, sourceID string) (int64, error) {
	if v, ok, err := s.meta.Get(ctx, colFeedIDs, sourceID); err != nil {
		return 0, err
	} else if ok {
		return strconv.ParseInt(string(v), 10, 64)
	}
	next := int64(1)
	err := s.meta.Scan(ctx, colFeedNums, func(string, []byte) error { next++; return nil })
	if err != nil {
		return 0, err
	}
	for {
		err := s.create(ctx, colFeedNums, strconv.FormatInt(next, 10), []byte(sourceID))
		if errors.Is(err, meta.ErrExists) {
			next++
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("readstate: number source %s: %w", sourceID, err)
		}
		break
	}
	if err := s.meta.Put(ctx, colFeedIDs, sourceID, []byte(strconv.FormatInt(next, 10))); err != nil {
		return 0, err
	}
	return next, nil
}

// SourceOfFeed returns the source a feed number names.
func (s *Store) SourceOfFeed(ctx context.Context, num int64) (string, bool, error) {
	v, ok, err := s.meta.Get(ctx, colFeedNums, strconv.FormatInt(num, 10))
	return string(v), ok, err
}
