// Package readstate keeps what each reader has read and starred: the one
// model the web reader and the client APIs share.
//
// Read state is kept as decisions, newest first wins:
//   - a mark on one article (read or unread), and
//   - a watermark on a scope (every article, one source, one topic or one
//     story): the articles of the scope published at or before it are read.
//
// An article is read when its newest applicable decision says so: an
// article mark newer than every watermark that covers the article decides;
// otherwise the article is read if a watermark covers it. Marking a story
// read sets the story's watermark at its latest article, so an article
// that joins the story later comes back unread. Counting the unread
// articles of a story needs only the story's head (first and latest
// article time, articles per source) unless a watermark falls inside the
// story's span, when its articles are read one by one.
//
// Each user's state is three collections: "reads" holds article marks
// under "a:<article>" and watermarks under "w:<scope>"; "stars" holds
// starred articles with what is needed to list them after they leave the
// story view; "subs" the reader's subscriptions and folders (subs.go). A
// node keeps them as the readstate operator's state (operator.go): every
// request that changes them appends one action to the reader.actions
// topic, applied exactly once into Pebble by the task of the user's
// partition. Releases before it kept them in the metadata store
// ("reads/<user>" and so on); Migrate moves them.
package readstate

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/newsflow/newsflow/internal/meta"
	"github.com/newsflow/newsflow/operators/story"
)

// Scope kinds of a watermark.
const (
	ScopeAll    = "all"
	ScopeSource = "source"
	ScopeTopic  = "topic"
	ScopeStory  = "story"
)

// Scope names the articles a watermark covers: every article (Kind
// ScopeAll), or those of one source, topic or story (Value).
type Scope struct {
	Kind  string `json:"kind"`
	Value string `json:"value,omitempty"`
}

// ErrBadScope is returned for a scope that is not one of the kinds, or
// lacks its value.
var ErrBadScope = errors.New("readstate: bad scope")

func (s Scope) key() (string, error) {
	switch s.Kind {
	case ScopeAll:
		return "w:" + ScopeAll, nil
	case ScopeSource, ScopeTopic, ScopeStory:
		if s.Value == "" {
			return "", fmt.Errorf("%w: %s needs a value", ErrBadScope, s.Kind)
		}
		return "w:" + s.Kind + ":" + s.Value, nil
	}
	return "", fmt.Errorf("%w: kind %q (want all, source, topic or story)", ErrBadScope, s.Kind)
}

// Article is what the state records of an article a reader marks or
// stars.
type Article struct {
	ID       string `json:"id"`
	StoryID  string `json:"story_id,omitempty"`
	SourceID string `json:"source_id,omitempty"`
	Source   string `json:"source,omitempty"`
	Title    string `json:"title,omitempty"`
	URL      string `json:"url,omitempty"`
	// Published is in ms since the epoch.
	Published int64 `json:"published_at"`
}

// ArticleOf is the readstate view of a story stage article.
func ArticleOf(a story.Article, storyID string) Article {
	return Article{ID: a.ID, StoryID: storyID, SourceID: a.SourceID, Source: a.Source, Title: a.Title, URL: a.URL, Published: a.Published}
}

// mark is an article's read decision, stored under "a:<article>".
type mark struct {
	Read bool `json:"read"`
	// At orders decisions (ns since the epoch).
	At        int64  `json:"at"`
	Story     string `json:"story,omitempty"`
	Source    string `json:"source,omitempty"`
	Published int64  `json:"published"`
}

// watermark is a scope's decision, stored under "w:<scope>".
type watermark struct {
	// Before: articles published at or before it (ms) are read.
	Before int64 `json:"before"`
	At     int64 `json:"at"`
}

// Star is a starred article.
type Star struct {
	Article
	// StarredAt is in ms since the epoch.
	StarredAt int64 `json:"starred_at"`
}

