package query

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/newsflow/newsflow/operators/trending"
	"github.com/valyala/fasthttp"
)

// handleTrending answers GET
// /api/v1/trending?window=1m|1h|24h&k=&category=&by=article|story.
func (s *Server) handleTrending(ctx *fasthttp.RequestCtx) {
	args := ctx.QueryArgs()
	windowArg := args.Peek("window")
	if len(windowArg) == 0 {
		windowArg = defaultWindow
	}
	maxK := s.trend.maxK
	k, err := intArg(ctx, "k", 10, 1, maxK)
	if err != nil {
		writeError(ctx, fasthttp.StatusBadRequest, err.Error())
		return
	}
	byStory := false
	switch by := args.Peek("by"); string(by) {
	case "", "article":
	case "story":
		if s.deps.Stories == nil {
			writeError(ctx, fasthttp.StatusBadRequest, "by: this node has no story stage; only \"article\" is supported")
			return
		}
		byStory = true
	default:
		writeError(ctx, fasthttp.StatusBadRequest, fmt.Sprintf("by: \"article\" or \"story\", got %q", by))
		return
	}
	fanOut := s.fansOut(ctx)
	// The plain answer of this node's partitions is precomputed
	// (trending_cache.go).
	if !byStory && !fanOut && len(args.Peek("expand")) == 0 && s.trend.serve(ctx, windowArg, args.Peek("category"), k) {
		return
	}
	window, category := string(windowArg), string(args.Peek("category"))
	ask := k
	if byStory {
		ask = maxK // the stories are summed from the top articles
	}
	res, failed, err := s.trendingTop(window, category, ask, fanOut)
	if errors.Is(err, trending.ErrUnknownWindow) {
		writeJSON(ctx, fasthttp.StatusBadRequest, map[string]any{"error": err.Error(), "windows": s.deps.Trending.WindowNames()})
		return
	}
	if err != nil {
		writeError(ctx, fasthttp.StatusInternalServerError, err.Error())
		return
	}
	if fanOut {
		// The answer of the whole cluster: say when part of it is missing.
		warnPartial(ctx, res.Partial, failed)
	}
	if byStory {
		writeJSON(ctx, fasthttp.StatusOK, s.storyAnswer(res, failed, k))
		return
	}
	switch expand := string(args.Peek("expand")); {
	case expand == "" && (len(failed) > 0 || fanOut && len(res.Partial) > 0):
		writeJSON(ctx, fasthttp.StatusOK, clusterTrending{Result: res, PartialAnswer: len(res.Partial) > 0, FailedNodes: failed})
	case expand == "":
		writeJSON(ctx, fasthttp.StatusOK, res)
	case expand != "articles":
		writeError(ctx, fasthttp.StatusBadRequest, "expand: only \"articles\" is supported")
	default:
		items := make([]trendingItem, len(res.Items))
		for i, it := range res.Items {
			items[i] = trendingItem{Item: it, articleRef: s.articleRef(it.ArticleID)}
		}
		body := map[string]any{"window": res.Window, "category": res.Category, "items": items, "as_of": res.AsOf,
			"missing_partitions": res.Partial, "failed_nodes": failed}
		if len(res.Partial) > 0 {
			body["partial"] = true
		}
		writeJSON(ctx, fasthttp.StatusOK, body)
	}
}

// defaultWindow is the window of a trending query that names none.
var defaultWindow = []byte("1h")

// trendingTop returns the top k articles of window and category from this
// node's partitions, merged with every other node's when fanOut (and the
// nodes that did not answer).
func (s *Server) trendingTop(window, category string, k int, fanOut bool) (trending.Result, []string, error) {
	if !fanOut {
		res, err := s.deps.Trending.Top(window, category, k)
		return res, nil, err
	}
	var res trending.Result
	var failed []string
	var err error
	s.untilComplete(func() []int32 {
		if res, err = s.deps.Trending.Top(window, category, k); err != nil {
			return nil
		}
		res, failed = s.clusterTop(res, window, category, k)
		return res.Partial
	})
	return res, failed, err
}

