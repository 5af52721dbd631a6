package readstate

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/newsflow/newsflow/internal/meta"
)

// migrateChunk bounds the ops of one migrated action.
const migrateChunk = 1000

// Migrate moves the readers' state an older release kept in the metadata
// store m (collections "reads/<user>", "stars/<user>", "subs/<user>") into
// s, user by user: it appends each user's keys as create ops (a key s
// already holds keeps its value, so a migration that runs again after a
// crash changes nothing it had moved), waits until they are applied, and
// only then deletes them from m. It returns how many keys it moved.
func Migrate(ctx context.Context, m meta.Store, s *Store, users []string) (int, error) {
	if _, ok := s.b.(metaBackend); ok {
		return 0, errors.New("readstate: migrate into a store over the metadata store")
	}
	moved := 0
	for _, user := range users {
		var ops []Op
		for _, coll := range collections {
			err := m.Scan(ctx, metaCollection(user, coll), func(k string, v []byte) error {
				ops = append(ops, Op{Op: OpCreate, Coll: coll, Key: k, Value: slices.Clone(v)})
				return nil
			})
			if err != nil {
				return moved, fmt.Errorf("readstate: migrate %s: %w", user, err)
			}
		}
		if len(ops) == 0 {
			continue
		}
		for chunk := range slices.Chunk(ops, migrateChunk) {
			if err := s.b.apply(ctx, user, chunk); err != nil {
				return moved, fmt.Errorf("readstate: migrate %s: %w", user, err)
			}
		}
		if err := clearMeta(ctx, m, user); err != nil {
			return moved, fmt.Errorf("readstate: migrate %s: delete the old copy: %w", user, err)
		}
		moved += len(ops)
	}
	return moved, nil
}
