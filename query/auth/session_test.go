package auth

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestSessionLifecycle(t *testing.T) {
	t.Parallel()
	e, ctx := newTestEnv(t, fastOptions())
	u := e.mustRegister(t, "sam", "sam's password")
	tok, sess, err := e.NewSession(ctx, u.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(tok) != TokenLen || TokenLen != 43 {
		t.Fatalf("token length %d, TokenLen %d", len(tok), TokenLen)
	}
	if raw, err := base64.RawURLEncoding.DecodeString(tok); err != nil || len(raw) != 32 {
		t.Fatalf("token is not 32 bytes of base64url: %v", err)
	}
	now := e.clock.Now()
	if sess.UserID != u.ID || !sess.Created.Equal(now) || !sess.Expires.Equal(now.Add(DefaultSessionTTL)) {
		t.Fatalf("session %+v", sess)
	}
	got, gu, err := e.Lookup(ctx, tok)
	if err != nil || got != sess || gu != u {
		t.Fatalf("Lookup = %+v, %+v, %v", got, gu, err)
	}

	e.clock.Advance(DefaultSessionTTL - time.Second)
	if _, _, err := e.Lookup(ctx, tok); err != nil {
		t.Fatalf("Lookup a second before expiry: %v", err)
	}
	e.clock.Advance(time.Second)
	if _, _, err := e.Lookup(ctx, tok); !errors.Is(err, ErrNoSession) {
		t.Fatalf("Lookup at expiry = %v, want ErrNoSession", err)
	}
	if ks := e.keys(t, colSessions); len(ks) != 0 {
		t.Errorf("expired session not deleted by Lookup: %v", ks)
	}
	if ks := e.keys(t, userSessions(u.ID)); len(ks) != 0 {
		t.Errorf("expired session still indexed: %v", ks)
	}

	if _, _, err := e.NewSession(ctx, "u-000000000000000000000000"); !errors.Is(err, ErrUserNotFound) {
		t.Errorf("NewSession(unknown) = %v", err)
	}
	if _, _, err := e.NewSession(ctx, "x\x00y"); !errors.Is(err, ErrUserNotFound) {
		t.Errorf("NewSession(garbage) = %v", err)
	}
}

func TestRevoke(t *testing.T) {
	t.Parallel()
	e, ctx := newTestEnv(t, fastOptions())
	a := e.mustRegister(t, "anna", "anna's password")
	b := e.mustRegister(t, "bert", "bert's password")
	a1, a2, a3 := e.mustSession(t, a.ID), e.mustSession(t, a.ID), e.mustSession(t, a.ID)
	b1 := e.mustSession(t, b.ID)

	if err := e.Revoke(ctx, a1); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.Lookup(ctx, a1); !errors.Is(err, ErrNoSession) {
		t.Errorf("revoked session: %v", err)
	}
	if _, _, err := e.Lookup(ctx, a2); err != nil {
		t.Errorf("other session after Revoke: %v", err)
	}
	for _, tok := range []string{a1, "", "garbage", strings.Repeat("A", TokenLen)} {
		if err := e.Revoke(ctx, tok); err != nil {
			t.Errorf("Revoke(%q) = %v, want nil", tok, err)
		}
	}
	if ks := e.keys(t, userSessions(a.ID)); len(ks) != 2 {
		t.Errorf("index after Revoke: %v", ks)
	}

	aKey, _, err := e.NewAPIKey(ctx, a.ID, "newsboat")
	if err != nil {
		t.Fatal(err)
	}
	bKey, _, err := e.NewAPIKey(ctx, b.ID, "reeder")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.RevokeAll(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	for _, tok := range []string{a2, a3} {
		if _, _, err := e.Lookup(ctx, tok); !errors.Is(err, ErrNoSession) {
			t.Errorf("session after RevokeAll: %v", err)
		}
	}
	// Logged out everywhere: the apps too.
	if _, _, err := e.LookupAPIKey(ctx, "", aKey); !errors.Is(err, ErrNoAPIKey) {
		t.Errorf("API key after RevokeAll: %v", err)
	}
	if keys, err := e.APIKeys(ctx, a.ID); err != nil || len(keys) != 0 {
		t.Errorf("API keys listed after RevokeAll: %v %v", keys, err)
	}
	if _, gu, err := e.LookupAPIKey(ctx, "", bKey); err != nil || gu.ID != b.ID {
		t.Errorf("other user's API key after RevokeAll: %+v, %v", gu, err)
	}
	if _, gu, err := e.Lookup(ctx, b1); err != nil || gu.ID != b.ID {
		t.Errorf("other user's session after RevokeAll: %+v, %v", gu, err)
	}
	if ks := e.keys(t, userSessions(a.ID)); len(ks) != 0 {
		t.Errorf("index after RevokeAll: %v", ks)
	}
	for _, id := range []string{a.ID, "u-000000000000000000000000", "", "x\x00y"} {
		if err := e.RevokeAll(ctx, id); err != nil {
			t.Errorf("RevokeAll(%q) = %v", id, err)
		}
	}
}

func TestMaxSessionsPerUser(t *testing.T) {
	t.Parallel()
	o := fastOptions()
	o.MaxSessionsPerUser, o.SessionTTL = 3, time.Hour
	e, ctx := newTestEnv(t, o)
	u := e.mustRegister(t, "maxi", "maxi's password")
	var toks []string
	for range 5 {
		toks = append(toks, e.mustSession(t, u.ID))
		e.clock.Advance(time.Second)
	}
	for i, tok := range toks {
		_, _, err := e.Lookup(ctx, tok)
		if i < 2 && !errors.Is(err, ErrNoSession) {
			t.Errorf("session %d of 5 still valid with a cap of 3: %v", i, err)
		}
		if i >= 2 && err != nil {
			t.Errorf("session %d of 5: %v", i, err)
		}
	}
	if ks := e.keys(t, userSessions(u.ID)); len(ks) != 3 {
		t.Errorf("index holds %d sessions, want 3", len(ks))
	}
	if ks := e.keys(t, colSessions); len(ks) != 3 {
		t.Errorf("%d sessions stored, want 3", len(ks))
	}

	// Expired sessions do not count, and are pruned.
	e.clock.Advance(2 * time.Hour)
	tok := e.mustSession(t, u.ID)
	if ks := e.keys(t, userSessions(u.ID)); len(ks) != 1 {
		t.Errorf("index after expiry holds %d sessions, want 1", len(ks))
	}
	if _, _, err := e.Lookup(ctx, tok); err != nil {
		t.Error(err)
	}
}

func TestLookupGarbage(t *testing.T) {
	t.Parallel()
	e, ctx := newTestEnv(t, fastOptions())
	u := e.mustRegister(t, "gary", "gary's password")
	tok := e.mustSession(t, u.ID)
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		t.Fatal(err)
	}
	flip := []byte(tok)
	flip[10] ^= 'A' ^ 'B'
	if flip[10] == tok[10] {
		t.Fatal("flip did nothing")
	}
	// The last character carries 2 spare bits: a lenient decoder accepts
	// a variant of the token with them set.
	last := strings.IndexByte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", tok[len(tok)-1])
	lenient := tok[:len(tok)-1] + string("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"[last|1])
	if lenient == tok {
		t.Fatal("a token with its spare bits set")
	}
	for _, bad := range []string{
		"",
		"x",
		"Bearer " + tok,
		tok + "=",
		tok + "A",
		tok[:len(tok)-1],
		string(flip),
		strings.Repeat("A", TokenLen),
		strings.Repeat("/", TokenLen),
		strings.Repeat("é", TokenLen),
		tok[:20] + "\x00" + tok[21:],
		base64.URLEncoding.EncodeToString(raw), // padded
		base64.StdEncoding.EncodeToString(raw), // other alphabet, padded
		base64.RawStdEncoding.EncodeToString(raw), // other alphabet
		hex.EncodeToString(raw),
		lenient,
		e.keys(t, colSessions)[0], // the stored hash is not a token
	} {
		if bad == tok {
			continue // the other alphabet spells tokens without '-' and '_' alike
		}
		if s, gu, err := e.Lookup(ctx, bad); !errors.Is(err, ErrNoSession) || s != (Session{}) || gu != (User{}) {
			t.Errorf("Lookup(%q) = %+v, %+v, %v; want ErrNoSession", bad, s, gu, err)
		}
	}
	if _, _, err := e.Lookup(ctx, tok); err != nil {
		t.Fatalf("the real token after garbage: %v", err)
	}
}

// TestTokensNotStored checks that no session token reaches the store: not
// in what is written through meta.Store, not in the database files.
func TestTokensNotStored(t *testing.T) {
	t.Parallel()
	e, ctx := newTestEnv(t, fastOptions())
	u := e.mustRegister(t, "tina", "tina's password")
	var toks [][]byte // each token, and its raw bytes in several encodings
	for range 5 {
		tok := e.mustSession(t, u.ID)
		raw, err := base64.RawURLEncoding.DecodeString(tok)
		if err != nil {
			t.Fatal(err)
		}
		toks = append(toks, []byte(tok), raw, []byte(hex.EncodeToString(raw)), []byte(base64.StdEncoding.EncodeToString(raw)))
		if _, _, err := e.Lookup(ctx, tok); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(e.keys(t, colSessions)); n != 5 {
		t.Fatalf("%d sessions stored", n)
	}
	for _, w := range e.meta.written() {
		for _, tok := range toks {
			if strings.Contains(w, string(tok)) {
				t.Fatalf("write %q contains a token", w)
			}
		}
	}
	// Everything the database holds, including its log, after closing.
	e.close(t)
	files := 0
	err := filepath.WalkDir(e.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		for _, tok := range toks {
			if bytes.Contains(b, tok) {
				t.Errorf("%s contains a token", path)
			}
		}
		return nil
	})
	if err != nil || files == 0 {
		t.Fatalf("walk %s: %d files, %v", e.dir, files, err)
	}
}

func TestSweep(t *testing.T) {
	t.Parallel()
	o := fastOptions()
	o.SessionTTL = time.Hour
	e, ctx := newTestEnv(t, o)
	a := e.mustRegister(t, "swan", "swan's password")
	b := e.mustRegister(t, "swim", "swim's password")
	a1, s1, err := e.NewSession(ctx, a.ID)
	if err != nil || s1.Expires.Sub(s1.Created.Time) != time.Hour {
		t.Fatalf("session %+v, %v; want one that lasts the SessionTTL of 1h", s1, err)
	}
	e.clock.Advance(30 * time.Minute)
	a2 := e.mustSession(t, a.ID) // 1h30m
	e.clock.Advance(20 * time.Minute)
	b1 := e.mustSession(t, b.ID) // 1h50m
	// A session record that does not decode can never be looked up.
	if err := e.meta.Put(ctx, colSessions, strings.Repeat("0", 64), []byte("{not json")); err != nil {
		t.Fatal(err)
	}

	if n, err := e.Sweep(ctx); err != nil || n != 1 {
		t.Fatalf("Sweep before any expiry = %d, %v; want the broken record only", n, err)
	}
	e.clock.Advance(15 * time.Minute) // at 1h05m
	if n, err := e.Sweep(ctx); err != nil || n != 1 {
		t.Fatalf("Sweep = %d, %v; want 1", n, err)
	}
	if ks := e.keys(t, userSessions(a.ID)); len(ks) != 1 {
		t.Errorf("index of a after Sweep: %v", ks)
	}
	if _, _, err := e.Lookup(ctx, a2); err != nil {
		t.Errorf("live session after Sweep: %v", err)
	}
	e.clock.Advance(time.Hour) // at 2h05m
	if n, err := e.Sweep(ctx); err != nil || n != 2 {
		t.Fatalf("Sweep = %d, %v; want 2", n, err)
	}
	for _, c := range []string{colSessions, userSessions(a.ID), userSessions(b.ID)} {
		if ks := e.keys(t, c); len(ks) != 0 {
			t.Errorf("%s after the last Sweep: %v", c, ks)
		}
	}
	for _, tok := range []string{a1, a2, b1} {
		if _, _, err := e.Lookup(ctx, tok); !errors.Is(err, ErrNoSession) {
			t.Errorf("swept session: %v", err)
		}
	}
	if n, err := e.Sweep(ctx); err != nil || n != 0 {
		t.Fatalf("Sweep of nothing = %d, %v", n, err)
	}
}

// TestLookupOrphanSession covers a session left by a crash or a race with
// DeleteUser: its user is gone, so it is no session.
func TestLookupOrphanSession(t *testing.T) {
	t.Parallel()
	e, ctx := newTestEnv(t, fastOptions())
	u := e.mustRegister(t, "orphan", "orphan's password")
	tok := e.mustSession(t, u.ID)
	if err := e.meta.Delete(ctx, colUsers, u.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.Lookup(ctx, tok); !errors.Is(err, ErrNoSession) {
		t.Fatalf("Lookup = %v", err)
	}
	if ks := e.keys(t, colSessions); len(ks) != 0 {
		t.Errorf("orphan session kept: %v", ks)
	}
}
