package readstate

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/newsflow/newsflow/internal/meta"
)

// Subscriptions: the sources a reader follows, each in one folder. The
// client APIs list them (a Miniflux category, a Google Reader label) and
// take their entries from them; the web reader shares them. The
// collection "subs/<user>" holds a subscription under "f:<source id>" and
// a folder under "c:<folder id>". Every reader has folder 1, "All" (what
// Miniflux calls the default category): a subscription in it has no
// label in the Google Reader dialect.

// Folder is a reader's folder of subscriptions.
type Folder struct {
	ID    int64  `json:"id"`
	Title string `json:"title"`
}

// Subscription is a source a reader follows.
type Subscription struct {
	SourceID string `json:"source_id"`
	// Title is the reader's name for it ("" = the source's own name).
	Title  string `json:"title,omitempty"`
	Folder int64  `json:"folder"`
	// Added is when the reader subscribed, in ms since the epoch.
	Added int64 `json:"added"`
}

// DefaultFolder is the folder every reader has.
var DefaultFolder = Folder{ID: 1, Title: "All"}

// Limits of subscriptions.
const (
	MaxFolderTitleLen = 128
	MaxSubscriptions  = 5000
	MaxFolders        = 500
)

// Subscription errors callers branch on.
var (
	ErrNoFolder          = errors.New("no such folder")
	ErrFolderExists      = errors.New("a folder of that title exists")
	ErrNotSubscribed     = errors.New("not subscribed to that source")
	ErrInvalidFolderName = fmt.Errorf("a folder's title must be 1 to %d bytes of printable text", MaxFolderTitleLen)
	ErrTooMany           = errors.New("too many subscriptions or folders")
)

func folderKey(id int64) string { return "c:" + strconv.FormatInt(id, 10) }

