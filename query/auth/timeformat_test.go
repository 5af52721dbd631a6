package auth

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestTimesInMillis checks that records are written with times in ms
// since the epoch, and what a write returns is what a read returns.
func TestTimesInMillis(t *testing.T) {
	t.Parallel()
	e, ctx := newTestEnv(t, fastOptions())
	e.clock.Advance(123456789 * time.Nanosecond) // sub-ms digits are not kept
	u := e.mustRegister(t, "mia", "mia's password")
	tok, sess, err := e.NewSession(ctx, u.ID)
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.PutPreferences(ctx, u.ID, Preferences{Topics: []string{"science"}})
	if err != nil {
		t.Fatal(err)
	}
	const ms = "1772366400123" // 2026-03-01T12:00:00.123Z
	for _, w := range e.meta.written() {
		if strings.HasPrefix(w, `{"id":"u-`) { // the username's record: no time
			continue
		}
		if strings.HasPrefix(w, "{") && !strings.Contains(w, `_at":`+ms) {
			t.Errorf("record %s has no time %s", w, ms)
		}
		if strings.Contains(w, `_at":"`) {
			t.Errorf("record %s has a time as a string", w)
		}
	}
	if gu, err := e.GetUser(ctx, u.ID); err != nil || gu != u {
		t.Errorf("GetUser = %+v, %v; Register returned %+v", gu, err, u)
	}
	if gs, _, err := e.Lookup(ctx, tok); err != nil || gs != sess {
		t.Errorf("Lookup = %+v, %v; NewSession returned %+v", gs, err, sess)
	}
	if gp, err := e.GetPreferences(ctx, u.ID); err != nil || gp.Updated != p.Updated {
		t.Errorf("GetPreferences = %+v, %v; PutPreferences returned %+v", gp, err, p)
	}
	b, err := json.Marshal(sess)
	if err != nil || string(b) != `{"user_id":"`+u.ID+`","created_at":`+ms+`,"expires_at":1772971200123}` {
		t.Errorf("session JSON %s, %v", b, err)
	}
}

// TestTimesOldFormat checks that records an earlier version wrote, with
// RFC 3339 times, load with the same instants and are written back in ms
// with nothing else changed.
//
// It is one scenario checked step by step (cyclomatic 32): the steps
// depend on each other's state, so they stay in order in one function.
func TestTimesOldFormat(t *testing.T) {
	t.Parallel()
	e, ctx := newTestEnv(t, fastOptions())
	hash, err := e.HashPassword("old's password")
	if err != nil {
		t.Fatal(err)
	}
	const id = "u-0123456789abcdef01234567"
	token, key, err := newToken()
	if err != nil {
		t.Fatal(err)
	}
	old := map[[2]string]string{
		{colUsers, id}: `{"id":"` + id + `","username":"old","role":"admin","created_at":"2025-12-24T08:30:00.5Z",` +
			`"password_scheme":"bcrypt-hmac-sha256","password_hash":"` + hash + `"}`,
		{colUsernames, "old"}:   `{"id":"` + id + `"}`,
		{colSessions, key}:      `{"user_id":"` + id + `","created_at":"2026-03-01T11:00:00.123456789Z","expires_at":"2026-03-02T13:00:00.123456789+02:00"}`,
		{userSessions(id), key}: `{"created_at":"2026-03-01T11:00:00.123456789Z","expires_at":"2026-03-02T11:00:00.123456789Z"}`,
		{colPrefs, id}:          `{"topics":["x"],"preferred_sources":[],"excluded_sources":["y"],"updated_at":"2026-02-01T00:00:00Z"}`,
	}
	for ck, v := range old {
		if err := e.meta.Put(ctx, ck[0], ck[1], []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	created := time.Date(2025, 12, 24, 8, 30, 0, 500_000_000, time.UTC)
	login := time.Date(2026, 3, 1, 11, 0, 0, 123456789, time.UTC)

	u, err := e.Authenticate(ctx, "old", "old's password")
	if err != nil || u.ID != id || u.Role != RoleAdmin || !u.Created.Equal(created) {
		t.Fatalf("Authenticate = %+v, %v", u, err)
	}
	if list, err := e.ListUsers(ctx); err != nil || len(list) != 1 || list[0] != u {
		t.Fatalf("ListUsers = %+v, %v", list, err)
	}
	sess, su, err := e.Lookup(ctx, token)
	if err != nil || su != u || !sess.Created.Equal(login) || !sess.Expires.Equal(login.Add(24*time.Hour)) {
		t.Fatalf("Lookup = %+v, %+v, %v", sess, su, err)
	}
	p, err := e.GetPreferences(ctx, id)
	if err != nil || !p.Updated.Equal(time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)) || p.Topics[0] != "x" || p.ExcludedSources[0] != "y" {
		t.Fatalf("GetPreferences = %+v, %v", p, err)
	}
	// The API writes them in ms.
	for _, c := range []struct {
		v    any
		want string
	}{
		{u, `{"id":"` + id + `","username":"old","role":"admin","created_at":1766565000500}`},
		{sess, `{"user_id":"` + id + `","created_at":1772362800123,"expires_at":1772449200123}`},
		{p, `{"topics":["x"],"preferred_sources":[],"excluded_sources":["y"],"updated_at":1769904000000}`},
	} {
		if b, err := json.Marshal(c.v); err != nil || string(b) != c.want {
			t.Errorf("%T encodes as %s, %v; want %s", c.v, b, err, c.want)
		}
	}

	// Writes store ms and keep the rest: the hash still logs in, the old
	// session still counts (and is swept when it expires).
	if _, err := e.SetRole(ctx, id, RoleUser); err != nil {
		t.Fatal(err)
	}
	tok2, _, err := e.NewSession(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := e.meta.Get(ctx, colUsers, id)
	if err != nil || !regexp.MustCompile(`^\{"id":"`+id+`","username":"old","role":"user","created_at":1766565000500,"password_scheme":"bcrypt-hmac-sha256","password_hash":"[^"]+"\}$`).Match(b) {
		t.Errorf("user record rewritten as %s, %v", b, err)
	}
	if _, err := e.Authenticate(ctx, "old", "old's password"); err != nil {
		t.Errorf("Authenticate after SetRole: %v", err)
	}
	if ks := e.keys(t, userSessions(id)); len(ks) != 2 {
		t.Errorf("session index %v, want the old session and the new", ks)
	}
	e.clock.Advance(24 * time.Hour) // past the old session's expiry
	if n, err := e.Sweep(ctx); err != nil || n != 1 {
		t.Errorf("Sweep = %d, %v; want the old session", n, err)
	}
	if _, _, err := e.Lookup(ctx, tok2); err != nil {
		t.Errorf("new session after Sweep: %v", err)
	}
}
