package story

import (
	"bytes"
	"container/heap"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/newsflow/newsflow/state"
)

// Builder state keys:
//
//	c…                          the clusterer (see Clusterer.Persist)
//	m                           next article number (uvarint), watermark (varint)
//	a <article id>              ArticleRecord (JSON)
//	w <time:8> <article num:8>  article id: the articles in the window, by time
//	s <story num:8>             storyRecord (JSON)
//	i <story id>                story num (8 bytes)
//	k <story num:8> <num:8>     article id: a story's articles, in arrival order
//	g <image id>                image URL, then NUL and the latest first-seen time (8 bytes) of
//	                            the articles with it: every image of an article (ImageID), for the proxy
//	x <last:8> <story num:8>    nothing: the closed stories by the latest first-seen time of
//	                            their articles (sign bit flipped, so that it sorts), for
//	                            retention
//	y <time:8> <article num:8>  story num (8 bytes), article id: every article by its
//	                            first-seen time (sign bit flipped), for retention
//	n <article num:8>           article id: the article an entry number names (the client APIs'
//	                            entry ids); it names a later number's article no more once
//	                            that article is applied again (its record's num differs)
//
// The meta value has a third field, 1, once the closed stories are indexed
// under x; state written before has none, and the next Persist indexes them.
var (
	prefixCluster  = []byte("c")
	keyBuilderMeta = []byte("m")
)

// storyRecord is a Story with the fields the builder needs to continue.
type storyRecord struct {
	Story
	Num          uint64 `json:"num"`
	RepPublished int64  `json:"rep_published"`
	// LastArrival is Story.lastArrival; absent from stories stored before
	// first-seen times.
	LastArrival int64  `json:"last_arrival,omitempty"`
	RepImage    string `json:"rep_image,omitempty"`
	FirstImage  string `json:"first_image,omitempty"`
	// FirstImageNum is the article number of FirstImage.
	FirstImageNum uint64             `json:"first_image_num,omitempty"`
	TopicSum      map[string]float64 `json:"topic_sum,omitempty"`
	Recent        []recentJSON       `json:"recent,omitempty"`
}

type recentJSON struct {
	T   int64  `json:"t"`
	Src string `json:"s"`
}

func u64(b []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(b, v) }

func articleKey(id string) []byte { return append([]byte("a"), id...) }
func storyNumKey(num uint64) []byte {
	return u64([]byte("s"), num)
}
func storyIDKey(id string) []byte { return append([]byte("i"), id...) }
func imageKey(id string) []byte   { return append([]byte("g"), id...) }
func numKey(num uint64) []byte    { return u64([]byte("n"), num) }

// agedKey is the y key of article num.
func agedKey(published int64, num uint64) []byte {
	return u64(u64([]byte("y"), uint64(published)^1<<63), num)
}

// closedKey is the x key of a closed story.
func closedKey(last int64, num uint64) []byte {
	return u64(u64([]byte("x"), uint64(last)^1<<63), num)
}

// imageValue is the g value of an image: its URL, and the latest publish
// time of the articles that have it.
func imageValue(url string, latest int64) []byte {
	return u64(append([]byte(url), 0), uint64(latest))
}

// parseImage splits a g value; a value stored before the time was added
// is a URL alone, as old as can be.
func parseImage(v []byte) (url string, latest int64) {
	u, t, ok := bytes.Cut(v, []byte{0})
	if !ok || len(t) != 8 {
		return string(v), math.MinInt64
	}
	return string(u), int64(binary.BigEndian.Uint64(t))
}

// Persist stages every change since the last Persist into w; r reads the
// committed state w's batch goes on top of.
//
// Retention: a story that leaves memory (its latest article left the
// story window, so it is final) is indexed under x by that time. Persist
// deletes every closed story whose latest article is older than the
// retention age behind the watermark, with the stories merged into it:
// their records (s), id mappings (i), member lists (k), their articles'
// records (a) and, when no article younger than the retention age has
// it, their articles' images (g), and the merge redirects to them in
// memory. Which stories go depends only on the articles applied, never on
// where commits fell: a story closed since the last Persist is deleted
// from what was committed and its changes since are not written.
// Deletions are staged first, so a key the batch writes again (an article
// applied again into a new story) keeps its new value.
func (b *Builder) Persist(w state.Writer, r state.Reader) error {
	gone, err := b.retire(w, r)
	if err != nil {
		return err
	}
	if err := b.backfillIndexes(w, r); err != nil {
		return err
	}
	if err := b.c.Persist(w, prefixCluster); err != nil {
		return err
	}
	if err := b.persistArticles(w, r, gone); err != nil {
		return err
	}
	// After the articles: one may have expired since it was applied.
	if err := b.persistExpired(w); err != nil {
		return err
	}
	if err := b.persistStories(w, gone); err != nil {
		return err
	}
	if err := b.persistClosed(w, gone); err != nil {
		return err
	}
	return w.Set(keyBuilderMeta, b.metaValue())
}

