package auth

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/crypto/bcrypt"

	"github.com/newsflow/newsflow/internal/jsontime"
	"github.com/newsflow/newsflow/internal/meta"
	"github.com/newsflow/newsflow/internal/option"
)

// Role is what a user may do.
type Role string

// Roles.
const (
	RoleUser  Role = "user"
	RoleAdmin Role = "admin"
)

// Valid reports whether r is a known role.
func (r Role) Valid() bool { return r == RoleUser || r == RoleAdmin }

// User is an account as the API shows it. It never holds the password or
// its hash, so it is safe to encode as JSON.
type User struct {
	ID       string          `json:"id"`
	Username string          `json:"username"`
	Role     Role            `json:"role"`
	Created  jsontime.Millis `json:"created_at"`
}

// Errors of the account API. Errors that wrap ErrInvalidUsername and
// ErrWeakPassword say why; none of them contains the password.
var (
	ErrUsernameTaken   = errors.New("username is taken")
	ErrInvalidUsername = errors.New("invalid username")
	ErrWeakPassword    = errors.New("weak password")
	ErrInvalidRole     = errors.New("invalid role")
	ErrUserNotFound    = errors.New("user not found")
	// ErrBadCredentials is returned by Authenticate for an unknown user
	// and for a wrong password alike.
	ErrBadCredentials = errors.New("invalid username or password")
)

// Limits of usernames and passwords, in bytes.
const (
	MinUsernameLen = 3
	MaxUsernameLen = 32
	MinPasswordLen = 10
	MaxPasswordLen = 128
)

// Metadata collections.
const (
	colUsers     = "users"
	colUsernames = "usernames"
	colSessions  = "sessions"
	colPrefs     = "prefs"
	// colUserSessionsPrefix + user id is the collection indexing one
	// user's sessions.
	colUserSessionsPrefix = "user-sessions/"
)

// Password hash schemes.
const schemeBcryptHMAC = "bcrypt-hmac-sha256"

// prehashKey separates our password pre-hash from plain SHA-256.
var prehashKey = []byte("newsflow/auth password prehash v1")

// userRecord is a user as stored.
type userRecord struct {
	User
	Scheme string `json:"password_scheme"`
	Hash   string `json:"password_hash"`
}

type usernameRecord struct {
	ID string `json:"id"`
}

// Store keeps users, sessions and preferences in a metadata store. See the
// package documentation for the layout and the concurrency contract.
type Store struct {
	meta meta.Store
	now  func() time.Time
	opts Options
	// dummyHash is compared against when a user does not exist, so that
	// Authenticate takes as long as for a wrong password. It is made on
	// first use, so that opening a Store (e.g. in the CLI) costs no hash.
	dummyHash func() ([]byte, error)

	// mu serialises every write: the check-then-put of usernames, the
	// read-modify-write of user records, and session creation against
	// DeleteUser and RevokeAll. It is never held while hashing.
	mu sync.Mutex
}

// NewStore returns the accounts kept in store. now is the clock (nil
// means time.Now).
func NewStore(store meta.Store, now func() time.Time, opts Options) (*Store, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if now == nil {
		now = time.Now
	}
	option.Fill(&opts, DefaultOptions())
	s := &Store{meta: store, now: now, opts: opts}
	s.dummyHash = sync.OnceValues(func() ([]byte, error) {
		var pw [16]byte
		if _, err := rand.Read(pw[:]); err != nil {
			return nil, fmt.Errorf("read random: %w", err)
		}
		h, err := bcrypt.GenerateFromPassword(prehash(hex.EncodeToString(pw[:])), s.opts.BcryptCost)
		if err != nil {
			return nil, fmt.Errorf("hash dummy password: %w", err)
		}
		return h, nil
	})
	return s, nil
}

// stamp is the time of a record written now, as the store keeps it: what
// a write returns is what later reads return.
func (s *Store) stamp() jsontime.Millis { return jsontime.Of(s.now()) }

// NormalizeUsername returns the canonical, lower-case form of a username,
// or an error wrapping ErrInvalidUsername. Usernames are 3 to 32 of the
// ASCII characters a-z, 0-9, '_', '.' and '-'; upper-case ASCII letters are
// lowered. The error does not repeat the name.
func NormalizeUsername(name string) (string, error) {
	if len(name) < MinUsernameLen || len(name) > MaxUsernameLen {
		return "", fmt.Errorf("%w: must be %d to %d characters", ErrInvalidUsername, MinUsernameLen, MaxUsernameLen)
	}
	b := []byte(name)
	for i, c := range b {
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '_', c == '.', c == '-':
		case 'A' <= c && c <= 'Z':
			b[i] = c + 'a' - 'A'
		default:
			return "", fmt.Errorf("%w: only letters a-z, digits, '_', '.' and '-' are allowed", ErrInvalidUsername)
		}
	}
	return string(b), nil
}