// storyAnswer is the by=story answer over a top of articles: the k best
// stories.
func (s *Server) storyAnswer(res trending.Result, failed []string, k int) storyTrending {
	return storyTrending{Window: res.Window, Category: res.Category, Items: s.trendingStories(res.Items, k),
		AsOf: res.AsOf, PartialAnswer: len(res.Partial) > 0, Partial: res.Partial, FailedNodes: failed}
}

// storyTrending is the answer of /api/v1/trending?by=story.
type storyTrending struct {
	Window   string      `json:"window"`
	Category string      `json:"category,omitempty"`
	Items    []storyItem `json:"items"`
	AsOf     int64       `json:"as_of"`
	// PartialAnswer is true when some partitions did not answer: Partial
	// lists them (as in the search's answers).
	PartialAnswer bool     `json:"partial,omitempty"`
	Partial       []int32  `json:"missing_partitions,omitempty"`
	FailedNodes   []string `json:"failed_nodes,omitempty"`
}

// storyItem is one trending story: the shares of its articles summed.
// An article not in a story yet stands for itself (StoryID empty).
type storyItem struct {
	Rank    int    `json:"rank"`
	StoryID string `json:"story_id,omitempty"`
	Title   string `json:"title,omitempty"`
	URL     string `json:"url,omitempty"`
	Source  string `json:"source,omitempty"`
	Count   uint64 `json:"count"`
	// Bound is the sum of its articles' error bounds (cms counts; absent
	// when exact): the story's true count is in [count-bound, count].
	Bound uint64 `json:"error_bound,omitempty"`
	// Articles are the story's articles among the trending ones, most
	// shared first.
	Articles []trending.Item `json:"articles"`
}

// trendingStories sums the trending articles' counts by the story each
// article is in now and returns the k best stories, most shared first
// (ties by story id). The articles are the top MaxK of the window, so a
// story counts the shares of those of its articles that are among them:
// exact unless a story's shares are spread over articles that each rank
// below MaxK.
func (s *Server) trendingStories(items []trending.Item, k int) []storyItem {
	at := map[string]int{}
	var out []storyItem
	for _, it := range items {
		ref := s.articleRef(it.ArticleID)
		key := "story:" + ref.StoryID
		if ref.StoryID == "" {
			key = "article:" + it.ArticleID
		}
		i, ok := at[key]
		if !ok {
			i = len(out)
			at[key] = i
			out = append(out, storyItem{StoryID: ref.StoryID, Title: ref.Title, URL: ref.URL, Source: ref.Source})
			if ref.StoryID != "" {
				if st, err := s.deps.Stories.Head(ref.StoryID); err == nil {
					out[i].Title, out[i].URL, out[i].Source = st.Title, st.URL, cmp.Or(st.Source, st.SourceID)
				}
			}
		}
		out[i].Count += it.Count
		out[i].Bound += it.Bound
		out[i].Articles = append(out[i].Articles, it)
	}
	slices.SortStableFunc(out, func(a, b storyItem) int {
		if a.Count != b.Count {
			return cmp.Compare(b.Count, a.Count)
		}
		return strings.Compare(a.StoryID+a.Articles[0].ArticleID, b.StoryID+b.Articles[0].ArticleID)
	})
	out = out[:min(k, len(out))]
	for i := range out {
		out[i].Rank = i + 1
	}
	if out == nil {
		out = []storyItem{}
	}
	return out
}

// clusterTrending is a trending answer some nodes or partitions did not
// contribute to.
type clusterTrending struct {
	trending.Result
	// PartialAnswer is true when some partitions did not answer (listed
	// in missing_partitions), as in the search's answers.
	PartialAnswer bool `json:"partial,omitempty"`
	// FailedNodes did not answer in time; their partitions are listed in
	// missing_partitions.
	FailedNodes []string `json:"failed_nodes,omitempty"`
}

