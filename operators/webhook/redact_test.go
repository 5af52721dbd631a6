package webhook

import (
	"bytes"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// syncBuffer is a log sink safe for the dispatcher's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// runDispatcher runs s with a dispatcher that checks every 10 ms, logs at
// Debug to log, and stops with the test.
func runDispatcher(s *stage, opts Options, log *syncBuffer, dead DeadLetter) {
	opts.Every = 10 * time.Millisecond
	s.run(opts, runOptions{dead: dead, logger: slog.New(slog.NewJSONHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))})
}

// A hook URL's credentials (its userinfo, a token in its query) appear in
// no log line of its deliveries, in no dead letter and in no status, also
// when the delivery fails with an error that quotes the URL.
func TestDeliveryLogsNoCredentials(t *testing.T) {
	ctx := t.Context()
	s := newStage(t)
	store := s.store
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusBadGateway) }))
	defer failing.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := ln.Addr().String() // nothing listens there
	ln.Close()
	secrets := []string{"hunter22", "t0k3nvalue", "s1gvalue"}
	var hooks []Hook
	for _, base := range []string{failing.URL, "http://" + down} {
		u := strings.Replace(base, "http://", "http://ann:hunter22@", 1) + "/hook?token=t0k3nvalue&sig=s1gvalue&topic=world"
		h, err := store.Add(ctx, "u-ann", u, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		hooks = append(hooks, h)
	}
	var log syncBuffer
	dead := &deadLetters{}
	runDispatcher(s, Options{Attempts: 2, Backoff: time.Millisecond, Timeout: time.Second}, &log, dead.add)
	s.breaking(episode("quake", "Earthquake", 100))
	waitFor(t, 5*time.Second, func() bool { return len(dead.list()) == 2 }, "both deliveries dead-lettered")

	out := log.String()
	if !strings.Contains(out, "dead-lettered") || !strings.Contains(out, "127.0.0.1") || !strings.Contains(out, "connection refused") {
		t.Fatalf("the log does not say what failed where:\n%s", out)
	}
	var texts []string
	texts = append(texts, out)
	texts = append(texts, dead.list()...)
	for _, h := range hooks {
		st, err := store.Status(ctx, h.ID)
		if err != nil || st.DeadLettered != 1 {
			t.Fatalf("status %+v %v", st, err)
		}
		texts = append(texts, st.LastError)
	}
	for _, text := range texts {
		for _, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("%q in %s", s, text)
			}
		}
	}
}

// The hooks of an owner who is deleted never fire again: none is
// announced to them, and a delivery waiting for its retry is dropped;
// other owners' hooks go on.
func TestDeletedOwnersHooksNeverFire(t *testing.T) {
	ctx := t.Context()
	s := newStage(t)
	store := s.store
	var annTries, bobGot atomic.Int32
	ann := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		annTries.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer ann.Close()
	bob := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { bobGot.Add(1) }))
	defer bob.Close()
	for _, u := range []string{ann.URL + "/a", ann.URL + "/b"} {
		if _, err := store.Add(ctx, "u-ann", u, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := store.Add(ctx, "u-bob", bob.URL, nil, nil); err != nil {
		t.Fatal(err)
	}
	var log syncBuffer
	dead := &deadLetters{}
	// Retries far apart: ann's deliveries wait for their second try
	// when her account goes.
	runDispatcher(s, Options{Attempts: 3, Backoff: 300 * time.Millisecond, MaxBackoff: 300 * time.Millisecond, Timeout: time.Second},
		&log, dead.add)
	s.breaking(episode("quake", "", 100))
	waitFor(t, 5*time.Second, func() bool { return annTries.Load() == 2 && bobGot.Load() == 1 }, "the first tries")
	n, err := store.DeleteOwner(ctx, "u-ann")
	if err != nil || n != 2 {
		t.Fatalf("DeleteOwner: %d %v", n, err)
	}
	if hs, _ := store.List(ctx, "u-ann"); len(hs) != 0 {
		t.Fatalf("ann's hooks after DeleteOwner: %+v", hs)
	}
	waitFor(t, 5*time.Second, func() bool { return strings.Count(log.String(), "the hook was deleted") == 2 }, "ann's retries dropped")
	s.breaking(episode("final", "", 200))
	waitFor(t, 5*time.Second, func() bool { return bobGot.Load() == 2 }, "bob's hook gets the next story")
	if got := annTries.Load(); got != 2 {
		t.Errorf("ann's receiver was tried %d times, want the 2 first tries only", got)
	}
	if l := dead.list(); len(l) != 0 {
		t.Errorf("dead letters for hooks deleted with their owner: %v", l)
	}
	if _, err := store.DeleteOwner(ctx, ""); err == nil {
		t.Error("DeleteOwner of no owner deleted every hook")
	}
}