// backfillIndexes writes, once, the indexes that state written before
// them lacks: the closed stories' (x, see indexClosed) and the entry
// numbers' (n, see indexNums).
func (b *Builder) backfillIndexes(w state.Writer, r state.Reader) error {
	if b.backfill {
		if err := b.indexClosed(w, r); err != nil {
			return err
		}
		b.backfill = false
	}
	if b.backfillNums {
		if err := indexNums(w, r); err != nil {
			return err
		}
		b.backfillNums = false
	}
	return nil
}

// persistArticles writes the articles applied since the last Persist,
// but those this batch deletes: with their story (in gone) or by their
// age.
func (b *Builder) persistArticles(w state.Writer, r state.Reader, gone map[uint64]bool) error {
	images := map[string]int64{} // image id → latest first-seen time staged
	cut, retain := b.cutoff()
	for _, ar := range b.dirtyArticles {
		if gone[ar.Story] || (retain && ar.Seen() < cut) {
			continue // deleted in this batch, with its story or by its age
		}
		if err := b.persistArticle(w, r, images, ar); err != nil {
			return err
		}
	}
	b.dirtyArticles = b.dirtyArticles[:0]
	return nil
}

// persistArticle writes an article's record (a) and its image (g, see
// stageImage), and the index entries of an article new since the last
// Persist.
func (b *Builder) persistArticle(w state.Writer, r state.Reader, images map[string]int64, ar ArticleRecord) error {
	v, err := json.Marshal(ar)
	if err != nil {
		return err
	}
	if err := w.Set(articleKey(ar.ID), v); err != nil {
		return err
	}
	if ar.ImageURL != "" {
		if err := b.stageImage(w, r, images, ar); err != nil {
			return err
		}
	}
	if !ar.fresh {
		return nil // an edit: indexes are unchanged
	}
	return indexArticle(w, ar)
}

// indexArticle writes a new article's entries in the window (w), its
// story's members (k), the articles by first-seen time (y) and the entry
// numbers (n).
func indexArticle(w state.Writer, ar ArticleRecord) error {
	if err := w.Set(u64(u64([]byte("w"), uint64(ar.Published)), ar.Num), []byte(ar.ID)); err != nil {
		return err
	}
	if err := w.Set(u64(u64([]byte("k"), ar.Story), ar.Num), []byte(ar.ID)); err != nil {
		return err
	}
	if err := w.Set(agedKey(ar.Seen(), ar.Num), append(u64(nil, ar.Story), ar.ID...)); err != nil {
		return err
	}
	return w.Set(numKey(ar.Num), []byte(ar.ID))
}

// persistExpired deletes the window entries (w) of the articles that left
// the window since the last Persist.
func (b *Builder) persistExpired(w state.Writer) error {
	for _, e := range b.expired {
		if err := w.Delete(u64(u64([]byte("w"), uint64(e.last)), e.num)); err != nil {
			return err
		}
	}
	b.expired = b.expired[:0]
	return nil
}

// persistStories writes the record (s) and id mapping (i) of every story
// changed since the last Persist but those in gone, in story order.
func (b *Builder) persistStories(w state.Writer, gone map[uint64]bool) error {
	for _, num := range slices.Sorted(maps.Keys(b.dirtyStories)) {
		if gone[num] {
			continue
		}
		st := b.dirtyStories[num]
		v, err := json.Marshal(newStoryRecord(num, st))
		if err != nil {
			return err
		}
		if err := w.Set(storyNumKey(num), v); err != nil {
			return err
		}
		if err := w.Set(storyIDKey(st.ID), u64(nil, num)); err != nil {
			return err
		}
	}
	clear(b.dirtyStories)
	return nil
}

// newStoryRecord returns the record of story num.
func newStoryRecord(num uint64, st *Story) storyRecord {
	rec := storyRecord{Story: *st, Num: num, RepPublished: st.repPublished, LastArrival: st.lastArrival, TopicSum: st.topicSum,
		RepImage: st.repImage, FirstImage: st.firstImage, FirstImageNum: st.firstImageNum}
	for _, r := range st.recent {
		rec.Recent = append(rec.Recent, recentJSON{T: r.t, Src: r.src})
	}
	return rec
}

