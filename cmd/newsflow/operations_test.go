package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/newsflow/newsflow/configs/promnames"
	"github.com/newsflow/newsflow/demo/feedfarm"
	"github.com/newsflow/newsflow/internal/testutil"
)

// The alert rules (configs/alerts.yaml) and dashboards
// (configs/grafana/*.json) ask only for what a running node exposes: after
// some load (sources crawled, shares and reads posted, a feed and a search
// asked for), every metric they name is in its /metrics, with the labels
// they match on, the stages they name and the bucket bounds their SLOs
// count up to (promnames.Check).
func TestOperationsMetricsExist(t *testing.T) {
	exprs, recorded, err := promnames.OperationsExprs("../../configs")
	if err != nil {
		t.Fatal(err)
	}
	if len(exprs) == 0 {
		t.Fatal("no alert rules or dashboards in configs/")
	}
	farm := httptest.NewServer(feedfarm.New(feedfarm.Options{Items: 5}))
	defer farm.Close()
	n := runNode(t, t.TempDir(), crawlEnv)

	for i := range 2 {
		var src struct {
			ID string `json:"id"`
		}
		body := fmt.Sprintf(`{"feed_url":"%s/gen/%d.xml","category":"world"}`, farm.URL, i)
		if code := postSource(t, n.URL("/api/v1/admin/sources?discover=false"), body, &src); code != http.StatusCreated {
			t.Fatalf("add source %d: %d", i, code)
		}
	}
	var page struct {
		Total int `json:"total"`
		Hits  []struct {
			ID string `json:"id"`
		} `json:"hits"`
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		if err := getJSON(n.URL("/api/v1/search?limit=100&q=feed"), &page); err != nil || page.Total < 10 {
			return fmt.Errorf("crawled items not searchable: %d hits, %v", page.Total, err)
		}
		return nil
	})
	now := time.Now().UnixMilli()
	for i, h := range page.Hits[:3] {
		share := fmt.Sprintf(`{"event_id":"ops-share-%d","article_id":%q,"user_id":"u%d","share_type":"link","category":"world","timestamp":%d}`, i, h.ID, i, now)
		read := fmt.Sprintf(`{"event_id":"ops-read-%d","user_id":"u%d","article_id":%q,"session_id":"s1","timestamp":%d}`, i, i, h.ID, now)
		ingest(t, n.URL("/api/v1/events/share"), share)
		ingest(t, n.URL("/api/v1/events/read"), read)
	}
	for _, path := range []string{"/api/v1/feed", "/api/v1/feed", "/api/v1/search?q=" + url.QueryEscape("feed reports"), "/api/v1/trending"} {
		var v any
		if err := getJSON(n.URL(path), &v); err != nil {
			t.Fatal(err)
		}
	}
	n.WaitCaughtUp(30 * time.Second)

	// Until the stages have committed what the load gave them.
	testutil.EventuallyEvery(t, 20*time.Second, 500*time.Millisecond, func() error {
		problems := promnames.Check(scrape(t, n), exprs, recorded)
		if len(problems) > 0 {
			return fmt.Errorf("%d problems with the metrics configs/ names:\n%s", len(problems), strings.Join(problems, "\n"))
		}
		return nil
	})
	t.Logf("%d expressions of configs/ checked against the node's /metrics", len(exprs))
}

// A node that has been given nothing yet (no source, no event, no query)
// already exposes every series the alert rules read, with their labels, so
// that a stage stuck from its start alerts: nothing waits for a first
// commit or a first event to exist.
func TestAlertMetricsOnFreshNode(t *testing.T) {
	b, err := os.ReadFile("../../configs/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	exprs, recorded, err := promnames.RuleExprs("alerts.yaml", b)
	if err != nil {
		t.Fatal(err)
	}
	n := runNode(t, t.TempDir(), crawlEnv) // crawling on, as by default, with no source yet
	if problems := promnames.Check(scrape(t, n), exprs, recorded); len(problems) > 0 {
		t.Fatalf("%d problems with the metrics the alert rules read, on a fresh node:\n%s", len(problems), strings.Join(problems, "\n"))
	}
}

// ingest posts one event with the ingestion token and wants it accepted.
func ingest(t *testing.T, url, body string) {
	t.Helper()
	resp, err := ingestPost(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST %s %s: %d %s", url, body, resp.StatusCode, b)
	}
}

// scrape returns a node's /metrics, parsed.
func scrape(t *testing.T, n *nodeProc) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(n.URL("/metrics"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}
