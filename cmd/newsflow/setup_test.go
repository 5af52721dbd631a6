package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/internal/testutil"
)

// A node started without an admin and without an admin token prints a
// one-time setup URL once, on its standard error and not in its log; while
// it runs, newsflow user add creates the first admin through it with that
// token and explains what to do without one.
//
// It is one scenario checked step by step (cyclomatic 27): the steps
// depend on each other's state, so they stay in order in one function.
func TestUserAddAgainstRunningNode(t *testing.T) {
	dir := t.TempDir()
	n := runNode(t, dir, []string{"NEWSFLOW_AUTH_ADMIN_TOKEN="})
	var token string
	re := regexp.MustCompile(`http://` + regexp.QuoteMeta(n.Addr) + `/setup\?token=([A-Za-z0-9_-]{20,})`)
	testutil.Eventually(t, 10*time.Second, func() error {
		b, _ := os.ReadFile(n.LogPath)
		m := re.FindAllStringSubmatch(string(b), -1)
		if len(m) == 0 || !strings.Contains(string(b), "was printed on standard error") {
			return fmt.Errorf("no setup URL printed, or the log does not say so:\n%s", b)
		}
		if len(m) != 1 { // the banner alone
			t.Fatalf("setup URL printed %d times (want once, on stderr, none in the log):\n%s", len(m), b)
		}
		token = m[0][1]
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "level=") && strings.Contains(line, token) {
				t.Fatalf("a log line carries the setup token: %s", line)
			}
		}
		return nil
	})
	add := func(args ...string) (string, error) {
		var stdout, stderr lockedBuffer
		args = append([]string{"add", "--config", "../../configs/newsflow.yaml", "--data", dir, "--http", n.Addr}, args...)
		err := cmdUser(context.Background(), args, strings.NewReader("a good long password\n"), &stdout, &stderr)
		return stdout.String(), err
	}
	setup := func() (st struct {
		AdminExists      bool `json:"admin_exists"`
		SetupTokenActive bool `json:"setup_token_active"`
	}) {
		resp, err := http.Get(n.URL("/api/v1/setup"))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET /api/v1/setup: %d %v", resp.StatusCode, err)
		}
		return st
	}
	if st := setup(); st.AdminExists || !st.SetupTokenActive {
		t.Fatalf("before: %+v", st)
	}

	// Without a token: what to do, naming the setup URL.
	if _, err := add("--admin", "root"); err == nil || !strings.Contains(err.Error(), "/setup?token=") || !strings.Contains(err.Error(), "--setup-token") {
		t.Fatalf("user add without a token: %v", err)
	}
	if _, err := add("--admin", "--setup-token", "wrong", "root"); err == nil || !strings.Contains(err.Error(), "wrong setup token") {
		t.Fatalf("user add with a wrong token: %v", err)
	}
	out, err := add("--admin", "--setup-token", token, "root")
	if err != nil || !strings.Contains(out, "added root (admin") {
		t.Fatalf("user add with the setup token: %q %v", out, err)
	}
	if st := setup(); !st.AdminExists || st.SetupTokenActive {
		t.Fatalf("after: %+v", st)
	}
	if _, err := add("--admin", "--setup-token", token, "second"); err == nil || !strings.Contains(err.Error(), "no setup token is active") {
		t.Fatalf("the setup token again: %v", err)
	}
	if _, err := add("bob"); err == nil || !strings.Contains(err.Error(), "admin token") {
		t.Fatalf("user add without an admin token: %v", err)
	}
}

// A node with an admin token prints no setup link: newsflow user add
// creates the first admin, and more accounts, with the admin token, and
// says so without it.
func TestUserAddWithTheAdminToken(t *testing.T) {
	dir := t.TempDir()
	n := runNode(t, dir, nil)
	add := func(args ...string) (string, error) {
		var stdout, stderr lockedBuffer
		args = append([]string{"add", "--config", "../../configs/newsflow.yaml", "--data", dir, "--http", n.Addr}, args...)
		err := cmdUser(context.Background(), args, strings.NewReader("a good long password\n"), &stdout, &stderr)
		return stdout.String(), err
	}
	if _, err := add("--admin", "root"); err == nil || !strings.Contains(err.Error(), "admin token") {
		t.Fatalf("user add of the first admin without a token: %v", err)
	}
	if out, err := add("--admin", "--token", testAdminToken, "root"); err != nil || !strings.Contains(out, "added root (admin") {
		t.Fatalf("user add of the first admin with the admin token: %q %v", out, err)
	}
	if out, err := add("--token", testAdminToken, "bob"); err != nil || !strings.Contains(out, "added bob (user") {
		t.Fatalf("user add with the admin token: %q %v", out, err)
	}
	if b, _ := os.ReadFile(n.LogPath); strings.Contains(string(b), "setup?token=") || strings.Contains(string(b), "one-time") {
		t.Errorf("a node with an admin token printed a setup link:\n%s", b)
	}
}
