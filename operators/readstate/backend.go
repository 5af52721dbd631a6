package readstate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/newsflow/newsflow/internal/meta"
)

// Collections of a user's state.
const (
	collReads = "reads" // "a:<article>" marks, "w:<scope>" watermarks
	collStars = "stars" // "<article>" starred articles
	collSubs  = "subs"  // "f:<source>" subscriptions, "c:<folder>" folders
)

var collections = []string{collReads, collStars, collSubs}

// Kinds of Op.
const (
	OpPut    = "put"    // set Key to Value
	OpCreate = "create" // set Key to Value unless Key holds a value
	OpDelete = "delete" // remove Key
	OpClear  = "clear"  // remove everything the user has, in every collection
)

// Op is one change to a user's state. An action (one record on Topic)
// carries the ops of one request, applied in order and atomically.
type Op struct {
	Op    string          `json:"op"`
	Coll  string          `json:"c,omitempty"`
	Key   string          `json:"k,omitempty"`
	Value json.RawMessage `json:"v,omitempty"`
}

func (o Op) check() error {
	switch o.Op {
	case OpClear:
		return nil
	case OpPut, OpCreate:
		if o.Value == nil {
			return fmt.Errorf("readstate: %s of %s/%s without a value", o.Op, o.Coll, o.Key)
		}
	case OpDelete:
	default:
		return fmt.Errorf("readstate: unknown op %q", o.Op)
	}
	if !isCollection(o.Coll) {
		return fmt.Errorf("readstate: unknown collection %q", o.Coll)
	}
	if o.Key == "" {
		return errors.New("readstate: op without a key")
	}
	return nil
}

func isCollection(c string) bool { return c == collReads || c == collStars || c == collSubs }

// backend is where a Store keeps each user's collections: the readstate
// operator's state (engine.go), or the metadata store (an older release's
// layout, and tests of the readers' logic alone).
type backend interface {
	get(ctx context.Context, user, coll, key string) ([]byte, bool, error)
	// scan calls fn for each key of the user's collection in key order;
	// the value is only valid during the call.
	scan(ctx context.Context, user, coll string, fn func(key string, v []byte) error) error
	// apply applies ops to the user's state; when it returns, a get or
	// scan on any node sees them.
	apply(ctx context.Context, user string, ops []Op) error
}

// metaBackend keeps user u's collection c in the metadata store's
// collection "c/u".
type metaBackend struct{ m meta.Store }

func metaCollection(user, coll string) string { return coll + "/" + user }

func (b metaBackend) get(ctx context.Context, user, coll, key string) ([]byte, bool, error) {
	return b.m.Get(ctx, metaCollection(user, coll), key)
}

func (b metaBackend) scan(ctx context.Context, user, coll string, fn func(string, []byte) error) error {
	return b.m.Scan(ctx, metaCollection(user, coll), fn)
}

func (b metaBackend) apply(ctx context.Context, user string, ops []Op) error {
	for _, o := range ops {
		if err := o.check(); err != nil {
			return err
		}
		c := metaCollection(user, o.Coll)
		var err error
		switch o.Op {
		case OpPut:
			err = b.m.Put(ctx, c, o.Key, o.Value)
		case OpCreate:
			if cr, ok := b.m.(meta.Creator); ok {
				if err = cr.Create(ctx, c, o.Key, o.Value); errors.Is(err, meta.ErrExists) {
					err = nil
				}
			} else if _, ok, gerr := b.m.Get(ctx, c, o.Key); gerr != nil {
				err = gerr
			} else if !ok {
				err = b.m.Put(ctx, c, o.Key, o.Value)
			}
		case OpDelete:
			err = b.m.Delete(ctx, c, o.Key)
		case OpClear:
			err = clearMeta(ctx, b.m, user)
		}
		if err != nil {
			return fmt.Errorf("readstate: %s %s: %w", o.Op, strings.TrimSuffix(c+" "+o.Key, " "), err)
		}
	}
	return nil
}

// clearMeta deletes every key of user's collections in m.
func clearMeta(ctx context.Context, m meta.Store, user string) error {
	for _, coll := range collections {
		var keys []string
		if err := m.Scan(ctx, metaCollection(user, coll), func(k string, _ []byte) error { keys = append(keys, k); return nil }); err != nil {
			return err
		}
		for _, k := range keys {
			if err := m.Delete(ctx, metaCollection(user, coll), k); err != nil {
				return err
			}
		}
	}
	return nil
}