// persistClosed indexes the stories that left memory since the last
// Persist under x, but those in gone.
func (b *Builder) persistClosed(w state.Writer, gone map[uint64]bool) error {
	for _, e := range b.closed {
		if !gone[e.num] {
			if err := w.Set(closedKey(e.last, e.num), nil); err != nil {
				return err
			}
		}
	}
	b.closed = b.closed[:0]
	return nil
}

// metaValue is the meta value (m): the next article number, the
// watermark, metaVersion and the newest first-seen time.
func (b *Builder) metaValue() []byte {
	meta := binary.AppendVarint(binary.AppendUvarint(nil, b.nextArt), b.wm)
	meta = binary.AppendUvarint(meta, metaVersion)
	return binary.AppendVarint(meta, b.seenWM)
}

// metaVersion is the meta value's third field: 1 once the closed stories
// are indexed under x, 2 once every article's entry number is indexed
// under n, 3 once the fourth field holds the newest first-seen time (in
// state written before, the watermark stands in for it).
const metaVersion = 3

// indexNums writes the n entry of every committed article: state written
// before entry numbers has none.
func indexNums(w state.Writer, r state.Reader) error {
	return r.Scan([]byte("a"), []byte("b"), func(_, v []byte) error {
		var ar ArticleRecord
		if err := json.Unmarshal(v, &ar); err != nil {
			return fmt.Errorf("%w: article: %v", errCorrupt, err)
		}
		return w.Set(numKey(ar.Num), []byte(ar.ID))
	})
}

// stageImage writes the g entry of an article's image with the latest
// first-seen time of the articles that have it: committed, staged by this
// Persist, and this one.
func (b *Builder) stageImage(w state.Writer, r state.Reader, staged map[string]int64, ar ArticleRecord) error {
	id := ImageID(ar.ImageURL)
	latest, ok := staged[id]
	if !ok {
		latest = math.MinInt64
		v, found, err := r.Get(imageKey(id))
		if err != nil {
			return err
		}
		if found {
			_, latest = parseImage(v)
		}
	}
	latest = max(latest, ar.Seen())
	staged[id] = latest
	return w.Set(imageKey(id), imageValue(ar.ImageURL, latest))
}

