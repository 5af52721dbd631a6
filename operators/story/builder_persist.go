package story

import (
	"container/heap"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
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
//	g <image id>                image URL: every image of an article (ImageID), for the proxy
var (
	prefixCluster  = []byte("c")
	keyBuilderMeta = []byte("m")
)

// storyRecord is a Story with the fields the builder needs to continue.
type storyRecord struct {
	Story
	Num          uint64 `json:"num"`
	RepPublished int64  `json:"rep_published"`
	RepImage     string `json:"rep_image,omitempty"`
	FirstImage   string `json:"first_image,omitempty"`
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

// Persist stages every change since the last Persist into w.
func (b *Builder) Persist(w state.Writer) error {
	if err := b.c.Persist(w, prefixCluster); err != nil {
		return err
	}
	for _, ar := range b.dirtyArticles {
		v, err := json.Marshal(ar)
		if err != nil {
			return err
		}
		if err := w.Set(articleKey(ar.ID), v); err != nil {
			return err
		}
		if ar.ImageURL != "" {
			if err := w.Set(imageKey(ImageID(ar.ImageURL)), []byte(ar.ImageURL)); err != nil {
				return err
			}
		}
		if ar.Version > 1 {
			continue // an edit: indexes are unchanged
		}
		if err := w.Set(u64(u64([]byte("w"), uint64(ar.Published)), ar.Num), []byte(ar.ID)); err != nil {
			return err
		}
		if err := w.Set(u64(u64([]byte("k"), ar.Story), ar.Num), []byte(ar.ID)); err != nil {
			return err
		}
	}
	b.dirtyArticles = b.dirtyArticles[:0]
	// After the articles: one may have expired since it was applied.
	for _, e := range b.expired {
		if err := w.Delete(u64(u64([]byte("w"), uint64(e.last)), e.num)); err != nil {
			return err
		}
	}
	b.expired = b.expired[:0]
	for _, num := range slices.Sorted(maps.Keys(b.dirtyStories)) {
		st := b.dirtyStories[num]
		rec := storyRecord{Story: *st, Num: num, RepPublished: st.repPublished, TopicSum: st.topicSum,
			RepImage: st.repImage, FirstImage: st.firstImage, FirstImageNum: st.firstImageNum}
		for _, r := range st.recent {
			rec.Recent = append(rec.Recent, recentJSON{T: r.t, Src: r.src})
		}
		v, err := json.Marshal(rec)
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
	return w.Set(keyBuilderMeta, binary.AppendVarint(binary.AppendUvarint(nil, b.nextArt), b.wm))
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
	if b.wm, k = binary.Varint(meta[k:]); k <= 0 {
		return nil, errCorrupt
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
			st.repPublished, st.topicSum = rec.RepPublished, rec.TopicSum
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
