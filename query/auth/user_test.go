package auth

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

func TestOptionsValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		opts Options
		ok   bool
	}{
		{Options{}, true},
		{DefaultOptions(), true},
		{Options{BcryptCost: 13}, true},
		{Options{BcryptCost: 11}, false},
		{Options{BcryptCost: bcrypt.MinCost}, false},
		{Options{BcryptCost: bcrypt.MinCost, AllowWeakCostForTests: true}, true},
		{Options{BcryptCost: bcrypt.MinCost - 1, AllowWeakCostForTests: true}, false},
		{Options{BcryptCost: bcrypt.MaxCost + 1}, false},
		{Options{SessionTTL: -time.Second}, false},
		{Options{MaxSessionsPerUser: -1}, false},
	} {
		if err := tc.opts.Validate(); (err == nil) != tc.ok {
			t.Errorf("%+v: Validate() = %v, want ok=%v", tc.opts, err, tc.ok)
		}
	}
	if _, err := NewStore(nil, nil, Options{BcryptCost: bcrypt.MinCost}); err == nil {
		t.Error("NewStore accepted a weak cost without AllowWeakCostForTests")
	}
	d := DefaultOptions()
	if d.BcryptCost < 12 || d.SessionTTL != 7*24*time.Hour || d.MaxSessionsPerUser != 20 {
		t.Errorf("DefaultOptions() = %+v", d)
	}
}

// TestDefaultCostHash hashes one real password at the default cost: slow
// (seconds under -race), so it runs in parallel with the rest.
func TestDefaultCostHash(t *testing.T) {
	t.Parallel()
	e, ctx := newTestEnv(t, Options{})
	u := e.mustRegister(t, "slowpoke", "a real password")
	var rec userRecord
	if ok, err := e.getJSON(ctx, colUsers, u.ID, &rec); err != nil || !ok {
		t.Fatalf("user record: %v %v", ok, err)
	}
	cost, err := bcrypt.Cost([]byte(rec.Hash))
	if err != nil {
		t.Fatal(err)
	}
	if cost < 12 || cost != DefaultBcryptCost {
		t.Fatalf("default bcrypt cost %d, want %d (at least 12)", cost, DefaultBcryptCost)
	}
}

func TestRegisterRules(t *testing.T) {
	t.Parallel()
	e, ctx := newTestEnv(t, fastOptions())
	const good = "correct horse"
	for _, tc := range []struct {
		name, username, password string
		want                     string // normalized username on success
		err                      error
	}{
		{"simple", "alice", good, "alice", nil},
		{"lower-cased", "Bob_2.x-Y", good, "bob_2.x-y", nil},
		{"shortest name", "abc", good, "abc", nil},
		{"longest name", strings.Repeat("z", 32), good, strings.Repeat("z", 32), nil},
		{"shortest password", "dora", "0123456789", "dora", nil},
		{"longest password", "erin", strings.Repeat("pw", 64), "erin", nil},
		{"multibyte password", "fred", "pässwörd-ünïcode", "fred", nil},

		{"empty name", "", good, "", ErrInvalidUsername},
		{"short name", "ab", good, "", ErrInvalidUsername},
		{"long name", strings.Repeat("z", 33), good, "", ErrInvalidUsername},
		{"space", "al ice", good, "", ErrInvalidUsername},
		{"slash", "al/ice", good, "", ErrInvalidUsername},
		{"at", "al@ice", good, "", ErrInvalidUsername},
		{"non-ASCII letter", "alicé", good, "", ErrInvalidUsername},
		{"Kelvin sign lowers to k", "\u212Aelvin", good, "", ErrInvalidUsername},
		{"dotted capital I", "\u0130van", good, "", ErrInvalidUsername},
		{"NUL", "ali\x00ce", good, "", ErrInvalidUsername},

		{"short password", "gina", "012345678", "", ErrWeakPassword},
		{"long password", "hank", strings.Repeat("p", 129), "", ErrWeakPassword},
		{"one character", "iris", "aaaaaaaaaaaa", "", ErrWeakPassword},
		{"one multibyte character", "jack", "éééééééééé", "", ErrWeakPassword},
		{"same as username", "kate.12345", "kate.12345", "", ErrWeakPassword},
		{"same as username in other case", "Liam.12345", "lIAM.12345", "", ErrWeakPassword},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, err := e.Register(ctx, tc.username, tc.password)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("Register = %+v, %v; want %v", u, err, tc.err)
				}
				if err == tc.err {
					t.Errorf("error %q gives no reason", err)
				}
				if len(tc.password) >= 4 && strings.Contains(err.Error(), tc.password) {
					t.Errorf("error %q contains the password", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Register: %v", err)
			}
			if u.Username != tc.want || u.Role != RoleUser || !validUserID(u.ID) || !u.Created.Equal(e.clock.Now()) {
				t.Fatalf("Register = %+v", u)
			}
			if got, err := e.Authenticate(ctx, tc.username, tc.password); err != nil || got != u {
				t.Fatalf("Authenticate after Register = %+v, %v", got, err)
			}
		})
	}
	if _, err := e.AddUser(ctx, "mona", good, Role("root")); !errors.Is(err, ErrInvalidRole) {
		t.Errorf("AddUser with role root: %v", err)
	}
}

