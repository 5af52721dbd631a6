package crawl

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/internal/meta"
	"github.com/newsflow/newsflow/state"
)

func newSources(t *testing.T) (*Sources, func() *Sources) {
	t.Helper()
	dir := t.TempDir()
	db, err := state.Open(dir, state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := func() time.Time { return now }
	reopen := func() *Sources {
		db.Close()
		db, err = state.Open(dir, state.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return NewSources(meta.NewLocal(db), clock)
	}
	t.Cleanup(func() { db.Close() })
	return NewSources(meta.NewLocal(db), clock), reopen
}

func TestSourcesCRUD(t *testing.T) {
	ss, reopen := newSources(t)
	ctx := context.Background()
	s, err := ss.Add(ctx, Source{FeedURL: "https://example.com/feed.xml", Category: " World "})
	if err != nil {
		t.Fatal(err)
	}
	if s.ID != SourceID("https://example.com/feed.xml") || s.Name != "example.com" || s.Category != "world" ||
		s.Authority != DefaultAuthority || time.Duration(s.MinInterval) != DefaultMinInterval ||
		time.Duration(s.MaxInterval) != DefaultMaxInterval || s.Status != StatusActive || s.Crawl.NextCrawl.IsZero() {
		t.Fatalf("defaults not filled: %+v", s)
	}
	if _, err := ss.Add(ctx, Source{FeedURL: "https://example.com/feed.xml"}); !errors.Is(err, ErrSourceExists) {
		t.Fatalf("second add: %v", err)
	}
	u, err := ss.Update(ctx, s.ID, func(s *Source) error { s.Status = StatusPaused; s.Crawl.ETag = `"v1"`; return nil })
	if err != nil || u.Status != StatusPaused {
		t.Fatalf("update: %+v %v", u, err)
	}
	if _, err := ss.Update(ctx, s.ID, func(s *Source) error { s.Authority = 2; return nil }); err == nil {
		t.Fatal("update to an invalid authority accepted")
	}
	ss = reopen()
	got, err := ss.Get(ctx, s.ID)
	if err != nil || got.Status != StatusPaused || got.Crawl.ETag != `"v1"` || got.Authority != DefaultAuthority {
		t.Fatalf("after reopen: %+v %v", got, err)
	}
	list, err := ss.List(ctx)
	if err != nil || len(list) != 1 {
		t.Fatalf("list: %v %v", list, err)
	}
	if err := ss.Delete(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := ss.Get(ctx, s.ID); !errors.Is(err, ErrSourceNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
	if err := ss.Delete(ctx, s.ID); !errors.Is(err, ErrSourceNotFound) {
		t.Fatalf("second delete: %v", err)
	}
}

func TestSourceValidation(t *testing.T) {
	for _, c := range []struct {
		s    Source
		want string
	}{
		{Source{FeedURL: "ftp://x/feed"}, "absolute http or https"},
		{Source{FeedURL: "/relative"}, "absolute http or https"},
		{Source{FeedURL: "https://x/f", Authority: 1.5}, "authority"},
		{Source{FeedURL: "https://x/f", MinInterval: Duration(10 * time.Second)}, "below"},
		{Source{FeedURL: "https://x/f", MaxInterval: Duration(48 * time.Hour)}, "above"},
		{Source{FeedURL: "https://x/f", MinInterval: Duration(30 * time.Minute), MaxInterval: Duration(10 * time.Minute)}, "above max_interval"},
		{Source{FeedURL: "https://x/f", Status: "sleeping"}, "status"},
		{Source{FeedURL: "https://x/f", Homepage: "javascript:alert(1)"}, "homepage"},
		{Source{FeedURL: "https://x/f", Name: strings.Repeat("n", 201)}, "name"},
	} {
		if err := c.s.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate(%+v) = %v, want error containing %q", c.s, err, c.want)
		}
	}
	var d Duration
	if err := json.Unmarshal([]byte(`"15m"`), &d); err != nil || time.Duration(d) != 15*time.Minute {
		t.Fatalf("duration: %v %v", d, err)
	}
	if err := json.Unmarshal([]byte(`900`), &d); err == nil {
		t.Fatal("numeric duration accepted")
	}
}

// A lower floor admits shorter intervals; a source added under it stays
// editable under a higher floor as long as its min_interval is unchanged.
func TestSourcesMinIntervalFloor(t *testing.T) {
	ss, _ := newSources(t)
	ctx := context.Background()
	short := Source{FeedURL: "https://example.com/fast.xml", MinInterval: Duration(2 * time.Second), MaxInterval: Duration(2 * time.Second)}
	if _, err := ss.Add(ctx, short); err == nil || !strings.Contains(err.Error(), "below 1m0s") {
		t.Fatalf("2s interval under the default floor: %v", err)
	}
	ss.SetMinIntervalFloor(time.Second)
	s, err := ss.Add(ctx, short)
	if err != nil {
		t.Fatal(err)
	}
	ss.SetMinIntervalFloor(time.Minute)
	u, err := ss.Update(ctx, s.ID, func(s *Source) error { s.Crawl.ETag = `"v2"`; return nil })
	if err != nil || u.Crawl.ETag != `"v2"` {
		t.Fatalf("crawl bookkeeping under a higher floor: %+v %v", u, err)
	}
	if _, err := ss.Update(ctx, s.ID, func(s *Source) error { s.MinInterval = Duration(3 * time.Second); return nil }); err == nil {
		t.Fatal("a new min_interval below the floor accepted")
	}
}

// staleStore answers the first read of each key with the value it held
// when the store was wrapped, like a replica that lags.
type staleStore struct {
	*meta.Local
	old  map[string][]byte
	read map[string]bool
}

func (s *staleStore) Get(ctx context.Context, c, k string) ([]byte, bool, error) {
	if v, ok := s.old[k]; ok && !s.read[k] {
		s.read[k] = true
		return v, true, nil
	}
	return s.Local.Get(ctx, c, k)
}

// Of two nodes that both think a due source is theirs, one claims it and
// the other finds it not due, also when its replica lags behind.
func TestSourcesClaim(t *testing.T) {
	db, err := state.Open(t.TempDir(), state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	store := meta.NewLocal(db)
	a := NewSources(store, func() time.Time { return now })
	s, err := a.Add(ctx, Source{FeedURL: "https://example.com/feed.xml"})
	if err != nil {
		t.Fatal(err)
	}
	stale, _, _ := store.Get(ctx, Collection, s.ID)
	b := NewSources(&staleStore{Local: store, old: map[string][]byte{s.ID: stale}, read: map[string]bool{}}, func() time.Time { return now })

	results := make(chan error, 2)
	for _, ss := range []*Sources{a, b} {
		go func() {
			_, err := ss.Claim(ctx, s.ID, now, false)
			results <- err
		}()
	}
	won := 0
	for range 2 {
		switch err := <-results; {
		case err == nil:
			won++
		case !errors.Is(err, ErrNotDue):
			t.Fatal(err)
		}
	}
	if won != 1 {
		t.Fatalf("%d claims of one due source won, want 1", won)
	}
	got, _ := a.Get(ctx, s.ID)
	if want := now.Add(DefaultMinInterval); !got.Crawl.NextCrawl.Equal(want) {
		t.Fatalf("claimed source next crawl %s, want %s", got.Crawl.NextCrawl, want)
	}
	// The lagging node reads the old value first: its swap conflicts, it
	// reads again and finds the source claimed.
	c := NewSources(&staleStore{Local: store, old: map[string][]byte{s.ID: stale}, read: map[string]bool{}}, func() time.Time { return now })
	if got, err := c.Claim(ctx, s.ID, now, false); !errors.Is(err, ErrNotDue) || !got.Crawl.NextCrawl.After(now) {
		t.Fatalf("claim through a lagging replica: %+v %v", got.Crawl, err)
	}
	// A manual crawl claims it anyway; a paused source is never due.
	if _, err := a.Claim(ctx, s.ID, now, true); err != nil {
		t.Fatalf("forced claim: %v", err)
	}
	if _, err := a.Update(ctx, s.ID, func(s *Source) error { s.Status = StatusPaused; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Claim(ctx, s.ID, now.Add(time.Hour), true); !errors.Is(err, ErrNotDue) {
		t.Fatalf("claim of a paused source: %v", err)
	}
}
