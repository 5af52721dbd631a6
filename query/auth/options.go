package auth

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// Defaults and limits of [Options].
const (
	// DefaultBcryptCost is the work factor of new password hashes, and the
	// lowest one allowed outside tests.
	DefaultBcryptCost         = 12
	DefaultSessionTTL         = 7 * 24 * time.Hour
	DefaultMaxSessionsPerUser = 20
)

// Options configure a [Store]. The zero value of each field means its
// default.
type Options struct {
	// BcryptCost is the bcrypt work factor of new password hashes
	// (default 12). Costs below 12 are refused unless
	// AllowWeakCostForTests is set.
	BcryptCost int `yaml:"bcrypt_cost"`
	// AllowWeakCostForTests allows a BcryptCost down to bcrypt.MinCost (4),
	// so test suites hash quickly. Never set it in production.
	AllowWeakCostForTests bool `yaml:"-"`
	// SessionTTL is how long a session lasts from its creation
	// (default 7 days). Sessions are not extended by use.
	SessionTTL time.Duration `yaml:"session_ttl"`
	// MaxSessionsPerUser caps the live sessions of one user (default 20);
	// creating one more revokes the oldest.
	MaxSessionsPerUser int `yaml:"max_sessions_per_user"`
}

// DefaultOptions returns the options a zero Options stands for.
func DefaultOptions() Options {
	return Options{
		BcryptCost:         DefaultBcryptCost,
		SessionTTL:         DefaultSessionTTL,
		MaxSessionsPerUser: DefaultMaxSessionsPerUser,
	}
}

// Validate reports whether the options are usable. Zero fields are valid:
// they mean the default.
func (o Options) Validate() error {
	switch {
	case o.BcryptCost == 0:
	case o.BcryptCost < bcrypt.MinCost || o.BcryptCost > bcrypt.MaxCost:
		return fmt.Errorf("bcrypt cost %d outside %d..%d", o.BcryptCost, bcrypt.MinCost, bcrypt.MaxCost)
	case o.BcryptCost < DefaultBcryptCost && !o.AllowWeakCostForTests:
		return fmt.Errorf("bcrypt cost %d below %d (lower costs are for tests: set AllowWeakCostForTests)", o.BcryptCost, DefaultBcryptCost)
	}
	if o.SessionTTL < 0 {
		return errors.New("negative session TTL")
	}
	if o.MaxSessionsPerUser < 0 {
		return errors.New("negative max sessions per user")
	}
	return nil
}