// TestLongPasswords checks that passwords past bcrypt's 72-byte limit work
// and that every byte of them counts.
func TestLongPasswords(t *testing.T) {
	t.Parallel()
	e, ctx := newTestEnv(t, fastOptions())
	long := strings.Repeat("0123456789", 12) + "abcdefgh" // 128 bytes
	e.mustRegister(t, "longpw", long)
	if _, err := e.Authenticate(ctx, "longpw", long); err != nil {
		t.Fatal(err)
	}
	for _, wrong := range []string{long[:72], long[:127] + "X", long[:127]} {
		if _, err := e.Authenticate(ctx, "longpw", wrong); !errors.Is(err, ErrBadCredentials) {
			t.Errorf("Authenticate with a %d-byte prefix or variant: %v", len(wrong), err)
		}
	}
}

func TestUsernameCaseInsensitive(t *testing.T) {
	t.Parallel()
	e, ctx := newTestEnv(t, fastOptions())
	u := e.mustRegister(t, "Alice", "correct horse")
	if u.Username != "alice" {
		t.Fatalf("username %q", u.Username)
	}
	for _, name := range []string{"alice", "ALICE", "aLiCe"} {
		if _, err := e.Register(ctx, name, "another password"); !errors.Is(err, ErrUsernameTaken) {
			t.Errorf("Register(%q) = %v, want ErrUsernameTaken", name, err)
		}
		if got, err := e.UserByName(ctx, name); err != nil || got != u {
			t.Errorf("UserByName(%q) = %+v, %v", name, got, err)
		}
	}
	if _, err := e.UserByName(ctx, "nobody"); !errors.Is(err, ErrUserNotFound) {
		t.Errorf("UserByName(nobody) = %v", err)
	}
	if _, err := e.UserByName(ctx, "no body"); !errors.Is(err, ErrUserNotFound) {
		t.Errorf("UserByName(invalid) = %v", err)
	}
}

// TestConcurrentRegister registers one name in different cases from many
// goroutines at once: exactly one wins.
func TestConcurrentRegister(t *testing.T) {
	t.Parallel()
	e, ctx := newTestEnv(t, fastOptions())
	names := []string{"carol", "Carol", "CAROL", "cArOl"}
	const n = 24
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			_, errs[i] = e.Register(ctx, names[i%len(names)], fmt.Sprintf("password-%d", i))
		})
	}
	close(start)
	wg.Wait()
	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, ErrUsernameTaken):
			t.Errorf("registration %d: %v", i, err)
		}
	}
	if won != 1 {
		t.Fatalf("%d registrations won, want 1", won)
	}
	users, err := e.ListUsers(ctx)
	if err != nil || len(users) != 1 || users[0].Username != "carol" {
		t.Fatalf("ListUsers = %+v, %v", users, err)
	}
	if ids := e.keys(t, colUsers); len(ids) != 1 {
		t.Fatalf("user records %v", ids)
	}
}

func TestAuthenticate(t *testing.T) {
	t.Parallel()
	e, ctx := newTestEnv(t, fastOptions())
	const pw = "s3cret-passphrase"
	u := e.mustRegister(t, "dave", pw)
	if got, err := e.Authenticate(ctx, "DAVE", pw); err != nil || got != u {
		t.Fatalf("good credentials: %+v, %v", got, err)
	}
	for _, tc := range []struct{ name, user, pw string }{
		{"wrong password", "dave", "s3cret-passphrasf"},
		{"password case", "dave", strings.ToUpper(pw)},
		{"empty password", "dave", ""},
		{"unknown user", "erin", pw},
		{"malformed username", "d a v e", pw},
		{"empty username", "", pw},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := e.Authenticate(ctx, tc.user, tc.pw)
			if err != ErrBadCredentials || got != (User{}) {
				t.Fatalf("Authenticate = %+v, %v; want ErrBadCredentials", got, err)
			}
			if strings.Contains(err.Error(), pw) {
				t.Fatalf("error %q contains the password", err)
			}
		})
	}
}

