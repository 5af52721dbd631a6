package story

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/state"
	"github.com/newsflow/newsflow/state/statetest"
)

// retentionOpts close a story 1h after its latest article and delete it
// 2h after.
var retentionOpts = Options{Cluster: ClusterOptions{Window: time.Hour}, Retention: 2 * time.Hour}

// retentionStream is a story A (a1, a2, with an image), its founding
// article applied again into a new story after it left the window, an
// article of another story sharing A's image, and unrelated articles every
// 10 minutes for 6 hours.
func retentionStream() []Article {
	const img = "https://img.example/a.jpg"
	out := []Article{
		{ID: "a1", SourceID: "s1", Title: "Volcano erupts near Reykjavik as flights are grounded", ImageURL: img, Published: minutes(0), Version: 1},
		{ID: "a2", SourceID: "s2", Title: "Reykjavik volcano eruption grounds flights across Iceland", Published: minutes(5), Version: 1},
	}
	for i := range 36 {
		m := float64(10 + 10*i)
		a := Article{ID: fmt.Sprint("u", i), SourceID: "s3", Title: fmt.Sprintf("q%dx w%dy z%dv", i, i, i), Published: minutes(m), Version: 1}
		switch i {
		case 26: // 4h30: a1 left the window (1h) long ago
			out = append(out, Article{ID: "a1", SourceID: "s1", Title: "Volcano erupts near Reykjavik as flights are grounded", Published: minutes(m - 5), Version: 2})
		case 10:
			a.ImageURL = img // shared with a1: kept while an article younger than the retention age has it
		}
		out = append(out, a)
	}
	return out
}

