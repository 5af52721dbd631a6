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

// TestREADMECurlExamples runs the curl commands of the README's "Using it"
// part, as a reader would paste them, against a node started as the README
// says (an ingestion token s3cret, $A holding the admin token), and
// expects every one to succeed (2xx). Placeholders are filled as a reader
// would: TOKEN with the session the login example returned, STORY_ID and
// ARTICLE_ID with a story of the articles the examples sent. Only the
// source examples are left out: they need a feed on the internet.
func TestREADMECurlExamples(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test skipped in -short mode")
	}
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl is not installed")
	}
	cmds := curlCommands(readmeUsingIt(t))
	if len(cmds) < 15 {
		t.Fatalf("found %d curl commands in the README", len(cmds))
	}

	n := startNodeEnv(t, t.TempDir(), []string{"NEWSFLOW_AUTH_INGEST_TOKEN=s3cret"})
	n.WaitReady(30 * time.Second)
	env := append(os.Environ(), "A=Authorization: Bearer "+testAdminToken)
	out := filepath.Join(t.TempDir(), "body")
	var session string
	ran := 0
	for _, cmd := range cmds {
		if strings.Contains(cmd, "/admin/sources") {
			continue // needs a feed on the internet
		}
		if strings.Contains(cmd, "STORY_ID") || strings.Contains(cmd, "ARTICLE_ID") {
			story, article := readmeStory(t, n)
			cmd = strings.NewReplacer("STORY_ID", story, "ARTICLE_ID", article).Replace(cmd)
		}
		if strings.Contains(cmd, "TOKEN") {
			if session == "" {
				t.Fatalf("%s: no session from the login example before it", cmd)
			}
			cmd = strings.ReplaceAll(cmd, "TOKEN", session)
		}
		cmd = strings.ReplaceAll(cmd, "localhost:8080", n.Addr)
		cmd = strings.Replace(cmd, "curl ", curl+" -sS -o "+out+" -w '%{http_code}' ", 1)
		c := exec.Command("bash", "-c", `I="Authorization: Bearer s3cret"; `+cmd)
		c.Env = env
		code, err := c.CombinedOutput()
		body, _ := os.ReadFile(out)
		if err != nil || len(code) != 3 || code[0] != '2' {
			t.Errorf("README example failed: %s\n  status %s (%v): %s", cmd, code, err, body)
			continue
		}
		if strings.Contains(cmd, "/auth/login") {
			var s struct {
				Token string `json:"token"`
			}
			if json.Unmarshal(body, &s) != nil || s.Token == "" {
				t.Fatalf("login example answered %s", body)
			}
			session = s.Token
		}
		ran++
	}
	t.Logf("%d README curl examples answered 2xx", ran)
}

// readmeUsingIt returns the README's "Using it" part, up to "A cluster":
// the examples a reader runs against one node.
func readmeUsingIt(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	start, end := strings.Index(readme, "\n## Using it"), strings.Index(readme, "\n### A cluster")
	if start < 0 || end < start {
		t.Fatal("README has no \"Using it\" part before \"A cluster\"")
	}
	return readme[start:end]
}

// curlCommands returns the curl commands of the sh blocks of md, with
// continuation lines joined.
func curlCommands(md string) []string {
	var cmds []string
	for _, block := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(md, -1) {
		lines := strings.Split(block[1], "\n")
		for i := 0; i < len(lines); i++ {
			if !strings.HasPrefix(lines[i], "curl ") {
				continue
			}
			cmd := lines[i]
			for strings.HasSuffix(strings.TrimSpace(cmd), "\\") && i+1 < len(lines) {
				i++
				cmd = strings.TrimSuffix(strings.TrimSpace(cmd), "\\") + " " + strings.TrimSpace(lines[i])
			}
			cmds = append(cmds, cmd)
		}
	}
	return cmds
}

// readmeStory waits for a story of the README's articles and returns its
// id and its representative article.
func readmeStory(t *testing.T, n *nodeProc) (story, article string) {
	t.Helper()
	testutil.Eventually(t, 20*time.Second, func() error {
		var page struct {
			Stories []struct {
				ID             string `json:"id"`
				Representative string `json:"representative"`
			} `json:"stories"`
		}
		if err := getJSON(n.URL("/api/v1/stories"), &page); err != nil || len(page.Stories) == 0 {
			return fmt.Errorf("no story from the README's article example (%v)", err)
		}
		story, article = page.Stories[0].ID, page.Stories[0].Representative
		return nil
	})
	return story, article
}