// TestAuthenticateTiming checks that a login as an unknown user costs a
// bcrypt comparison, as a wrong password does.
func TestAuthenticateTiming(t *testing.T) {
	e, ctx := newTestEnv(t, Options{BcryptCost: 6, AllowWeakCostForTests: true})
	e.mustRegister(t, "timer", "the right password")
	// The fastest of 15 tries of each, taken in turns, so that a busy
	// machine slows all three alike.
	users := []string{"timer", "nobody", "no body"}
	best := []time.Duration{1<<63 - 1, 1<<63 - 1, 1<<63 - 1}
	for round := range 16 {
		for i, user := range users {
			start := time.Now()
			if _, err := e.Authenticate(ctx, user, "the wrong password"); !errors.Is(err, ErrBadCredentials) {
				t.Fatal(err)
			}
			if round > 0 { // the first makes the dummy hash
				best[i] = min(best[i], time.Since(start))
			}
		}
	}
	wrong, unknown, malformed := best[0], best[1], best[2]
	t.Logf("wrong password %v, unknown user %v, malformed name %v", wrong, unknown, malformed)
	if unknown < wrong/3 || malformed < wrong/3 {
		t.Fatalf("unknown user (%v) or malformed name (%v) much faster than a wrong password (%v)", unknown, malformed, wrong)
	}
}

func TestRolesAndListing(t *testing.T) {
	t.Parallel()
	e, ctx := newTestEnv(t, fastOptions())
	admin, err := e.AddUser(ctx, "Root.Admin", "admin password", RoleAdmin)
	if err != nil || admin.Role != RoleAdmin || admin.Username != "root.admin" {
		t.Fatalf("AddUser = %+v, %v", admin, err)
	}
	zed := e.mustRegister(t, "zed", "zed's password")
	amy := e.mustRegister(t, "amy", "amy's password")
	users, err := e.ListUsers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []User{amy, admin, zed}; !slices.Equal(users, want) {
		t.Fatalf("ListUsers = %+v, want %+v", users, want)
	}
	got, err := e.SetRole(ctx, zed.ID, RoleAdmin)
	if err != nil || got.Role != RoleAdmin {
		t.Fatalf("SetRole = %+v, %v", got, err)
	}
	if got, err := e.GetUser(ctx, zed.ID); err != nil || got.Role != RoleAdmin || got.Username != "zed" {
		t.Fatalf("GetUser after SetRole = %+v, %v", got, err)
	}
	if _, err := e.SetRole(ctx, zed.ID, "superuser"); !errors.Is(err, ErrInvalidRole) {
		t.Errorf("SetRole(superuser) = %v", err)
	}
	for _, id := range []string{"", "garbage", "u-000000000000000000000000", "u-ZZZ", "../users"} {
		if _, err := e.SetRole(ctx, id, RoleUser); !errors.Is(err, ErrUserNotFound) {
			t.Errorf("SetRole(%q) = %v", id, err)
		}
		if _, err := e.GetUser(ctx, id); !errors.Is(err, ErrUserNotFound) {
			t.Errorf("GetUser(%q) = %v", id, err)
		}
	}
}

