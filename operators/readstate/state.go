package readstate

import "github.com/newsflow/newsflow/operators/story"

// State is one user's read state, loaded for answering one request.
type State struct {
	marks   map[string]mark
	byStory map[string][]string // story id at marking time → marked articles
	scopes  map[string]watermark
	starred map[string]bool
}

// Starred reports whether the article is starred.
func (s *State) Starred(id string) bool { return s.starred[id] }

// storyScopes lists the scope keys that cover a whole story: every
// article, the story's topics, the story and the stories merged into it.
func storyScopes(st *story.Story) []string {
	keys := make([]string, 0, 2+len(st.Topics)+len(st.MergedFrom))
	keys = append(keys, ScopeAll, ScopeStory+":"+st.ID)
	for _, id := range st.MergedFrom {
		keys = append(keys, ScopeStory+":"+id)
	}
	for _, t := range st.Topics {
		keys = append(keys, ScopeTopic+":"+t.Topic)
	}
	return keys
}

// covered returns the newest decision time of the watermarks among keys
// (and the source's) that cover an article published at published; 0 when
// none does.
func (s *State) covered(keys []string, source string, published int64) int64 {
	var at int64
	cover := func(k string) {
		if w, ok := s.scopes[k]; ok && w.Before >= published && w.At > at {
			at = w.At
		}
	}
	for _, k := range keys {
		cover(k)
	}
	if source != "" {
		cover(ScopeSource + ":" + source)
	}
	return at
}

// read decides one article: its mark when newer than every watermark that
// covers it, else whether any does.
func (s *State) read(keys []string, id, source string, published int64) bool {
	at := s.covered(keys, source, published)
	if m, ok := s.marks[id]; ok && m.At > at {
		return m.Read
	}
	return at > 0
}

// Read reports whether an article of st is read.
func (s *State) Read(st *story.Story, id, source string, published int64) bool {
	return s.read(storyScopes(st), id, source, published)
}

// Unread counts the unread articles of st, in total and per source. When
// a watermark falls inside the story's span the articles are read one by
// one from detail; otherwise the story's head is enough.
func (s *State) Unread(st *story.Story, detail func() (*story.Detail, error)) (int, map[string]int, error) {
	keys := storyScopes(st)
	partial := false
	span := func(k string) {
		if w, ok := s.scopes[k]; ok && w.Before >= st.FirstSeen && w.Before < st.LastSeen {
			partial = true
		}
	}
	for _, k := range keys {
		span(k)
	}
	for _, sc := range st.Sources {
		span(ScopeSource + ":" + sc.SourceID)
	}
	per := make(map[string]int, len(st.Sources))
	total := 0
	if partial {
		d, err := detail()
		if err != nil {
			return 0, nil, err
		}
		for _, a := range d.Articles {
			if !s.read(keys, a.ID, a.SourceID, a.Published) {
				per[a.SourceID]++
				total++
			}
		}
		return total, per, nil
	}
	// Every watermark covers all of the story or none of it: start from
	// the sources' counts and apply the article marks newer than it.
	cover := make(map[string]int64, len(st.Sources))
	for _, sc := range st.Sources {
		at := s.covered(keys, sc.SourceID, st.LastSeen)
		cover[sc.SourceID] = at
		if at == 0 {
			per[sc.SourceID] = sc.Articles
		}
	}
	for _, sid := range append([]string{st.ID}, st.MergedFrom...) {
		for _, id := range s.byStory[sid] {
			m := s.marks[id]
			at, ok := cover[m.Source]
			if !ok || m.At <= at {
				continue
			}
			switch {
			case at > 0 && !m.Read:
				per[m.Source]++
			case at == 0 && m.Read && per[m.Source] > 0:
				per[m.Source]--
			}
		}
	}
	for src, n := range per {
		if n == 0 {
			delete(per, src)
		}
		total += n
	}
	return total, per, nil
}
