package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/newsflow/newsflow/internal/meta"
	"github.com/newsflow/newsflow/state/statetest"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// receiver records the deliveries it accepts, checking their signature.
type receiver struct {
	t      *testing.T
	secret func() string
	status atomic.Int32
	mu     sync.Mutex
	got    []Payload
	at     []time.Time
	tries  atomic.Int32
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.tries.Add(1)
	body, _ := io.ReadAll(req.Body)
	ts, err := strconv.ParseInt(req.Header.Get("X-Newsflow-Timestamp"), 10, 64)
	if err != nil || req.Header.Get("X-Newsflow-Signature") != Sign(r.secret(), ts, body) || req.Header.Get("Content-Type") != "application/json" {
		r.t.Errorf("delivery with a bad signature or headers: %v", req.Header)
	}
	if s := int(r.status.Load()); s != 0 {
		w.WriteHeader(s)
		return
	}
	var p Payload
	if err := json.Unmarshal(body, &p); err != nil || p.Delivery != req.Header.Get("X-Newsflow-Delivery") || p.Event != req.Header.Get("X-Newsflow-Event") {
		r.t.Errorf("payload %s: %v", body, err)
	}
	r.mu.Lock()
	r.got, r.at = append(r.got, p), append(r.at, time.Now())
	r.mu.Unlock()
}

func (r *receiver) deliveries() []Payload {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Payload(nil), r.got...)
}

// value is a gauge's or a counter's value.
func value(t *testing.T, m prometheus.Metric) float64 {
	t.Helper()
	var pb dto.Metric
	if err := m.Write(&pb); err != nil {
		t.Fatal(err)
	}
	if pb.Gauge != nil {
		return pb.Gauge.GetValue()
	}
	return pb.Counter.GetValue()
}

type deadLetters struct {
	mu      sync.Mutex
	reasons []string
}

func (d *deadLetters) add(_ context.Context, h Hook, body []byte, reason string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.reasons = append(d.reasons, h.ID+": "+reason)
	return nil
}

func (d *deadLetters) list() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.reasons...)
}

