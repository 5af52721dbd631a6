package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestUserAddAndLogin: an admin created offline with newsflow user add
// logs in to the node; the password appears in no output or log.
func TestUserAddAndLogin(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	dir := t.TempDir()
	const password = "s3cret-passphrase-for-root"
	add := func() ([]byte, error) {
		cmd := exec.Command(binPath, "user", "add", "--admin", "--config", "../../configs/newsflow.yaml", "--data", dir, "--log-level", "warn", "root")
		cmd.Stdin = strings.NewReader(password + "\n")
		return cmd.CombinedOutput()
	}
	out, err := add()
	if err != nil || !strings.Contains(string(out), "added root (admin") {
		t.Fatalf("user add: %v\n%s", err, out)
	}
	if out, err := add(); err == nil || !strings.Contains(string(out), "taken") {
		t.Fatalf("second user add: %v\n%s", err, out)
	}
	n := runNode(t, dir, nil, "--log-level", "debug") // every request is logged
	resp, err := http.Post(n.URL("/api/v1/auth/login"), "application/json", strings.NewReader(`{"username":"root","password":"`+password+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		User struct{ Role string } `json:"user"`
	}
	json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if resp.StatusCode != 200 || body.User.Role != "admin" {
		t.Fatalf("login: %d %+v", resp.StatusCode, body)
	}
	resp, _ = http.Post(n.URL("/api/v1/auth/login"), "application/json", strings.NewReader(`{"username":"root","password":"wrong-`+password+`"}`))
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Errorf("wrong password: %d", resp.StatusCode)
	}
	n.Kill()
	logs, _ := os.ReadFile(n.LogPath)
	if !bytes.Contains(logs, []byte("/api/v1/auth/login")) || !bytes.Contains(logs, []byte("request_id=")) {
		t.Errorf("no access log lines with request ids at debug level:\n%.2000s", logs)
	}
	if bytes.Contains(logs, []byte(password)) || bytes.Contains(out, []byte(password)) {
		t.Error("the password appears in the node's log or the CLI's output")
	}
}

// TestUserHashAndImport: accounts imported from hashes log in.
func TestUserHashAndImport(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	dir := t.TempDir()
	hashCmd := exec.Command(binPath, "user", "hash", "--config", "../../configs/newsflow.yaml")
	hashCmd.Stdin = strings.NewReader("imported account password\n")
	out, err := hashCmd.Output()
	if err != nil || !strings.HasPrefix(string(out), "$2") {
		t.Fatalf("user hash: %v %q", err, out)
	}
	h := strings.TrimSpace(string(out))
	var lines []string
	for _, u := range []string{"ivy", "jon", "kim"} {
		b, _ := json.Marshal(map[string]string{"username": u, "password_hash": h})
		lines = append(lines, string(b))
	}
	file := dir + "/users.ndjson"
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	data := dir + "/data"
	imp, err := exec.Command(binPath, "user", "import", "--config", "../../configs/newsflow.yaml", "--data", data, "--log-level", "warn", file).CombinedOutput()
	if err != nil || !strings.Contains(string(imp), "imported 3 accounts") {
		t.Fatalf("user import: %v\n%s", err, imp)
	}
	n := runNode(t, data, nil)
	resp, err := http.Post(n.URL("/api/v1/auth/login"), "application/json", strings.NewReader(`{"username":"kim","password":"imported account password"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("login of an imported account: %d", resp.StatusCode)
	}
}
