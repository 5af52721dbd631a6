package readstate

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// TestSubscriptions: a reader subscribes to sources in folders, renames
// and moves them (keeping when they were added), deletes a folder (its
// subscriptions go to the default folder), unsubscribes; another reader's
// subscriptions are their own, and deleting a reader deletes theirs.
func TestSubscriptions(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	if fs, err := s.Folders(ctx, "ann"); err != nil || len(fs) != 1 || fs[0] != DefaultFolder {
		t.Fatalf("folders of a new reader: %+v %v", fs, err)
	}
	tech, err := s.AddFolder(ctx, "ann", "  Tech ")
	if err != nil || tech.ID != 2 || tech.Title != "Tech" {
		t.Fatalf("add folder: %+v %v", tech, err)
	}
	if _, err := s.AddFolder(ctx, "ann", "tech"); !errors.Is(err, ErrFolderExists) {
		t.Errorf("same title again: %v", err)
	}
	for _, bad := range []string{"", "  ", strings.Repeat("x", MaxFolderTitleLen+1), "a\x00b", "\xff"} {
		if _, err := s.AddFolder(ctx, "ann", bad); !errors.Is(err, ErrInvalidFolderName) {
			t.Errorf("title %q: %v", bad, err)
		}
	}
	news, _ := s.AddFolder(ctx, "ann", "News")
	if _, err := s.Subscribe(ctx, "ann", Subscription{SourceID: "bbc", Folder: 99}); !errors.Is(err, ErrNoFolder) {
		t.Errorf("into a missing folder: %v", err)
	}
	bbc, err := s.Subscribe(ctx, "ann", Subscription{SourceID: "bbc", Folder: news.ID})
	if err != nil || bbc.Added == 0 {
		t.Fatal(bbc, err)
	}
	if _, err := s.Subscribe(ctx, "ann", Subscription{SourceID: "ars", Title: " Ars ", Folder: tech.ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Subscribe(ctx, "ann", Subscription{SourceID: "lwn"}); err != nil {
		t.Fatal(err)
	}
	// Moving and renaming keeps when it was added.
	moved, err := s.Subscribe(ctx, "ann", Subscription{SourceID: "bbc", Title: "BBC", Folder: tech.ID})
	if err != nil || moved.Added != bbc.Added || moved.Folder != tech.ID {
		t.Fatalf("move: %+v %v", moved, err)
	}
	subs, _ := s.Subscriptions(ctx, "ann")
	if got := fmt.Sprint(subs); got != fmt.Sprintf("[{bbc BBC %d %d} {ars Ars %d %d} {lwn  1 %d}]", tech.ID, bbc.Added, tech.ID, subs[1].Added, subs[2].Added) {
		t.Fatalf("subscriptions: %s", got)
	}
	if _, err := s.RenameFolder(ctx, "ann", tech.ID, "news"); !errors.Is(err, ErrFolderExists) {
		t.Errorf("rename onto another folder's title: %v", err)
	}
	if f, err := s.RenameFolder(ctx, "ann", tech.ID, "Technology"); err != nil || f.Title != "Technology" {
		t.Errorf("rename: %+v %v", f, err)
	}
	if err := s.DeleteFolder(ctx, "ann", DefaultFolder.ID); !errors.Is(err, ErrNoFolder) {
		t.Errorf("delete the default folder: %v", err)
	}
	if err := s.DeleteFolder(ctx, "ann", tech.ID); err != nil {
		t.Fatal(err)
	}
	subs, _ = s.Subscriptions(ctx, "ann")
	for _, sub := range subs {
		if sub.Folder != DefaultFolder.ID {
			t.Errorf("%s in folder %d after its folder was deleted", sub.SourceID, sub.Folder)
		}
	}
	// Ids are not reused.
	if f, _ := s.AddFolder(ctx, "ann", "Again"); f.ID != news.ID+1 {
		t.Errorf("new folder id %d after deleting %d, want %d", f.ID, tech.ID, news.ID+1)
	}
	if err := s.Unsubscribe(ctx, "ann", "lwn"); err != nil {
		t.Fatal(err)
	}
	if err := s.Unsubscribe(ctx, "ann", "lwn"); !errors.Is(err, ErrNotSubscribed) {
		t.Errorf("unsubscribe twice: %v", err)
	}
	if subs, _ := s.Subscriptions(ctx, "bob"); len(subs) != 0 {
		t.Errorf("bob has %+v", subs)
	}
	if err := s.DeleteUser(ctx, "ann"); err != nil {
		t.Fatal(err)
	}
	if subs, _ := s.Subscriptions(ctx, "ann"); len(subs) != 0 {
		t.Errorf("deleted reader keeps %+v", subs)
	}
	if fs, _ := s.Folders(ctx, "ann"); len(fs) != 1 {
		t.Errorf("deleted reader keeps folders %+v", fs)
	}
}

// TestAddFolderConcurrently: folders created at once (as on two nodes)
// get distinct ids.
func TestAddFolderConcurrently(t *testing.T) {
	s := newStore(t)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			if _, err := s.AddFolder(t.Context(), "ann", fmt.Sprint("f", i)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	fs, _ := s.Folders(t.Context(), "ann")
	seen := map[int64]bool{}
	for _, f := range fs {
		if seen[f.ID] {
			t.Errorf("folder id %d twice: %+v", f.ID, fs)
		}
		seen[f.ID] = true
	}
	if len(fs) != 9 {
		t.Errorf("%d folders, want 9: %+v", len(fs), fs)
	}
}

// TestFeedNums: a source keeps the number it gets first; numbers given at
// once (as on two nodes) differ; a number names its source.
func TestFeedNums(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	nums := make([]int64, 8)
	var wg sync.WaitGroup
	for i := range nums {
		wg.Go(func() {
			n, err := s.FeedNum(ctx, fmt.Sprint("src", i))
			if err != nil {
				t.Error(err)
			}
			nums[i] = n
		})
	}
	wg.Wait()
	seen := map[int64]bool{}
	for i, n := range nums {
		if n <= 0 || seen[n] {
			t.Fatalf("numbers %v", nums)
		}
		seen[n] = true
		if again, err := s.FeedNum(ctx, fmt.Sprint("src", i)); err != nil || again != n {
			t.Errorf("src%d numbered %d, then %d %v", i, n, again, err)
		}
		if src, ok, err := s.SourceOfFeed(ctx, n); err != nil || !ok || src != fmt.Sprint("src", i) {
			t.Errorf("feed %d names %q %v %v", n, src, ok, err)
		}
	}
	if _, ok, _ := s.SourceOfFeed(ctx, 99); ok {
		t.Error("an unknown number names a source")
	}
}
