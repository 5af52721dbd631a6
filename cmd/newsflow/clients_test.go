package main

import (
	"bytes"
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
	miniflux "miniflux.app/v2/client"
)

// Real reader apps, installed from Debian (.ci/run installs them), drive
// the reader APIs of a running node. NEWSFLOW_CLIENTS_REQUIRED=1 (set by
// .ci/run) makes a missing app a failure instead of a skip.

// needClient returns the path of a client program, or skips (fails in CI).
func needClient(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		msg := fmt.Sprintf("%s is not installed (apt-get install %s)", name, name)
		if os.Getenv("NEWSFLOW_CLIENTS_REQUIRED") == "1" {
			t.Fatalf("NEWSFLOW_CLIENTS_REQUIRED=1 and %s", msg)
		}
		t.Skip(msg)
	}
	return p
}

// readerNode is a node with two sources, their articles, and a reader
// with an API key subscribed to both through the Miniflux API.
type readerNode struct {
	*nodeProc
	session, key string
	feedIDs      []int64
	titles       []string // the articles' titles
}

func startReaderNode(t *testing.T) *readerNode {
	t.Helper()
	n := &readerNode{nodeProc: runNode(t, t.TempDir(), nil)}
	var srcIDs []string
	for _, src := range []struct{ url, name string }{{"https://wire.example/feed.xml", "The Wire"}, {"https://daily.example/rss", "Daily"}} {
		srcIDs = append(srcIDs, addPausedSource(t, n.nodeProc, src.url, src.name))
	}
	now := time.Now().UTC()
	var lines []string
	for i, a := range []struct {
		src        int
		url, title string
	}{
		{0, "https://wire.example/quake", "Strong earthquake shakes Lisbon"},
		{0, "https://wire.example/rates", "Central bank raises interest rates"},
		{1, "https://daily.example/cup", "Striker scores twice in cup final"},
	} {
		b, _ := json.Marshal(map[string]string{"url": a.url, "source_id": srcIDs[a.src], "title": a.title, "summary": a.title + ".",
			"published_at": now.Add(-time.Duration(10-i) * time.Minute).Format(time.RFC3339)})
		lines = append(lines, string(b))
		n.titles = append(n.titles, a.title)
	}
	resp, err := ingestPost(n.URL("/api/v1/articles?batch=1"), "application/x-ndjson", strings.NewReader(strings.Join(lines, "\n")))
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("articles: %v %v", err, resp)
	}
	resp.Body.Close()
	n.WaitCaughtUp(30 * time.Second)
	resp, err = http.Post(n.URL("/api/v1/auth/register"), "application/json", strings.NewReader(`{"username":"ann","password":"ann's long password"}`))
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("register: %v %v", err, resp)
	}
	var sess struct{ Token string }
	json.NewDecoder(resp.Body).Decode(&sess)
	resp.Body.Close()
	n.session = sess.Token
	resp, err = tokenPost(n.session, n.URL("/api/v1/me/api-keys"), "application/json", strings.NewReader(`{"name":"newsboat"}`))
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("api key: %v %v", err, resp)
	}
	var k struct{ Secret string }
	json.NewDecoder(resp.Body).Decode(&k)
	resp.Body.Close()
	n.key = k.Secret
	for _, url := range []string{"https://wire.example/feed.xml", "https://daily.example/rss"} {
		var c struct {
			FeedID int64 `json:"feed_id"`
		}
		if code := n.miniflux(t, "POST", "/v1/feeds", fmt.Sprintf(`{"feed_url":%q}`, url), &c); code != http.StatusCreated {
			t.Fatalf("subscribe to %s: %d", url, code)
		}
		n.feedIDs = append(n.feedIDs, c.FeedID)
	}
	return n
}

// miniflux calls the node's Miniflux API with the reader's key and
// decodes the answer into v (when not nil).
func (n *readerNode) miniflux(t *testing.T, method, path, body string, v any) int {
	t.Helper()
	req, err := http.NewRequest(method, n.URL(path), strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Auth-Token", n.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if v != nil {
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
	}
	return resp.StatusCode
}

// entries lists the reader's entries with the given query.
func (n *readerNode) entries(t *testing.T, query string) []struct {
	ID      int64  `json:"id"`
	Title   string `json:"title"`
	Status  string `json:"status"`
	Starred bool   `json:"starred"`
} {
	t.Helper()
	var l struct {
		Entries []struct {
			ID      int64  `json:"id"`
			Title   string `json:"title"`
			Status  string `json:"status"`
			Starred bool   `json:"starred"`
		} `json:"entries"`
	}
	if code := n.miniflux(t, "GET", "/v1/entries?"+query, "", &l); code != 200 {
		t.Fatalf("entries: %d", code)
	}
	return l.Entries
}

