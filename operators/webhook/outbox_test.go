package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/newsflow/newsflow/internal/meta"
	"github.com/newsflow/newsflow/internal/testutil"
	"github.com/newsflow/newsflow/operators/story"
	"github.com/newsflow/newsflow/state/statetest"
)

// startDispatcher runs a dispatcher of the writer's node until the
// returned stop (or the test's end); stop returns once Run did.
func startDispatcher(t *testing.T, opts Options, store *Store, stories Breaking, dead DeadLetter) (stop func()) {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{}}
	d, err := New(opts, store, stories, client, dead, func() bool { return true }, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func addHook(t *testing.T, store *Store, owner, url string, r *receiver) Hook {
	t.Helper()
	h, err := store.Add(t.Context(), owner, url, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r != nil {
		r.secret = func() string { return h.Secret }
	}
	return h
}

// TestOutboxResumes: a delivery whose try is still in flight when the
// dispatcher stops (the node shuts down) is cut short after the drain
// bound and stays in the outbox, not dead-lettered; the next dispatcher
// over the same store delivers it under the same delivery id, the one
// DeliveryID gives for the hook and the breaking episode. Whether the
// metadata store writes the outbox and the mark in one batch (a node's
// own) or one after the other (a cluster's).
func TestOutboxResumes(t *testing.T) {
	t.Run("batch", func(t *testing.T) { testOutboxResumes(t, meta.NewLocal(statetest.Open(t))) })
	t.Run("ordered", func(t *testing.T) { testOutboxResumes(t, struct{ meta.Store }{meta.NewLocal(statetest.Open(t))}) })
}

func testOutboxResumes(t *testing.T, m meta.Store) {
	ctx := t.Context()
	store := NewStore(m, nil, true)
	rcv := &receiver{t: t}
	var tries atomic.Int32
	var firstID atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tries.Add(1) == 1 {
			firstID.Store(r.Header.Get("X-Newsflow-Delivery"))
			_, _ = io.ReadAll(r.Body) // then the server notices when the sender hangs up
			<-r.Context().Done()      // the first try hangs until the sender gives up
			return
		}
		rcv.ServeHTTP(w, r)
	}))
	defer srv.Close()
	h := addHook(t, store, "u-ann", srv.URL, rcv)
	stories := &breakingNow{}
	const drain = 200 * time.Millisecond
	opts := Options{Attempts: 5, Backoff: time.Minute, Timeout: time.Minute, Every: 20 * time.Millisecond, Drain: drain}
	dead := &deadLetters{}
	stop := startDispatcher(t, opts, store, stories, dead.add)
	stories.set(&story.Story{ID: "quake", Title: "Earthquake", BreakingAt: 1000})
	want := DeliveryID(h.ID, "quake", 1000)
	waitFor(t, 5*time.Second, func() bool { return tries.Load() == 1 }, "a first try")
	began := time.Now()
	stop()
	if took := time.Since(began); took > drain+time.Second {
		t.Errorf("the stop took %v with a try in flight, want about the drain bound %v", took, drain)
	}
	if id, _ := firstID.Load().(string); id != want {
		t.Errorf("delivery id %q, want %q", id, want)
	}
	if ids, err := store.pendingIDs(ctx, h.ID); err != nil || !slices.Equal(ids, []string{want}) {
		t.Fatalf("outbox after the stop: %v %v, want the delivery", ids, err)
	}
	if len(dead.list()) != 0 {
		t.Errorf("dead letters at the stop: %v", dead.list())
	}

	startDispatcher(t, opts, store, stories, dead.add)
	waitFor(t, 5*time.Second, func() bool { return len(rcv.deliveries()) == 1 }, "the delivery resumed")
	if p := rcv.deliveries()[0]; p.Delivery != want || p.Story.ID != "quake" || p.Hook != h.ID {
		t.Errorf("resumed payload %+v", p)
	}
	waitFor(t, 5*time.Second, func() bool { ids, _ := store.pendingIDs(ctx, ""); return len(ids) == 0 }, "the outbox empty once delivered")
	if n := tries.Load(); n != 2 {
		t.Errorf("%d tries, want 2 (one cut short, one delivered)", n)
	}
}

