package trending

import (
	"container/heap"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/newsflow/newsflow/operators/internal/timeindex"
	"github.com/newsflow/newsflow/state"
)

// A share without a category counts under its article's topics.
//
// Where: in the trending task itself. The stories task writes every article
// to articles.indexed partitioned by murmur2 of its id over the engine's
// partition count, and the trending task routes shares by the same key, so
// task p of both meets every share and the article it names, on whatever
// node runs partition p. The task reads articles.indexed as a second input
// and keeps each article's topic names in its own state, so the topics, the
// counts they feed and the input offsets are committed in one batch (and in
// a cluster travel in one changelog transaction): a crash, a restore on
// another node or a replay applies every share and every article exactly
// once. Filling the category in at ingestion instead would miss the shares
// other producers write to the log, and would need the topics on the node
// the request reached (they live on the owner of the article's partition).
//
// How: the share counts globally under no category (Add) and, with
// AddToCategory, once in each of its article's topics; a share with a
// category counts under that category only, as before. A share whose
// article the task has not seen yet counts globally at once and waits
// ("parked") for the article: when the article arrives, the shares that
// waited for it no longer than ParkFor of event time behind the task's
// watermark are added to its topics (each in every window that still
// covers its time). Since the watermark only grows, the counts do not
// depend on whether the article or the share came first, as long as the
// article comes within ParkFor; after that the share stays without a
// category. The parked shares are task state like the counts.
//
// Limits: the two inputs are not read in one order, so a replay may see an
// article that first came more than ParkFor after its share in time (and
// count the share under its topics), or the other way round; the topics
// are those of the article when the share is applied (an edit that changes
// them does not move the shares counted before); an article's topics are
// kept for the retention age (about 70 bytes per article in the task's
// store), and a replay from a time or offset after an article was indexed
// does not see it again, so shares of older articles then count without
// topics (replay trending from the start of articles.indexed); at most MaxParked distinct
// (article, time) pairs wait per task, later ones count without topics.

// State keys of the join (the counts use 'c', 'm', 's', 'w'; event ids 'e';
// repeat pairs 'u'):
//
//	'a' | article id → the article's first-seen time (8 bytes) and topic names
//	      (JSON array; [] for an article without topics); a JSON array
//	      alone in state written before times were kept
//	'x' | first-seen time (8 bytes, sign bit flipped so that it sorts) | article id
//	      → nothing: the articles by time, for retention
//	'j' → the newest first-seen time seen (8 bytes)
//	'p' | article id → waiting shares: (uvarint ts, uvarint count)...
//	'q' | article id → waiting shares that counted in some windows only
//	      (repeat.go): (uvarint ts, uvarint count, uvarint window mask)...
//
// Retention (OperatorOptions.Retention): an article's topics are forgotten
// once it is older than the retention age behind the newest article: a
// lookup treats it as unknown at once, and the next flush deletes it.
const (
	topicsPrefix = 'a'
	parkedPrefix = 'p'
	maskedPrefix = 'q'
	timesPrefix  = 'x'
)

var newestKey = []byte{'j'}

// noTime is the time of an article stored without one (never forgotten),
// and the newest before any article.
const noTime = math.MinInt64

// topicsEntry is an article's topics and first-seen time.
type topicsEntry struct {
	t      int64
	topics []string
}

// topicCacheSize bounds the article topics a task keeps in memory besides
// the store; shares concentrate on few articles.
const topicCacheSize = 1 << 16

// waiting is a number of shares of one article at one event time that
// counted in the windows of mask (AllWindows, or fewer for repeats).
type waiting struct {
	ts   int64
	n    uint32
	mask uint64
}

// articleTopics is a task's join state. It belongs to the task goroutine.
type articleTopics struct {
	r         state.Reader
	retention int64                  // ms; negative: keep every article
	newest    int64                  // the newest first-seen time seen
	pending   map[string]topicsEntry // set since the last Flush
	cache     map[string]topicsEntry // looked up or set; cleared when full

	parked  map[string][]waiting // by article
	entries int                  // total entries in parked
	expiry  parkHeap             // (ts, article) of parked entries, oldest first
	changed map[string]bool      // parked lists changed since the last Flush
}

func newArticleTopics(r state.Reader, retention time.Duration) *articleTopics {
	return &articleTopics{r: r, retention: retention.Milliseconds(), newest: noTime,
		pending: map[string]topicsEntry{}, cache: map[string]topicsEntry{},
		parked: map[string][]waiting{}, changed: map[string]bool{}}
}

