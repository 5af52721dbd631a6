package auth

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/crypto/bcrypt"

	"github.com/newsflow/newsflow/internal/meta"
	"github.com/newsflow/newsflow/internal/testutil"
	"github.com/newsflow/newsflow/state"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newClock returns the clock of a test: it starts at noon on 1 March 2026
// and moves when the test says.
func newClock() *testutil.Clock {
	return testutil.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
}

// recordingStore is a meta.Store that remembers every key and value
// written through it.
type recordingStore struct {
	meta.Store
	mu     sync.Mutex
	writes []string // collection, key and value of each write
}

func (r *recordingStore) record(parts ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes = append(r.writes, parts...)
}

func (r *recordingStore) Put(ctx context.Context, c, k string, v []byte) error {
	r.record(c, k, string(v))
	return r.Store.Put(ctx, c, k, v)
}

func (r *recordingStore) PutLazy(ctx context.Context, c, k string, v []byte) error {
	r.record(c, k, string(v))
	return r.Store.PutLazy(ctx, c, k, v)
}

func (r *recordingStore) Delete(ctx context.Context, c, k string) error {
	r.record(c, k)
	return r.Store.Delete(ctx, c, k)
}

func (r *recordingStore) written() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.writes...)
}

// testEnv is a Store on a real state database in a temporary directory.
type testEnv struct {
	*Store
	clock *testutil.Clock
	meta  *recordingStore
	db    *state.DB
	dir   string
	once  sync.Once
}

// fastOptions hash at bcrypt.MinCost, so tests run quickly.
func fastOptions() Options {
	return Options{BcryptCost: bcrypt.MinCost, AllowWeakCostForTests: true}
}

// newTestEnv returns a Store on a fresh database, closed when the test ends,
// and the test's context to call it with.
func newTestEnv(t testing.TB, opts Options) (*testEnv, context.Context) {
	t.Helper()
	dir := t.TempDir()
	db, err := state.Open(dir, state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := &testEnv{clock: newClock(), meta: &recordingStore{Store: meta.NewLocal(db)}, db: db, dir: dir}
	t.Cleanup(func() { e.close(t) })
	e.Store, err = NewStore(e.meta, e.clock.Now, opts)
	if err != nil {
		t.Fatal(err)
	}
	return e, t.Context()
}

// close closes the database; later calls do nothing.
func (e *testEnv) close(t testing.TB) {
	e.once.Do(func() {
		if err := e.db.Close(); err != nil {
			t.Error(err)
		}
	})
}

// keys returns the keys of a collection.
func (e *testEnv) keys(t testing.TB, collection string) []string {
	t.Helper()
	var ks []string
	if err := e.meta.Scan(t.Context(), collection, func(k string, _ []byte) error {
		ks = append(ks, k)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return ks
}

// mustRegister registers a user or fails the test.
func (e *testEnv) mustRegister(t testing.TB, name, password string) User {
	t.Helper()
	u, err := e.Register(t.Context(), name, password)
	if err != nil {
		t.Fatalf("Register(%q): %v", name, err)
	}
	return u
}

// mustSession creates a session or fails the test.
func (e *testEnv) mustSession(t testing.TB, userID string) string {
	t.Helper()
	tok, _, err := e.NewSession(t.Context(), userID)
	if err != nil {
		t.Fatalf("NewSession(%s): %v", userID, err)
	}
	return tok
}