// TestBlackHoleFair: one user's ten hooks to an address that accepts the
// connection and never answers delay another user's delivery by less
// than one try's timeout, also while their retries wait; that user's
// tries hold at most half the workers at once: as each lasts the
// timeout, no three of them start within much less.
func TestBlackHoleFair(t *testing.T) {
	store := NewStore(meta.NewLocal(statetest.Open(t)), nil, true)
	hole := testutil.NewBlackHole(t)
	for range MaxPerUser {
		addHook(t, store, "u-mallory", "http://"+hole.Addr()+"/hook", nil)
	}
	rcv := &receiver{t: t}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	addHook(t, store, "u-bob", srv.URL, rcv)
	stories := &breakingNow{}
	const timeout = time.Second
	opts := Options{Attempts: 3, Backoff: 100 * time.Millisecond, Timeout: timeout, Every: 20 * time.Millisecond}
	startDispatcher(t, opts, store, stories, (&deadLetters{}).add)

	first := &story.Story{ID: "quake", Title: "Earthquake", BreakingAt: 1000}
	began := time.Now()
	stories.set(first)
	waitFor(t, 5*time.Second, func() bool { return len(rcv.deliveries()) == 1 }, "bob's first delivery")
	lag1 := time.Since(began)
	// Mallory's first tries time out and fall due again 100 ms later,
	// with the tries her other hooks have not made yet.
	waitFor(t, 10*time.Second, func() bool { return hole.Accepted() >= 4 }, "a second round of tries to the black hole")
	began = time.Now()
	stories.set(first, &story.Story{ID: "flood", Title: "Flood", BreakingAt: 2000})
	waitFor(t, 5*time.Second, func() bool { return len(rcv.deliveries()) == 2 }, "bob's second delivery")
	lag2 := time.Since(began)
	crowded := hole.Crowded(2)
	t.Logf("bob's deliveries %v and %v after the stories became breaking; %d tries to the black hole, three of them within %v at least",
		lag1.Round(time.Millisecond), lag2.Round(time.Millisecond), hole.Accepted(), crowded.Round(time.Millisecond))
	for _, lag := range []time.Duration{lag1, lag2} {
		if lag > timeout+500*time.Millisecond {
			t.Errorf("bob's delivery took %v, want at most the try timeout %v and 500ms", lag, timeout)
		}
	}
	if crowded < timeout/2 { // three at once start within milliseconds; the half spares a slow accept
		t.Errorf("three tries to mallory's hooks began within %v, want at most 2 at once (half the 4 workers) for the try timeout %v", crowded, timeout)
	}
}