func topicsKey(id string) []byte        { return append([]byte{topicsPrefix}, id...) }
func timeKey(t int64, id string) []byte { return timeindex.Key(timesPrefix, t, id) }

// cutoff returns the first-seen time before which articles are forgotten,
// and false when retention is off or no article was seen.
func (j *articleTopics) cutoff() (int64, bool) {
	if j.retention < 0 || j.newest == noTime {
		return 0, false
	}
	return j.newest - j.retention, true
}

// stored reads an article's committed topics entry.
func (j *articleTopics) stored(id string) (topicsEntry, bool, error) {
	v, ok, err := j.r.Get(topicsKey(id))
	if err != nil || !ok {
		return topicsEntry{}, false, err
	}
	e := topicsEntry{t: noTime}
	if len(v) > 0 && v[0] != '[' {
		if len(v) < 8 {
			return e, false, fmt.Errorf("trending: corrupt topics of %q", id)
		}
		e.t, v = int64(binary.BigEndian.Uint64(v)), v[8:]
	}
	if err := json.Unmarshal(v, &e.topics); err != nil {
		return e, false, fmt.Errorf("trending: corrupt topics of %q: %w", id, err)
	}
	return e, true, nil
}
func parkedKey(id string) []byte { return append([]byte{parkedPrefix}, id...) }
func maskedKey(id string) []byte { return append([]byte{maskedPrefix}, id...) }

// load reads the newest first-seen time and the waiting shares from
// committed state.
func (j *articleTopics) load() error {
	if v, ok, err := j.r.Get(newestKey); err != nil {
		return err
	} else if ok && len(v) == 8 {
		j.newest = int64(binary.BigEndian.Uint64(v))
	}
	for _, prefix := range []byte{parkedPrefix, maskedPrefix} {
		err := j.r.Scan([]byte{prefix}, []byte{prefix + 1}, func(k, v []byte) error {
			id := string(k[1:])
			ws := j.parked[id]
			for len(v) > 0 {
				ts, n1 := binary.Uvarint(v)
				if n1 <= 0 {
					return fmt.Errorf("trending: corrupt waiting shares of %q", id)
				}
				n, n2 := binary.Uvarint(v[n1:])
				if n2 <= 0 || n == 0 || n > countMask {
					return fmt.Errorf("trending: corrupt waiting shares of %q", id)
				}
				v = v[n1+n2:]
				mask := AllWindows
				if prefix == maskedPrefix {
					m, n3 := binary.Uvarint(v)
					if n3 <= 0 || m == AllWindows {
						return fmt.Errorf("trending: corrupt waiting shares of %q", id)
					}
					mask, v = m, v[n3:]
				}
				ws = append(ws, waiting{int64(ts), uint32(n), mask})
				j.expiry = append(j.expiry, parkRef{int64(ts), id})
				j.entries++
			}
			j.parked[id] = ws
			return nil
		})
		if err != nil {
			return err
		}
	}
	heap.Init(&j.expiry)
	return nil
}

// set records an article's topics and first-seen time.
func (j *articleTopics) set(id string, topics []string, seen int64) {
	if topics == nil {
		topics = []string{}
	}
	e := topicsEntry{seen, topics}
	j.pending[id] = e
	j.remember(id, e)
	j.newest = max(j.newest, seen)
}

func (j *articleTopics) remember(id string, e topicsEntry) {
	if len(j.cache) >= topicCacheSize {
		clear(j.cache)
	}
	j.cache[id] = e
}

// lookup returns an article's topics; ok is false for an article the task
// has not seen, or has forgotten (see Retention).
func (j *articleTopics) lookup(id string) (topics []string, ok bool, err error) {
	e, ok := j.pending[id]
	if !ok {
		e, ok = j.cache[id]
	}
	if !ok {
		if _, waits := j.parked[id]; waits {
			return nil, false, nil
		}
		if e, ok, err = j.stored(id); err != nil || !ok {
			return nil, false, err
		}
		j.remember(id, e)
	}
	if cut, on := j.cutoff(); on && e.t != noTime && e.t < cut {
		return nil, false, nil
	}
	return e.topics, true, nil
}

