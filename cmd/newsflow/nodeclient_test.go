package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every command that calls a node explains a 401: it names --token and
// NEWSFLOW_ADMIN_TOKEN (and, for the ingestion endpoints, the ingestion
// token), with a token given or without.
func TestUnauthorizedHint(t *testing.T) {
	node := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		w.Write([]byte(`{"error":"admin endpoint: log in as an admin (session cookie or Authorization: Bearer)"}`))
	}))
	defer node.Close()
	dir := t.TempDir()
	events := filepath.Join(dir, "events.ndjson")
	if err := os.WriteFile(events, []byte(`{"event_id":"e1","article_id":"a1","user_id":"u1","timestamp":1}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	feeds := filepath.Join(dir, "feeds.opml")
	if err := os.WriteFile(feeds, []byte(`<opml version="2.0"><body><outline text="A" xmlUrl="https://a.example/rss"/></body></opml>`), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("NEWSFLOW_ADMIN_TOKEN", "")
	t.Setenv("NEWSFLOW_INGEST_TOKEN", "")
	for _, args := range [][]string{
		{"status"},
		{"leave"},
		{"sources", "export"},
		{"sources", "import", feeds},
		{"sources", "add", "https://news.example/"},
		{"produce", "shares", events, "--retry-for", "0s"},
		{"produce", "reads", events, "--retry-for", "0s"},
		{"produce", "articles", events, "--retry-for", "0s"},
	} {
		for _, token := range []string{"", "wrong"} {
			full := append(args, "--addr", node.URL)
			if token != "" {
				full = append(full, "--token", token)
			}
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), full, &stdout, &stderr)
			if err == nil {
				t.Fatalf("%v: no error from a 401", full)
			}
			msg := err.Error()
			for _, want := range []string{"401", "hint:", "--token", "NEWSFLOW_ADMIN_TOKEN"} {
				if !strings.Contains(msg, want) {
					t.Errorf("%v: error does not mention %q:\n%s", full, want, msg)
				}
			}
			if args[0] == "produce" && !strings.Contains(msg, "NEWSFLOW_INGEST_TOKEN") {
				t.Errorf("%v: error does not name the ingestion token:\n%s", full, msg)
			}
		}
	}
}
