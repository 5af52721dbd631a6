package auth

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/newsflow/newsflow/internal/jsontime"
)

// API keys are the passwords of the client APIs (the Google Reader and
// Miniflux dialects that reader apps speak), separate from the login
// password: a reader creates one per app in the reader's settings, sees
// its secret once, and revokes it there; a leaked key gives access to
// the client APIs only, never to the account's settings, and revoking it
// ends every app that logged in with it. The secret is a session-grade
// token (32 random bytes, base64url); the store keeps its SHA-256 only,
// under colAPIKeys, and each user's keys are indexed under
// colUserAPIKeysPrefix + user id by their public id.

// APIKey is a client-API password as the store describes it: never its
// secret.
type APIKey struct {
	// ID names the key in listings and to revoke it: the first 16 hex
	// digits of the SHA-256 of its secret.
	ID       string          `json:"id"`
	UserID   string          `json:"user_id"`
	Name     string          `json:"name"`
	Created  jsontime.Millis `json:"created_at"`
	LastUsed jsontime.Millis `json:"last_used_at,omitzero"`
}

// Limits of API keys.
const (
	MaxAPIKeysPerUser = 20
	MaxAPIKeyNameLen  = 64
)

// Errors of API keys.
var (
	// ErrNoAPIKey is returned for a malformed, unknown or revoked key,
	// or one of another user than the one named.
	ErrNoAPIKey = errors.New("no such API key")
	// ErrTooManyAPIKeys is returned by NewAPIKey when the user has
	// MaxAPIKeysPerUser keys.
	ErrTooManyAPIKeys = fmt.Errorf("at most %d API keys per user: revoke one first", MaxAPIKeysPerUser)
	// ErrInvalidAPIKeyName is returned by NewAPIKey for an empty, long or
	// unprintable name.
	ErrInvalidAPIKeyName = fmt.Errorf("an API key's name must be 1 to %d bytes of printable text", MaxAPIKeyNameLen)
)

// apiKeyEntry is a key as its user's index holds it: with the key it is
// stored under, to revoke it.
type apiKeyEntry struct {
	APIKey
	Key string `json:"key"`
}

// lastUsedEvery is how stale a key's LastUsed may be: a lookup writes it
// only when it is older, not on every request.
const lastUsedEvery = time.Hour

// touchTimeout bounds the write of an API key's time of last use during a
// lookup.
const touchTimeout = 500 * time.Millisecond

const (
	colAPIKeys           = "api-keys"
	colUserAPIKeysPrefix = "user-api-keys/"
)

func userAPIKeys(userID string) string { return colUserAPIKeysPrefix + userID }

// apiKeyID is the public id of the key stored under key (its hex SHA-256).
func apiKeyID(key string) string { return key[:16] }

