package query

import (
	"encoding/json"
	"maps"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/newsflow/newsflow/operators/trending"
	"github.com/valyala/fasthttp"
)

// The plain trending answer (GET /api/v1/trending without expand, by
// article, answered from this node's partitions) is served from bytes
// serialised once per change of the trending snapshots: for each window
// and category asked for, the answer for the largest k (trending max_k) is
// kept as JSON with the offset where each item ends. The answer for a
// smaller k is the first k items of it (ranks count from the top) followed
// by the same tail, so one serialisation serves every k. An answer is kept
// with the generation of the trending.View it was made from (not the view,
// which would keep its snapshots alive as long as a category nobody asks
// for any more) and is rebuilt when Operator.View returns a later view: a
// partition published a snapshot,
// one is due for a rebuild (older than snapshot_interval with shares
// applied since), or a partition started, stopped or was restored. Answers
// are therefore exactly as fresh as the computed ones, and byte for byte
// the same (encoding/json's encoding of trending.Result).
//
// Not cached, computed per request as before:
//   - a node of a cluster answering for the cluster: it asks every other
//     node (their answers to the fan-out are served from their caches) and
//     merges; the merge depends on which nodes answer;
//   - by=story and expand=articles: they read the story state, which
//     changes independently of the trending snapshots;
//   - categories without any article in the window (the answer is empty;
//     keeping them would let clients grow the cache at will), and more
//     than maxTrendingSlots categories per window.
type trendingCache struct {
	op      Trending
	maxK    int
	windows []string
	// slots holds, per window (index in windows), the answers per
	// category, in a map replaced whole when a category is added, so a
	// request reads it without a lock.
	slots []atomic.Pointer[map[string]*trendingSlot]
	mu    sync.Mutex // serialises adding slots
}

// maxTrendingSlots bounds the categories cached per window.
const maxTrendingSlots = 1024

func newTrendingCache(op Trending) *trendingCache {
	c := &trendingCache{op: op, maxK: op.Options().MaxK, windows: op.WindowNames()}
	c.slots = make([]atomic.Pointer[map[string]*trendingSlot], len(c.windows))
	for i := range c.slots {
		c.slots[i].Store(&map[string]*trendingSlot{})
	}
	return c
}

// trendingSlot is the cached answer of one window and category.
type trendingSlot struct {
	window, category string
	mu               sync.Mutex // serialises rebuilds
	cur              atomic.Pointer[trendingAnswer]
}

// trendingAnswer is one serialised answer for k = max_k.
type trendingAnswer struct {
	gen  uint64 // of the view it was made from
	body []byte // the whole answer: for every k ≥ len(ends)
	ends []int  // ends[i]: where item i ends in body
	tail []byte // what follows the last item: "]" and the fields after it
}

// serve writes the cached answer of window, category and k (1 ≤ k ≤
// max_k) and reports true, or reports false when it is not cached (an
// unknown window, an empty or one category too many): the caller computes
// the answer.
func (c *trendingCache) serve(ctx *fasthttp.RequestCtx, window, category []byte, k int) bool {
	wi := -1
	for i, w := range c.windows {
		if string(window) == w {
			wi = i
			break
		}
	}
	if wi < 0 {
		return false
	}
	v := c.op.View()
	sl := (*c.slots[wi].Load())[string(category)]
	if sl == nil {
		if sl = c.addSlot(wi, string(category), v); sl == nil {
			return false
		}
	}
	// An answer made from a later view than v (by a request that came
	// meanwhile) is at least as fresh.
	a := sl.cur.Load()
	if a == nil || a.gen < v.Generation() {
		if a = sl.rebuild(c); a == nil {
			return false
		}
	}
	a.write(ctx, k)
	return true
}

// addSlot adds the slot of window wi and category unless the category has
// no article in v or the window has maxTrendingSlots already.
func (c *trendingCache) addSlot(wi int, category string, v *trending.View) *trendingSlot {
	if category != "" {
		if res, err := v.Top(c.windows[wi], category, 1); err != nil || len(res.Items) == 0 {
			return nil
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := *c.slots[wi].Load()
	if sl := old[category]; sl != nil {
		return sl
	}
	if len(old) >= maxTrendingSlots {
		return nil
	}
	m := maps.Clone(old)
	sl := &trendingSlot{window: c.windows[wi], category: category}
	m[category] = sl
	c.slots[wi].Store(&m)
	return sl
}

// rebuild serialises the slot's answer from the current view, unless a
// request did meanwhile. The view is taken under the slot's lock, so the
// slot only moves to later views.
func (sl *trendingSlot) rebuild(c *trendingCache) *trendingAnswer {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	v := c.op.View()
	if a := sl.cur.Load(); a != nil && a.gen >= v.Generation() {
		return a
	}
	res, err := v.Top(sl.window, sl.category, c.maxK)
	if err != nil {
		return nil
	}
	a, err := encodeTrending(res)
	if err != nil {
		return nil
	}
	a.gen = v.Generation()
	sl.cur.Store(a)
	return a
}

// write answers with the first k items.
func (a *trendingAnswer) write(ctx *fasthttp.RequestCtx, k int) {
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentType("application/json")
	if k >= len(a.ends) {
		// The bytes are never changed once made.
		ctx.Response.SetBodyRaw(a.body)
		return
	}
	ctx.SetBody(a.body[:a.ends[k-1]])
	ctx.Response.AppendBody(a.tail)
}

// encodeTrending serialises res as encoding/json does (the struct's field
// order, omitempty fields left out, strings escaped by encoding/json),
// noting where each item ends.
func encodeTrending(res trending.Result) (*trendingAnswer, error) {
	a := &trendingAnswer{ends: make([]int, len(res.Items))}
	b := make([]byte, 0, 64+len(res.Items)*64)
	b = append(b, `{"window":`...)
	b, err := appendJSONString(b, res.Window)
	if err == nil && res.Category != "" {
		b = append(b, `,"category":`...)
		b, err = appendJSONString(b, res.Category)
	}
	b = append(b, `,"items":[`...)
	for i, it := range res.Items {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"rank":`...)
		b = strconv.AppendInt(b, int64(it.Rank), 10)
		b = append(b, `,"article_id":`...)
		if b, err = appendJSONString(b, it.ArticleID); err != nil {
			return nil, err
		}
		b = append(b, `,"count":`...)
		b = strconv.AppendUint(b, it.Count, 10)
		if it.Bound != 0 { // cms mode (omitempty)
			b = append(b, `,"error_bound":`...)
			b = strconv.AppendUint(b, it.Bound, 10)
		}
		b = append(b, '}')
		a.ends[i] = len(b)
	}
	tail := len(b)
	b = append(b, `],"as_of":`...)
	b = strconv.AppendInt(b, res.AsOf, 10)
	if len(res.Partial) > 0 {
		b = append(b, `,"missing_partitions":[`...)
		for i, p := range res.Partial {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, int64(p), 10)
		}
		b = append(b, ']')
	}
	b = append(b, '}')
	a.body, a.tail = b, b[tail:]
	return a, err
}

// appendJSONString appends s as encoding/json writes a string (HTML
// characters, U+2028 and U+2029 escaped, invalid UTF-8 replaced); plain
// strings, the usual case, are copied as they are.
func appendJSONString(b []byte, s string) ([]byte, error) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			enc, err := json.Marshal(s)
			return append(b, enc...), err
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"'), nil
}
