package feed

import (
	"io/fs"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestSharedLeadImages finds the lead images of the real feeds in the
// shared data (feeds/real and feeds/golden) and checks that each is an
// absolute http(s) URL that no skip rule refuses. It logs the count per
// file and in all; -v shows them.
func TestSharedLeadImages(t *testing.T) {
	// Counts pinned for a few files: media:content (TechCrunch, Macworld),
	// media:thumbnail in media:group (YouTube), share buttons and ad
	// counters only (the Washington Post's wellness feed), text only
	// (Daring Fireball).
	pinned := map[string]int{
		"feeds/real/feedjira_sample_feeds/TechCrunch.xml":        19,
		"feeds/real/feedjira_sample_feeds/youtube_atom.xml":      15,
		"feeds/real/rsparser_resources/macworld.rss":             30,
		"feeds/real/node_feedparser_test_feeds/wapowellness.xml": 0,
		"feeds/real/rsparser_resources/DaringFireball.rss":       0,
	}
	var files, items, withImage int
	var lines []string
	for _, sub := range []string{"feeds/real", "feeds/golden"} {
		dir := sharedDir(t, sub)
		walkFiles(t, dir, func(path string, _ fs.DirEntry, body []byte) {
			f, err := Parse(body, "", testFeedURL, testFetched)
			if err != nil || len(f.Items) == 0 {
				return
			}
			files++
			n := 0
			var example string
			for _, it := range f.Items {
				items++
				if it.ImageURL == "" {
					continue
				}
				n++
				if example == "" {
					example = it.ImageURL
				}
				u, err := url.Parse(it.ImageURL)
				switch {
				case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
					t.Errorf("%s: %s: image %q is not an absolute http(s) URL", path, it.URL, it.ImageURL)
				case len(it.ImageURL) > MaxURLBytes || notALeadImage(u):
					t.Errorf("%s: %s: image %q should have been skipped", path, it.URL, it.ImageURL)
				}
			}
			withImage += n
			rel, _ := filepath.Rel(sharedData, path)
			if want, ok := pinned[filepath.ToSlash(rel)]; ok {
				delete(pinned, filepath.ToSlash(rel))
				if n != want {
					t.Errorf("%s: %d items with an image, want %d", rel, n, want)
				}
			}
			lines = append(lines, strings.Join([]string{rel, ": ", strconv.Itoa(n), "/", strconv.Itoa(len(f.Items)), " items with an image ", example}, ""))
		})
	}
	for rel := range pinned {
		t.Errorf("%s: not found or not a feed", rel)
	}
	logSorted(t, lines)
	t.Logf("lead images: %d of %d items in %d feeds", withImage, items, files)
	if withImage == 0 {
		t.Error("no lead image found in any shared feed")
	}
}