// Folders lists a reader's folders by id, DefaultFolder first.
func (s *Store) Folders(ctx context.Context, user string) ([]Folder, error) {
	out := []Folder{DefaultFolder}
	err := scanJSON(ctx, s, user, collSubs, "c:", func(_ string, f Folder) { out = append(out, f) })
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out[1:], func(a, b Folder) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// Folder returns one of a reader's folders by id, or ErrNoFolder.
func (s *Store) Folder(ctx context.Context, user string, id int64) (Folder, error) {
	if id == DefaultFolder.ID {
		return DefaultFolder, nil
	}
	v, ok, err := s.b.get(ctx, user, collSubs, folderKey(id))
	if err != nil || !ok {
		if err == nil {
			err = ErrNoFolder
		}
		return Folder{}, err
	}
	var f Folder
	err = json.Unmarshal(v, &f)
	return f, err
}

// FolderByTitle returns the reader's folder of that title (titles compare
// without regard to case), or ErrNoFolder.
func (s *Store) FolderByTitle(ctx context.Context, user, title string) (Folder, error) {
	folders, err := s.Folders(ctx, user)
	if err != nil {
		return Folder{}, err
	}
	for _, f := range folders {
		if strings.EqualFold(f.Title, strings.TrimSpace(title)) {
			return f, nil
		}
	}
	return Folder{}, ErrNoFolder
}

func validTitle(title string) (string, error) {
	title = strings.TrimSpace(title)
	if title == "" || len(title) > MaxFolderTitleLen || !utf8.ValidString(title) ||
		strings.ContainsFunc(title, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return "", ErrInvalidFolderName
	}
	return title, nil
}

// AddFolder creates a folder and returns it; a folder of the same title
// (without regard to case) is ErrFolderExists. Ids are never reused: two
// nodes creating folders at once get different ids (two folders of one
// title created at the same instant may then both exist).
func (s *Store) AddFolder(ctx context.Context, user, title string) (Folder, error) {
	title, err := validTitle(title)
	if err != nil {
		return Folder{}, err
	}
	folders, err := s.Folders(ctx, user)
	if err != nil {
		return Folder{}, err
	}
	if len(folders) >= MaxFolders {
		return Folder{}, ErrTooMany
	}
	next := DefaultFolder.ID + 1
	for _, f := range folders {
		if strings.EqualFold(f.Title, title) {
			return Folder{}, ErrFolderExists
		}
		next = max(next, f.ID+1)
	}
	for {
		f := Folder{ID: next, Title: title}
		b, _ := json.Marshal(f)
		if err := s.b.apply(ctx, user, []Op{{Op: OpCreate, Coll: collSubs, Key: folderKey(f.ID), Value: b}}); err != nil {
			return Folder{}, fmt.Errorf("readstate: add folder: %w", err)
		}
		// Another request may have taken the id first.
		if got, err := s.Folder(ctx, user, f.ID); err != nil {
			return Folder{}, err
		} else if got == f {
			return f, nil
		}
		next++
	}
}

// create creates a key atomically when the store can, else puts it.
func (s *Store) create(ctx context.Context, collection, key string, value []byte) error {
	if c, ok := s.meta.(meta.Creator); ok {
		return c.Create(ctx, collection, key, value)
	}
	return s.meta.Put(ctx, collection, key, value)
}

// RenameFolder gives a folder a new title.
func (s *Store) RenameFolder(ctx context.Context, user string, id int64, title string) (Folder, error) {
	title, err := validTitle(title)
	if err != nil {
		return Folder{}, err
	}
	if id == DefaultFolder.ID {
		return Folder{}, fmt.Errorf("%w: the default folder keeps its title", ErrNoFolder)
	}
	if _, err := s.Folder(ctx, user, id); err != nil {
		return Folder{}, err
	}
	if other, err := s.FolderByTitle(ctx, user, title); err == nil && other.ID != id {
		return Folder{}, ErrFolderExists
	}
	f := Folder{ID: id, Title: title}
	b, _ := json.Marshal(f)
	return f, s.b.apply(ctx, user, []Op{{Op: OpPut, Coll: collSubs, Key: folderKey(id), Value: b}})
}

// DeleteFolder deletes a folder; its subscriptions move to DefaultFolder.
func (s *Store) DeleteFolder(ctx context.Context, user string, id int64) error {
	if id == DefaultFolder.ID {
		return fmt.Errorf("%w: the default folder cannot be deleted", ErrNoFolder)
	}
	if _, err := s.Folder(ctx, user, id); err != nil {
		return err
	}
	subs, err := s.Subscriptions(ctx, user)
	if err != nil {
		return err
	}
	var ops []Op
	for _, sub := range subs {
		if sub.Folder == id {
			sub.Folder = DefaultFolder.ID
			op, err := subOp(sub)
			if err != nil {
				return err
			}
			ops = append(ops, op)
		}
	}
	return s.b.apply(ctx, user, append(ops, Op{Op: OpDelete, Coll: collSubs, Key: folderKey(id)}))
}

// Subscriptions lists a reader's subscriptions, oldest first.
func (s *Store) Subscriptions(ctx context.Context, user string) ([]Subscription, error) {
	out := []Subscription{}
	err := scanJSON(ctx, s, user, collSubs, "f:", func(_ string, sub Subscription) { out = append(out, sub) })
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(out, func(a, b Subscription) int {
		return cmp.Or(cmp.Compare(a.Added, b.Added), cmp.Compare(a.SourceID, b.SourceID))
	})
	return out, nil
}

// Subscription returns the reader's subscription to a source, or
// ErrNotSubscribed.
func (s *Store) Subscription(ctx context.Context, user, sourceID string) (Subscription, error) {
	v, ok, err := s.b.get(ctx, user, collSubs, "f:"+sourceID)
	if err != nil || !ok {
		if err == nil {
			err = ErrNotSubscribed
		}
		return Subscription{}, err
	}
	var sub Subscription
	err = json.Unmarshal(v, &sub)
	return sub, err
}

// Subscribe adds a subscription (or moves and renames one the reader has:
// Added is kept). Its folder must exist.
func (s *Store) Subscribe(ctx context.Context, user string, sub Subscription) (Subscription, error) {
	if sub.SourceID == "" || strings.ContainsRune(sub.SourceID, 0) {
		return Subscription{}, errors.New("readstate: subscription without a source")
	}
	if sub.Folder == 0 {
		sub.Folder = DefaultFolder.ID
	}
	if _, err := s.Folder(ctx, user, sub.Folder); err != nil {
		return Subscription{}, err
	}
	sub.Title = strings.TrimSpace(sub.Title)
	if old, err := s.Subscription(ctx, user, sub.SourceID); err == nil {
		sub.Added = old.Added
	} else if !errors.Is(err, ErrNotSubscribed) {
		return Subscription{}, err
	} else {
		subs, err := s.Subscriptions(ctx, user)
		if err != nil {
			return Subscription{}, err
		}
		if len(subs) >= MaxSubscriptions {
			return Subscription{}, ErrTooMany
		}
		sub.Added = s.now().UnixMilli()
	}
	return sub, s.putSub(ctx, user, sub)
}

func subOp(sub Subscription) (Op, error) {
	b, err := json.Marshal(sub)
	return Op{Op: OpPut, Coll: collSubs, Key: "f:" + sub.SourceID, Value: b}, err
}

func (s *Store) putSub(ctx context.Context, user string, sub Subscription) error {
	op, err := subOp(sub)
	if err != nil {
		return err
	}
	if err := s.b.apply(ctx, user, []Op{op}); err != nil {
		return fmt.Errorf("readstate: subscribe to %s: %w", sub.SourceID, err)
	}
	return nil
}

// Unsubscribe removes a subscription; ErrNotSubscribed when there is none.
func (s *Store) Unsubscribe(ctx context.Context, user, sourceID string) error {
	if _, err := s.Subscription(ctx, user, sourceID); err != nil {
		return err
	}
	return s.b.apply(ctx, user, []Op{{Op: OpDelete, Coll: collSubs, Key: "f:" + sourceID}})
}
