package story

import (
	"encoding/binary"
	"encoding/json"
	"fmt"

	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/state"
)

// Read replicas. In a cluster the story stage keeps a standby copy of its
// state on every node that does not run its task (engine.Spec.Standby):
// the engine applies the task's changelog to the node's store, commit by
// commit, and calls Follow. Follow keeps the same query view the task
// publishes, from the story records (s keys) each commit changed, and
// points the reads of committed state (a story's articles, an article,
// an image, merges) at the copy. So every node answers the story queries
// from its own copy, a commit behind the writer at most, and goes on
// answering while the writer fails over; engine.Freshness says how stale.

var _ engine.Follower = (*Operator)(nil)

// Follow implements engine.Follower.
func (o *Operator) Follow(_ int32, r state.Reader, changes []eventlog.Change) error {
	if changes == nil {
		return o.loadReplica(r)
	}
	old := o.view.Load()
	var v *view
	for _, ch := range changes {
		num, ok := storyNumOf(ch.Key)
		if !ok {
			continue
		}
		if v == nil {
			v = &view{stories: make(map[uint64]*Story, len(old.stories)+8), watermark: old.watermark}
			for n, st := range old.stories {
				v.stories[n] = st
			}
		}
		if err := v.apply(num, ch); err != nil {
			return err
		}
	}
	if v != nil {
		v.prune(o.opts.ViewWindow)
		o.storeView(v)
	}
	o.reader.Store(&r)
	return nil
}

// loadReplica builds the view from every story record of the copy.
func (o *Operator) loadReplica(r state.Reader) error {
	v := &view{stories: map[uint64]*Story{}}
	err := r.Scan([]byte("s"), []byte("t"), func(k, val []byte) error {
		num, ok := storyNumOf(k)
		if !ok {
			return nil
		}
		return v.apply(num, eventlog.Change{Key: k, Value: val})
	})
	if err != nil {
		return fmt.Errorf("stories: load replica: %w", err)
	}
	v.prune(o.opts.ViewWindow)
	o.storeView(v)
	o.reader.Store(&r)
	return nil
}

// storyNumOf returns the story number of an s key.
func storyNumOf(key []byte) (uint64, bool) {
	if len(key) != 9 || key[0] != 's' {
		return 0, false
	}
	return binary.BigEndian.Uint64(key[1:]), true
}

// apply applies a change of story record num to v: a story merged into
// another or deleted leaves the view.
func (v *view) apply(num uint64, ch eventlog.Change) error {
	if ch.Delete {
		delete(v.stories, num)
		return nil
	}
	var rec storyRecord
	if err := json.Unmarshal(ch.Value, &rec); err != nil {
		return fmt.Errorf("stories: corrupt story record %d: %w", num, err)
	}
	if rec.MergedInto != "" {
		delete(v.stories, num)
		return nil
	}
	st := rec.Story
	v.stories[num] = &st
	v.watermark = max(v.watermark, st.LastSeen)
	return nil
}
