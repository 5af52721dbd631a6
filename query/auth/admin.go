package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// errFound stops a scan at the first match.
var errFound = errors.New("found")

// HasAdmin reports whether any account has the admin role (the first-run
// setup asks). It stops reading at the first admin.
func (s *Store) HasAdmin(ctx context.Context) (bool, error) {
	err := s.meta.Scan(ctx, colUsers, func(id string, b []byte) error {
		var rec struct {
			Role Role `json:"role"`
		}
		if err := json.Unmarshal(b, &rec); err != nil {
			return fmt.Errorf("decode user %s: %w", id, err)
		}
		if rec.Role == RoleAdmin {
			return errFound
		}
		return nil
	})
	switch {
	case errors.Is(err, errFound):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("list users: %w", err)
	}
	return false, nil
}
