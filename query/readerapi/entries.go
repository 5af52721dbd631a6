package readerapi

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/newsflow/newsflow/operators/readstate"
	"github.com/newsflow/newsflow/operators/searchindex"
	"github.com/newsflow/newsflow/operators/story"
)

// Entries: a reader's articles of subscribed sources, with their read and
// starred state, as both APIs list them. An entry's id is its article's
// entry number (story.ArticleRecord.Num: its arrival order, unique while
// the article is kept). Articles come from the search index, newest
// published first (Search, over the whole cluster); each is looked up in
// the story state for its number, and its state in the reader's read
// state. A listing reads at most maxScan articles of its selection, the
// newest: its total counts those.

// maxScan bounds the articles one listing reads.
const maxScan = 2000

// Stories is what the APIs read of the story state.
type Stories interface {
	Article(id string) (story.ArticleRecord, string, bool)
	ArticleByNum(num uint64) (story.ArticleRecord, string, bool)
	Head(id string) (*story.Story, error)
}

// SearchFunc searches every partition (newest first without text).
type SearchFunc func(ctx context.Context, r searchindex.Request) ([]searchindex.Hit, *searchindex.Cursor, error)

// entry is an article as the APIs show it.
type entry struct {
	story.ArticleRecord
	StoryID string
	Read    bool
	Starred bool
}

// selection says which entries a listing holds.
type selection struct {
	sources []string // subscribed sources to read (nil with starredOnly)
	// status: "" (any), "read" or "unread".
	status string
	// starred: nil (any), or only starred / only not starred.
	starred *bool
	// after and before bound the published time (ms; 0 = open).
	after, before int64
	// starredOnly lists the reader's stars instead of sources.
	starredOnly bool
}

// listEntries returns the entries of sel, newest first, at most maxScan
// read: what the filters keep of them. rs is the reader's state, loaded
// here when nil (callers that list several selections load it once).
func (a *API) listEntries(ctx context.Context, user string, rs *readstate.State, sel selection) ([]entry, error) {
	var err error
	if rs == nil {
		if rs, err = a.deps.Reads.Load(ctx, user); err != nil {
			return nil, err
		}
	}
	var ids []string
	if sel.starredOnly {
		stars, err := a.deps.Reads.Stars(ctx, user)
		if err != nil {
			return nil, err
		}
		for _, st := range stars {
			ids = append(ids, st.ID)
		}
	} else if len(sel.sources) > 0 {
		if ids, err = a.scanSources(ctx, sel); err != nil {
			return nil, err
		}
	}
	heads := map[string]*story.Story{}
	var out []entry
	for _, id := range ids {
		e, ok := a.entryOf(id, rs, heads)
		if !ok || !sel.keeps(e) {
			continue
		}
		out = append(out, e)
	}
	if sel.starredOnly {
		slices.SortStableFunc(out, func(x, y entry) int { return compareNewest(x.Published, y.Published, x.Num, y.Num) })
	}
	return out, nil
}

func compareNewest(pa, pb int64, na, nb uint64) int {
	switch {
	case pa != pb:
		if pa > pb {
			return -1
		}
		return 1
	case na > nb:
		return -1
	case na < nb:
		return 1
	}
	return 0
}

// scanSources reads the ids of the newest maxScan articles of the
// selection's sources.
func (a *API) scanSources(ctx context.Context, sel selection) ([]string, error) {
	r := searchindex.Request{Sources: sel.sources, Limit: searchindex.MaxLimit}
	if sel.after > 0 {
		r.From = msTime(sel.after + 1)
	}
	if sel.before > 0 {
		r.To = msTime(sel.before)
	}
	var ids []string
	for len(ids) < maxScan {
		hits, next, err := a.deps.Search(ctx, r)
		if err != nil {
			return nil, fmt.Errorf("list entries: %w", err)
		}
		for _, h := range hits {
			ids = append(ids, h.ID)
		}
		if next == nil || len(hits) == 0 {
			break
		}
		r.After = next
	}
	return ids[:min(len(ids), maxScan)], nil
}

// entryOf looks an article up in the story state and the reader's state;
// heads caches the story heads of one listing.
func (a *API) entryOf(id string, rs *readstate.State, heads map[string]*story.Story) (entry, bool) {
	ar, storyID, ok := a.deps.Stories.Article(id)
	if !ok {
		return entry{}, false // gone since it was indexed
	}
	return a.entryOfRecord(ar, storyID, rs, heads), true
}

func (a *API) entryOfRecord(ar story.ArticleRecord, storyID string, rs *readstate.State, heads map[string]*story.Story) entry {
	head, ok := heads[storyID]
	if !ok {
		if h, err := a.deps.Stories.Head(storyID); err == nil {
			head = h
		} else {
			head = &story.Story{ID: storyID}
		}
		heads[storyID] = head
	}
	return entry{ArticleRecord: ar, StoryID: storyID, Read: rs.Read(head, ar.ID, ar.SourceID, ar.Published), Starred: rs.Starred(ar.ID)}
}

// keeps reports whether an entry passes the selection's filters.
func (sel selection) keeps(e entry) bool {
	switch {
	case sel.status == "read" && !e.Read, sel.status == "unread" && e.Read:
		return false
	case sel.starred != nil && *sel.starred != e.Starred:
		return false
	case sel.after > 0 && e.Published <= sel.after, sel.before > 0 && e.Published >= sel.before:
		return false
	}
	return true
}

// errNoEntry is returned for an entry number that names no article.
var errNoEntry = errors.New("no such entry")

// entryByNum returns one entry of the reader's.
func (a *API) entryByNum(ctx context.Context, user string, num int64) (entry, error) {
	if num < 0 {
		return entry{}, errNoEntry
	}
	ar, storyID, ok := a.deps.Stories.ArticleByNum(uint64(num))
	if !ok {
		return entry{}, errNoEntry
	}
	rs, err := a.deps.Reads.Load(ctx, user)
	if err != nil {
		return entry{}, err
	}
	return a.entryOfRecord(ar, storyID, rs, map[string]*story.Story{}), nil
}

// readstateArticle is what the read state keeps of an entry's article.
func readstateArticle(e entry) readstate.Article {
	return readstate.Article{ID: e.ID, StoryID: e.StoryID, SourceID: e.SourceID, Source: e.Source, Title: e.Title, URL: e.URL, Published: e.Published}
}

func msTime(ms int64) time.Time { return time.UnixMilli(ms).UTC() }
