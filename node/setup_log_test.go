package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/newsflow/newsflow/internal/testutil"
)

// lockedBuffer is a sink safe for the node's goroutines.
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

// startLoggedNode runs a node whose log (at Debug, as JSON, through
// NewLogger's masking) and console go to the buffers returned; it stops
// with the test.
func startLoggedNode(t *testing.T, adminToken string) (base string, log, console *lockedBuffer) {
	t.Helper()
	log, console = &lockedBuffer{}, &lockedBuffer{}
	logger, err := newLogger(log, LoggingConfig{Level: "debug", Format: "json"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Default()
	cfg.DataDir, cfg.Crawl.Enabled, cfg.Log.Partitions = t.TempDir(), false, 2
	cfg.Auth.BcryptCost, cfg.Auth.AllowWeakCostForTests = 4, true
	cfg.Auth.AdminToken = adminToken
	n, err := Open(context.Background(), cfg, Options{Logger: logger, Console: console, Operators: []string{"trending"}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("node Run: %v", err)
		}
		if err := n.Close(); err != nil {
			t.Errorf("close node: %v", err)
		}
	})
	base = "http://" + ln.Addr().String()
	testutil.Eventually(t, 20*time.Second, func() error {
		resp, err := http.Get(base + "/health/live")
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	})
	return base, log, console
}

// call sends a JSON request and decodes the answer into out (if not nil).
func call(t *testing.T, method, url, body, bearer string, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %d %s", method, url, resp.StatusCode, b)
		}
	}
	return resp.StatusCode
}

// A node with no admin and no admin token prints the one-time setup link
// on its console alone: its log says a link was printed, never the token;
// nor does the log carry the passwords, session tokens and webhook
// credentials of the requests that follow.
func TestSetupLinkOnTheConsoleOnly(t *testing.T) {
	base, log, console := startLoggedNode(t, "")
	m := regexp.MustCompile(`/setup\?token=([A-Za-z0-9_-]{20,})`).FindStringSubmatch(console.String())
	if m == nil {
		t.Fatalf("no setup link on the console:\n%s", console)
	}
	token := m[1]
	if !strings.Contains(console.String(), "--setup-token "+token) {
		t.Errorf("the console does not give the command with the token:\n%s", console)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if !strings.Contains(log.String(), "was printed on standard error") {
			return fmt.Errorf("the log does not say a setup link was printed:\n%s", log)
		}
		return nil
	})

	var sess struct {
		Token string `json:"token"`
	}
	body := `{"token":"` + token + `","username":"root","password":"the root passphrase"}`
	if code := call(t, http.MethodPost, base+"/api/v1/setup/admin", body, "", &sess); code != http.StatusCreated || sess.Token == "" {
		t.Fatalf("create the first admin with the setup token: %d", code)
	}
	hook := "https://ann:hunter22@hooks.example/newsflow?token=h00ktoken&topic=world"
	var added struct {
		Secret string `json:"secret"`
	}
	if code := call(t, http.MethodPost, base+"/api/v1/me/webhooks", `{"url":"`+hook+`"}`, sess.Token, &added); code != http.StatusCreated {
		t.Fatalf("register a webhook: %d", code)
	}
	for _, secret := range []string{token, sess.Token, "the root passphrase", "hunter22", "h00ktoken", added.Secret} {
		if strings.Contains(log.String(), secret) {
			t.Errorf("the log carries %q:\n%s", secret, log)
		}
	}
}

// A node with an admin token makes no setup link: the admin token creates
// the first admin. Nothing about a link is printed or logged, and the
// setup status says no link is active.
func TestNoSetupLinkWithAnAdminToken(t *testing.T) {
	const adminToken = "an-admin-token-of-the-node"
	base, log, console := startLoggedNode(t, adminToken)
	var st struct {
		AdminExists      bool `json:"admin_exists"`
		SetupTokenActive bool `json:"setup_token_active"`
	}
	if code := call(t, http.MethodGet, base+"/api/v1/setup", "", "", &st); code != http.StatusOK || st.AdminExists || st.SetupTokenActive {
		t.Fatalf("setup status: %d %+v", code, st)
	}
	body := `{"username":"root","password":"the root passphrase","role":"admin"}`
	if code := call(t, http.MethodPost, base+"/api/v1/admin/users", body, adminToken, nil); code != http.StatusCreated {
		t.Fatalf("create the first admin with the admin token: %d", code)
	}
	if c := console.String(); c != "" {
		t.Errorf("the console of a node with an admin token: %q", c)
	}
	for _, s := range []string{"one-time", "setup?token", adminToken} {
		if strings.Contains(log.String(), s) {
			t.Errorf("the log says %q:\n%s", s, log)
		}
	}
}
