package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/internal/testutil"
)

// TestREADMETrendingCMS runs the README's share and trending curl examples
// against a node with trending.counter: cms, as a reader who switched
// counters would: every trending item carries its count and error_bound
// (the exact count is within it), and so does an article's shares.
//
// It is one scenario checked step by step (cyclomatic 25): the steps
// depend on each other's state, so they stay in order in one function.
func TestREADMETrendingCMS(t *testing.T) {
	curl := needCurl(t)
	var share, trend []string
	for _, cmd := range curlCommands(readmeUsingIt(t)) {
		switch {
		case strings.Contains(cmd, "/api/v1/events/share"):
			share = append(share, cmd)
		case strings.Contains(cmd, "/api/v1/trending") && !strings.Contains(cmd, "by=story"),
			strings.Contains(cmd, "/api/v1/articles/") && strings.Contains(cmd, "/shares"):
			trend = append(trend, cmd)
		}
	}
	if len(share) == 0 || len(trend) < 3 {
		t.Fatalf("README examples: %d sending shares, %d reading trending", len(share), len(trend))
	}
	n := runNode(t, t.TempDir(), []string{"NEWSFLOW_AUTH_INGEST_TOKEN=s3cret", "NEWSFLOW_TRENDING_COUNTER=cms"})
	reader := newREADMEReader(t, curl, n, nil)
	run := func(cmd string) []byte {
		t.Helper()
		body, err := reader.run(cmd)
		if err != nil {
			t.Fatalf("README example failed: %s\n  %v: %s", cmd, err, body)
		}
		return body
	}
	for _, cmd := range share {
		run(cmd)
	}
	n.WaitCaughtUp(30 * time.Second)
	for _, cmd := range trend {
		// Top-K answers may be a snapshot interval stale: poll.
		testutil.Eventually(t, 5*time.Second, func() error {
			body := run(cmd)
			var res struct {
				Items  []cmsItem `json:"items"`
				Count  *uint64   `json:"count"`
				Bound  *uint64   `json:"error_bound"`
				Window string    `json:"window"`
			}
			if err := json.Unmarshal(body, &res); err != nil {
				t.Fatalf("%s: %s", cmd, body)
			}
			ok := false
			switch {
			case res.Count != nil: // an article's shares in one window
				ok = *res.Count >= 1 && res.Bound != nil && *res.Bound >= *res.Count-1
			case len(res.Items) > 0:
				ok = true
				for _, it := range res.Items {
					ok = ok && it.Count >= 1 && it.Bound != nil && *it.Bound >= it.Count-1
				}
			}
			if !ok {
				return fmt.Errorf("%s: no count with error_bound in %s", cmd, body)
			}
			t.Logf("%s\n  %s", cmd, body)
			return nil
		})
	}
}