// NewAPIKey creates an API key for a user and returns its secret, which
// the store does not keep, and its description. The name (1 to
// MaxAPIKeyNameLen bytes, e.g. the app's) is for the reader's listing.
func (s *Store) NewAPIKey(ctx context.Context, userID, name string) (string, APIKey, error) {
	name = strings.TrimSpace(name)
	if name == "" || len(name) > MaxAPIKeyNameLen || !utf8.ValidString(name) || strings.ContainsFunc(name, isControl) {
		return "", APIKey{}, ErrInvalidAPIKeyName
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := found(s.getRecord(ctx, userID)); err != nil {
		return "", APIKey{}, err
	}
	n := 0
	if err := s.meta.Scan(ctx, userAPIKeys(userID), func(string, []byte) error { n++; return nil }); err != nil {
		return "", APIKey{}, fmt.Errorf("scan API keys of %s: %w", userID, err)
	}
	if n >= MaxAPIKeysPerUser {
		return "", APIKey{}, ErrTooManyAPIKeys
	}
	secret, key, err := newToken()
	if err != nil {
		return "", APIKey{}, err
	}
	k := APIKey{ID: apiKeyID(key), UserID: userID, Name: name, Created: s.stamp()}
	// The index entry first: every key is in its user's index.
	if err := s.putJSON(ctx, userAPIKeys(userID), k.ID, apiKeyEntry{k, key}); err != nil {
		return "", APIKey{}, err
	}
	if err := s.putJSON(ctx, colAPIKeys, key, k); err != nil {
		return "", APIKey{}, err
	}
	return secret, k, nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// APIKeys lists a user's API keys, oldest first.
func (s *Store) APIKeys(ctx context.Context, userID string) ([]APIKey, error) {
	keys := []APIKey{}
	if !validUserID(userID) {
		return keys, nil
	}
	err := s.meta.Scan(ctx, userAPIKeys(userID), func(_ string, b []byte) error {
		var e apiKeyEntry
		if err := json.Unmarshal(b, &e); err != nil {
			return err
		}
		keys = append(keys, e.APIKey)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("scan API keys of %s: %w", userID, err)
	}
	sort.SliceStable(keys, func(i, j int) bool { return keys[i].Created.Before(keys[j].Created.Time) })
	return keys, nil
}

// RevokeAPIKey deletes a user's API key by its id. It returns ErrNoAPIKey
// when the user has no key of that id.
func (s *Store) RevokeAPIKey(ctx context.Context, userID, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !validUserID(userID) {
		return ErrNoAPIKey
	}
	var e apiKeyEntry
	if ok, err := s.getJSON(ctx, userAPIKeys(userID), id, &e); err != nil {
		return err
	} else if !ok {
		return ErrNoAPIKey
	}
	return s.deleteAPIKeyLocked(ctx, userID, e)
}

// deleteAPIKeyLocked deletes a key, then its entry in its user's index:
// once the key is gone nobody can use it.
func (s *Store) deleteAPIKeyLocked(ctx context.Context, userID string, e apiKeyEntry) error {
	if e.Key != "" {
		if err := s.meta.Delete(ctx, colAPIKeys, e.Key); err != nil {
			return fmt.Errorf("delete API key %s: %w", e.ID, err)
		}
	}
	if err := s.meta.Delete(ctx, userAPIKeys(userID), e.ID); err != nil {
		return fmt.Errorf("delete API key %s of %s: %w", e.ID, userID, err)
	}
	return nil
}

// revokeAPIKeysLocked deletes every API key of a user (RevokeAll,
// DeleteUser).
func (s *Store) revokeAPIKeysLocked(ctx context.Context, userID string) error {
	if !validUserID(userID) {
		return nil
	}
	var entries []apiKeyEntry
	err := s.meta.Scan(ctx, userAPIKeys(userID), func(id string, b []byte) error {
		var e apiKeyEntry
		if err := json.Unmarshal(b, &e); err != nil {
			e = apiKeyEntry{APIKey: APIKey{ID: id}} // unreadable: its index entry at least goes
		}
		entries = append(entries, e)
		return nil
	})
	if err != nil {
		return fmt.Errorf("scan API keys of %s: %w", userID, err)
	}
	for _, e := range entries {
		if err := s.deleteAPIKeyLocked(ctx, userID, e); err != nil {
			return err
		}
	}
	return nil
}

// LookupAPIKey returns the key a secret stands for and its user, or
// ErrNoAPIKey. If username is not empty it must name the key's user
// (Basic auth and ClientLogin send both): the comparison of the names
// takes the same time whether they differ early or late.
func (s *Store) LookupAPIKey(ctx context.Context, username, secret string) (APIKey, User, error) {
	key, ok := parseToken(strings.TrimSpace(secret))
	if !ok {
		return APIKey{}, User{}, ErrNoAPIKey
	}
	var k APIKey
	if ok, err := s.getJSON(ctx, colAPIKeys, key, &k); err != nil {
		return APIKey{}, User{}, err
	} else if !ok {
		return APIKey{}, User{}, ErrNoAPIKey
	}
	rec, ok, err := s.getRecord(ctx, k.UserID)
	if err != nil {
		return APIKey{}, User{}, err
	}
	if !ok {
		return APIKey{}, User{}, ErrNoAPIKey
	}
	if username != "" {
		name, err := NormalizeUsername(username)
		if err != nil || subtle.ConstantTimeCompare([]byte(name), []byte(rec.Username)) != 1 {
			return APIKey{}, User{}, ErrNoAPIKey
		}
	}
	if now := s.now(); now.Sub(k.LastUsed.Time) >= lastUsedEvery {
		k.LastUsed = jsontime.Of(now)
		// The time of last use is advisory: a store that cannot take the
		// write soon (a cluster without a leader) neither fails nor holds
		// the lookup, which reads only the local replica; the next use
		// writes it.
		tctx, cancel := context.WithTimeout(ctx, touchTimeout)
		err := s.touchAPIKey(tctx, key, k)
		cancel()
		if err != nil && ctx.Err() != nil {
			return APIKey{}, User{}, err
		}
	}
	return k, rec.User, nil
}

// touchAPIKey writes a key's new LastUsed, unless it was revoked
// meanwhile.
func (s *Store) touchAPIKey(ctx context.Context, key string, k APIKey) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var e apiKeyEntry
	if ok, err := s.getJSON(ctx, userAPIKeys(k.UserID), k.ID, &e); err != nil || !ok {
		return err
	}
	e.LastUsed = k.LastUsed
	if err := s.putJSON(ctx, userAPIKeys(k.UserID), k.ID, e); err != nil {
		return err
	}
	return s.putJSON(ctx, colAPIKeys, key, k)
}