// newsboat runs Debian's newsboat with a configuration made of lines, in
// dir, and returns its output.
func newsboat(t *testing.T, bin, dir string, config []string, args ...string) string {
	t.Helper()
	cfg := filepath.Join(dir, "config")
	if err := os.WriteFile(cfg, []byte(strings.Join(config, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	urls := filepath.Join(dir, "urls")
	if err := os.WriteFile(urls, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	debug := filepath.Join(dir, "newsboat.log")
	cmd := exec.Command(bin, append([]string{"-C", cfg, "-u", urls, "-c", filepath.Join(dir, "cache.db"), "-d", debug, "-l", "4"}, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+dir, "TERM=xterm")
	out, err := cmd.CombinedOutput()
	if err != nil {
		// newsboat may exit 1 without a word: its log says why.
		log, _ := os.ReadFile(debug)
		t.Fatalf("newsboat %v: %v\n%s\nnewsboat's log (last 4 KiB):\n%s", args, err, out, log[max(len(log)-4096, 0):])
	}
	return string(out)
}

// tui runs newsboat's interface in a detached tmux session, with the
// commands of run-on-startup, until check holds; then it quits.
func tui(t *testing.T, tmux, bin, dir string, config []string, check func() error) {
	t.Helper()
	cfg := filepath.Join(dir, "config")
	if err := os.WriteFile(cfg, []byte(strings.Join(config, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	session := fmt.Sprintf("nf%d", time.Now().UnixNano())
	cmd := exec.Command(tmux, "new-session", "-d", "-s", session, "-x", "120", "-y", "40",
		fmt.Sprintf("HOME=%s TERM=xterm %s -C %s -u %s -c %s", dir, bin, cfg, filepath.Join(dir, "urls"), filepath.Join(dir, "cache.db")))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tmux: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command(tmux, "kill-session", "-t", session).Run() })
	defer func() { _ = exec.Command(tmux, "send-keys", "-t", session, "Q").Run() }()
	testutil.Eventually(t, 30*time.Second, func() error {
		if err := check(); err != nil {
			screen, _ := exec.Command(tmux, "capture-pane", "-p", "-t", session).Output()
			return fmt.Errorf("%w; newsboat's screen:\n%s", err, bytes.TrimSpace(screen))
		}
		return nil
	})
}

// TestNewsboatMiniflux: Debian's newsboat, in its Miniflux mode with the
// reader's username and API key, logs in, lists the subscriptions, fetches
// the unread articles and marks one read through the node's Miniflux API;
// the node and the web reader then show it read. (newsboat 2.21 cannot
// star through the Miniflux API; TestMinifluxEntries stars through it.)
func TestNewsboatMiniflux(t *testing.T) {
	bin := needClient(t, "newsboat")
	tmux := needClient(t, "tmux")
	n := startReaderNode(t)
	dir := t.TempDir()
	config := []string{`urls-source "miniflux"`, `miniflux-url "http://` + n.Addr + `"`, `miniflux-login "ann"`,
		`miniflux-password "` + n.key + `"`}
	out := newsboat(t, bin, dir, config, "-x", "reload", "print-unread")
	m := regexp.MustCompile(`(\d+) unread articles`).FindStringSubmatch(out)
	if m == nil || m[1] != strconv.Itoa(len(n.titles)) {
		t.Fatalf("newsboat print-unread: %q, want %d unread articles", out, len(n.titles))
	}

	// In the interface: open the first feed and mark its first unread
	// article read.
	before := n.entries(t, "status=unread")
	tui(t, tmux, bin, dir, append(config, `run-on-startup open ; toggle-article-read "read"`), func() error {
		if after := n.entries(t, "status=unread"); len(after) != len(before)-1 {
			return fmt.Errorf("%d unread entries on the node, want %d", len(after), len(before)-1)
		}
		return nil
	})
	var read []string
	for _, e := range n.entries(t, "status=read") {
		read = append(read, e.Title)
	}
	if len(read) != 1 {
		t.Fatalf("read on the node: %v", read)
	}
	// The web reader shows the same: one article read.
	req, _ := http.NewRequest("GET", n.URL("/api/v1/me/unread"), nil)
	req.Header.Set("Authorization", "Bearer "+n.session)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var unread struct {
		Total struct {
			Articles int `json:"articles"`
		} `json:"total"`
	}
	json.NewDecoder(resp.Body).Decode(&unread)
	resp.Body.Close()
	if unread.Total.Articles != len(n.titles)-1 {
		t.Errorf("the web reader counts %d unread articles, want %d (newsboat marked %v read)", unread.Total.Articles, len(n.titles)-1, read)
	}
	// And newsboat, reloading, agrees.
	out = newsboat(t, bin, dir, config, "-x", "reload", "print-unread")
	if !strings.Contains(out, fmt.Sprintf("%d unread articles", len(n.titles)-1)) {
		t.Errorf("newsboat after marking: %q", out)
	}
}

// addPausedSource adds a source as an admin would, without fetching it
// and paused (the tests' feeds are not on the network), and returns its id.
func addPausedSource(t *testing.T, n *nodeProc, feedURL, name string) string {
	t.Helper()
	body := fmt.Sprintf(`{"feed_url":%q,"name":%q,"status":"paused"}`, feedURL, name)
	resp, err := tokenPost(testAdminToken, n.URL("/api/v1/admin/sources?discover=false"), "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s struct{ ID string }
	if resp.StatusCode != http.StatusCreated || json.NewDecoder(resp.Body).Decode(&s) != nil {
		t.Fatalf("add source %s: %v", feedURL, resp.Status)
	}
	return s.ID
}

// TestNewsboatGoogleReader: Debian's newsboat, in its FeedHQ mode (the
// Google Reader API with Atom streams) with the reader's username and API
// key, logs in with ClientLogin, lists the subscriptions, fetches the
// unread articles, and in its interface marks one read and stars one; the
// node and the web reader show both.
func TestNewsboatGoogleReader(t *testing.T) {
	bin := needClient(t, "newsboat")
	tmux := needClient(t, "tmux")
	n := startReaderNode(t)
	dir := t.TempDir()
	config := []string{`urls-source "feedhq"`, `feedhq-url "http://` + n.Addr + `"`, `feedhq-login "ann"`,
		`feedhq-password "` + n.key + `"`, `feedhq-show-special-feeds no`, `feedhq-flag-star "s"`, `feedhq-min-items 50`}
	out := newsboat(t, bin, dir, config, "-x", "reload", "print-unread")
	m := regexp.MustCompile(`(\d+) unread articles`).FindStringSubmatch(out)
	if m == nil || m[1] != strconv.Itoa(len(n.titles)) {
		t.Fatalf("newsboat print-unread: %q, want %d unread articles", out, len(n.titles))
	}
	// The interface marks the first unread article read and stars the one
	// its cursor is on then.
	tui(t, tmux, bin, dir, append(config, `run-on-startup open ; toggle-article-read "read" ; edit-flags "s"`), func() error {
		read, starred := n.entries(t, "status=read"), n.entries(t, "starred=true")
		if len(read) != 1 || len(starred) != 1 {
			return fmt.Errorf("on the node: read %v, starred %v; want one of each", read, starred)
		}
		return nil
	})
	starred := n.entries(t, "starred=true")
	req, _ := http.NewRequest("GET", n.URL("/api/v1/me/starred"), nil)
	req.Header.Set("Authorization", "Bearer "+n.session)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var stars struct {
		Articles []struct {
			Title string `json:"title"`
		} `json:"articles"`
	}
	json.NewDecoder(resp.Body).Decode(&stars)
	resp.Body.Close()
	if len(stars.Articles) != 1 || stars.Articles[0].Title != starred[0].Title {
		t.Errorf("the web reader's stars: %+v, want %q", stars, starred[0].Title)
	}
	out = newsboat(t, bin, dir, config, "-x", "reload", "print-unread")
	if !strings.Contains(out, fmt.Sprintf("%d unread articles", len(n.titles)-1)) {
		t.Errorf("newsboat after marking: %q", out)
	}
}

// TestMinifluxGoClient: Miniflux's own Go client (miniflux.app/v2/client)
// with the reader's API key as its token: it reads the reader, the
// subscriptions and the unread entries, marks one read and stars one, as
// the web reader then shows. (Debian's newsboat cannot star through the
// Miniflux API; this client can.)
func TestMinifluxGoClient(t *testing.T) {
	n := startReaderNode(t)
	c := miniflux.NewClient("http://"+n.Addr, n.key)
	me, err := c.Me()
	if err != nil || me.Username != "ann" {
		t.Fatalf("me: %+v %v", me, err)
	}
	feeds, err := c.Feeds()
	if err != nil || len(feeds) != 2 {
		t.Fatalf("feeds: %+v %v", feeds, err)
	}
	unread, err := c.Entries(&miniflux.Filter{Status: miniflux.EntryStatusUnread, Order: "published_at", Direction: "desc"})
	if err != nil || unread.Total != len(n.titles) || len(unread.Entries) != len(n.titles) {
		t.Fatalf("unread entries: %+v %v", unread, err)
	}
	read, star := unread.Entries[0], unread.Entries[1]
	if err := c.UpdateEntries([]int64{read.ID}, miniflux.EntryStatusRead); err != nil {
		t.Fatal(err)
	}
	if err := c.ToggleStarred(star.ID); err != nil {
		t.Fatal(err)
	}
	starred, err := c.Entries(&miniflux.Filter{Starred: miniflux.FilterOnlyStarred})
	if err != nil || starred.Total != 1 || starred.Entries[0].ID != star.ID {
		t.Fatalf("starred: %+v %v", starred, err)
	}
	if left, err := c.Entries(&miniflux.Filter{Status: miniflux.EntryStatusUnread}); err != nil || left.Total != len(n.titles)-1 {
		t.Fatalf("unread after marking one: %+v %v", left, err)
	}
	counters, err := c.FetchCounters()
	if err != nil || len(counters.ReadCounters) != 1 {
		t.Fatalf("counters: %+v %v", counters, err)
	}
	// The web reader shows the same star.
	req, _ := http.NewRequest("GET", n.URL("/api/v1/me/starred"), nil)
	req.Header.Set("Authorization", "Bearer "+n.session)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var stars struct {
		Articles []struct {
			Title string `json:"title"`
		} `json:"articles"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&stars); err != nil || len(stars.Articles) != 1 || stars.Articles[0].Title != star.Title {
		t.Errorf("the web reader's stars: %+v %v, want %q", stars, err, star.Title)
	}
}
