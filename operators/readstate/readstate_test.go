package readstate

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/enginetest"
	"github.com/newsflow/newsflow/internal/meta"
	"github.com/newsflow/newsflow/operators/story"
	"github.com/newsflow/newsflow/state"
)

// newStore returns a store over the readstate operator, running on an
// engine of two partitions.
func newStore(t testing.TB) *Store {
	t.Helper()
	r := enginetest.New(t, map[string]int32{Topic: 2})
	op := NewOperator(2, r.Log)
	r.Start(engine.Options{Partitions: 2, CommitInterval: 2 * time.Millisecond}, op)
	return op.Store(meta.NewLocal(r.DB), testClock())
}

// newMetaStore returns a store over a metadata store, as releases before
// the operator kept the readers' state.
func newMetaStore(t testing.TB) (*Store, meta.Store) {
	t.Helper()
	db, err := state.Open(t.TempDir(), state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	m := meta.NewLocal(db)
	return New(m, testClock()), m
}

func testClock() func() time.Time {
	now := time.UnixMilli(1_700_000_000_000)
	var mu sync.Mutex
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(time.Millisecond)
		return now
	}
}

// fixture is a story of three articles from two sources:
// a1 (src A, t=100), a2 (src B, t=200), a3 (src A, t=300).
func fixture() (*story.Story, *story.Detail) {
	arts := []story.ArticleRecord{
		{Article: story.Article{ID: "a1", SourceID: "A", Published: 100}},
		{Article: story.Article{ID: "a2", SourceID: "B", Published: 200}},
		{Article: story.Article{ID: "a3", SourceID: "A", Published: 300}},
	}
	st := story.Story{ID: "s1", Articles: 3, FirstSeen: 100, LastSeen: 300,
		Sources: []story.SourceCount{{SourceID: "A", Articles: 2}, {SourceID: "B", Articles: 1}},
		Topics:  []story.Label{{Topic: "science", Confidence: 1}}}
	return &st, &story.Detail{Story: st, Articles: arts}
}

func art(d *story.Detail, id string) Article {
	for _, a := range d.Articles {
		if a.ID == id {
			return ArticleOf(a.Article, d.ID)
		}
	}
	panic(id)
}

// unread counts both ways: from the head where it can, and article by
// article, which must agree.
func unread(t *testing.T, s *Store, st *story.Story, d *story.Detail) (int, map[string]int) {
	t.Helper()
	state, err := s.Load(context.Background(), "u")
	if err != nil {
		t.Fatal(err)
	}
	n, per, err := state.Unread(st, func() (*story.Detail, error) { return d, nil })
	if err != nil {
		t.Fatal(err)
	}
	exact := map[string]int{}
	for _, a := range d.Articles {
		if !state.Read(st, a.ID, a.SourceID, a.Published) {
			exact[a.SourceID]++
		}
	}
	if !maps.Equal(per, exact) {
		t.Fatalf("per-source unread %v, article by article %v", per, exact)
	}
	return n, per
}