func waitFor(t *testing.T, d time.Duration, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestDeliveries: a story that becomes breaking reaches, signed, within
// 5 s, the hooks whose filters it passes and no other; a receiver that fails is retried with backoff, then the delivery is
// dead-lettered with its reason, while other hooks keep getting theirs;
// a node that is not the writer delivers nothing.
func TestDeliveries(t *testing.T) {
	ctx := t.Context()
	s := newStage(t)
	store := s.store
	var writer atomic.Bool
	writer.Store(true)
	good := &receiver{t: t}
	bad := &receiver{t: t}
	bad.status.Store(http.StatusServiceUnavailable)
	sport := &receiver{t: t}
	goodSrv, badSrv, sportSrv := httptest.NewServer(good), httptest.NewServer(bad), httptest.NewServer(sport)
	defer goodSrv.Close()
	defer badSrv.Close()
	defer sportSrv.Close()
	gh, err := store.Add(ctx, "u-ann", goodSrv.URL+"/hook", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	bh, _ := store.Add(ctx, "u-ann", badSrv.URL, nil, nil)
	sh, _ := store.Add(ctx, "u-bob", sportSrv.URL, []string{"sport"}, nil)
	good.secret = func() string { return gh.Secret }
	bad.secret = func() string { return bh.Secret }
	sport.secret = func() string { return sh.Secret }

	dead := &deadLetters{}
	s.run(Options{Attempts: 3, Backoff: 50 * time.Millisecond, Timeout: time.Second}, runOptions{dead: dead.add, writer: writer.Load})
	d := s.dispatcher()

	breakingAt := time.Now()
	s.breaking(episode("quake", "Earthquake", 200, "world"))
	s.breaking(episode("final", "Cup final", 200, "sport"))
	waitFor(t, 5*time.Second, func() bool { return len(good.deliveries()) == 2 && len(sport.deliveries()) == 1 },
		"quake and final delivered to the catch-all hook, final to the sport hook")
	good.mu.Lock()
	latest := good.at[len(good.at)-1]
	good.mu.Unlock()
	if lag := latest.Sub(breakingAt); lag > 5*time.Second {
		t.Errorf("delivered %v after the stories became breaking, want <= 5s", lag)
	}
	ids := map[string]bool{}
	for _, p := range good.deliveries() {
		ids[p.Story.ID] = true
		if p.Event != "story.breaking" || p.Hook != gh.ID || p.Story.Title == "" {
			t.Errorf("payload %+v", p)
		}
	}
	if len(ids) != 2 || !ids["quake"] || !ids["final"] {
		t.Errorf("announced %v, want quake and final", ids)
	}
	if got := sport.deliveries(); got[0].Story.ID != "final" {
		t.Errorf("sport hook got %+v", got)
	}
	// The failing receiver: 3 tries, then a dead letter each.
	waitFor(t, 5*time.Second, func() bool { return len(dead.list()) == 2 }, "two dead letters for the failing hook")
	if n := bad.tries.Load(); n != 6 {
		t.Errorf("the failing hook was tried %d times, want 3 per story", n)
	}
	for _, r := range dead.list() {
		if r != bh.ID+": 3 tries failed, the last: HTTP 503" {
			t.Errorf("dead letter %q", r)
		}
	}
	for outcome, want := range map[string]float64{outcomeDelivered: 3, outcomeFailed: 4, outcomeDeadLettered: 2, outcomeDropped: 0} {
		if got := value(t, d.metrics.tries.WithLabelValues(outcome)); got != want {
			t.Errorf("newsflow_webhook_tries_total{outcome=%q} = %v, want %v", outcome, got, want)
		}
	}
	waitFor(t, 5*time.Second, func() bool { return value(t, d.metrics.pending) == 0 }, "nothing pending")
	st, err := store.Status(ctx, bh.ID)
	if err != nil || st.DeadLettered != 2 || st.Retried != 6 || st.LastStatus != 503 || st.Delivered != 0 {
		t.Errorf("status of the failing hook: %+v %v", st, err)
	}
	if st, _ := store.Status(ctx, gh.ID); st.Delivered != 2 || st.DeadLettered != 0 {
		t.Errorf("status of the good hook: %+v", st)
	}

	// Not the writer: nothing is delivered; the node that becomes the
	// writer delivers what became breaking meanwhile, once.
	writer.Store(false)
	time.Sleep(100 * time.Millisecond)
	s.breaking(episode("late", "Late", 300))
	time.Sleep(2500 * time.Millisecond)
	if n := len(good.deliveries()); n != 2 {
		t.Errorf("a node that is not the writer delivered: %d deliveries", n)
	}
	writer.Store(true)
	waitFor(t, 5*time.Second, func() bool { return len(good.deliveries()) == 3 }, "late delivered by the new writer")
	time.Sleep(1500 * time.Millisecond)
	if got := good.deliveries(); len(got) != 3 || got[2].Story.ID != "late" {
		t.Errorf("deliveries after the writer came back: %+v", got)
	}
}

// TestStore: hooks are validated, owned, limited and deleted with their
// status.
func TestStore(t *testing.T) {
	ctx := t.Context()
	store := NewStore(meta.NewLocal(statetest.Open(t)), nil, true)
	for _, bad := range []string{"ftp://example.org/x", "/relative", "", "http://"} {
		if _, err := store.Add(ctx, "u-ann", bad, nil, nil); !errors.Is(err, ErrInvalid) {
			t.Errorf("URL %q: %v", bad, err)
		}
	}
	strict := NewStore(meta.NewLocal(statetest.Open(t)), nil, false)
	if _, err := strict.Add(ctx, "u-ann", "http://example.org/hook", nil, nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("an http hook without allow_http: %v", err)
	}
	if _, err := strict.Add(ctx, "u-ann", "https://example.org/hook", nil, nil); err != nil {
		t.Errorf("an https hook: %v", err)
	}
	if _, err := store.Add(ctx, "u-ann", "https://example.org/hook", []string{""}, nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("empty topic: %v", err)
	}
	var first Hook
	for i := range MaxPerUser {
		h, err := store.Add(ctx, "u-ann", "https://example.org/hook/"+strconv.Itoa(i), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = h
		}
	}
	if _, err := store.Add(ctx, "u-ann", "https://example.org/more", nil, nil); !errors.Is(err, ErrTooMany) {
		t.Errorf("one too many: %v", err)
	}
	if err := store.Delete(ctx, "u-bob", first.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("bob deletes ann's hook: %v", err)
	}
	if err := store.Delete(ctx, "u-ann", first.ID); err != nil {
		t.Fatal(err)
	}
	if hs, _ := store.List(ctx, "u-ann"); len(hs) != MaxPerUser-1 {
		t.Errorf("%d hooks after deleting one", len(hs))
	}
	if hs, _ := store.List(ctx, "u-bob"); len(hs) != 0 {
		t.Errorf("bob lists %d hooks", len(hs))
	}
}
