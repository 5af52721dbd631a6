package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
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
	curl := needCurl(t)
	cmds := curlCommands(readmeUsingIt(t))
	if len(cmds) < 15 {
		t.Fatalf("found %d curl commands in the README", len(cmds))
	}

	n := runNode(t, t.TempDir(), []string{"NEWSFLOW_AUTH_INGEST_TOKEN=s3cret"})
	reader := newREADMEReader(t, curl, n, append(os.Environ(), "A=Authorization: Bearer "+testAdminToken))
	var session string
	var apiKey struct{ ID, Secret string }
	readmeFeedSource(t, n)
	ran := 0
	for _, cmd := range cmds {
		if strings.Contains(cmd, "/admin/sources") {
			continue // needs a feed on the internet
		}
		if strings.Contains(cmd, "SECRET") || strings.Contains(cmd, "KEY_ID") {
			if apiKey.Secret == "" {
				t.Fatalf("%s: no API key from the example before it", cmd)
			}
			cmd = strings.NewReplacer("SECRET", apiKey.Secret, "KEY_ID", apiKey.ID).Replace(cmd)
		}
		if strings.Contains(cmd, "ENTRY_ID") {
			cmd = strings.ReplaceAll(cmd, "ENTRY_ID", readmeEntry(t, n, apiKey.Secret))
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
		body, err := reader.run(cmd)
		if err != nil {
			t.Errorf("README example failed: %s\n  %v: %s", cmd, err, body)
			continue
		}
		if strings.Contains(cmd, "-XPOST") && strings.Contains(cmd, "/me/api-keys") {
			if json.Unmarshal(body, &apiKey) != nil || apiKey.Secret == "" {
				t.Fatalf("API key example answered %s", body)
			}
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

// needCurl skips the test in -short mode (it runs a node) or where curl is
// not installed, and otherwise returns the curl binary.
func needCurl(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test skipped in -short mode")
	}
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl is not installed")
	}
	return curl
}

// readmeReader runs the README's curl examples against a node as a reader
// pastes them: localhost:8080 is the node, and $I holds the ingestion
// token s3cret.
type readmeReader struct {
	curl string
	n    *nodeProc
	env  []string // the commands' environment; nil for the test's own
	out  string   // the file an answer's body is written to
}

func newREADMEReader(t *testing.T, curl string, n *nodeProc, env []string) *readmeReader {
	return &readmeReader{curl: curl, n: n, env: env, out: filepath.Join(t.TempDir(), "body")}
}

// run runs cmd, a curl example of the README, and returns the body of the
// answer; the error says why when curl fails or the status is not 2xx.
func (r *readmeReader) run(cmd string) ([]byte, error) {
	cmd = strings.ReplaceAll(cmd, "localhost:8080", r.n.Addr)
	cmd = strings.Replace(cmd, "curl ", r.curl+" -sS -o "+r.out+" -w '%{http_code}' ", 1)
	c := exec.Command("bash", "-c", `I="Authorization: Bearer s3cret"; `+cmd)
	c.Env = r.env
	code, err := c.CombinedOutput()
	body, _ := os.ReadFile(r.out)
	if err != nil || len(code) != 3 || code[0] != '2' {
		return body, fmt.Errorf("status %s (%v)", code, err)
	}
	return body, nil
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

// readmeFeedURL is the feed the README's Miniflux example subscribes to.
const readmeFeedURL = "https://example.org/feed.xml"

// readmeFeedSource adds the source of the README's Miniflux example (as an
// admin would, without fetching it) and an article of it.
func readmeFeedSource(t *testing.T, n *nodeProc) {
	t.Helper()
	id := addPausedSource(t, n, readmeFeedURL, "Example")
	line := `{"url":"https://example.org/news/1","source_id":"` + id + `","title":"Example outlet reports on a quiet day"}`
	resp, err := tokenPost("s3cret", n.URL("/api/v1/articles"), "application/json", strings.NewReader(line))
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("the example's article: %v %v", err, resp)
	}
	resp.Body.Close()
}

// readmeEntry returns the id of an entry the README's API key lists.
func readmeEntry(t *testing.T, n *nodeProc, key string) string {
	t.Helper()
	var id string
	testutil.Eventually(t, 20*time.Second, func() error {
		req, _ := http.NewRequest("GET", n.URL("/v1/entries"), nil)
		req.Header.Set("X-Auth-Token", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var l struct {
			Entries []struct {
				ID int64 `json:"id"`
			} `json:"entries"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&l); err != nil || len(l.Entries) == 0 {
			return fmt.Errorf("no entry for the README's Miniflux examples (%v)", err)
		}
		id = strconv.FormatInt(l.Entries[0].ID, 10)
		return nil
	})
	return id
}
