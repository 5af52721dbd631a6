package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/newsflow/newsflow/cmd/newsflow/nodeproc"
	"github.com/newsflow/newsflow/demo/feedfarm"
)

// newsflow sources import of a broken file says what is wrong with it
// and where, before it calls any node.
func TestSourcesImportBrokenFile(t *testing.T) {
	dir := t.TempDir()
	for name, c := range map[string]struct{ in, want string }{
		"empty.opml": {"", "empty.opml: empty file"},
		"cut.opml":   {"<opml version=\"2.0\">\n<body>\n<outline text=\"A\" xmlUrl=\"https://a.exa", "cut.opml:3: XML syntax error: unexpected end of file"},
		"page.opml":  {"<html><body>not a list</body></html>", "page.opml:1: not an OPML document: the root element is <html>"},
		"text.opml":  {"feeds: https://a.example/rss", "text.opml: not an OPML document"},
	} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(c.in), 0o644); err != nil {
			t.Fatal(err)
		}
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), []string{"sources", "import", path, "--addr", "http://" + nodeproc.FreeAddr(t, "")}, &stdout, &stderr)
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("import %s: %v, want an error with the path and %q", name, err, c.want)
		}
	}
}

// newsflow sources add refuses, with the node's reason, a URL that
// cannot work: an address the crawler may not fetch (here 127.0.0.2,
// outside the node's crawl.allow_cidrs) and a page that is no feed and
// names none, with --no-discover too. A feed on an allowed address is
// added; --no-discover takes such a URL as given.
func TestSourcesAddChecks(t *testing.T) {
	if testing.Short() {
		t.Skip("process test skipped in -short mode")
	}
	farm := feedfarm.New(feedfarm.Options{Items: 3})
	mux := http.NewServeMux()
	mux.Handle("/gen/", farm)
	mux.HandleFunc("/blog", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte(`<!doctype html><html><head><title>A blog</title></head><body>No feed here.</body></html>`))
	})
	allowed := httptest.NewServer(mux)
	defer allowed.Close()
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("no 127.0.0.2 here: %v", err)
	}
	blocked := httptest.NewUnstartedServer(mux)
	blocked.Listener.Close()
	blocked.Listener = ln
	blocked.Start()
	defer blocked.Close()

	n := runNode(t, t.TempDir(), crawlEnv)
	add := func(args ...string) (string, error) {
		out, err := exec.Command(binPath, append(append([]string{"sources", "add"}, args...), "--addr", "http://"+n.Addr, "--token", testAdminToken)...).CombinedOutput()
		return string(out), err
	}
	if out, err := add(blocked.URL + "/gen/0.xml"); err == nil || !strings.Contains(out, "127.0.0.2") ||
		!strings.Contains(out, "crawl.allow_cidrs") || !strings.Contains(out, "400") {
		t.Errorf("add a feed on a blocked address: %v\n%s", err, out)
	}
	if out, err := add(blocked.URL+"/gen/0.xml", "--no-discover"); err == nil || !strings.Contains(out, "127.0.0.2") ||
		!strings.Contains(out, "loopback") || !strings.Contains(out, "400") {
		t.Errorf("add a feed on a blocked address --no-discover: %v\n%s", err, out)
	}
	if out, err := add(allowed.URL + "/blog"); err == nil || !strings.Contains(out, "not a feed and links to none") {
		t.Errorf("add a page without a feed: %v\n%s", err, out)
	}
	if out, err := add(allowed.URL+"/gen/0.xml", "--category", "world"); err != nil || !strings.HasPrefix(out, "added src-") {
		t.Errorf("add a feed: %v\n%s", err, out)
	}
	if out, err := add(allowed.URL+"/blog", "--no-discover", "--name", "Blog"); err != nil || !strings.Contains(out, "(Blog)") {
		t.Errorf("add a page --no-discover: %v\n%s", err, out)
	}
}