// articleRef is what a list of article ids shows of each article: its
// title, link, source and story, when the story operator knows it.
type articleRef struct {
	Title   string `json:"title,omitempty"`
	URL     string `json:"url,omitempty"`
	Source  string `json:"source,omitempty"`
	StoryID string `json:"story_id,omitempty"`
}

type trendingItem struct {
	trending.Item
	articleRef
}

func (s *Server) articleRef(id string) articleRef {
	if s.deps.Stories == nil {
		return articleRef{}
	}
	ar, storyID, ok := s.deps.Stories.Article(id)
	if !ok {
		return articleRef{}
	}
	src := ar.Source
	if src == "" {
		src = ar.SourceID
	}
	return articleRef{Title: ar.Title, URL: ar.URL, Source: src, StoryID: storyID}
}

// handleArticleShares answers GET /api/v1/articles/{id}/shares[?window=].
func (s *Server) handleArticleShares(ctx *fasthttp.RequestCtx) {
	raw, _ := ctx.UserValue("id").(string)
	id, err := url.PathUnescape(raw)
	if err != nil {
		writeError(ctx, fasthttp.StatusBadRequest, "article id is not valid percent-encoding")
		return
	}
	if id == "" || len(id) > 128 {
		writeError(ctx, fasthttp.StatusBadRequest, "article id must be 1-128 bytes")
		return
	}
	sh, err := s.deps.Trending.Shares(id)
	if s.deps.Cluster != nil {
		// The partition may have just moved here and be restoring.
		for deadline := time.Now().Add(s.opts.PeerTimeout); errors.Is(err, trending.ErrUnavailable) && time.Now().Before(deadline); {
			time.Sleep(50 * time.Millisecond)
			sh, err = s.deps.Trending.Shares(id)
		}
	}
	if errors.Is(err, trending.ErrUnavailable) {
		writeError(ctx, fasthttp.StatusServiceUnavailable, err.Error())
		return
	}
	if err != nil {
		writeError(ctx, fasthttp.StatusInternalServerError, err.Error())
		return
	}
	if w := string(ctx.QueryArgs().Peek("window")); w != "" {
		c, ok := sh.Counts[w]
		if !ok {
			writeJSON(ctx, fasthttp.StatusBadRequest, map[string]any{"error": "unknown window " + w, "windows": s.deps.Trending.WindowNames()})
			return
		}
		body := map[string]any{"article_id": id, "window": w, "count": c, "as_of": sh.AsOf}
		if b, ok := sh.Bounds[w]; ok {
			body["error_bound"] = b // cms mode: the true count is in [count-error_bound, count]
		}
		writeJSON(ctx, fasthttp.StatusOK, body)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, sh)
}

// handleProgress answers GET /api/v1/admin/progress: readiness, whether the
// node has processed everything in the log, and each input's lag.
func (s *Server) handleProgress(ctx *fasthttp.RequestCtx) {
	cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	caughtUp, err := s.deps.Engine.CaughtUp(cctx)
	if err != nil {
		writeError(ctx, fasthttp.StatusServiceUnavailable, "log unavailable: "+err.Error())
		return
	}
	type input struct {
		Stage     string `json:"stage"`
		Topic     string `json:"topic"`
		Partition int32  `json:"partition"`
		Committed int64  `json:"committed"`
		Lag       int64  `json:"lag"`
	}
	prog := s.deps.Engine.Progress()
	out := struct {
		Ready    bool    `json:"ready"`
		CaughtUp bool    `json:"caught_up"`
		Inputs   []input `json:"inputs"`
	}{Ready: s.deps.Engine.Ready(), CaughtUp: caughtUp, Inputs: make([]input, 0, len(prog))}
	for _, p := range prog {
		out.Inputs = append(out.Inputs, input{p.Stage, p.Topic, p.Partition, p.Committed, p.Lag()})
	}
	writeJSON(ctx, fasthttp.StatusOK, out)
}

func (s *Server) handleTopology(ctx *fasthttp.RequestCtx) {
	writeJSON(ctx, fasthttp.StatusOK, s.deps.Engine.Topology())
}