// retire stages the deletion of the closed stories older than the
// retention age (see Persist) and returns the numbers of the stories it
// deletes, merged ones included.
func (b *Builder) retire(w state.Writer, r state.Reader) (map[uint64]bool, error) {
	gone := map[uint64]bool{}
	b.deleted = b.deleted[:0]
	cut, ok := b.cutoff()
	if !ok {
		return gone, nil
	}
	var due []closedStory
	err := r.Scan([]byte("x"), closedKey(cut, 0), func(k, _ []byte) error {
		if len(k) != 17 {
			return fmt.Errorf("%w: closed story key %x", errCorrupt, k)
		}
		due = append(due, closedStory{last: int64(binary.BigEndian.Uint64(k[1:]) ^ 1<<63), num: binary.BigEndian.Uint64(k[9:])})
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, e := range b.closed {
		if e.last < cut {
			due = append(due, e)
		}
	}
	if err := b.retireArticles(w, r, cut); err != nil {
		return nil, err
	}
	if len(due) == 0 {
		return gone, nil
	}
	// Stories made since the last Persist have no committed id mapping.
	staged := make(map[string]uint64, len(b.dirtyStories))
	for num, st := range b.dirtyStories {
		staged[st.ID] = num
	}
	for _, e := range due {
		if err := b.retireStory(w, r, e, cut, staged, gone); err != nil {
			return nil, err
		}
	}
	return gone, nil
}

// retireArticles deletes the committed articles first seen before cut, in
// whatever story, with their member entries and their images no younger
// article has: a story whose latest article is recent keeps only its
// articles within the retention age (its aggregates still count all).
func (b *Builder) retireArticles(w state.Writer, r state.Reader, cut int64) error {
	return r.Scan([]byte("y"), agedKey(cut, 0), func(k, v []byte) error {
		if len(k) != 17 || len(v) < 8 {
			return fmt.Errorf("%w: aged article key %x", errCorrupt, k)
		}
		if err := w.Delete(k); err != nil {
			return err
		}
		num, story, id := binary.BigEndian.Uint64(k[9:]), binary.BigEndian.Uint64(v), string(v[8:])
		if err := w.Delete(u64(u64([]byte("k"), story), num)); err != nil {
			return err
		}
		if err := w.Delete(numKey(num)); err != nil {
			return err
		}
		raw, ok, err := r.Get(articleKey(id))
		if err != nil || !ok {
			return err
		}
		var ar ArticleRecord
		if err := json.Unmarshal(raw, &ar); err != nil {
			return fmt.Errorf("%w: article %s: %v", errCorrupt, id, err)
		}
		if ar.Num != num || ar.Seen() >= cut {
			return nil // applied again since
		}
		return b.deleteArticle(w, r, &ar, cut)
	})
}

// deleteArticle deletes an article's record, and its image when no
// article younger than cut has it.
func (b *Builder) deleteArticle(w state.Writer, r state.Reader, ar *ArticleRecord, cut int64) error {
	if err := w.Delete(articleKey(ar.ID)); err != nil {
		return err
	}
	if ar.ImageURL == "" {
		return nil
	}
	ik := imageKey(ImageID(ar.ImageURL))
	v, ok, err := r.Get(ik)
	if err != nil || !ok {
		return err
	}
	if _, latest := parseImage(v); latest < cut {
		return w.Delete(ik)
	}
	return nil
}

// retireStory deletes closed story e and the stories merged into it.
func (b *Builder) retireStory(w state.Writer, r state.Reader, e closedStory, cut int64, staged map[string]uint64, gone map[uint64]bool) error {
	st := e.st
	if st == nil { // committed: its index entry goes too
		if err := w.Delete(closedKey(e.last, e.num)); err != nil {
			return err
		}
		raw, ok, err := r.Get(storyNumKey(e.num))
		if err != nil {
			return err
		}
		if !ok {
			return nil // deleted before its index entry: nothing left
		}
		var rec storyRecord
		if err := json.Unmarshal(raw, &rec); err != nil {
			return fmt.Errorf("%w: story %d: %v", errCorrupt, e.num, err)
		}
		st = &rec.Story
	}
	type member struct {
		id  string
		num uint64
	}
	stories := []member{{st.ID, e.num}}
	for _, id := range st.MergedFrom {
		num, ok := staged[id]
		if !ok {
			v, found, err := r.Get(storyIDKey(id))
			if err != nil {
				return err
			}
			if !found || len(v) != 8 {
				continue
			}
			num = binary.BigEndian.Uint64(v)
		}
		stories = append(stories, member{id, num})
		delete(b.redirect, num)
		delete(b.mergedID, id)
	}
	for _, s := range stories {
		gone[s.num] = true
		b.deleted = append(b.deleted, s.num)
		if err := b.deleteMembers(w, r, s.num, cut); err != nil {
			return err
		}
		if err := w.Delete(storyNumKey(s.num)); err != nil {
			return err
		}
		// The id may name a newer story since (its founding article
		// applied again after it left the window).
		v, ok, err := r.Get(storyIDKey(s.id))
		if err != nil {
			return err
		}
		if ok && len(v) == 8 && binary.BigEndian.Uint64(v) == s.num {
			if err := w.Delete(storyIDKey(s.id)); err != nil {
				return err
			}
		}
	}
	return nil
}

// deleteMembers deletes the committed member list of story num, its
// articles that still belong to it, and their images that no article
// younger than cut has.
func (b *Builder) deleteMembers(w state.Writer, r state.Reader, num uint64, cut int64) error {
	return scanMembers(r, num, func(k []byte, ar *ArticleRecord) error {
		if err := w.Delete(k); err != nil {
			return err
		}
		if len(k) != 17 {
			return fmt.Errorf("%w: member key %x", errCorrupt, k)
		}
		if err := w.Delete(numKey(binary.BigEndian.Uint64(k[9:]))); err != nil {
			return err
		}
		if ar == nil || ar.Story != num {
			return nil // gone, or applied again since into another story
		}
		return b.deleteArticle(w, r, ar, cut)
	})
}

// scanMembers calls fn with each member key of story num, in arrival
// order, and the record of the article it names (nil if there is none).
func scanMembers(r state.Reader, num uint64, fn func(key []byte, ar *ArticleRecord) error) error {
	return r.Scan(u64([]byte("k"), num), u64([]byte("k"), num+1), func(k, id []byte) error {
		raw, ok, err := r.Get(articleKey(string(id)))
		if err != nil {
			return err
		}
		if !ok {
			return fn(k, nil)
		}
		var ar ArticleRecord
		if err := json.Unmarshal(raw, &ar); err != nil {
			return fmt.Errorf("%w: article %s: %v", errCorrupt, id, err)
		}
		return fn(k, &ar)
	})
}

// indexClosed writes the x entries of the closed stories of state written
// before retention: the committed stories not merged, not in memory and
// not changed since the last Persist (those closed since are in b.closed).
func (b *Builder) indexClosed(w state.Writer, r state.Reader) error {
	return r.Scan([]byte("s"), []byte("t"), func(k, v []byte) error {
		if len(k) != 9 {
			return fmt.Errorf("%w: story key %x", errCorrupt, k)
		}
		num := binary.BigEndian.Uint64(k[1:])
		if _, open := b.stories[num]; open || b.dirtyStories[num] != nil {
			return nil
		}
		var rec storyRecord
		if err := json.Unmarshal(v, &rec); err != nil {
			return fmt.Errorf("%w: story %d: %v", errCorrupt, num, err)
		}
		if rec.MergedInto != "" {
			return nil
		}
		return w.Set(closedKey(rec.LastSeen, num), nil) // before first-seen times
	})
}

// RestoreBuilder rebuilds a builder from the state Persist wrote. It
// continues exactly as the builder that wrote it would have.
func RestoreBuilder(opts Options, r state.Reader) (*Builder, error) {
	b, err := NewBuilder(opts)
	if err != nil {
		return nil, err
	}
	if b.c, err = RestoreClusterer(b.opts.Cluster, r, prefixCluster); err != nil {
		return nil, err
	}
	meta, ok, err := r.Get(keyBuilderMeta)
	if err != nil || !ok {
		return b, err
	}
	n, k := binary.Uvarint(meta)
	if k <= 0 {
		return nil, errCorrupt
	}
	b.nextArt = n
	rest := meta[k:]
	if b.wm, k = binary.Varint(rest); k <= 0 {
		return nil, errCorrupt
	}
	b.backfill = len(rest) == k // no retention index yet
	version, vk := binary.Uvarint(rest[k:])
	b.backfillNums = version < 2
	b.seenWM = b.wm
	if version >= 3 {
		if b.seenWM, k = binary.Varint(rest[k+vk:]); k <= 0 {
			return nil, errCorrupt
		}
	}
	// The articles in the window, in time order as the live builder added
	// them to its near-duplicate index and expiry heap.
	err = r.Scan([]byte("w"), []byte("x"), func(key, value []byte) error {
		if len(key) != 17 {
			return errCorrupt
		}
		raw, ok, err := r.Get(articleKey(string(value)))
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: windowed article %s missing", errCorrupt, value)
		}
		var ar ArticleRecord
		if err := json.Unmarshal(raw, &ar); err != nil {
			return fmt.Errorf("%w: article %s: %v", errCorrupt, value, err)
		}
		num, err := b.loadStory(r, ar.Story)
		if err != nil {
			return err
		}
		doc := b.det.Doc(ar.Title, ar.Summary)
		b.articles[ar.ID] = &articleState{num: ar.Num, story: num, doc: doc, t: ar.Published}
		b.byNum[ar.Num] = ar.ID
		b.nd.Add(ar.Num, doc.FP)
		b.expiry = append(b.expiry, lastEntry{last: ar.Published, num: ar.Num})
		return nil
	})
	if err != nil {
		return nil, err
	}
	heap.Init(&b.expiry)
	return b, nil
}

// loadStory loads story num and the stories it was merged into, and
// returns the number of the story it is part of now.
func (b *Builder) loadStory(r state.Reader, num uint64) (uint64, error) {
	for {
		if _, ok := b.stories[num]; ok {
			return num, nil
		}
		if into, ok := b.redirect[num]; ok {
			num = into
			continue
		}
		raw, ok, err := r.Get(storyNumKey(num))
		if err != nil {
			return 0, err
		}
		if !ok {
			return 0, fmt.Errorf("%w: story %d missing", errCorrupt, num)
		}
		var rec storyRecord
		if err := json.Unmarshal(raw, &rec); err != nil {
			return 0, fmt.Errorf("%w: story %d: %v", errCorrupt, num, err)
		}
		if rec.MergedInto == "" {
			st := rec.Story
			st.repPublished, st.topicSum, st.lastArrival = rec.RepPublished, rec.TopicSum, rec.LastArrival
			st.repImage, st.firstImage, st.firstImageNum = rec.RepImage, rec.FirstImage, rec.FirstImageNum
			if st.topicSum == nil {
				st.topicSum = map[string]float64{}
			}
			for _, x := range rec.Recent {
				st.recent = append(st.recent, recentArticle{t: x.T, src: x.Src})
			}
			b.stories[num] = &st
			return num, nil
		}
		v, ok, err := r.Get(storyIDKey(rec.MergedInto))
		if err != nil {
			return 0, err
		}
		if !ok || len(v) != 8 {
			return 0, fmt.Errorf("%w: story %s missing", errCorrupt, rec.MergedInto)
		}
		into := binary.BigEndian.Uint64(v)
		b.redirect[num] = into
		b.mergedID[rec.ID] = rec.MergedInto
		num = into
	}
}
