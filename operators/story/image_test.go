package story

import (
	"testing"

	"github.com/newsflow/newsflow/state"
)

// TestBuilderImages: a story shows its representative's image, else the
// first image among its articles; edits and merges keep that true, and a
// restored builder has the same images and the ids the proxy looks up.
func TestBuilderImages(t *testing.T) {
	b := newTestBuilder(t, Options{})
	const (
		imgBlog  = "https://blog.example/volcano.jpg"
		imgPaper = "https://paper.example/iceland.jpg"
		imgWire  = "https://wire.example/eruption.jpg"
	)
	image := func(id string) string {
		t.Helper()
		st, ok := b.StoryOf(id)
		if !ok {
			t.Fatalf("no story of %s", id)
		}
		return st.Image
	}
	mustApply(t, b, Article{ID: "a1", SourceID: "blog", Authority: 0.3, Title: "Volcano erupts near Reykjavik as flights are grounded", ImageURL: imgBlog, Published: minutes(0)})
	if got := image("a1"); got != ImagePath(imgBlog) {
		t.Fatalf("founding article's image: %q", got)
	}
	// A representative without an image: the first image stays.
	mustApply(t, b, Article{ID: "a2", SourceID: "wire", Authority: 0.9, Title: "Reykjavik volcano eruption grounds flights across Iceland", Published: minutes(5)})
	if st, _ := b.StoryOf("a1"); st.Representative != "a2" || st.Image != ImagePath(imgBlog) {
		t.Fatalf("representative %s image %q, want a2 with the blog's image", st.Representative, st.Image)
	}
	// A later article's image does not replace the first one.
	mustApply(t, b, Article{ID: "a3", SourceID: "paper", Authority: 0.5, Title: "Iceland volcano erupts near Reykjavik, flights grounded", ImageURL: imgPaper, Published: minutes(9)})
	if got := image("a1"); got != ImagePath(imgBlog) {
		t.Errorf("after a later image: %q", got)
	}
	// The representative gains an image by an edit: it is shown.
	r := mustApply(t, b, Article{ID: "a2", SourceID: "wire", Authority: 0.9, Title: "Reykjavik volcano eruption grounds flights across Iceland", ImageURL: imgWire, Published: minutes(5), Version: 2})
	if !r.Update || image("a1") != ImagePath(imgWire) {
		t.Errorf("after the representative's edit: %+v, image %q", r, image("a1"))
	}
	// A story without images has none.
	mustApply(t, b, Article{ID: "b1", SourceID: "biz", Title: "Central bank raises interest rates by half a point", Published: minutes(10)})
	if got := image("b1"); got != "" {
		t.Errorf("story without images: %q", got)
	}

	db, err := state.Open(t.TempDir(), state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ns := db.Namespace("stories")
	batch := ns.NewBatch()
	if err := b.Persist(batch, ns); err != nil {
		t.Fatal(err)
	}
	if err := batch.Commit(); err != nil {
		t.Fatal(err)
	}
	rb, err := RestoreBuilder(Options{}, ns)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := rb.StoryOf("a3"); st.Image != ImagePath(imgWire) || st.firstImage != imgBlog || st.repImage != imgWire {
		t.Errorf("restored story: image %q first %q rep %q", st.Image, st.firstImage, st.repImage)
	}
	for _, u := range []string{imgBlog, imgPaper, imgWire} {
		v, ok, err := ns.Get(imageKey(ImageID(u)))
		if url, _ := parseImage(v); err != nil || !ok || url != u {
			t.Errorf("image %s: stored %q %v %v", u, v, ok, err)
		}
	}
}

// TestBuilderMergeImages: a merged story keeps the representative's image,
// else the earlier of the two first images.
func TestBuilderMergeImages(t *testing.T) {
	b := newTestBuilder(t, Options{Cluster: ClusterOptions{Threshold: 0.5, ThresholdLong: 0.5, Bridge: 0.3, BridgeLong: 0.3, Merge: 0.3, MergeLong: 0.3}})
	a := mustApply(t, b, Article{ID: "x1", SourceID: "a", Authority: 0.9, Title: "Mars rover finds ancient lake bed", Published: minutes(0)})
	c := mustApply(t, b, Article{ID: "y1", SourceID: "b", Authority: 0.1, Title: "Ancient lake sediments discovered by NASA scientists", ImageURL: "https://b.example/lake.jpg", Published: minutes(1)})
	if a.Story == c.Story {
		t.Skip("fixture did not form two stories")
	}
	r := mustApply(t, b, Article{ID: "z1", SourceID: "c", Authority: 0.1, Title: "NASA Mars rover finds ancient lake bed sediments", ImageURL: "https://c.example/rover.jpg", Published: minutes(2)})
	if len(r.Merged) != 1 {
		t.Fatalf("no merge: %+v", r)
	}
	st, _ := b.StoryOf("x1")
	if st.Representative != "x1" || st.Image != ImagePath("https://b.example/lake.jpg") {
		t.Errorf("merged story: representative %s image %q, want x1 with y1's image", st.Representative, st.Image)
	}
}

func TestImageID(t *testing.T) {
	id := ImageID("https://img.example/a.jpg")
	if !ValidImageID(id) || id == ImageID("https://img.example/b.jpg") {
		t.Errorf("ImageID %q", id)
	}
	for _, bad := range []string{"", id[:31], id + "0", "G" + id[1:], "../../../etc/passwd/aaaaaaaaaaaa"} {
		if ValidImageID(bad) {
			t.Errorf("ValidImageID(%q) = true", bad)
		}
	}
	if ImagePath("") != "" || ImagePath("https://img.example/a.jpg") != "/api/v1/image/"+id {
		t.Errorf("ImagePath")
	}
}