// checkPassword enforces the password rules for the user named name
// (normalized). Its errors never contain the password.
func checkPassword(password, name string) error {
	switch {
	case len(password) < MinPasswordLen:
		return fmt.Errorf("%w: shorter than %d bytes", ErrWeakPassword, MinPasswordLen)
	case len(password) > MaxPasswordLen:
		return fmt.Errorf("%w: longer than %d bytes", ErrWeakPassword, MaxPasswordLen)
	case oneRune(password):
		return fmt.Errorf("%w: one character repeated", ErrWeakPassword)
	case strings.EqualFold(password, name):
		return fmt.Errorf("%w: same as the username", ErrWeakPassword)
	}
	return nil
}

// oneRune reports whether s repeats a single character (invalid UTF-8
// bytes count as one character).
func oneRune(s string) bool {
	first, _ := utf8.DecodeRuneInString(s)
	for _, r := range s {
		if r != first {
			return false
		}
	}
	return true
}

// prehash maps a password of any length to 44 bytes of base64, within
// bcrypt's 72-byte limit and free of NUL bytes.
func prehash(password string) []byte {
	m := hmac.New(sha256.New, prehashKey)
	m.Write([]byte(password))
	sum := m.Sum(nil)
	out := make([]byte, base64.StdEncoding.EncodedLen(len(sum)))
	base64.StdEncoding.Encode(out, sum)
	return out
}

func (s *Store) hashPassword(password string) (string, error) {
	h, err := bcrypt.GenerateFromPassword(prehash(password), s.opts.BcryptCost)
	if err != nil {
		return "", fmt.Errorf("hash password: %w", err)
	}
	return string(h), nil
}

// newUserID returns "u-" and 24 random hex digits.
func newUserID() (string, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("read random: %w", err)
	}
	return "u-" + hex.EncodeToString(b[:]), nil
}

