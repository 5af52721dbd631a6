package auth

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/internal/meta"
)

// TestAPIKeyLifecycle: a key is shown once, authenticates its user (with
// or without the username, which must be its user's), never another user,
// is listed by id and name without its secret, records when it was last
// used (at most hourly), and once revoked, or its user deleted, no longer
// authenticates.
func TestAPIKeyLifecycle(t *testing.T) {
	t.Parallel()
	e, ctx := newTestEnv(t, fastOptions())
	ann := e.mustRegister(t, "ann", "ann's long password")
	bob := e.mustRegister(t, "bob", "bob's long password")
	secret, k, err := e.NewAPIKey(ctx, ann.ID, "  newsboat on the laptop ")
	if err != nil {
		t.Fatal(err)
	}
	if k.Name != "newsboat on the laptop" || k.UserID != ann.ID || len(k.ID) != 16 || len(secret) != TokenLen {
		t.Fatalf("new key: %+v, secret of %d bytes", k, len(secret))
	}
	for _, name := range []string{"", "ann", "Ann", " ann\n"} {
		got, u, err := e.LookupAPIKey(ctx, strings.TrimSpace(name), secret)
		if err != nil || u.ID != ann.ID || got.ID != k.ID {
			t.Fatalf("lookup with username %q: %+v %+v %v", name, got, u, err)
		}
	}
	// A secret with surrounding white space (a client's token file) works too.
	if _, _, err := e.LookupAPIKey(ctx, "", " "+secret+"\n"); err != nil {
		t.Fatalf("lookup of a padded secret: %v", err)
	}
	for _, c := range []struct{ user, secret string }{
		{"bob", secret},   // another user's name
		{"carol", secret}, // an unknown user
		{"ann", "ann's long password"},
		{"", otherSecret(secret)},
		{"", ""},
		{"", strings.Repeat("x", TokenLen)},
	} {
		if _, _, err := e.LookupAPIKey(ctx, c.user, c.secret); !errors.Is(err, ErrNoAPIKey) {
			t.Errorf("lookup %q %q: %v, want ErrNoAPIKey", c.user, c.secret, err)
		}
	}
	// Used at most hourly.
	keys, err := e.APIKeys(ctx, ann.ID)
	if err != nil || len(keys) != 1 || keys[0].ID != k.ID || !keys[0].LastUsed.Equal(e.clock.Now()) {
		t.Fatalf("keys of ann: %+v %v", keys, err)
	}
	used := keys[0].LastUsed
	e.clock.Advance(30 * time.Minute)
	_, _, _ = e.LookupAPIKey(ctx, "", secret)
	if keys, _ = e.APIKeys(ctx, ann.ID); !keys[0].LastUsed.Equal(used.Time) {
		t.Errorf("last used %v after 30 minutes, want still %v", keys[0].LastUsed, used)
	}
	e.clock.Advance(31 * time.Minute)
	_, _, _ = e.LookupAPIKey(ctx, "", secret)
	if keys, _ = e.APIKeys(ctx, ann.ID); !keys[0].LastUsed.Equal(e.clock.Now()) {
		t.Errorf("last used %v after 61 minutes, want now", keys[0].LastUsed)
	}
	if keys, _ := e.APIKeys(ctx, bob.ID); len(keys) != 0 {
		t.Errorf("bob lists %+v", keys)
	}

	// Revoking: another user cannot, the owner can; the key stops working.
	second, k2, err := e.NewAPIKey(ctx, ann.ID, "reeder")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.RevokeAPIKey(ctx, bob.ID, k.ID); !errors.Is(err, ErrNoAPIKey) {
		t.Errorf("bob revokes ann's key: %v", err)
	}
	if err := e.RevokeAPIKey(ctx, ann.ID, k.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.LookupAPIKey(ctx, "", secret); !errors.Is(err, ErrNoAPIKey) {
		t.Errorf("revoked key: %v", err)
	}
	if err := e.RevokeAPIKey(ctx, ann.ID, k.ID); !errors.Is(err, ErrNoAPIKey) {
		t.Errorf("revoked twice: %v", err)
	}
	if keys, _ := e.APIKeys(ctx, ann.ID); len(keys) != 1 || keys[0].ID != k2.ID {
		t.Errorf("keys after revoking one: %+v", keys)
	}
	// Deleting the user deletes its keys.
	if err := e.DeleteUser(ctx, ann.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.LookupAPIKey(ctx, "", second); !errors.Is(err, ErrNoAPIKey) {
		t.Errorf("key of a deleted user: %v", err)
	}
	if n := len(e.keys(t, colAPIKeys)); n != 0 {
		t.Errorf("%d keys stored after the user was deleted", n)
	}
}

// TestAPIKeyLimitsAndSecrets: names are checked, a user has at most
// MaxAPIKeysPerUser keys, and no secret is ever written to the store.
func TestAPIKeyLimitsAndSecrets(t *testing.T) {
	t.Parallel()
	e, ctx := newTestEnv(t, fastOptions())
	u := e.mustRegister(t, "tina", "tina's password")
	for _, name := range []string{"", "   ", strings.Repeat("n", MaxAPIKeyNameLen+1), "tab\there", "bad \xff utf8"} {
		if _, _, err := e.NewAPIKey(ctx, u.ID, name); !errors.Is(err, ErrInvalidAPIKeyName) {
			t.Errorf("name %q: %v", name, err)
		}
	}
	if _, _, err := e.NewAPIKey(ctx, "u-nobody", "app"); err == nil {
		t.Error("a key for an unknown user")
	}
	var secrets []string
	for i := range MaxAPIKeysPerUser {
		s, _, err := e.NewAPIKey(ctx, u.ID, strings.Repeat("a", i+1))
		if err != nil {
			t.Fatal(err)
		}
		secrets = append(secrets, s)
	}
	if _, _, err := e.NewAPIKey(ctx, u.ID, "one too many"); !errors.Is(err, ErrTooManyAPIKeys) {
		t.Errorf("key %d: %v", MaxAPIKeysPerUser+1, err)
	}
	for _, w := range e.meta.written() {
		for _, s := range secrets {
			raw, _ := base64.RawURLEncoding.DecodeString(s)
			if strings.Contains(w, s) || strings.Contains(w, string(raw)) {
				t.Fatalf("write %q contains a secret", w)
			}
		}
	}
}

// otherSecret is secret with its last character changed to another that
// leaves the unused low bits zero (A and Q both do), so it decodes to
// another key.
func otherSecret(secret string) string {
	last := "A"
	if secret[len(secret)-1] == 'A' {
		last = "Q"
	}
	return secret[:len(secret)-1] + last
}

// noLeaderStore is a meta.Store whose reads answer from its replica and
// whose writes wait until their context ends, as in a cluster without a
// leader.
type noLeaderStore struct{ meta.Store }

func (noLeaderStore) Put(ctx context.Context, _, _ string, _ []byte) error {
	<-ctx.Done()
	return fmt.Errorf("no leader took it: %w", ctx.Err())
}

func (s noLeaderStore) PutLazy(ctx context.Context, c, k string, v []byte) error {
	return s.Put(ctx, c, k, v)
}

func (s noLeaderStore) Delete(ctx context.Context, c, k string) error { return s.Put(ctx, c, k, nil) }

// TestAPIKeyLookupWithoutWrites: the first use of a key writes its time
// of use, but a store that cannot take the write (a cluster without a
// leader) neither fails the lookup nor holds it for the caller's whole
// deadline: it reads the replica.
func TestAPIKeyLookupWithoutWrites(t *testing.T) {
	t.Parallel()
	e, ctx := newTestEnv(t, fastOptions())
	ann := e.mustRegister(t, "ann", "ann's long password")
	secret, k, err := e.NewAPIKey(ctx, ann.ID, "reader app")
	if err != nil {
		t.Fatal(err)
	}
	stuck, err := NewStore(noLeaderStore{e.meta}, e.clock.Now, fastOptions())
	if err != nil {
		t.Fatal(err)
	}
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	start := time.Now()
	got, u, err := stuck.LookupAPIKey(lctx, "ann", secret)
	if took := time.Since(start); err != nil || got.ID != k.ID || u.ID != ann.ID || took > 2*time.Second {
		t.Fatalf("lookup without writes: %+v %+v %v after %s, want the key at once", got, u, err, took)
	}
	// The caller's own deadline still ends it.
	done, cancel2 := context.WithCancel(ctx)
	cancel2()
	if _, _, err := stuck.LookupAPIKey(done, "ann", secret); err == nil {
		t.Fatal("lookup with an ended context succeeded")
	}
}