// wantUnread stops the test unless the user has n unread articles in the
// story, and per[src] of them from each source src named in per.
func wantUnread(t *testing.T, s *Store, st *story.Story, d *story.Detail, n int, per map[string]int, what string) {
	t.Helper()
	gotN, gotPer := unread(t, s, st, d)
	ok := gotN == n
	for src, want := range per {
		ok = ok && gotPer[src] == want
	}
	if !ok {
		t.Fatalf("%s: %d unread %v, want %d %v", what, gotN, gotPer, n, per)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestUnreadFollowsMarks(t *testing.T) {
	ctx := context.Background()
	st, d := fixture()
	s := newStore(t)
	wantUnread(t, s, st, d, 3, nil, "fresh user")
	must(t, s.MarkArticles(ctx, "u", true, art(d, "a2")))
	wantUnread(t, s, st, d, 2, map[string]int{"A": 2, "B": 0}, "after reading a2")
	// The story marked read at its latest article: nothing unread...
	must(t, s.MarkScope(ctx, "u", Scope{Kind: ScopeStory, Value: "s1"}, st.LastSeen))
	wantUnread(t, s, st, d, 0, nil, "story read")
	// ...until an article joins it.
	st2, d2 := fixture()
	d2.Articles = append(d2.Articles, story.ArticleRecord{Article: story.Article{ID: "a4", SourceID: "B", Published: 400}})
	st2.Articles, st2.LastSeen, st2.Sources[1].Articles = 4, 400, 2
	d2.Story = *st2
	wantUnread(t, s, st2, d2, 1, map[string]int{"B": 1}, "new article after the story was read")
	// An article marked unread after the watermark is unread again.
	must(t, s.MarkArticles(ctx, "u", false, art(d, "a1")))
	wantUnread(t, s, st, d, 1, map[string]int{"A": 1}, "a1 kept unread")
	// A newer watermark decides over the older article mark.
	must(t, s.MarkScope(ctx, "u", Scope{Kind: ScopeTopic, Value: "science"}, 300))
	wantUnread(t, s, st, d, 0, nil, "topic read after a1 was kept unread")
}

func TestWatermarkInsideStory(t *testing.T) {
	ctx := context.Background()
	st, d := fixture()
	s := newStore(t)
	must(t, s.MarkScope(ctx, "u", Scope{Kind: ScopeAll}, 200))
	wantUnread(t, s, st, d, 1, map[string]int{"A": 1}, "everything up to t=200 read (a3 unread)")
	must(t, s.MarkScope(ctx, "u", Scope{Kind: ScopeSource, Value: "A"}, 1000))
	wantUnread(t, s, st, d, 0, nil, "source A read too")
	must(t, s.ClearScope(ctx, "u", Scope{Kind: ScopeSource, Value: "A"}))
	wantUnread(t, s, st, d, 1, nil, "source watermark cleared")
}

func TestMarkAllDropsSupersededMarks(t *testing.T) {
	ctx := context.Background()
	_, d := fixture()
	s := newStore(t)
	must(t, s.MarkArticles(ctx, "u", true, art(d, "a1"), art(d, "a3")))
	must(t, s.MarkScope(ctx, "u", Scope{Kind: ScopeStory, Value: "s1"}, 300))
	must(t, s.MarkScope(ctx, "u", Scope{Kind: ScopeAll}, 250))
	var keys []string
	must(t, s.b.scan(ctx, "u", collReads, func(k string, _ []byte) error { keys = append(keys, k); return nil }))
	// a1 (t=100) is covered by the new watermark; a3 (t=300) and the
	// story's watermark (300) are not.
	if want := []string{"a:a3", "w:all", "w:story:s1"}; !slices.Equal(keys, want) {
		t.Fatalf("kept %v, want %v", keys, want)
	}
}

func TestStars(t *testing.T) {
	ctx := context.Background()
	_, d := fixture()
	s := newStore(t)
	first, err := s.SetStar(ctx, "u", art(d, "a1"), true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetStar(ctx, "u", art(d, "a2"), true); err != nil {
		t.Fatal(err)
	}
	again, err := s.SetStar(ctx, "u", art(d, "a1"), true)
	if err != nil || again.StarredAt != first.StarredAt {
		t.Fatalf("starring twice: %v, time %d then %d", err, first.StarredAt, again.StarredAt)
	}
	stars, err := s.Stars(ctx, "u")
	if err != nil || len(stars) != 2 || stars[0].ID != "a2" || stars[1].ID != "a1" || stars[1].StoryID != "s1" {
		t.Fatalf("stars %+v %v, want a2 then a1", stars, err)
	}
	if other, _ := s.Stars(ctx, "v"); len(other) != 0 {
		t.Fatalf("another user sees %d stars", len(other))
	}
	if _, err := s.SetStar(ctx, "u", art(d, "a2"), false); err != nil {
		t.Fatal(err)
	}
	st, err := s.Load(ctx, "u")
	if err != nil || !st.Starred("a1") || st.Starred("a2") {
		t.Fatalf("after unstarring a2: a1 %v a2 %v (%v)", st.Starred("a1"), st.Starred("a2"), err)
	}
	must(t, s.DeleteUser(ctx, "u"))
	if stars, _ := s.Stars(ctx, "u"); len(stars) != 0 {
		t.Fatalf("deleted user keeps %d stars", len(stars))
	}
}

// Forget drops the marks on articles published before the cut, and
// nothing else: not newer marks, watermarks, stars or another reader's.
func TestForget(t *testing.T) {
	ctx := context.Background()
	st, d := fixture()
	s := newStore(t)
	must(t, s.MarkArticles(ctx, "u", true, art(d, "a1"), art(d, "a3")))
	must(t, s.MarkArticles(ctx, "u", false, art(d, "a2")))
	must(t, s.MarkArticles(ctx, "v", true, art(d, "a1")))
	must(t, s.MarkScope(ctx, "u", Scope{Kind: ScopeSource, Value: "B"}, 150))
	if _, err := s.SetStar(ctx, "u", art(d, "a1"), true); err != nil {
		t.Fatal(err)
	}
	n, err := s.Forget(ctx, "u", 250) // a1 (100) and a2 (200) go, a3 (300) stays
	if err != nil || n != 2 {
		t.Fatalf("Forget = %d, %v; want 2 marks", n, err)
	}
	state, err := s.Load(ctx, "u")
	if err != nil {
		t.Fatal(err)
	}
	if !state.Read(st, "a3", "A", 300) || state.Read(st, "a1", "A", 100) || !state.Starred("a1") {
		t.Fatalf("after Forget: a3 read %v, a1 read %v, a1 starred %v", state.Read(st, "a3", "A", 300), state.Read(st, "a1", "A", 100), state.Starred("a1"))
	}
	if _, ok := state.scopes["source:B"]; !ok {
		t.Fatal("Forget dropped a watermark")
	}
	if other, _ := s.Load(ctx, "v"); !other.Read(st, "a1", "A", 100) {
		t.Fatal("Forget of u changed v's marks")
	}
}

func TestBadScope(t *testing.T) {
	s := newStore(t)
	for _, sc := range []Scope{{Kind: "everything"}, {Kind: ScopeTopic}, {}} {
		if err := s.MarkScope(context.Background(), "u", sc, 1); !errors.Is(err, ErrBadScope) {
			t.Errorf("scope %+v: %v, want ErrBadScope", sc, err)
		}
	}
}

// TestMigrate moves a state an older release kept in the metadata store
// into the operator: every mark, watermark, star, folder and subscription
// reads the same afterwards, the old copy is gone, and a second run (a
// migration cut short after its appends) neither moves anything again nor
// overwrites what the reader changed since.
func TestMigrate(t *testing.T) {
	ctx := context.Background()
	st, d := fixture()
	old, m := newMetaStore(t)
	must(t, old.MarkArticles(ctx, "u", true, art(d, "a1")))
	must(t, old.MarkScope(ctx, "u", Scope{Kind: ScopeSource, Value: "B"}, 1000))
	if _, err := old.SetStar(ctx, "u", art(d, "a3"), true); err != nil {
		t.Fatal(err)
	}
	f, err := old.AddFolder(ctx, "u", "Tech")
	must(t, err)
	if _, err := old.Subscribe(ctx, "u", Subscription{SourceID: "A", Folder: f.ID}); err != nil {
		t.Fatal(err)
	}
	must(t, old.MarkArticles(ctx, "v", false, art(d, "a2")))
	before := snapshot(t, old, st, d, "u")

	r := enginetest.New(t, map[string]int32{Topic: 2})
	op := NewOperator(2, r.Log)
	r.Start(engine.Options{Partitions: 2, CommitInterval: 2 * time.Millisecond}, op)
	s := op.Store(m, testClock())
	n, err := Migrate(ctx, m, s, []string{"u", "v", "nobody"})
	must(t, err)
	if n != 6 {
		t.Errorf("moved %d keys, want 6 (2 reads, 1 star, 1 folder, 1 subscription of u; 1 mark of v)", n)
	}
	if after := snapshot(t, s, st, d, "u"); after != before {
		t.Errorf("after the migration:\n%s\nbefore:\n%s", after, before)
	}
	for _, coll := range collections {
		must(t, m.Scan(ctx, metaCollection("u", coll), func(k string, _ []byte) error {
			t.Errorf("%s of u still in the metadata store: %s", coll, k)
			return nil
		}))
	}
	// A run cut short after its appends: the old copy is back, and the
	// reader has unstarred a3 since.
	if _, err := s.SetStar(ctx, "u", art(d, "a3"), false); err != nil {
		t.Fatal(err)
	}
	if _, err := old.SetStar(ctx, "u", art(d, "a3"), true); err != nil {
		t.Fatal(err)
	}
	must(t, old.MarkArticles(ctx, "u", true, art(d, "a1")))
	if _, err := Migrate(ctx, m, s, []string{"u"}); err != nil {
		t.Fatal(err)
	}
	stars, err := s.Stars(ctx, "u")
	must(t, err)
	// The star comes back: the migration cannot tell an unstar from a
	// key it never had; what it must not do is change a kept value.
	if len(stars) != 1 {
		t.Errorf("stars after the second run: %v", stars)
	}
	if _, err := Migrate(ctx, m, old, nil); err == nil {
		t.Error("a migration into the metadata store itself was not refused")
	}
}

// snapshot renders what a reader sees of user's state.
func snapshot(t *testing.T, s *Store, st *story.Story, d *story.Detail, user string) string {
	t.Helper()
	ctx := context.Background()
	rs, err := s.Load(ctx, user)
	must(t, err)
	n, per, err := rs.Unread(st, func() (*story.Detail, error) { return d, nil })
	must(t, err)
	stars, err := s.Stars(ctx, user)
	must(t, err)
	folders, err := s.Folders(ctx, user)
	must(t, err)
	subs, err := s.Subscriptions(ctx, user)
	must(t, err)
	return fmt.Sprintf("unread %d %v\nstars %v\nfolders %v\nsubs %v", n, per, stars, folders, subs)
}