// TestUserJSON checks that users encode without secrets.
func TestUserJSON(t *testing.T) {
	t.Parallel()
	e, ctx := newTestEnv(t, fastOptions())
	const pw = "hunter2hunter2"
	e.mustRegister(t, "jason", pw)
	users, err := e.ListUsers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(users)
	if err != nil {
		t.Fatal(err)
	}
	var fields []map[string]any
	if err := json.Unmarshal(b, &fields); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range fields[0] {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if fmt.Sprint(keys) != "[created_at id role username]" {
		t.Fatalf("user JSON fields %v", keys)
	}
	if s := string(b); strings.Contains(s, pw) || strings.Contains(s, "$2a$") || strings.Contains(s, "hash") {
		t.Fatalf("user JSON holds a secret: %s", s)
	}
}

func TestSetPassword(t *testing.T) {
	t.Parallel()
	e, ctx := newTestEnv(t, fastOptions())
	u := e.mustRegister(t, "kim", "old password")
	tok := e.mustSession(t, u.ID)
	if err := e.SetPassword(ctx, u.ID, "kimkimkim"); !errors.Is(err, ErrWeakPassword) {
		t.Fatalf("SetPassword(short) = %v", err)
	}
	if err := e.SetPassword(ctx, u.ID, "new password"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Authenticate(ctx, "kim", "old password"); !errors.Is(err, ErrBadCredentials) {
		t.Errorf("old password: %v", err)
	}
	if _, err := e.Authenticate(ctx, "kim", "new password"); err != nil {
		t.Errorf("new password: %v", err)
	}
	if _, _, err := e.Lookup(ctx, tok); !errors.Is(err, ErrNoSession) {
		t.Errorf("session survived a password change: %v", err)
	}
	if err := e.SetPassword(ctx, "u-000000000000000000000000", "new password"); !errors.Is(err, ErrUserNotFound) {
		t.Errorf("SetPassword(unknown) = %v", err)
	}
}

func TestDeleteUser(t *testing.T) {
	t.Parallel()
	e, ctx := newTestEnv(t, fastOptions())
	u := e.mustRegister(t, "leaver", "leaving password")
	other := e.mustRegister(t, "stayer", "staying password")
	t1, t2, t3 := e.mustSession(t, u.ID), e.mustSession(t, u.ID), e.mustSession(t, other.ID)
	for _, id := range []string{u.ID, other.ID} {
		if _, err := e.PutPreferences(ctx, id, Preferences{Topics: []string{"science"}}); err != nil {
			t.Fatal(err)
		}
	}

	if err := e.DeleteUser(ctx, u.ID); err != nil {
		t.Fatal(err)
	}
	// The store first: Lookup would delete what DeleteUser left.
	if ks := e.keys(t, userSessions(u.ID)); len(ks) != 0 {
		t.Errorf("session index left: %v", ks)
	}
	if ks := e.keys(t, colSessions); len(ks) != 1 {
		t.Errorf("sessions left: %v, want the other user's one", ks)
	}
	for _, tok := range []string{t1, t2} {
		if _, _, err := e.Lookup(ctx, tok); !errors.Is(err, ErrNoSession) {
			t.Errorf("session of a deleted user: %v", err)
		}
	}
	if _, _, err := e.Lookup(ctx, t3); err != nil {
		t.Errorf("other user's session: %v", err)
	}
	if _, err := e.GetUser(ctx, u.ID); !errors.Is(err, ErrUserNotFound) {
		t.Errorf("GetUser after delete: %v", err)
	}
	if _, err := e.Authenticate(ctx, "leaver", "leaving password"); !errors.Is(err, ErrBadCredentials) {
		t.Errorf("Authenticate after delete: %v", err)
	}
	if p, err := e.GetPreferences(ctx, u.ID); err != nil || p.Topics != nil {
		t.Errorf("preferences after delete: %+v, %v", p, err)
	}
	if ks := e.keys(t, colPrefs); fmt.Sprint(ks) != fmt.Sprint([]string{other.ID}) {
		t.Errorf("preferences left: %v", ks)
	}
	if ks := e.keys(t, colUsernames); fmt.Sprint(ks) != "[stayer]" {
		t.Errorf("usernames left: %v", ks)
	}
	if err := e.DeleteUser(ctx, u.ID); !errors.Is(err, ErrUserNotFound) {
		t.Errorf("second DeleteUser = %v", err)
	}
	// The name is free again, for a new account.
	again := e.mustRegister(t, "Leaver", "another password")
	if again.ID == u.ID {
		t.Fatal("id reused")
	}
}

// TestStaleUsername simulates a crash between claiming a name and writing
// the user: the name is free to register.
func TestStaleUsername(t *testing.T) {
	t.Parallel()
	e, ctx := newTestEnv(t, fastOptions())
	if err := e.meta.Put(ctx, colUsernames, "ghost", []byte(`{"id":"u-000000000000000000000000"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.UserByName(ctx, "ghost"); !errors.Is(err, ErrUserNotFound) {
		t.Fatalf("UserByName(stale) = %v", err)
	}
	u := e.mustRegister(t, "ghost", "boo boo boo!")
	if got, err := e.UserByName(ctx, "GHOST"); err != nil || got != u {
		t.Fatalf("UserByName = %+v, %v", got, err)
	}
}

func TestImportUser(t *testing.T) {
	e, ctx := newTestEnv(t, fastOptions())
	hash, err := e.HashPassword("a shared long password")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := e.ImportUser(ctx, fmt.Sprint("bulk", i), RoleUser, hash); err != nil {
			t.Fatal(err)
		}
	}
	if u, err := e.Authenticate(ctx, "bulk2", "a shared long password"); err != nil || u.Username != "bulk2" {
		t.Fatalf("imported user cannot log in: %+v %v", u, err)
	}
	if _, err := e.ImportUser(ctx, "bulk1", RoleUser, hash); !errors.Is(err, ErrUsernameTaken) {
		t.Errorf("duplicate import: %v", err)
	}
	if _, err := e.ImportUser(ctx, "bad", RoleUser, "not a hash"); err == nil {
		t.Error("garbage hash imported")
	}
}

func TestImportRefusesWeakHashes(t *testing.T) {
	e, ctx := newTestEnv(t, Options{})
	weak, _ := bcrypt.GenerateFromPassword([]byte("x"), bcrypt.MinCost)
	if _, err := e.ImportUser(ctx, "weak", RoleUser, string(weak)); err == nil {
		t.Error("a cost-4 hash imported into a cost-12 store")
	}
}