// Store keeps the read state of every user. It is safe for concurrent
// use; two writes for one user at once both land, the later one deciding
// where they overlap.
type Store struct {
	b backend
	// meta numbers feeds (feedids.go), which every reader shares.
	meta meta.Store
	now  func() time.Time
	// last keeps decision times strictly increasing within the process
	// (clock steps and two writes in one nanosecond tick).
	last lastTick
}

// New returns a store that keeps the readers' state in m, as releases
// before the readstate operator did (Operator.Store keeps it in the
// engine); now is the clock (time.Now when nil).
func New(m meta.Store, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{b: metaBackend{m}, meta: m, now: now}
}

// MarkArticles records that user read (or did not read) the articles, in
// one action.
func (s *Store) MarkArticles(ctx context.Context, user string, read bool, arts ...Article) error {
	ops := make([]Op, 0, len(arts))
	for _, a := range arts {
		if a.ID == "" {
			return errors.New("readstate: article without id")
		}
		b, err := json.Marshal(mark{Read: read, At: s.last.next(s.now()), Story: a.StoryID, Source: a.SourceID, Published: a.Published})
		if err != nil {
			return err
		}
		ops = append(ops, Op{Op: OpPut, Coll: collReads, Key: "a:" + a.ID, Value: b})
	}
	if err := s.b.apply(ctx, user, ops); err != nil {
		return fmt.Errorf("readstate: mark %d articles: %w", len(arts), err)
	}
	return nil
}

