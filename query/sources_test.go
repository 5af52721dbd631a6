package query_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/newsflow/newsflow/operators/crawl/opml"
	"github.com/valyala/fasthttp"
)

func TestSourcesAdminAPI(t *testing.T) {
	n := newTestNode(t)
	const base = "/api/v1/admin/sources"
	r := n.post(t, base, `{"feed_url":"https://news.example/rss","name":"Example News","category":"World","authority":0.8,"min_interval":"10m"}`)
	if r.status != fasthttp.StatusCreated {
		t.Fatalf("add: %s", r)
	}
	var src struct {
		ID          string  `json:"id"`
		Category    string  `json:"category"`
		Authority   float64 `json:"authority"`
		MinInterval string  `json:"min_interval"`
		MaxInterval string  `json:"max_interval"`
		Status      string  `json:"status"`
	}
	if err := json.Unmarshal(r.body, &src); err != nil {
		t.Fatal(err)
	}
	if src.ID == "" || src.Category != "world" || src.Authority != 0.8 || src.MinInterval != "10m0s" || src.MaxInterval != "1h0m0s" || src.Status != "active" {
		t.Fatalf("added source: %s", r.body)
	}
	if r.header["Location"] != base+"/"+src.ID {
		t.Fatalf("Location = %q", r.header["Location"])
	}
	wantError(t, n.post(t, base, `{"feed_url":"https://news.example/rss"}`), fasthttp.StatusConflict, "exists")
	for body, want := range map[string]string{
		`{"name":"x"}`:                                  "feed_url is required",
		`{"feed_url":"gopher://x"}`:                     "absolute http or https",
		`{"feed_url":"https://x/f","authority":3}`:      "authority",
		`{"feed_url":"https://x/f","min_interval":600}`: "duration must be a string",
		`{"feed_url":"https://x/f","colour":"red"}`:     "unknown field",
		`{"feed_url":`:                                  "invalid JSON",
	} {
		wantError(t, n.post(t, base, body), fasthttp.StatusBadRequest, want)
	}

	r = n.do(t, fasthttp.MethodPatch, base+"/"+src.ID, []byte(`{"status":"paused","name":"Renamed"}`))
	if r.status != 200 || !strings.Contains(string(r.body), `"status":"paused"`) || !strings.Contains(string(r.body), `"name":"Renamed"`) {
		t.Fatalf("patch: %s", r)
	}
	wantError(t, n.do(t, fasthttp.MethodPatch, base+"/"+src.ID, []byte(`{"status":"gone"}`)), fasthttp.StatusBadRequest, "set active or paused")
	r = n.do(t, fasthttp.MethodPatch, base+"/"+src.ID, []byte(`{"full_text":"never"}`))
	if r.status != 200 || !strings.Contains(string(r.body), `"full_text":"never"`) {
		t.Fatalf("patch full_text: %s", r)
	}
	wantError(t, n.do(t, fasthttp.MethodPatch, base+"/"+src.ID, []byte(`{"full_text":"sometimes"}`)), fasthttp.StatusBadRequest, "want auto, always or never")
	wantError(t, n.do(t, fasthttp.MethodPatch, base+"/"+src.ID, []byte(`{"feed_url":"https://other/"}`)), fasthttp.StatusBadRequest, "cannot be changed")
	wantError(t, n.do(t, fasthttp.MethodPatch, base+"/nope", []byte(`{}`)), fasthttp.StatusNotFound, "not found")

	r = n.get(t, base+"/"+src.ID+"/status")
	if r.status != 200 || !strings.Contains(string(r.body), `"crawl"`) {
		t.Fatalf("status: %s", r)
	}

	// OPML import skips what exists and reports invalid feeds; export
	// round-trips.
	doc := `<opml version="2.0"><body><outline text="tech">
	  <outline text="A" xmlUrl="https://a.example/feed" authority="0.9"/>
	  <outline text="Dup" xmlUrl="https://news.example/rss"/>
	  <outline text="Bad" xmlUrl="mailto:x@y"/>
	</outline></body></opml>`
	r = n.post(t, base+"/import", doc)
	if r.status != fasthttp.StatusBadRequest || !strings.Contains(string(r.body), `"added":1,"skipped":1`) || !strings.Contains(string(r.body), "mailto:x@y") {
		t.Fatalf("import: %s", r)
	}
	wantError(t, n.post(t, base+"/import", "<html/>"), fasthttp.StatusBadRequest, "opml")
	r = n.get(t, base+"/export")
	if r.status != 200 || !strings.HasPrefix(r.header["Content-Type"], "text/x-opml") {
		t.Fatalf("export: %s", r)
	}
	es, err := opml.Parse(strings.NewReader(string(r.body)))
	if err != nil || len(es) != 2 {
		t.Fatalf("exported OPML: %v %v\n%s", es, err, r.body)
	}
	got := map[string]opml.Entry{}
	for _, e := range es {
		got[e.FeedURL] = e
	}
	if e := got["https://a.example/feed"]; e.Category != "tech" || e.Authority != 0.9 || e.Title != "A" {
		t.Fatalf("exported entry %+v", e)
	}
	if e := got["https://news.example/rss"]; e.Title != "Renamed" || e.Category != "world" || e.Authority != 0.8 {
		t.Fatalf("exported entry %+v", e)
	}

	r = n.get(t, base)
	if r.status != 200 || strings.Count(string(r.body), `"feed_url"`) != 2 {
		t.Fatalf("list: %s", r)
	}
	if r := n.do(t, fasthttp.MethodDelete, base+"/"+src.ID, nil); r.status != fasthttp.StatusNoContent {
		t.Fatalf("delete: %s", r)
	}
	wantError(t, n.get(t, base+"/"+src.ID), fasthttp.StatusNotFound, "not found")
}
