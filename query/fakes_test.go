package query

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/eventlog/embedded"
	"github.com/newsflow/newsflow/operators/story"
	"github.com/newsflow/newsflow/operators/trending"
)

// fakeEngine is a ready engine running nothing.
type fakeEngine struct{ Engine }

func (fakeEngine) Ready() bool                            { return true }
func (fakeEngine) CaughtUp(context.Context) (bool, error) { return true, nil }
func (fakeEngine) Partitions() int32                      { return 1 }
func (fakeEngine) HomePartition(string) (int32, bool)     { return 0, true }
func (fakeEngine) Freshness(string, int32) (engine.Freshness, bool) {
	return engine.Freshness{Source: "task"}, true
}

// fakeStories serves fixed stories.
type fakeStories struct {
	Stories
	byID map[string]*story.Detail
}

func (f fakeStories) Get(id string) (*story.Detail, error) {
	if d, ok := f.byID[id]; ok {
		return d, nil
	}
	return nil, story.ErrNotFound
}

func (f fakeStories) Topics() []story.TopicCount {
	return []story.TopicCount{{Topic: "science", Stories: 1, Articles: 2}}
}

// The story API over a fake stories operator: no node, no engine, no
// pipeline. What a reader sees is the fake's story, and an unknown id is a
// 404 with a JSON error.
func TestStoriesWithFakeOperator(t *testing.T) {
	l, err := embedded.Open(embedded.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	reg := prometheus.NewRegistry()
	tr, err := trending.New(trending.DefaultOperatorOptions(), 1, reg)
	if err != nil {
		t.Fatal(err)
	}
	stories := fakeStories{byID: map[string]*story.Detail{
		"s1": {Story: story.Story{ID: "s1", Title: "Comet seen over the harbour"}},
	}}
	srv, err := New(Deps{Log: l, Engine: fakeEngine{}, Trending: tr, Stories: stories},
		Options{MaxPast: tr.Options().MaxPast(), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) (int, map[string]any) {
		var ctx fasthttp.RequestCtx
		ctx.Request.SetRequestURI(path)
		ctx.Request.Header.Set("Host", "localhost")
		srv.Handler()(&ctx)
		var body map[string]any
		if err := json.Unmarshal(ctx.Response.Body(), &body); err != nil {
			t.Fatalf("GET %s: %d %q: %v", path, ctx.Response.StatusCode(), ctx.Response.Body(), err)
		}
		return ctx.Response.StatusCode(), body
	}
	if code, body := get("/api/v1/stories/s1"); code != 200 || body["title"] != "Comet seen over the harbour" {
		t.Fatalf("story s1: %d %v", code, body)
	}
	if code, body := get("/api/v1/stories/nope"); code != 404 || !strings.Contains(body["error"].(string), `"nope"`) {
		t.Fatalf("unknown story: %d %v", code, body)
	}
	if code, body := get("/api/v1/topics"); code != 200 || len(body["topics"].([]any)) != 1 {
		t.Fatalf("topics: %d %v", code, body)
	}
}