// MarkScope records that every article of the scope published at or
// before before (ms) is read. For the whole reading list it also drops
// the article marks it supersedes, which keeps the state small.
func (s *Store) MarkScope(ctx context.Context, user string, sc Scope, before int64) error {
	k, err := sc.key()
	if err != nil {
		return err
	}
	b, err := json.Marshal(watermark{Before: before, At: s.last.next(s.now())})
	if err != nil {
		return err
	}
	ops := []Op{{Op: OpPut, Coll: collReads, Key: k, Value: b}}
	if sc.Kind == ScopeAll {
		err = s.b.scan(ctx, user, collReads, func(key string, v []byte) error {
			switch {
			case strings.HasPrefix(key, "a:"):
				var m mark
				if json.Unmarshal(v, &m) == nil && m.Published <= before {
					ops = append(ops, Op{Op: OpDelete, Coll: collReads, Key: key})
				}
			case strings.HasPrefix(key, "w:") && key != k:
				var w watermark
				if json.Unmarshal(v, &w) == nil && w.Before <= before {
					ops = append(ops, Op{Op: OpDelete, Coll: collReads, Key: key})
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	if err := s.b.apply(ctx, user, ops); err != nil {
		return fmt.Errorf("readstate: mark %s read: %w", k, err)
	}
	return nil
}

// ClearScope removes a scope's watermark (a story marked unread again).
func (s *Store) ClearScope(ctx context.Context, user string, sc Scope) error {
	k, err := sc.key()
	if err != nil {
		return err
	}
	return s.b.apply(ctx, user, []Op{{Op: OpDelete, Coll: collReads, Key: k}})
}

// SetStar stars or unstars an article. Starring an article twice keeps
// the first time.
func (s *Store) SetStar(ctx context.Context, user string, a Article, starred bool) (Star, error) {
	if a.ID == "" {
		return Star{}, errors.New("readstate: article without id")
	}
	if !starred {
		return Star{Article: a}, s.b.apply(ctx, user, []Op{{Op: OpDelete, Coll: collStars, Key: a.ID}})
	}
	if st, ok, err := s.star(ctx, user, a.ID); err != nil || ok {
		return st, err
	}
	b, err := json.Marshal(Star{Article: a, StarredAt: s.now().UnixMilli()})
	if err != nil {
		return Star{}, err
	}
	if err := s.b.apply(ctx, user, []Op{{Op: OpCreate, Coll: collStars, Key: a.ID, Value: b}}); err != nil {
		return Star{}, err
	}
	st, _, err := s.star(ctx, user, a.ID)
	return st, err
}

func (s *Store) star(ctx context.Context, user, id string) (Star, bool, error) {
	raw, ok, err := s.b.get(ctx, user, collStars, id)
	if err != nil || !ok {
		return Star{}, false, err
	}
	var st Star
	if err := json.Unmarshal(raw, &st); err != nil {
		return Star{}, false, fmt.Errorf("readstate: star %s of %s: %w", id, user, err)
	}
	return st, true, nil
}

// Stars lists user's starred articles, the most recently starred first.
func (s *Store) Stars(ctx context.Context, user string) ([]Star, error) {
	var out []Star
	err := scanJSON(ctx, s, user, collStars, "", func(_ string, st Star) { out = append(out, st) })
	slices.SortFunc(out, func(a, b Star) int {
		if c := cmp.Compare(b.StarredAt, a.StarredAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, err
}

// DeleteUser removes everything kept for user.
func (s *Store) DeleteUser(ctx context.Context, user string) error {
	return s.b.apply(ctx, user, []Op{{Op: OpClear}})
}

// forgetChunk bounds the deletions of one action.
const forgetChunk = 1000

// Forget deletes user's marks on articles published before before (ms):
// what the stages no longer keep (see retention in the node's
// configuration) cannot be listed, so its marks only take space. Marks
// without a publish time, watermarks and stars stay. It returns how many
// marks it deleted.
func (s *Store) Forget(ctx context.Context, user string, before int64) (int, error) {
	var old []Op
	err := scanJSON(ctx, s, user, collReads, "a:", func(k string, m mark) {
		if m.Published != 0 && m.Published < before {
			old = append(old, Op{Op: OpDelete, Coll: collReads, Key: k})
		}
	})
	if err != nil {
		return 0, err
	}
	for ops := range slices.Chunk(old, forgetChunk) {
		if err := s.b.apply(ctx, user, ops); err != nil {
			return 0, err
		}
	}
	return len(old), nil
}

// Load reads user's state for answering one request.
func (s *Store) Load(ctx context.Context, user string) (*State, error) {
	st := &State{marks: map[string]mark{}, byStory: map[string][]string{}, scopes: map[string]watermark{}, starred: map[string]bool{}}
	err := s.b.scan(ctx, user, collReads, func(k string, v []byte) error {
		switch {
		case strings.HasPrefix(k, "a:"):
			var m mark
			if err := json.Unmarshal(v, &m); err != nil {
				return fmt.Errorf("readstate: %s: %w", k, err)
			}
			id := k[2:]
			st.marks[id] = m
			st.byStory[m.Story] = append(st.byStory[m.Story], id)
		case strings.HasPrefix(k, "w:"):
			var w watermark
			if err := json.Unmarshal(v, &w); err != nil {
				return fmt.Errorf("readstate: %s: %w", k, err)
			}
			st.scopes[k[2:]] = w
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = s.b.scan(ctx, user, collStars, func(k string, _ []byte) error { st.starred[k] = true; return nil })
	return st, err
}

// scanJSON calls fn for each key of user's collection coll that begins
// with prefix, in key order, with its value decoded.
func scanJSON[T any](ctx context.Context, s *Store, user, coll, prefix string, fn func(key string, v T)) error {
	return s.b.scan(ctx, user, coll, func(k string, raw []byte) error {
		if !strings.HasPrefix(k, prefix) {
			return nil
		}
		var v T
		if err := json.Unmarshal(raw, &v); err != nil {
			return fmt.Errorf("readstate: %s %s of %s: %w", coll, k, user, err)
		}
		fn(k, v)
		return nil
	})
}

// lastTick hands out strictly increasing decision times.
type lastTick struct {
	mu   sync.Mutex
	last int64
}

func (l *lastTick) next(now time.Time) int64 {
	t := now.UnixNano()
	l.mu.Lock()
	defer l.mu.Unlock()
	if t <= l.last {
		t = l.last + 1
	}
	l.last = t
	return t
}
