package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/newsflow/newsflow/internal/jsontime"
)

// Session is a login: it authenticates its token's bearer as UserID until
// Expires.
type Session struct {
	UserID  string          `json:"user_id"`
	Created jsontime.Millis `json:"created_at"`
	Expires jsontime.Millis `json:"expires_at"`
}

// ErrNoSession is returned by Lookup for a token that is malformed,
// unknown, revoked or expired, or whose user no longer exists.
var ErrNoSession = errors.New("no such session")

// tokenBytes is the entropy of a session token.
const tokenBytes = 32

var tokenEncoding = base64.RawURLEncoding.Strict()

// TokenLen is the length of a session token: 32 bytes in unpadded
// base64url.
const TokenLen = (tokenBytes*8 + 5) / 6

// indexEntry is a session as its user's index holds it.
type indexEntry struct {
	Created jsontime.Millis `json:"created_at"`
	Expires jsontime.Millis `json:"expires_at"`
}

// userSessions is the collection indexing the sessions of a user whose id
// passed validUserID.
func userSessions(userID string) string { return colUserSessionsPrefix + userID }

// newToken returns a fresh token and the key its session is stored under.
func newToken() (token, key string, err error) {
	var b [tokenBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", "", fmt.Errorf("read random: %w", err)
	}
	return tokenEncoding.EncodeToString(b[:]), tokenKey(b[:]), nil
}

// parseToken returns the key of a token's session, or false if the token
// is not one newToken could have made.
func parseToken(token string) (string, bool) {
	if len(token) != TokenLen {
		return "", false
	}
	var b [tokenBytes]byte
	n, err := tokenEncoding.Decode(b[:], []byte(token))
	if err != nil || n != tokenBytes {
		return "", false
	}
	return tokenKey(b[:]), true
}

// tokenKey is the hex SHA-256 of a token's bytes: what the store keeps
// instead of the token.
func tokenKey(raw []byte) string {
	h := sha256.Sum256(raw)
	return hex.EncodeToString(h[:])
}

// NewSession logs a user in: it stores a session that lasts SessionTTL and
// returns its token, which the store does not keep. If the user then has
// more than MaxSessionsPerUser sessions, the oldest are revoked.
func (s *Store) NewSession(ctx context.Context, userID string) (string, Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := found(s.getRecord(ctx, userID)); err != nil {
		return "", Session{}, err
	}
	now := s.stamp()
	live, err := s.pruneLocked(ctx, userID, now.Time)
	if err != nil {
		return "", Session{}, err
	}
	for len(live) >= s.opts.MaxSessionsPerUser {
		if err := s.deleteSessionLocked(ctx, userID, live[0].key); err != nil {
			return "", Session{}, err
		}
		live = live[1:]
	}
	token, key, err := newToken()
	if err != nil {
		return "", Session{}, err
	}
	sess := Session{UserID: userID, Created: now, Expires: jsontime.Millis{Time: now.Add(s.opts.SessionTTL)}}
	// The index entry first: every session is in its user's index.
	if err := s.putJSON(ctx, userSessions(userID), key, indexEntry{Created: sess.Created, Expires: sess.Expires}); err != nil {
		return "", Session{}, err
	}
	if err := s.putJSON(ctx, colSessions, key, sess); err != nil {
		return "", Session{}, err
	}
	return token, sess, nil
}

type keyedEntry struct {
	key string
	indexEntry
}

