package query_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// TestOpenAPICoversRoutes: the OpenAPI document describes exactly the
// routes the server answers.
func TestOpenAPICoversRoutes(t *testing.T) {
	n := newTestNode(t, withArticles(), withCluster(testCluster()))
	r := n.get(t, "/api/v1/openapi.json")
	if r.status != fasthttp.StatusOK {
		t.Fatalf("openapi: %s", r)
	}
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(r.body, &doc); err != nil || !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("not an OpenAPI 3 document: %v", err)
	}
	documented := map[string]bool{}
	for path, ops := range doc.Paths {
		for method := range ops {
			documented[strings.ToUpper(method)+" "+path] = true
		}
	}
	routed := map[string]bool{}
	for method, paths := range n.srv.Routes() {
		for _, p := range paths {
			routed[method+" "+p] = true
		}
	}
	var missing, extra []string
	for k := range routed {
		if !documented[k] {
			missing = append(missing, k)
		}
	}
	for k := range documented {
		if !routed[k] {
			extra = append(extra, k)
		}
	}
	slices.Sort(missing)
	slices.Sort(extra)
	if len(missing) > 0 || len(extra) > 0 {
		t.Errorf("routes not documented: %v; documented but not routed: %v", missing, extra)
	}
	if len(routed) < 30 {
		t.Errorf("only %d routes", len(routed))
	}
}

// TestOpenAPITimes: the account schemas describe their times as the API
// writes them, integers in ms since the epoch.
func TestOpenAPITimes(t *testing.T) {
	n := newTestNode(t)
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]struct {
					Type string `json:"type"`
				} `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(n.get(t, "/api/v1/openapi.json").body, &doc); err != nil {
		t.Fatal(err)
	}
	for _, f := range [][2]string{{"User", "created_at"}, {"Session", "expires_at"}, {"Preferences", "updated_at"}} {
		if got := doc.Components.Schemas[f[0]].Properties[f[1]].Type; got != "integer" {
			t.Errorf("%s.%s is of type %q, want integer", f[0], f[1], got)
		}
	}
}