// TestDeletedOwnerPending: a user's deliveries waiting in the outbox go
// with the account: none is tried again, whether the dispatcher runs or
// restarts, and a delivery left by a crash for a hook that is gone leaves
// the outbox untried.
func TestDeletedOwnerPending(t *testing.T) {
	ctx := t.Context()
	store := NewStore(meta.NewLocal(statetest.Open(t)), nil, true)
	ann, ann2, bob := &receiver{t: t}, &receiver{t: t}, &receiver{t: t}
	ann.status.Store(http.StatusServiceUnavailable)
	ann2.status.Store(http.StatusServiceUnavailable)
	annSrv, ann2Srv, bobSrv := httptest.NewServer(ann), httptest.NewServer(ann2), httptest.NewServer(bob)
	defer annSrv.Close()
	defer ann2Srv.Close()
	defer bobSrv.Close()
	ah1 := addHook(t, store, "u-ann", annSrv.URL, ann)
	ah2 := addHook(t, store, "u-ann", ann2Srv.URL, ann2)
	addHook(t, store, "u-bob", bobSrv.URL, bob)
	stories := &breakingNow{}
	opts := Options{Attempts: 100, Backoff: time.Minute, Timeout: time.Second, Every: 20 * time.Millisecond}
	stop := startDispatcher(t, opts, store, stories, (&deadLetters{}).add)
	stories.set(&story.Story{ID: "quake", Title: "Earthquake", BreakingAt: 1000})
	waitFor(t, 5*time.Second, func() bool {
		s1, _ := store.Status(ctx, ah1.ID)
		s2, _ := store.Status(ctx, ah2.ID)
		return s1.Retried == 1 && s2.Retried == 1 && len(bob.deliveries()) == 1
	}, "ann's hooks failed once, bob's delivered")
	stop()
	if ids, _ := store.pendingIDs(ctx, ""); len(ids) != 2 {
		t.Fatalf("outbox %v, want ann's two deliveries", ids)
	}
	// A crash after a hook went but before its deliveries did.
	stale := pending{ID: "stale", Hook: "gone-hook", Owner: "u-carol", Body: json.RawMessage(`{}`)}
	if err := store.putPending(ctx, stale); err != nil {
		t.Fatal(err)
	}
	if n, err := store.DeleteOwner(ctx, "u-ann"); err != nil || n != 2 {
		t.Fatalf("delete ann's hooks: %d %v", n, err)
	}
	if ids, _ := store.pendingIDs(ctx, ""); !slices.Equal(ids, []string{"stale"}) {
		t.Errorf("outbox after ann went: %v, want only the stale delivery", ids)
	}
	tries := ann.tries.Load() + ann2.tries.Load()
	ann.status.Store(0)
	ann2.status.Store(0)
	startDispatcher(t, opts, store, stories, (&deadLetters{}).add)
	waitFor(t, 5*time.Second, func() bool { ids, _ := store.pendingIDs(ctx, ""); return len(ids) == 0 }, "the stale delivery dropped")
	stories.set(&story.Story{ID: "quake", Title: "Earthquake", BreakingAt: 1000}, &story.Story{ID: "flood", Title: "Flood", BreakingAt: 2000})
	waitFor(t, 5*time.Second, func() bool { return len(bob.deliveries()) == 2 }, "bob's second delivery")
	if n := ann.tries.Load() + ann2.tries.Load(); n != tries {
		t.Errorf("ann's hooks were tried %d times after her account went", n-tries)
	}
}

// failingMark is a metadata store without batches whose writes of the
// announced mark fail while fail is set: a crash between a delivery's
// outbox entry and the mark.
type failingMark struct {
	meta.Store
	fail atomic.Bool
}

func (f *failingMark) Put(ctx context.Context, collection, key string, value []byte) error {
	if collection == colState && f.fail.Load() {
		return errors.New("the disk is gone")
	}
	return f.Store.Put(ctx, collection, key, value)
}

// TestAnnounceTornWrite: on a store that writes the outbox entries, then
// the mark, a dispatcher stops after the entries while the mark stayed
// behind; the next one announces the story again under the same delivery
// id: the receiver gets it once, not twice, and nothing is left pending.
func TestAnnounceTornWrite(t *testing.T) {
	ctx := t.Context()
	m := &failingMark{Store: meta.NewLocal(statetest.Open(t))}
	m.fail.Store(true)
	store := NewStore(m, nil, true)
	rcv := &receiver{t: t}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	h := addHook(t, store, "u-ann", srv.URL, rcv)
	stories := &breakingNow{}
	stories.set(&story.Story{ID: "quake", Title: "Earthquake", BreakingAt: 1000})
	opts := Options{Attempts: 5, Backoff: time.Second, Timeout: time.Second, Every: 20 * time.Millisecond}
	stop := startDispatcher(t, opts, store, stories, (&deadLetters{}).add)
	want := DeliveryID(h.ID, "quake", 1000)
	waitFor(t, 5*time.Second, func() bool { ids, _ := store.pendingIDs(ctx, ""); return slices.Equal(ids, []string{want}) }, "the entry written")
	stop()
	if n := rcv.tries.Load(); n != 0 {
		t.Fatalf("%d tries before the mark moved", n)
	}
	if mk, _ := store.announced(ctx); mk.At != 0 {
		t.Fatalf("the mark moved: %+v", mk)
	}
	m.fail.Store(false)
	startDispatcher(t, opts, store, stories, (&deadLetters{}).add)
	waitFor(t, 5*time.Second, func() bool { ids, _ := store.pendingIDs(ctx, ""); return len(ids) == 0 }, "the delivery done")
	waitFor(t, 5*time.Second, func() bool { mk, _ := store.announced(ctx); return mk.At == 1000 }, "the mark moved")
	if got := rcv.deliveries(); len(got) != 1 || got[0].Delivery != want {
		t.Errorf("deliveries %+v, want one with id %s", got, want)
	}
}