// pruneLocked deletes the user's expired sessions and returns the others,
// oldest first.
func (s *Store) pruneLocked(ctx context.Context, userID string, now time.Time) ([]keyedEntry, error) {
	var all []keyedEntry
	err := s.meta.Scan(ctx, userSessions(userID), func(k string, v []byte) error {
		var e indexEntry
		if err := json.Unmarshal(v, &e); err != nil {
			return fmt.Errorf("decode session index of %s: %w", userID, err)
		}
		all = append(all, keyedEntry{k, e})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("scan sessions of %s: %w", userID, err)
	}
	live := all[:0]
	for _, e := range all {
		if !now.Before(e.Expires.Time) {
			if err := s.deleteSessionLocked(ctx, userID, e.key); err != nil {
				return nil, err
			}
			continue
		}
		live = append(live, e)
	}
	sort.Slice(live, func(i, j int) bool {
		if !live[i].Created.Equal(live[j].Created.Time) {
			return live[i].Created.Before(live[j].Created.Time)
		}
		return live[i].key < live[j].key
	})
	return live, nil
}

// deleteSessionLocked deletes a session, then its index entry.
func (s *Store) deleteSessionLocked(ctx context.Context, userID, key string) error {
	if err := s.meta.Delete(ctx, colSessions, key); err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	if !validUserID(userID) {
		return nil // an undecodable session has no index entry to find
	}
	if err := s.meta.Delete(ctx, userSessions(userID), key); err != nil {
		return fmt.Errorf("delete session index entry: %w", err)
	}
	return nil
}

// Lookup returns the session a token stands for and its user. It returns
// ErrNoSession for a malformed, unknown, revoked or expired token, and
// deletes an expired session it finds.
func (s *Store) Lookup(ctx context.Context, token string) (Session, User, error) {
	key, ok := parseToken(token)
	if !ok {
		return Session{}, User{}, ErrNoSession
	}
	var sess Session
	if ok, err := s.getJSON(ctx, colSessions, key, &sess); err != nil {
		return Session{}, User{}, err
	} else if !ok {
		return Session{}, User{}, ErrNoSession
	}
	if !s.now().Before(sess.Expires.Time) {
		if err := s.revokeKey(ctx, sess.UserID, key); err != nil {
			return Session{}, User{}, err
		}
		return Session{}, User{}, ErrNoSession
	}
	rec, ok, err := s.getRecord(ctx, sess.UserID)
	if err != nil {
		return Session{}, User{}, err
	}
	if !ok {
		// Left over from a DeleteUser that raced a login.
		if err := s.revokeKey(ctx, sess.UserID, key); err != nil {
			return Session{}, User{}, err
		}
		return Session{}, User{}, ErrNoSession
	}
	return sess, rec.User, nil
}

// Revoke ends the session of a token (logout). Revoking a malformed,
// unknown or already revoked token is not an error.
func (s *Store) Revoke(ctx context.Context, token string) error {
	key, ok := parseToken(token)
	if !ok {
		return nil
	}
	var sess Session
	if ok, err := s.getJSON(ctx, colSessions, key, &sess); err != nil || !ok {
		return err
	}
	return s.revokeKey(ctx, sess.UserID, key)
}

func (s *Store) revokeKey(ctx context.Context, userID, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deleteSessionLocked(ctx, userID, key)
}

// RevokeAll logs a user out everywhere: it ends every session and
// revokes every API key, so that no browser and no app stays logged in.
// A user with neither, or no user, is not an error.
func (s *Store) RevokeAll(ctx context.Context, userID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.revokeAllLocked(ctx, userID); err != nil {
		return err
	}
	return s.revokeAPIKeysLocked(ctx, userID)
}

func (s *Store) revokeAllLocked(ctx context.Context, userID string) error {
	if !validUserID(userID) {
		return nil
	}
	var keys []string
	err := s.meta.Scan(ctx, userSessions(userID), func(k string, _ []byte) error {
		keys = append(keys, k)
		return nil
	})
	if err != nil {
		return fmt.Errorf("scan sessions of %s: %w", userID, err)
	}
	for _, k := range keys {
		if err := s.deleteSessionLocked(ctx, userID, k); err != nil {
			return err
		}
	}
	return nil
}

// Sweep deletes every expired session and returns how many it deleted.
// The node calls it periodically; Lookup and NewSession also delete the
// expired sessions they meet.
func (s *Store) Sweep(ctx context.Context) (int, error) {
	now := s.now()
	type victim struct{ userID, key string }
	var expired []victim
	err := s.meta.Scan(ctx, colSessions, func(k string, v []byte) error {
		var sess Session
		if err := json.Unmarshal(v, &sess); err != nil {
			// It cannot be looked up: drop it.
			expired = append(expired, victim{key: k})
			return nil
		}
		if !now.Before(sess.Expires.Time) {
			expired = append(expired, victim{sess.UserID, k})
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("scan sessions: %w", err)
	}
	// Expired sessions stay expired: deleting them after the scan is safe.
	for i, v := range expired {
		if err := s.revokeKey(ctx, v.userID, v.key); err != nil {
			return i, err
		}
	}
	return len(expired), nil
}
