package webhook

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/internal/testutil"
	"github.com/newsflow/newsflow/operators/story"
)

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
// node stops is cut short after the drain bound and stays in the outbox
// (the webhooks stage's state), not dead-lettered; the next run over the
// same log and state delivers it under the same delivery id, the one
// DeliveryID gives for the hook and the breaking episode.
func TestOutboxResumes(t *testing.T) {
	s := newStage(t)
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
	h := addHook(t, s.store, "u-ann", srv.URL, rcv)
	const drain = 200 * time.Millisecond
	opts := Options{Attempts: 5, Backoff: time.Minute, Timeout: time.Minute, Drain: drain}
	dead := &deadLetters{}
	stop := s.run(opts, runOptions{dead: dead.add})
	s.breaking(episode("quake", "Earthquake", 1000))
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
	if ids := s.pendingIDs(h.ID); !slices.Equal(ids, []string{want}) {
		t.Fatalf("outbox after the stop: %v, want the delivery", ids)
	}
	if len(dead.list()) != 0 {
		t.Errorf("dead letters at the stop: %v", dead.list())
	}

	s.run(opts, runOptions{dead: dead.add})
	waitFor(t, 5*time.Second, func() bool { return len(rcv.deliveries()) == 1 }, "the delivery resumed")
	if p := rcv.deliveries()[0]; p.Delivery != want || p.Story.ID != "quake" || p.Hook != h.ID {
		t.Errorf("resumed payload %+v", p)
	}
	waitFor(t, 5*time.Second, func() bool { return len(s.pendingIDs("")) == 0 }, "the outbox empty once delivered")
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
	s := newStage(t)
	store := s.store
	hole := testutil.NewBlackHole(t)
	for range MaxPerUser {
		addHook(t, store, "u-mallory", "http://"+hole.Addr()+"/hook", nil)
	}
	rcv := &receiver{t: t}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	addHook(t, store, "u-bob", srv.URL, rcv)
	const timeout = time.Second
	opts := Options{Attempts: 3, Backoff: 100 * time.Millisecond, Timeout: timeout}
	s.run(opts, runOptions{dead: (&deadLetters{}).add})

	began := time.Now()
	s.breaking(episode("quake", "Earthquake", 1000))
	waitFor(t, 5*time.Second, func() bool { return len(rcv.deliveries()) == 1 }, "bob's first delivery")
	lag1 := time.Since(began)
	// Mallory's first tries time out and fall due again 100 ms later,
	// with the tries her other hooks have not made yet.
	waitFor(t, 10*time.Second, func() bool { return hole.Accepted() >= 4 }, "a second round of tries to the black hole")
	began = time.Now()
	s.breaking(episode("flood", "Flood", 2000))
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
// restarts; they leave the outbox untried when they fall due, as does a
// delivery imported for a hook that is gone.
func TestDeletedOwnerPending(t *testing.T) {
	ctx := t.Context()
	s := newStage(t)
	store := s.store
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
	// Retries 300 ms apart: they fall due within the test.
	opts := Options{Attempts: 100, Backoff: 300 * time.Millisecond, MaxBackoff: 300 * time.Millisecond, Timeout: time.Second}
	stop := s.run(opts, runOptions{dead: (&deadLetters{}).add})
	s.breaking(episode("quake", "Earthquake", 1000))
	waitFor(t, 5*time.Second, func() bool {
		s1, _ := store.Status(ctx, ah1.ID)
		s2, _ := store.Status(ctx, ah2.ID)
		return s1.Retried >= 1 && s2.Retried >= 1 && len(bob.deliveries()) == 1
	}, "ann's hooks failed, bob's delivered")
	stop()
	if ids := s.pendingIDs(""); len(ids) != 2 {
		t.Fatalf("outbox %v, want ann's two deliveries", ids)
	}
	if n, err := store.DeleteOwner(ctx, "u-ann"); err != nil || n != 2 {
		t.Fatalf("delete ann's hooks: %d %v", n, err)
	}
	// A delivery of a hook that is gone, as an older release's outbox
	// may hold.
	stale := pending{ID: "stale", Hook: "gone-hook", Owner: "u-carol", Body: json.RawMessage(`{}`)}
	if err := s.log.Append(ctx, []*eventlog.Record{Event{Kind: EventImported, Hook: stale.Hook, ID: stale.ID, Pending: &stale}.Record(time.Now())}); err != nil {
		t.Fatal(err)
	}
	tries := ann.tries.Load() + ann2.tries.Load()
	ann.status.Store(0)
	ann2.status.Store(0)
	s.run(opts, runOptions{dead: (&deadLetters{}).add})
	waitFor(t, 5*time.Second, func() bool { return len(s.pendingIDs("")) == 0 }, "ann's and the stale deliveries dropped")
	s.breaking(episode("flood", "Flood", 2000))
	waitFor(t, 5*time.Second, func() bool { return len(bob.deliveries()) == 2 }, "bob's second delivery")
	if n := ann.tries.Load() + ann2.tries.Load(); n != tries {
		t.Errorf("ann's hooks were tried %d times after her account went", n-tries)
	}
}

// TestAnnounceOnce: an episode emitted again (the stories task applies its
// records again after a crash, or the stories stage is replayed from the
// log: the same articles offset) is announced once, also across a
// restart; a new episode of the same story is a new delivery.
func TestAnnounceOnce(t *testing.T) {
	s := newStage(t)
	rcv := &receiver{t: t}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	h := addHook(t, s.store, "u-ann", srv.URL, rcv)
	opts := Options{Attempts: 5, Backoff: time.Second, Timeout: time.Second}
	stop := s.run(opts, runOptions{dead: (&deadLetters{}).add})
	s.breakingAt(episode("quake", "Earthquake", 1000), 10)
	s.breakingAt(episode("quake", "Earthquake", 1000), 10)
	waitFor(t, 5*time.Second, func() bool { return len(rcv.deliveries()) == 1 && len(s.pendingIDs("")) == 0 }, "the delivery done")
	stop()
	s.run(opts, runOptions{dead: (&deadLetters{}).add})
	s.breakingAt(episode("quake", "Earthquake", 1000), 10)
	// A replay of the stories stage from a later point makes other
	// stories, with other episodes, of articles announced before.
	s.breakingAt(episode("quake-replayed", "Earthquake", 1500), 10)
	s.breakingAt(episode("flood", "Flood", 2000), 20) // after them in the log: once flood is delivered, they were applied
	waitFor(t, 5*time.Second, func() bool { return len(rcv.deliveries()) == 2 }, "flood delivered")
	s.breakingAt(episode("quake", "Earthquake again", 9000), 30)
	waitFor(t, 5*time.Second, func() bool { return len(rcv.deliveries()) == 3 }, "the second episode delivered")
	var ids []string
	for _, p := range rcv.deliveries() {
		ids = append(ids, p.Delivery)
	}
	want := []string{DeliveryID(h.ID, "quake", 1000), DeliveryID(h.ID, "flood", 2000), DeliveryID(h.ID, "quake", 9000)}
	if !slices.Equal(ids, want) {
		t.Errorf("deliveries %v, want %v", ids, want)
	}
}

// TestOutboxMigrates: deliveries an older release left in the metadata
// store's outbox are moved into the stage, delivered under their ids, and
// gone from the metadata store with its announced mark.
func TestOutboxMigrates(t *testing.T) {
	ctx := t.Context()
	s := newStage(t)
	rcv := &receiver{t: t}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	h := addHook(t, s.store, "u-ann", srv.URL, rcv)
	id := DeliveryID(h.ID, "quake", 1000)
	body, _ := json.Marshal(Payload{Event: eventBreaking, Delivery: id, Hook: h.ID, SentAt: 1000, Story: story.Ranked{Story: episode("quake", "Earthquake", 1000)}})
	old, _ := json.Marshal(pending{ID: id, Hook: h.ID, Owner: "u-ann", NextAt: 1000, Body: body})
	if err := s.meta.Put(ctx, colOutbox, h.ID+"/"+id, old); err != nil {
		t.Fatal(err)
	}
	if err := s.meta.Put(ctx, colState, "announced", []byte(`{"at":1000,"ids":["quake"]}`)); err != nil {
		t.Fatal(err)
	}
	s.run(Options{Attempts: 5, Backoff: time.Second, Timeout: time.Second}, runOptions{dead: (&deadLetters{}).add})
	waitFor(t, 5*time.Second, func() bool { return len(rcv.deliveries()) == 1 }, "the old delivery delivered")
	if p := rcv.deliveries()[0]; p.Delivery != id || p.Story.ID != "quake" {
		t.Errorf("delivery %+v", p)
	}
	n := 0
	if err := s.meta.Scan(ctx, colOutbox, func(string, []byte) error { n++; return nil }); err != nil || n != 0 {
		t.Errorf("the metadata store's outbox holds %d entries (%v), want none", n, err)
	}
	if _, ok, _ := s.meta.Get(ctx, colState, "announced"); ok {
		t.Error("the old announced mark is still there")
	}
	waitFor(t, 5*time.Second, func() bool { return len(s.pendingIDs("")) == 0 }, "the outbox empty")
}

// TestOutboxFull: past Options.Queue deliveries pending, a new one is
// dead-lettered at once with the reason, untried.
func TestOutboxFull(t *testing.T) {
	s := newStage(t)
	var tries atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		tries.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	for range 3 {
		addHook(t, s.store, "u-ann", srv.URL, nil)
	}
	dead := &deadLetters{}
	s.run(Options{Attempts: 100, Backoff: time.Minute, Timeout: time.Second, Queue: 2}, runOptions{dead: dead.add})
	s.breaking(episode("quake", "Earthquake", 1000))
	waitFor(t, 5*time.Second, func() bool { return len(dead.list()) == 1 && tries.Load() == 2 }, "one dead letter, two tries")
	if l := dead.list(); !strings.HasSuffix(l[0], ": too many deliveries pending") {
		t.Errorf("dead letter %q", l[0])
	}
	waitFor(t, 5*time.Second, func() bool { return len(s.pendingIDs("")) == 2 }, "two deliveries left waiting")
}
