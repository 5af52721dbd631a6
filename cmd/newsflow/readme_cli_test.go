package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/internal/testutil"
)

// readmeCLISkips are the newsflow commands of the README's "Using it" part
// that TestREADMECLIExamples does not run, with the reason.
var readmeCLISkips = map[string]string{
	"bin/newsflow run":                                 "it starts a node: the test runs one the same way",
	"bin/newsflow run --brokers 127.0.0.1:9092":        "needs a Kafka broker (the Kafka tests cover it)",
	"bin/newsflow feedfarm DIR --faults":               "a server that runs until stopped (its own tests cover it)",
	"bin/newsflow sources add https://example.com/ --": "needs a feed on the internet",
}

// readmeInputs are the files the README's commands read, written as a
// reader would before pasting them.
func readmeInputs(t *testing.T, dir string) {
	t.Helper()
	now := time.Now().UnixMilli()
	var articles, labelled []string
	events := []struct{ story, url, src, title string }{
		{"volcano", "https://a.example/volcano", "a", "Volcano erupts near Reykjavik, flights grounded"},
		{"volcano", "https://b.example/iceland-eruption", "b", "Iceland volcano eruption grounds flights at Reykjavik"},
		{"rates", "https://a.example/ecb", "a", "European Central Bank raises interest rates again"},
		{"rates", "https://c.example/ecb-hike", "c", "ECB interest rate hike hits mortgages"},
	}
	for i, e := range events {
		b, _ := json.Marshal(map[string]any{"id": fmt.Sprint("r", i), "story": e.story, "url": e.url, "publisher": e.src,
			"title": e.title, "summary": e.title + ".", "published_at": now - int64(10-i)*60_000})
		articles = append(articles, string(b))
	}
	for i, ex := range []struct{ topic, text string }{
		{"science", "volcano eruption lava geologists study the crater"}, {"science", "astronomers find a new planet with a telescope"},
		{"science", "researchers publish a study on climate and glaciers"}, {"business", "the central bank raises interest rates for mortgages"},
		{"business", "shares fall as the company reports lower profits"}, {"business", "the merger of two banks creates a giant lender"},
	} {
		b, _ := json.Marshal(map[string]string{"topic": ex.topic, "title": ex.text, "summary": fmt.Sprint(ex.text, " ", i)})
		labelled = append(labelled, string(b))
	}
	files := map[string]string{
		"events.ndjson":   fmt.Sprintf(`{"event_id":"rm1","article_id":"a1","user_id":"u1","share_type":"email","timestamp":%d}`+"\n", now),
		"reads.ndjson":    fmt.Sprintf(`{"event_id":"rr1","user_id":"u1","article_id":"a1","session_id":"s1","timestamp":%d}`+"\n", now),
		"articles.ndjson": strings.Join(articles, "\n") + "\n",
		"labelled.ndjson": strings.Join(labelled, "\n") + "\n",
		"my-feeds.opml": `<?xml version="1.0"?><opml version="2.0"><head><title>mine</title></head><body>
<outline type="rss" text="Example News" xmlUrl="https://news.example.org/rss.xml"/></body></opml>`,
		"password.txt": "a long root password\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestREADMECLIExamples runs the newsflow commands of the README's "Using
// it" part as a reader would paste them, in order, from a directory with
// the files they read: those that talk to a node against a fresh node
// (its address added with --addr), then, with the node stopped, those the
// README says need it stopped (the node's data directory added). Each must
// exit 0 and leave what it promises; the few it cannot run are listed in
// readmeCLISkips with the reason, and a command that is neither run nor
// listed fails the test.
//
// It is one scenario checked step by step (cyclomatic 30): the steps
// depend on each other's state, so they stay in order in one function.
func TestREADMECLIExamples(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test skipped in -short mode")
	}
	var running, stopped []string
	for _, line := range regexp.MustCompile(`(?m)^bin/newsflow .*$`).FindAllString(readmeUsingIt(t), -1) {
		cmd, comment, _ := strings.Cut(line, " #")
		cmd = strings.TrimSpace(cmd)
		skipped := false
		for prefix := range readmeCLISkips {
			skipped = skipped || cmd == prefix || strings.HasPrefix(prefix, "bin/newsflow sources add") && strings.HasPrefix(cmd, strings.TrimSuffix(prefix, " --"))
		}
		switch {
		case skipped:
		case strings.Contains(comment, "node stopped"):
			stopped = append(stopped, cmd)
		default:
			running = append(running, cmd)
		}
	}
	if len(running) < 8 || len(stopped) < 2 {
		t.Fatalf("found %d commands for a running node and %d for a stopped one in the README", len(running), len(stopped))
	}

	dir, data := t.TempDir(), t.TempDir()
	readmeInputs(t, dir)
	config, err := filepath.Abs("../../configs/newsflow.yaml")
	if err != nil {
		t.Fatal(err)
	}
	n := runNode(t, data, []string{"NEWSFLOW_AUTH_INGEST_TOKEN=s3cret"})
	env := append(os.Environ(), "NEWSFLOW_ADMIN_TOKEN="+testAdminToken)
	run := func(cmd, extra string) string {
		t.Helper()
		line := strings.Replace(cmd, "bin/newsflow", binPath, 1)
		line = strings.ReplaceAll(line, "TOKEN", testAdminToken) + extra
		c := exec.Command("bash", "-c", line)
		c.Dir, c.Env = dir, env
		out, err := c.CombinedOutput()
		if err != nil {
			t.Errorf("README command failed: %s\n  %v: %s", cmd, err, out)
		}
		return string(out)
	}
	outputs := map[string]string{}
	for _, cmd := range running {
		extra := ""
		if regexp.MustCompile(`^bin/newsflow (produce|status|sources|user|stage) `).MatchString(cmd) {
			extra = " --addr http://" + n.Addr
		}
		outputs[cmd] = run(cmd, extra)
	}
	// What the commands promise.
	for cmd, out := range outputs {
		switch {
		case strings.HasPrefix(cmd, "bin/newsflow topology"):
			for _, op := range []string{"trending", "articles", "stories", "search", "interest"} {
				if !strings.Contains(out, op) {
					t.Errorf("topology does not list %s:\n%s", op, out)
				}
			}
		case strings.HasPrefix(cmd, "bin/newsflow status"):
			if !strings.Contains(out, "ready") {
				t.Errorf("status says nothing of readiness:\n%s", out)
			}
		case strings.HasPrefix(cmd, "bin/newsflow stage pause"), strings.HasPrefix(cmd, "bin/newsflow stage resume"):
			if verb := strings.Fields(cmd)[2]; !strings.Contains(out, "stories "+strings.TrimSuffix(verb, "e")+"ed on") {
				t.Errorf("%s says:\n%s", cmd, out)
			}
		case strings.HasPrefix(cmd, "bin/newsflow topics eval"):
			if !strings.Contains(strings.ToLower(out), "accuracy") && !strings.Contains(strings.ToLower(out), "f1") {
				t.Errorf("topics eval prints no score:\n%s", out)
			}
		}
	}
	for file, want := range map[string]string{"feeds.opml": "news.example.org", "stories.tsv": "r3\t", "topics.model": "science"} {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil || !strings.Contains(string(b), want) {
			t.Errorf("%s after the README's commands: %v, want it to hold %q:\n%.300s", file, err, want, b)
		}
	}
	var page struct {
		Stories []struct {
			ArticleCount int `json:"article_count"`
		} `json:"stories"`
	}
	testutil.Eventually(t, 20*time.Second, func() error {
		if err := getJSON(n.URL("/api/v1/stories?limit=100"), &page); err != nil || len(page.Stories) == 0 {
			return fmt.Errorf("no story from the README's produce articles example (%v)", err)
		}
		return nil
	})

	stopClean(t, n)
	for _, cmd := range stopped {
		run(cmd, fmt.Sprintf(" --config %s --data %s", config, data))
	}
	t.Logf("%d README newsflow commands ran against a node, %d with it stopped; not run: %v", len(running), len(stopped), readmeCLISkips)
}