// park records a share of an unknown article at ts that counted in the
// windows of mask. It returns false, and records nothing, when max entries
// wait already and this share would need a new one.
func (j *articleTopics) park(id string, ts int64, mask uint64, max int) bool {
	ws := j.parked[id]
	for i := range ws {
		if ws[i].ts == ts && ws[i].mask == mask && ws[i].n < countMask {
			ws[i].n++
			j.changed[id] = true
			return true
		}
	}
	if j.entries >= max {
		return false
	}
	j.parked[id] = append(ws, waiting{ts, 1, mask})
	j.entries++
	j.changed[id] = true
	heap.Push(&j.expiry, parkRef{ts, id})
	return true
}

// unpark removes and returns the shares waiting for an article.
func (j *articleTopics) unpark(id string) []waiting {
	ws, ok := j.parked[id]
	if !ok {
		return nil
	}
	delete(j.parked, id)
	j.entries -= len(ws)
	j.changed[id] = true
	return ws
}

// expire drops the waiting shares older than limit and returns how many
// shares it dropped.
func (j *articleTopics) expire(limit int64) int {
	dropped := 0
	for len(j.expiry) > 0 && j.expiry[0].ts < limit {
		ref := heap.Pop(&j.expiry).(parkRef)
		ws := j.parked[ref.id]
		for i, w := range ws {
			if w.ts == ref.ts {
				dropped += int(w.n)
				ws = append(ws[:i], ws[i+1:]...)
				j.entries--
				j.changed[ref.id] = true
				break
			}
		}
		if len(ws) == 0 {
			delete(j.parked, ref.id)
		} else {
			j.parked[ref.id] = ws
		}
	}
	return dropped
}

// flush stages the topics set and the waiting shares changed since the
// last flush.
func (j *articleTopics) flush(w state.Writer) error {
	cut, on := j.cutoff()
	if on {
		// Deletions first: an article applied again is written after. An
		// index entry older than its article's topics (applied again with
		// a later time) goes alone.
		err := timeindex.Expired(j.r, timesPrefix, cut, func(k []byte, at int64, id string) error {
			if err := w.Delete(k); err != nil {
				return err
			}
			if e, ok, err := j.stored(id); err != nil || (ok && e.t > at) {
				return err
			}
			return w.Delete(topicsKey(id))
		})
		if err != nil {
			return fmt.Errorf("trending: flush topics: %w", err)
		}
	}
	var tb [8]byte
	for id, e := range j.pending {
		if on && e.t < cut {
			continue // forgotten since it was set
		}
		v, err := json.Marshal(e.topics)
		if err != nil {
			return err
		}
		binary.BigEndian.PutUint64(tb[:], uint64(e.t))
		if err := w.Set(topicsKey(id), append(tb[:], v...)); err != nil {
			return fmt.Errorf("trending: flush topics: %w", err)
		}
		if err := w.Set(timeKey(e.t, id), nil); err != nil {
			return fmt.Errorf("trending: flush topics: %w", err)
		}
	}
	clear(j.pending)
	binary.BigEndian.PutUint64(tb[:], uint64(j.newest))
	if err := w.Set(newestKey, tb[:]); err != nil {
		return fmt.Errorf("trending: flush topics: %w", err)
	}
	var all, masked []byte
	for id := range j.changed {
		all, masked = all[:0], masked[:0]
		for _, x := range j.parked[id] {
			if x.mask == AllWindows {
				all = binary.AppendUvarint(binary.AppendUvarint(all, uint64(x.ts)), uint64(x.n))
			} else {
				masked = binary.AppendUvarint(binary.AppendUvarint(binary.AppendUvarint(masked, uint64(x.ts)), uint64(x.n)), x.mask)
			}
		}
		for _, kv := range [2]struct {
			key []byte
			v   []byte
		}{{parkedKey(id), all}, {maskedKey(id), masked}} {
			var err error
			if len(kv.v) == 0 {
				err = w.Delete(kv.key)
			} else {
				err = w.Set(kv.key, kv.v)
			}
			if err != nil {
				return fmt.Errorf("trending: flush waiting shares: %w", err)
			}
		}
	}
	clear(j.changed)
	return nil
}

// parkRef names one waiting entry; parkHeap orders them by time.
type parkRef struct {
	ts int64
	id string
}

type parkHeap []parkRef

func (h parkHeap) Len() int { return len(h) }
func (h parkHeap) Less(a, b int) bool {
	if h[a].ts != h[b].ts {
		return h[a].ts < h[b].ts
	}
	return h[a].id < h[b].id
}
func (h parkHeap) Swap(a, b int) { h[a], h[b] = h[b], h[a] }
func (h *parkHeap) Push(x any)   { *h = append(*h, x.(parkRef)) }
func (h *parkHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
