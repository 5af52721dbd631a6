package auth

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func FuzzNormalizeUsername(f *testing.F) {
	for _, s := range []string{"alice", "Bob_2.x-Y", "ab", "al ice", "\u212Aelvin", "\u0130van", strings.Repeat("z", 33), "\xff\xfe\xfd"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := NormalizeUsername(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidUsername) || n != "" {
				t.Fatalf("NormalizeUsername(%q) = %q, %v", s, n, err)
			}
			return
		}
		if len(n) < MinUsernameLen || len(n) > MaxUsernameLen || !strings.EqualFold(n, s) {
			t.Fatalf("NormalizeUsername(%q) = %q", s, n)
		}
		for _, c := range []byte(n) {
			if !strings.ContainsRune("abcdefghijklmnopqrstuvwxyz0123456789_.-", rune(c)) {
				t.Fatalf("NormalizeUsername(%q) = %q with %q", s, n, c)
			}
		}
		if again, err := NormalizeUsername(n); err != nil || again != n {
			t.Fatalf("not idempotent: %q → %q → %q, %v", s, n, again, err)
		}
	})
}

// FuzzLookup feeds arbitrary tokens to the token parser and to Lookup on a
// real store holding one session.
func FuzzLookup(f *testing.F) {
	e, ctx := newTestEnv(f, fastOptions())
	u := e.mustRegister(f, "fuzzer", "fuzzer's password")
	tok := e.mustSession(f, u.ID)
	for _, s := range []string{tok, "", tok + "=", tok[:42] + "B", strings.Repeat("A", TokenLen), strings.Repeat("_", TokenLen), "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		key, ok := parseToken(s)
		if ok {
			// Only canonical tokens parse: one string per session.
			raw, err := tokenEncoding.DecodeString(s)
			if err != nil || len(raw) != tokenBytes || tokenEncoding.EncodeToString(raw) != s || key != tokenKey(raw) {
				t.Fatalf("parseToken(%q) accepted a non-canonical token", s)
			}
		}
		sess, gu, err := e.Lookup(ctx, s)
		if s == tok {
			if err != nil || gu.ID != u.ID || sess.UserID != u.ID {
				t.Fatalf("Lookup(real token) = %+v, %+v, %v", sess, gu, err)
			}
			return
		}
		if !errors.Is(err, ErrNoSession) {
			t.Fatalf("Lookup(%q) = %+v, %+v, %v", s, sess, gu, err)
		}
	})
}

func FuzzIPKey(f *testing.F) {
	for _, s := range []string{"192.0.2.1", "192.0.2.1:80", "2001:db8::1", "[::1]:443", "fe80::1%eth0", "::ffff:10.0.0.1", "", "garbage"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if k := ClientKey(s); len(k) > 64 {
			t.Fatalf("ClientKey(%q) = %q: longer than 64 bytes", s, k)
		}
	})
}

// FuzzPreferences checks that normalizing never panics and is idempotent.
func FuzzPreferences(f *testing.F) {
	f.Add("tech,world,tech", "src-a", "src-b")
	f.Add(" a , b", "x,x,x", "")
	f.Add("\xff", "a\nb", "a")
	f.Fuzz(func(t *testing.T, topics, preferred, excluded string) {
		split := func(s string) []string {
			if s == "" {
				return nil
			}
			return strings.Split(s, ",")
		}
		p := Preferences{Topics: split(topics), PreferredSources: split(preferred), ExcludedSources: split(excluded)}
		n, err := p.normalize()
		if err != nil {
			if !errors.Is(err, ErrInvalidPreferences) {
				t.Fatalf("normalize error %v does not wrap ErrInvalidPreferences", err)
			}
			return
		}
		again, err := n.normalize()
		if err != nil || !reflect.DeepEqual(again, n) {
			t.Fatalf("normalize not idempotent: %#v → %#v, %v", n, again, err)
		}
	})
}