// validUserID reports whether id has the form newUserID returns, so that
// ids from requests never reach collection names unchecked.
func validUserID(id string) bool {
	if len(id) != 26 || !strings.HasPrefix(id, "u-") {
		return false
	}
	for _, c := range []byte(id[2:]) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// Register creates an account with the user role. See AddUser.
func (s *Store) Register(ctx context.Context, username, password string) (User, error) {
	return s.AddUser(ctx, username, password, RoleUser)
}

// AddUser creates an account with the given role, for the CLI and for
// admins. Usernames are unique regardless of case; errors wrap
// ErrInvalidUsername, ErrWeakPassword, ErrInvalidRole or ErrUsernameTaken.
func (s *Store) AddUser(ctx context.Context, username, password string, role Role) (User, error) {
	if !role.Valid() {
		return User{}, fmt.Errorf("%w: %q", ErrInvalidRole, role)
	}
	name, err := NormalizeUsername(username)
	if err != nil {
		return User{}, err
	}
	if err := checkPassword(password, name); err != nil {
		return User{}, err
	}
	// A taken name costs no hashing; the check is repeated under the lock.
	if _, ok, err := s.userByName(ctx, name); err != nil {
		return User{}, err
	} else if ok {
		return User{}, ErrUsernameTaken
	}
	hash, err := s.hashPassword(password)
	if err != nil {
		return User{}, err
	}
	return s.insert(ctx, name, role, hash)
}

// HashPassword returns the stored form of a password under the store's
// cost, for ImportUser.
func (s *Store) HashPassword(password string) (string, error) { return s.hashPassword(password) }

// ImportUser creates an account from a hash made by HashPassword (by this
// or another node with the same scheme), without hashing: for moving
// accounts between deployments and for provisioning many accounts.
func (s *Store) ImportUser(ctx context.Context, username string, role Role, hash string) (User, error) {
	if !role.Valid() {
		return User{}, fmt.Errorf("%w: %q", ErrInvalidRole, role)
	}
	name, err := NormalizeUsername(username)
	if err != nil {
		return User{}, err
	}
	cost, err := bcrypt.Cost([]byte(hash))
	if err != nil {
		return User{}, fmt.Errorf("import %s: not a bcrypt hash: %w", name, err)
	}
	if cost < DefaultBcryptCost && !s.opts.AllowWeakCostForTests {
		return User{}, fmt.Errorf("import %s: bcrypt cost %d below %d", name, cost, DefaultBcryptCost)
	}
	return s.insert(ctx, name, role, hash)
}

// insert stores a new account under a normalized name.
func (s *Store) insert(ctx context.Context, name string, role Role, hash string) (User, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok, err := s.userByName(ctx, name); err != nil {
		return User{}, err
	} else if ok {
		return User{}, ErrUsernameTaken
	}
	var id string
	var err error
	for {
		if id, err = newUserID(); err != nil {
			return User{}, err
		}
		if _, ok, err := s.getRecord(ctx, id); err != nil {
			return User{}, err
		} else if !ok {
			break
		}
	}
	rec := userRecord{
		User:   User{ID: id, Username: name, Role: role, Created: s.stamp()},
		Scheme: schemeBcryptHMAC,
		Hash:   hash,
	}
	// The name first: a crash before the record leaves a stale name,
	// which the next registration of that name takes over. A store that
	// can create atomically (the cluster's) decides between registrations
	// of one name on different nodes.
	if err := s.claimName(ctx, name, id); err != nil {
		return User{}, err
	}
	if err := s.putJSON(ctx, colUsers, id, rec); err != nil {
		return User{}, err
	}
	return rec.User, nil
}

func (s *Store) claimName(ctx context.Context, name, id string) error {
	c, ok := s.meta.(meta.Creator)
	if !ok {
		return s.putJSON(ctx, colUsernames, name, usernameRecord{ID: id})
	}
	b, err := json.Marshal(usernameRecord{ID: id})
	if err != nil {
		return err
	}
	err = c.Create(ctx, colUsernames, name, b)
	if errors.Is(err, meta.ErrExists) {
		// Taken, unless it is a stale name (checked under s.mu above on
		// this node; another node may have completed it since).
		if _, ok, err := s.userByName(ctx, name); err != nil || ok {
			if err == nil {
				err = ErrUsernameTaken
			}
			return err
		}
		return s.putJSON(ctx, colUsernames, name, usernameRecord{ID: id})
	}
	return err
}

// GetUser returns the user with the given id, or ErrUserNotFound.
func (s *Store) GetUser(ctx context.Context, id string) (User, error) {
	rec, err := found(s.getRecord(ctx, id))
	return rec.User, err
}

// UserByName returns the user with the given username (any case), or
// ErrUserNotFound.
func (s *Store) UserByName(ctx context.Context, username string) (User, error) {
	name, err := NormalizeUsername(username)
	if err != nil {
		return User{}, ErrUserNotFound
	}
	rec, err := found(s.userByName(ctx, name))
	return rec.User, err
}

// ListUsers returns every user, ordered by username (an empty, non-nil
// slice if there are none).
func (s *Store) ListUsers(ctx context.Context) ([]User, error) {
	out := []User{}
	err := s.meta.Scan(ctx, colUsers, func(id string, b []byte) error {
		var rec userRecord
		if err := json.Unmarshal(b, &rec); err != nil {
			return fmt.Errorf("decode user %s: %w", id, err)
		}
		out = append(out, rec.User)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Username < out[j].Username })
	return out, nil
}

// SetRole changes a user's role.
func (s *Store) SetRole(ctx context.Context, id string, role Role) (User, error) {
	if !role.Valid() {
		return User{}, fmt.Errorf("%w: %q", ErrInvalidRole, role)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, err := found(s.getRecord(ctx, id))
	if err != nil {
		return User{}, err
	}
	rec.Role = role
	if err := s.putJSON(ctx, colUsers, id, rec); err != nil {
		return User{}, err
	}
	return rec.User, nil
}

// SetPassword replaces a user's password, under the rules of Register, and
// revokes all of the user's sessions; create a new one to keep the caller
// logged in.
func (s *Store) SetPassword(ctx context.Context, id, password string) error {
	u, err := s.GetUser(ctx, id)
	if err != nil {
		return err
	}
	if err := checkPassword(password, u.Username); err != nil {
		return err
	}
	hash, err := s.hashPassword(password)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, err := found(s.getRecord(ctx, id))
	if err != nil {
		return err
	}
	rec.Scheme, rec.Hash = schemeBcryptHMAC, hash
	if err := s.putJSON(ctx, colUsers, id, rec); err != nil {
		return err
	}
	return s.revokeAllLocked(ctx, id)
}

// DeleteUser deletes a user with their sessions and preferences, and frees
// their username.
func (s *Store) DeleteUser(ctx context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, err := found(s.getRecord(ctx, id))
	if err != nil {
		return err
	}
	// Dependents first, so that a crash leaves a user to delete again.
	if err := s.revokeAllLocked(ctx, id); err != nil {
		return err
	}
	if err := s.revokeAPIKeysLocked(ctx, id); err != nil {
		return err
	}
	if err := s.meta.Delete(ctx, colPrefs, id); err != nil {
		return fmt.Errorf("delete preferences of %s: %w", id, err)
	}
	if err := s.meta.Delete(ctx, colUsers, id); err != nil {
		return fmt.Errorf("delete user %s: %w", id, err)
	}
	// Release the name only if it is still ours.
	var nr usernameRecord
	if ok, err := s.getJSON(ctx, colUsernames, rec.Username, &nr); err != nil {
		return err
	} else if ok && nr.ID == id {
		if err := s.meta.Delete(ctx, colUsernames, rec.Username); err != nil {
			return fmt.Errorf("delete username of %s: %w", id, err)
		}
	}
	return nil
}

// Authenticate checks a username and password. It returns
// ErrBadCredentials for an unknown user, a malformed username or a wrong
// password, and takes about the same time (one bcrypt comparison) in all
// three cases. Rate-limit calls with a [Limiter].
func (s *Store) Authenticate(ctx context.Context, username, password string) (User, error) {
	pre := prehash(password)
	name, err := NormalizeUsername(username)
	if err != nil {
		return User{}, s.compareDummy(pre)
	}
	rec, ok, err := s.userByName(ctx, name)
	if err != nil {
		return User{}, err
	}
	if !ok || rec.Scheme != schemeBcryptHMAC {
		return User{}, s.compareDummy(pre)
	}
	if err := bcrypt.CompareHashAndPassword([]byte(rec.Hash), pre); err != nil {
		return User{}, ErrBadCredentials
	}
	return rec.User, nil
}

// compareDummy spends the time of a password check and returns
// ErrBadCredentials.
func (s *Store) compareDummy(prehashed []byte) error {
	h, err := s.dummyHash()
	if err != nil {
		return err
	}
	// It never matches: the dummy password is random and discarded.
	_ = bcrypt.CompareHashAndPassword(h, prehashed)
	return ErrBadCredentials
}

// userByName returns the record of the user holding name (normalized). A
// name whose id has no record, or a record with another name, is stale
// (see the package documentation) and reported as absent.
func (s *Store) userByName(ctx context.Context, name string) (userRecord, bool, error) {
	var nr usernameRecord
	ok, err := s.getJSON(ctx, colUsernames, name, &nr)
	if err != nil || !ok {
		return userRecord{}, false, err
	}
	rec, ok, err := s.getRecord(ctx, nr.ID)
	if err != nil || !ok || rec.Username != name {
		return userRecord{}, false, err
	}
	return rec, true, nil
}

// found is the record a lookup found, or ErrUserNotFound when it found
// none.
func found(rec userRecord, ok bool, err error) (userRecord, error) {
	if err != nil {
		return userRecord{}, err
	}
	if !ok {
		return userRecord{}, ErrUserNotFound
	}
	return rec, nil
}

func (s *Store) getRecord(ctx context.Context, id string) (userRecord, bool, error) {
	if !validUserID(id) {
		return userRecord{}, false, nil
	}
	var rec userRecord
	ok, err := s.getJSON(ctx, colUsers, id, &rec)
	return rec, ok, err
}

func (s *Store) getJSON(ctx context.Context, collection, key string, v any) (bool, error) {
	b, ok, err := s.meta.Get(ctx, collection, key)
	if err != nil {
		return false, fmt.Errorf("get %s/%s: %w", collection, key, err)
	}
	if !ok {
		return false, nil
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("decode %s/%s: %w", collection, key, err)
	}
	return true, nil
}

func (s *Store) putJSON(ctx context.Context, collection, key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s/%s: %w", collection, key, err)
	}
	if err := s.meta.Put(ctx, collection, key, b); err != nil {
		return fmt.Errorf("put %s/%s: %w", collection, key, err)
	}
	return nil
}

// Meta returns the metadata store the accounts are kept in (other
// per-user state is kept beside them).
func (s *Store) Meta() meta.Store { return s.meta }