// applyRetention applies the stream to a builder over a fresh namespace,
// committing every commitEvery articles (and at the end) and, if restore,
// restoring the builder after each commit. It returns the namespace.
func applyRetention(t *testing.T, commitEvery int, restore bool) (state.Namespace, *Builder) {
	t.Helper()
	ns := statetest.Open(t).Namespace("stories/0")
	b, err := RestoreBuilder(retentionOpts, ns)
	if err != nil {
		t.Fatal(err)
	}
	commit := func() {
		statetest.Commit(t, builderFlusher{b, ns}, ns)
		if restore {
			if b, err = RestoreBuilder(retentionOpts, ns); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i, a := range retentionStream() {
		if _, err := b.Apply(a); err != nil {
			t.Fatalf("article %d (%s): %v", i, a.ID, err)
		}
		if (i+1)%commitEvery == 0 {
			commit()
		}
	}
	commit()
	return ns, b
}

func dump(t *testing.T, r state.Reader) map[string]string {
	t.Helper()
	m := map[string]string{}
	if err := r.Scan(nil, nil, func(k, v []byte) error { m[string(k)] = string(v); return nil }); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestRetentionDeletesOldStories(t *testing.T) {
	ns, b := applyRetention(t, 5, false)
	got := dump(t, ns)
	var a1 ArticleRecord
	for k, v := range got {
		switch {
		case k == "ia2" || k == "aa2":
			t.Errorf("key %q of the deleted story A is left", k)
		case strings.HasPrefix(k, "k") || strings.HasPrefix(k, "s") || k[0] == 'x':
			if strings.Contains(v, `"id":"a1"`) && strings.Contains(v, `"article_count":2`) {
				t.Errorf("story A's record is left under %q", k)
			}
		}
	}
	// a1, applied again after it left the window, is in a story of its own.
	v, ok := got["aa1"]
	if !ok {
		t.Fatal("a1, applied again into a new story, was deleted with its old story")
	}
	if err := json.Unmarshal([]byte(v), &a1); err != nil || a1.Version != 2 {
		t.Fatalf("a1: %v %+v", err, a1)
	}
	if _, ok := got["ia1"]; !ok {
		t.Error("the id mapping of a1's new story was deleted with the old one")
	}
	// The image a1 had, and u10, both older than the retention age, is gone.
	if _, ok := got[string(imageKey(ImageID("https://img.example/a.jpg")))]; ok {
		t.Error("an image no article younger than the retention age has is kept")
	}
	// Every story left has its latest article within 2h of the watermark,
	// or is still open.
	cut := b.wm - retentionOpts.Retention.Milliseconds()
	stories := 0
	for k, v := range got {
		if k[0] != 's' || len(k) != 9 {
			continue
		}
		var rec storyRecord
		if err := json.Unmarshal([]byte(v), &rec); err != nil {
			t.Fatal(err)
		}
		stories++
		if rec.LastSeen < cut {
			t.Errorf("story %s (latest %d) kept, cutoff %d", rec.ID, rec.LastSeen, cut)
		}
	}
	// u0..u35 at 10-minute steps up to 6h: those from 4h on (cutoff
	// 6h-2h) are kept, u23 to u35, and a1's new story (4h25).
	if stories != 14 {
		t.Errorf("%d stories kept, want 14 (u23..u35 and a1's)", stories)
	}
	if len(b.redirect) != 0 || len(b.mergedID) != 0 {
		t.Errorf("redirects left: %v %v", b.redirect, b.mergedID)
	}
	// An article older than the retention age is refused.
	_, err := b.Apply(Article{ID: "late", Title: "A late article about the volcano", Published: minutes(10), Version: 1})
	if !errors.Is(err, ErrTooOld) {
		t.Errorf("late article: %v, want ErrTooOld", err)
	}
}

// TestRetentionKeepsSharedImage: an image goes with the last of the
// articles that have it.
func TestRetentionKeepsSharedImage(t *testing.T) {
	const img = "https://img.example/shared.jpg"
	ns := statetest.Open(t).Namespace("stories/0")
	b, err := RestoreBuilder(retentionOpts, ns)
	if err != nil {
		t.Fatal(err)
	}
	apply := func(a Article) {
		t.Helper()
		mustApply(t, b, a)
		statetest.Commit(t, builderFlusher{b, ns}, ns)
	}
	image := func() (int64, bool) {
		v, ok, err := ns.Get(imageKey(ImageID(img)))
		if err != nil {
			t.Fatal(err)
		}
		_, latest := parseImage(v)
		return latest, ok
	}
	apply(Article{ID: "a1", Title: "Volcano erupts near Reykjavik as flights are grounded", ImageURL: img, Published: minutes(0), Version: 1})
	apply(Article{ID: "x1", Title: "Central bank raises interest rates by half a point", ImageURL: img, Published: minutes(60), Version: 1})
	for m := 70; m <= 150; m += 10 {
		apply(Article{ID: fmt.Sprint("f", m), Title: fmt.Sprintf("q%dx w%dy", m, m), Published: minutes(float64(m)), Version: 1})
	}
	// At 2h30 a1's story is deleted; x1 (1h) keeps the image.
	if _, ok, _ := ns.Get(articleKey("a1")); ok {
		t.Error("a1 kept at 2h30")
	}
	if latest, ok := image(); !ok || latest != minutes(60) {
		t.Errorf("image: %v, latest %d; want kept, latest %d", ok, latest, minutes(60))
	}
	for m := 160; m <= 200; m += 10 {
		apply(Article{ID: fmt.Sprint("f", m), Title: fmt.Sprintf("q%dx w%dy", m, m), Published: minutes(float64(m)), Version: 1})
	}
	if _, ok := image(); ok {
		t.Error("image kept at 3h20, after the last article that had it was deleted")
	}
}

// TestRetentionDeterministic: where commits fall, and restores between
// them, change nothing of what is deleted or kept.
func TestRetentionDeterministic(t *testing.T) {
	ns, _ := applyRetention(t, 1000, false)
	want := dump(t, ns)
	for _, c := range []struct {
		every   int
		restore bool
	}{{1, false}, {3, true}, {7, false}, {7, true}} {
		ns, _ := applyRetention(t, c.every, c.restore)
		got := dump(t, ns)
		if !maps.Equal(got, want) {
			var diff []string
			for k := range maps.Keys(want) {
				if got[k] != want[k] {
					diff = append(diff, fmt.Sprintf("%q: %q, want %q", k, got[k], want[k]))
				}
			}
			for k := range maps.Keys(got) {
				if _, ok := want[k]; !ok {
					diff = append(diff, fmt.Sprintf("%q: %q, want none", k, got[k]))
				}
			}
			slices.Sort(diff)
			t.Errorf("commit every %d, restore %v: state differs from one commit at the end:\n%s", c.every, c.restore, strings.Join(diff, "\n"))
		}
	}
}

// TestRetentionOff: a negative retention keeps every story.
func TestRetentionOff(t *testing.T) {
	opts := retentionOpts
	opts.Retention = -1
	ns := statetest.Open(t).Namespace("stories/0")
	b, err := RestoreBuilder(opts, ns)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range retentionStream() {
		mustApply(t, b, a)
	}
	statetest.Commit(t, builderFlusher{b, ns}, ns)
	if _, ok := dump(t, ns)["ia2"]; ok {
		t.Error("a2 founded no story, yet has an id mapping")
	}
	if _, ok := dump(t, ns)["aa2"]; !ok {
		t.Error("retention off, yet a2 was deleted")
	}
	if _, err := NewBuilder(Options{Cluster: ClusterOptions{Window: 3 * time.Hour}, Retention: 2 * time.Hour}); err == nil {
		t.Error("a retention shorter than the story window was accepted")
	}
}

// TestOldNewsIsNotBreaking: a burst that would make a story breaking (70
// articles in 30 minutes from 6 sources) does not when the articles are
// old news first seen long after their publication, as when a feed's back
// catalogue arrives; the same burst first seen as it is published does.
func TestOldNewsIsNotBreaking(t *testing.T) {
	for _, tc := range []struct {
		name  string
		delay time.Duration // first seen this long after publication
		want  bool
	}{
		{"live", time.Minute, true},
		{"a day late", 24 * time.Hour, true},
		{"old news", 3 * 365 * 24 * time.Hour, false},
		{"just past the fresh age", 24*time.Hour + time.Minute, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newTestBuilder(t, Options{})
			var st *Story
			for i := range 70 {
				id := fmt.Sprintf("q%d", i)
				p := minutes(float64(i) * 30 / 70)
				mustApply(t, b, Article{ID: id, SourceID: fmt.Sprintf("s%d", i%6),
					Title:     fmt.Sprintf("Earthquake of magnitude 7 strikes Lisbon region report %d", i),
					Published: p, FirstSeen: p + tc.delay.Milliseconds()})
				st, _ = b.StoryOf(id)
			}
			if st.Articles != 70 {
				t.Fatalf("%d articles in the story, want 70", st.Articles)
			}
			if st.Breaking != tc.want {
				t.Errorf("breaking %v, want %v (velocity %v)", st.Breaking, tc.want, st.Velocity)
			}
			if !tc.want && st.Velocity != 0 {
				t.Errorf("velocity %v of old news, want 0", st.Velocity)
			}
		})
	}
}

// TestRetentionByFirstSeen: stories of old news (published years before
// they are first seen) are kept like any other until the newest article
// was first seen more than the retention age after theirs, through
// commits and restores, and deleted then.
func TestRetentionByFirstSeen(t *testing.T) {
	ns := statetest.Open(t).Namespace("stories/0")
	b, err := RestoreBuilder(retentionOpts, ns)
	if err != nil {
		t.Fatal(err)
	}
	commit := func() {
		t.Helper()
		statetest.Commit(t, builderFlusher{b, ns}, ns)
		if b, err = RestoreBuilder(retentionOpts, ns); err != nil {
			t.Fatal(err)
		}
	}
	arrived := minutes(0)
	years := (3 * 365 * 24 * time.Hour).Milliseconds()
	for i := range 5 {
		p := arrived - years + int64(i)*(24*time.Hour).Milliseconds()
		mustApply(t, b, Article{ID: fmt.Sprint("old", i), SourceID: "blog", Title: fmt.Sprintf("Archive post number %d about gardening tomatoes%d", i, i),
			Published: p, FirstSeen: arrived, Version: 1})
	}
	commit()
	storiesOf := func() map[string]bool {
		out := map[string]bool{}
		for k, v := range dump(t, ns) {
			if k[0] != 's' || len(k) != 9 {
				continue
			}
			var rec storyRecord
			if err := json.Unmarshal([]byte(v), &rec); err != nil {
				t.Fatal(err)
			}
			out[rec.ID] = true
		}
		return out
	}
	// New articles every 10 minutes up to exactly the retention age (2h)
	// after the old posts arrived: they are all kept.
	for i := 1; i <= 12; i++ {
		m := minutes(float64(10 * i))
		mustApply(t, b, Article{ID: fmt.Sprint("new", i), SourceID: "wire", Title: fmt.Sprintf("z%dq harbour k%dw m%dp", i, i, i), Published: m, FirstSeen: m, Version: 1})
		commit()
	}
	got := storiesOf()
	for i := range 5 {
		if !got[fmt.Sprint("old", i)] {
			t.Errorf("story of old post %d deleted within the retention age of its first-seen time", i)
		}
	}
	// One more article a minute later: the old posts' stories go.
	m := minutes(121)
	mustApply(t, b, Article{ID: "new13", SourceID: "wire", Title: "x13q ballet premiere v13r", Published: m, FirstSeen: m, Version: 1})
	commit()
	got = storiesOf()
	for i := range 5 {
		if got[fmt.Sprint("old", i)] {
			t.Errorf("story of old post %d kept past the retention age of its first-seen time", i)
		}
	}
	if !got["new1"] || !got["new13"] {
		t.Errorf("recent stories deleted: %v", slices.Sorted(maps.Keys(got)))
	}
	for k := range dump(t, ns) {
		if strings.HasPrefix(k, "aold") {
			t.Errorf("article record %q of old news left", k)
		}
	}
	// An article first seen before the cutoff is refused; its publish
	// date alone never is.
	if _, err := b.Apply(Article{ID: "late", Title: "A late arrival", Published: minutes(121), FirstSeen: minutes(0), Version: 1}); !errors.Is(err, ErrTooOld) {
		t.Errorf("article first seen before the cutoff: %v, want ErrTooOld", err)
	}
	if _, err := b.Apply(Article{ID: "ancient", Title: "An ancient post", Published: minutes(0) - 10*years, FirstSeen: minutes(122), Version: 1}); err != nil {
		t.Errorf("old news first seen now: %v", err)
	}
}
