package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/demo/feedfarm"
	"github.com/newsflow/newsflow/internal/testutil"
)

// crawlEnv sets a node to crawl, with no seed list, and lets it fetch from
// this machine, where the tests serve their feeds.
var crawlEnv = []string{"NEWSFLOW_CRAWL_ENABLED=true", "NEWSFLOW_CRAWL_SEED_OPML=", "NEWSFLOW_CRAWL_ALLOW_CIDRS=127.0.0.1/32"}

// A running node crawls: a web page added as a source is resolved to the
// feed it links to, and a manual crawl appends the feed's items.
//
// It is one scenario checked step by step (cyclomatic 28): the steps
// depend on each other's state, so they stay in order in one function.
func TestNodeCrawls(t *testing.T) {
	farm := httptest.NewServer(feedfarm.New(feedfarm.Options{Faults: true, Items: 7}))
	defer farm.Close()
	n := runNode(t, t.TempDir(), crawlEnv)

	body := `{"feed_url":"` + farm.URL + `/fault/html","category":"world"}`
	var src struct {
		ID       string `json:"id"`
		FeedURL  string `json:"feed_url"`
		Homepage string `json:"homepage"`
	}
	if code := postSource(t, n.URL("/api/v1/admin/sources"), body, &src); code != 201 || src.FeedURL != farm.URL+"/gen/0.xml" || src.Homepage != farm.URL+"/fault/html" {
		t.Fatalf("add page: %d %+v", code, src)
	}
	// The crawler may have crawled it already (it is due at once); either
	// way, within a few seconds its status shows the 7 items.
	testutil.Eventually(t, 15*time.Second, func() error {
		var st struct {
			Crawl struct {
				LastResult *struct {
					Outcome  string `json:"outcome"`
					ItemsNew int    `json:"items_new"`
				} `json:"last_result"`
			} `json:"crawl"`
		}
		if err := getJSON(n.URL("/api/v1/admin/sources/"+src.ID+"/status"), &st); err != nil {
			t.Fatal(err)
		}
		if r := st.Crawl.LastResult; r == nil || r.Outcome != "ok" || r.ItemsNew != 7 {
			return fmt.Errorf("source not crawled: %+v", r)
		}
		return nil
	})
	// A manual crawl now finds nothing new (304), and a second one is
	// refused for a minute.
	resp, err := adminPost(n.URL("/api/v1/admin/sources/"+src.ID+"/crawl"), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	var rec bytes.Buffer
	rec.ReadFrom(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(rec.String(), `"outcome":"not_modified"`) {
		t.Fatalf("manual crawl: %d %s", resp.StatusCode, rec.String())
	}
	resp, err = adminPost(n.URL("/api/v1/admin/sources/"+src.ID+"/crawl"), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("second manual crawl: %d", resp.StatusCode)
	}
	// The crawled items go through the article pipeline: they are in
	// stories and found by a search filtered on their source.
	testutil.Eventually(t, 15*time.Second, func() error {
		var page struct {
			Total int `json:"total"`
			Hits  []struct {
				StoryID  string `json:"story_id"`
				SourceID string `json:"source_id"`
			} `json:"hits"`
		}
		if err := getJSON(n.URL("/api/v1/search?limit=100&source="+src.ID), &page); err != nil || page.Total != 7 {
			return fmt.Errorf("crawled items not searchable: %+v, %v", page, err)
		}
		for _, h := range page.Hits {
			var st struct {
				ArticleCount int `json:"article_count"`
			}
			if h.StoryID == "" || getJSON(n.URL("/api/v1/stories/"+h.StoryID), &st) != nil || st.ArticleCount == 0 {
				t.Fatalf("crawled article in no story: %+v", h)
			}
		}
		return nil
	})
	// A URL that cannot be fetched now is kept as given: the crawler will
	// record the failure (here a 410) on the source.
	resp, err = adminPost(n.URL("/api/v1/admin/sources"), "application/json", strings.NewReader(`{"feed_url":"`+farm.URL+`/fault/410"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Fatalf("add a URL that fails to fetch: %d", resp.StatusCode)
	}
}

// postSource posts body to url, a node's /api/v1/admin/sources, with the
// admin token, decodes the answer into src and returns its status.
func postSource(t *testing.T, url, body string, src any) int {
	t.Helper()
	resp, err := adminPost(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	json.NewDecoder(resp.Body).Decode(src)
	return resp.StatusCode
}

// A feed whose items carry one line gets its articles' full text: a word
// found only on the article pages finds the articles in search, and the
// crawl record counts the pages.
func TestNodeSearchesFullTextOfOneLineFeeds(t *testing.T) {
	farm := httptest.NewServer(feedfarm.New(feedfarm.Options{Items: 3, OneLine: true}))
	defer farm.Close()
	n := runNode(t, t.TempDir(), crawlEnv)

	var src struct {
		ID string `json:"id"`
	}
	if code := postSource(t, n.URL("/api/v1/admin/sources?discover=false"), `{"feed_url":"`+farm.URL+`/gen/4.xml"}`, &src); code != 201 {
		t.Fatalf("add source: %d", code)
	}
	// "spring" is on the pages only: the feed's titles and lines lack it.
	testutil.Eventually(t, 20*time.Second, func() error {
		var page struct {
			Hits []struct {
				ID       string `json:"id"`
				Title    string `json:"title"`
				SourceID string `json:"source_id"`
			} `json:"hits"`
		}
		if err := getJSON(n.URL("/api/v1/search?q=spring"), &page); err != nil || len(page.Hits) != 3 {
			return fmt.Errorf("search for a word of the pages: %v, %d hits %+v", err, len(page.Hits), page.Hits)
		}
		for _, h := range page.Hits {
			if h.SourceID != src.ID || !strings.HasPrefix(h.Title, "Feed 4 reports development number") {
				t.Errorf("hit %+v", h)
			}
		}
		return nil
	})
	var st struct {
		Crawl struct {
			LastResult struct {
				ItemsNew int `json:"items_new"`
				FullText int `json:"full_text"`
			} `json:"last_result"`
		} `json:"crawl"`
	}
	if err := getJSON(n.URL("/api/v1/admin/sources/"+src.ID+"/status"), &st); err != nil {
		t.Fatal(err)
	}
	if r := st.Crawl.LastResult; r.ItemsNew != 3 || r.FullText != 3 {
		t.Errorf("crawl record: %d new items, %d full texts; want 3 and 3", r.ItemsNew, r.FullText)
	}
}
