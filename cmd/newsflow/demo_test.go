package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/newsflow/newsflow/cmd/newsflow/nodeproc"
	"github.com/newsflow/newsflow/internal/testutil"
)

// lockedBuffer is a bytes.Buffer that a command may write from several
// goroutines while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestDemo runs newsflow demo in the test's process, on free ports with a
// fresh data directory, and checks within 90 seconds what a visitor should
// see: stories with three sources or more, a trending list whose counts
// grow, readers whose reads are counted, every objective measured (each
// metric it reads has events, and /api/v1/admin/slo a value for it), and
// the admin login the banner prints; then it stops the demo as Ctrl-C
// does.
//
// It is one scenario checked step by step: the steps
// depend on each other's state, so they stay in order in one function.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a node for up to a minute")
	}
	httpAddr, farmAddr := nodeproc.FreeAddr(t, ""), nodeproc.FreeAddr(t, "")
	base := "http://" + httpAddr
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr lockedBuffer
	done := make(chan error, 1)
	go func() {
		done <- cmdDemo(ctx, []string{"--http", httpAddr, "--farm", farmAddr, "--data", t.TempDir(),
			"--users", "10", "--rate", "40", "--log-level", "error"}, &stdout, &stderr)
	}()
	stopped := false
	defer func() {
		if !stopped {
			cancel()
			<-done
		}
		if t.Failed() {
			t.Logf("demo output:\n%s\n%s", stdout.String(), stderr.String())
		}
	}()

	deadline := time.Now().Add(90 * time.Second)
	// eventually polls check until it succeeds, failing the test when the
	// demo exits or the minute is over.
	eventually := func(what string, check func() error) {
		t.Helper()
		for {
			err := check()
			if err == nil {
				return
			}
			select {
			case derr := <-done:
				stopped = true
				t.Fatalf("%s: the demo exited: %v", what, derr)
			case <-time.After(250 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s within 90 s: %v", what, err)
			}
		}
	}

	eventually("a story with three sources", func() error {
		var page struct {
			Stories []struct {
				Sources []json.RawMessage `json:"sources"`
			} `json:"stories"`
		}
		if err := getJSON(base+"/api/v1/stories?limit=50", &page); err != nil {
			return err
		}
		for _, s := range page.Stories {
			if len(s.Sources) >= 3 {
				return nil
			}
		}
		return fmt.Errorf("none among %d stories", len(page.Stories))
	})

	trending := func() (map[string]uint64, error) {
		var res struct {
			Items []struct {
				ArticleID string `json:"article_id"`
				Count     uint64 `json:"count"`
			} `json:"items"`
		}
		if err := getJSON(base+"/api/v1/trending?window=1h&k=20", &res); err != nil {
			return nil, err
		}
		counts := map[string]uint64{}
		for _, it := range res.Items {
			counts[it.ArticleID] = it.Count
		}
		return counts, nil
	}
	var first map[string]uint64
	eventually("trending articles", func() (err error) {
		if first, err = trending(); err == nil && len(first) == 0 {
			err = fmt.Errorf("no trending articles")
		}
		return err
	})
	// The readers keep sharing: the shares counted in the top 20 grow. (An
	// article of the first answer may drop out of the top 20 as others
	// overtake it, so the test sums the top rather than follow one.)
	sum := func(counts map[string]uint64) (total uint64) {
		for _, n := range counts {
			total += n
		}
		return total
	}
	eventually("growing trending counts", func() error {
		now, err := trending()
		if err != nil {
			return err
		}
		if sum(now) <= sum(first) {
			return fmt.Errorf("top 20 holds %d shares, %d at first: counts %v, first %v", sum(now), sum(first), now, first)
		}
		return nil
	})

	// Reads reach the readers' interest profiles, which the banner's admin
	// token may see.
	banner := stdout.String()
	token := regexp.MustCompile(`Authorization: Bearer (\S+)`).FindStringSubmatch(banner)
	m := regexp.MustCompile(`log in as\s+(\S+), password (\S+)`).FindStringSubmatch(banner)
	if token == nil || m == nil {
		t.Fatalf("no admin token or login in the banner:\n%s", banner)
	}
	eventually("a reader's history", func() error {
		req, _ := http.NewRequest(http.MethodGet, base+"/api/v1/admin/users/reader-001/interest", nil)
		req.Header.Set("Authorization", "Bearer "+token[1])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var p struct {
			History []json.RawMessage `json:"history"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&p); err != nil || resp.StatusCode != 200 {
			return fmt.Errorf("%d %v", resp.StatusCode, err)
		}
		if len(p.History) == 0 {
			return fmt.Errorf("no reads yet")
		}
		return nil
	})

	// Under the demo's load every objective is measured: each metric it
	// reads has events, and the node's report has a value for each.
	eventually("every objective measured", func() error {
		metrics, err := scrapeSeries(base)
		if err != nil {
			return err
		}
		for _, series := range []string{
			`newsflow_event_visible_seconds_count{input="articles.raw",stage="articles"}`,
			`newsflow_event_visible_seconds_count{input="articles",stage="stories"}`,
			`newsflow_event_visible_seconds_count{input="articles.indexed",stage="search"}`,
			`newsflow_event_visible_seconds_count{input="shares",stage="trending"}`,
			`newsflow_query_seconds_count{cache="hit",query="feed"}`,
			`newsflow_query_seconds_count{cache="miss",query="search"}`,
			`newsflow_crawl_sources_active`,
			`newsflow_article_publication_delay_seconds_count`,
			`newsflow_http_group_requests_total{class="2xx",group="feed"}`,
		} {
			if metrics[series] <= 0 {
				return fmt.Errorf("%s is %v", series, metrics[series])
			}
		}
		req, _ := http.NewRequest(http.MethodGet, base+"/api/v1/admin/slo", nil)
		req.Header.Set("Authorization", "Bearer "+token[1])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var rep struct {
			Objectives []struct {
				ID     string   `json:"id"`
				Value  *float64 `json:"value"`
				Status string   `json:"status"`
			} `json:"objectives"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil || resp.StatusCode != 200 {
			return fmt.Errorf("/api/v1/admin/slo: %d %v", resp.StatusCode, err)
		}
		var missing, values []string
		for _, o := range rep.Objectives {
			if o.Value == nil || o.Status == "no_data" {
				missing = append(missing, o.ID)
				continue
			}
			values = append(values, fmt.Sprintf("%s %.4f %s", o.ID, *o.Value, o.Status))
		}
		if len(rep.Objectives) < 8 || len(missing) > 0 {
			return fmt.Errorf("%d objectives, without data: %v", len(rep.Objectives), missing)
		}
		t.Logf("objectives under the demo's load: %s", strings.Join(values, "; "))
		return nil
	})

	// The banner's admin password logs in.
	resp, err := http.Post(base+"/api/v1/auth/login", "application/json",
		strings.NewReader(fmt.Sprintf(`{"username":%q,"password":%q}`, m[1], m[2])))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("login with the banner's password: %d", resp.StatusCode)
	}

	cancel()
	stopped = true
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("demo stopped with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("demo did not stop within 30s")
	}
}

// scrapeSeries reads a node's /metrics into values by series
// (testutil.Series).
func scrapeSeries(base string) (map[string]float64, error) {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return testutil.Series(b)
}
