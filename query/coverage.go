package query

import (
	"cmp"
	"slices"
	"strconv"
	"sync"

	"github.com/newsflow/newsflow/operators/story"
)

// Full coverage: a story card lists other outlets' headlines of the story,
// as Google News does, so a reader sees how others report it without
// opening the story.

// maxCoverage is how many other outlets' headlines a card lists.
const maxCoverage = 3

// coverageItem is one other outlet's headline of a story.
type coverageItem struct {
	ID       string `json:"id"`
	Title    string `json:"title"`
	URL      string `json:"url"`
	SourceID string `json:"source_id"`
	Source   string `json:"source,omitempty"`
	// Published is in ms since the epoch.
	Published int64 `json:"published_at"`
}

// coverageCache keeps the coverage of recent stories, keyed by story, the
// outlet the card shows and the story's article count (which changes when
// an article joins). It is dropped whole when it grows past its bound.
type coverageCache struct {
	mu sync.Mutex
	m  map[string][]coverageItem
}

const maxCoverageEntries = 20000

// coverage returns up to maxCoverage headlines of st from outlets other
// than the one its card shows (shown), the newest of each outlet, newest
// first; nil when the story has no other outlet or cannot be read.
func (s *Server) coverage(st *story.Story, shown string) []coverageItem {
	if st == nil || len(st.Sources) < 2 || s.deps.Stories == nil {
		return nil
	}
	key := st.ID + "\x00" + shown + "\x00" + strconv.Itoa(st.Articles)
	c := &s.covers
	c.mu.Lock()
	items, ok := c.m[key]
	c.mu.Unlock()
	if ok {
		return items
	}
	d, err := s.deps.Stories.Get(st.ID)
	if err != nil {
		return nil
	}
	newest := map[string]*story.ArticleRecord{}
	for i := range d.Articles {
		a := &d.Articles[i]
		if a.SourceID == shown || a.DuplicateOf != "" {
			continue
		}
		if b := newest[a.SourceID]; b == nil || a.Published > b.Published {
			newest[a.SourceID] = a
		}
	}
	for _, a := range newest {
		items = append(items, coverageItem{ID: a.ID, Title: a.Title, URL: a.URL, SourceID: a.SourceID, Source: a.Source, Published: a.Published})
	}
	slices.SortFunc(items, func(a, b coverageItem) int {
		if c := cmp.Compare(b.Published, a.Published); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	items = items[:min(len(items), maxCoverage)]
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxCoverageEntries {
		c.m = map[string][]coverageItem{}
	}
	c.m[key] = items
	c.mu.Unlock()
	return items
}
