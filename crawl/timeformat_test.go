package crawl

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/internal/polite"
)

// oldSource is a source as an earlier version stored it: times in RFC
// 3339, also in the crawl record and the circuit.
const oldSource = `{"id":"src-0ld","feed_url":"https://old.example/feed.xml","name":"Old","authority":0.7,` +
	`"min_interval":"5m0s","max_interval":"1h0m0s","status":"active","full_text":"auto",` +
	`"created_at":"2025-11-02T10:00:00.123456789Z","updated_at":"2026-01-01T10:30:00+01:00",` +
	`"crawl":{"etag":"\"e1\"","interval":"10m0s","last_crawl":"2026-01-02T03:00:00.5Z","next_crawl":"2026-01-02T03:10:00.5Z",` +
	`"consecutive_errors":5,"last_error":"502 Bad Gateway",` +
	`"last_result":{"at":"2026-01-02T03:00:00.5Z","outcome":"error","status":502,"duration":"1.5s","bytes":0,"items_seen":0,"items_new":0,"error":"502 Bad Gateway"},` +
	`"circuit":{"state":"open","consecutive_failures":5,"opened_at":"2026-01-02T03:00:00.5Z","open_until":"2026-01-02T03:05:00.5Z"}}}`

// newSource is oldSource as it is written now: the same, times in ms.
const newSource = `{"id":"src-0ld","feed_url":"https://old.example/feed.xml","name":"Old","authority":0.7,` +
	`"min_interval":"5m0s","max_interval":"1h0m0s","status":"active","full_text":"auto",` +
	`"created_at":1762077600123,"updated_at":1767259800000,` +
	`"crawl":{"etag":"\"e1\"","interval":"10m0s","consecutive_errors":5,"last_error":"502 Bad Gateway",` +
	`"last_result":{"outcome":"error","status":502,"duration":"1.5s","bytes":0,"items_seen":0,"items_new":0,"error":"502 Bad Gateway","at":1767322800500},` +
	`"circuit":{"state":"open","consecutive_failures":5,"opened_at":1767322800500,"open_until":1767323100500},` +
	`"last_crawl":1767322800500,"next_crawl":1767323400500}}`

func TestSourceTimesOldFormat(t *testing.T) {
	ss, reopen := newSources(t) // now is 2026-01-02T03:04:05Z
	ctx := context.Background()
	if err := ss.store.Put(ctx, Collection, "src-0ld", []byte(oldSource)); err != nil {
		t.Fatal(err)
	}
	lastCrawl := time.Date(2026, 1, 2, 3, 0, 0, 500_000_000, time.UTC)
	s, err := ss.Get(ctx, "src-0ld")
	if err != nil {
		t.Fatal(err)
	}
	if !s.CreatedAt.Equal(time.Date(2025, 11, 2, 10, 0, 0, 123456789, time.UTC)) || !s.UpdatedAt.Equal(time.Date(2026, 1, 1, 9, 30, 0, 0, time.UTC)) ||
		!s.Crawl.LastCrawl.Equal(lastCrawl) || !s.Crawl.NextCrawl.Equal(lastCrawl.Add(10*time.Minute)) ||
		s.Crawl.LastResult == nil || !s.Crawl.LastResult.At.Equal(lastCrawl) || s.Crawl.LastResult.Status != 502 {
		t.Fatalf("old source read as %+v", s)
	}
	var br polite.BreakerState
	if err := json.Unmarshal(s.Crawl.Circuit, &br); err != nil || br.State != polite.Open ||
		!br.OpenedAt.Equal(lastCrawl) || !br.OpenUntil.Equal(lastCrawl.Add(5*time.Minute)) {
		t.Fatalf("old circuit read as %+v, %v", br, err)
	}
	b, err := json.Marshal(s)
	if err != nil || string(b) != newSource {
		t.Fatalf("old source written as\n%s, %v\nwant\n%s", b, err, newSource)
	}
	// Its next crawl holds; an update writes it in ms, the rest as it was.
	if _, err := ss.Claim(ctx, s.ID, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), false); !errors.Is(err, ErrNotDue) {
		t.Fatalf("claim before the old next crawl: %v", err)
	}
	if _, err := ss.Update(ctx, s.ID, func(s *Source) error { s.Name = "Old news"; return nil }); err != nil {
		t.Fatal(err)
	}
	ss = reopen()
	stored, _, err := ss.store.Get(ctx, Collection, s.ID)
	want := strings.Replace(strings.Replace(newSource, `"Old"`, `"Old news"`, 1), "1767259800000", "1767323045000", 1)
	if err != nil || string(stored) != want {
		t.Fatalf("updated source stored as\n%s, %v\nwant\n%s", stored, err, want)
	}
	list, err := ss.List(ctx)
	if err != nil || len(list) != 1 || !list[0].Crawl.LastCrawl.Equal(lastCrawl) {
		t.Fatalf("List = %+v, %v", list, err)
	}
}

// TestSourceTimesInMillis checks that what Add and Update return is what
// is read back, to the millisecond the store keeps.
func TestSourceTimesInMillis(t *testing.T) {
	ss, _ := newSources(t)
	ctx := context.Background()
	now := time.Date(2026, 1, 2, 3, 4, 5, 678_901_234, time.Local)
	ss.now = func() time.Time { return now }
	s, err := ss.Add(ctx, Source{FeedURL: "https://example.com/feed.xml"})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := ss.Get(ctx, s.ID); err != nil || got.CreatedAt != s.CreatedAt || got.UpdatedAt != s.UpdatedAt || !got.Crawl.NextCrawl.Equal(s.Crawl.NextCrawl) {
		t.Fatalf("Add returned %+v, Get %+v (%v)", s, got, err)
	}
	b, _, _ := ss.store.Get(ctx, Collection, s.ID)
	if ms := `1767323045678`; !strings.Contains(string(b), `"created_at":`+ms+`,"updated_at":`+ms) || !strings.Contains(string(b), `"next_crawl":`+ms) {
		t.Fatalf("stored %s", b)
	}
}
