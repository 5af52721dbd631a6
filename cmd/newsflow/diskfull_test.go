package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/newsflow/newsflow/internal/testutil"
	"github.com/newsflow/newsflow/node"
)

// tmpfsRequiredEnv turns the skip of the tests that mount a file system of
// their own (they need root) into a failure; CI sets it.
const tmpfsRequiredEnv = "NEWSFLOW_TMPFS_REQUIRED"

// smallVolume mounts a tmpfs of size bytes on a new directory and
// unmounts it when the test ends.
func smallVolume(t *testing.T, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv(tmpfsRequiredEnv) == "1" {
			t.Fatalf("%s=1 but mounting a tmpfs needs root", tmpfsRequiredEnv)
		}
		t.Skip("mounting a small volume needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", dir).CombinedOutput(); err != nil {
		if os.Getenv(tmpfsRequiredEnv) == "1" {
			t.Fatalf("mount tmpfs: %v: %s", err, out)
		}
		t.Skipf("cannot mount a tmpfs here: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// TestDiskFull fills the data directory's volume while shares are posted:
// the node never crashes; once free space falls below the floor ingestion
// answers 507 with the reason and keeps nothing of the refused batch, the
// stages hold and say why, and queries keep answering; when space returns
// it resumes by itself, and every acknowledged share is counted, once.
func TestDiskFull(t *testing.T) {
	const mb = 1 << 20
	vol := smallVolume(t, 192*mb)
	data := filepath.Join(vol, "data")
	n := runNode(t, data, []string{"NEWSFLOW_DISK_MIN_FREE_BYTES=" + fmt.Sprint(24*mb), "NEWSFLOW_DISK_BALLAST_BYTES=" + fmt.Sprint(8*mb),
		"NEWSFLOW_DISK_CHECK_INTERVAL=100ms", "NEWSFLOW_STATE_MEMTABLE_SIZE=" + fmt.Sprint(4*mb), "NEWSFLOW_LOG_PARTITIONS=2"})
	if _, err := os.Stat(filepath.Join(data, node.BallastFile)); err != nil {
		t.Fatalf("no ballast file: %v", err)
	}
	// Another program takes most of the volume: 48 MiB stay free.
	free, _, err := node.DiskSpace(vol)
	if err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(vol, "filler")
	if out, err := exec.Command("fallocate", "-l", fmt.Sprint(int64(free)-48*mb), filler).CombinedOutput(); err != nil {
		t.Fatalf("fallocate: %v: %s", err, out)
	}

	acked := map[string]int{} // article → shares acknowledged
	batch := 0
	post := func() (int, string) {
		t.Helper()
		var b strings.Builder
		now := time.Now().UnixMilli()
		for i := range 4000 {
			// Each share its own user: a user's repeats of an article
			// count once (trending.repeat_shares).
			fmt.Fprintf(&b, `{"event_id":"full-%d-%d","article_id":"art-%d","user_id":"u%d-%d","share_type":"link","category":"world","timestamp":%d}`+"\n",
				batch, i, i%50, batch, i, now)
		}
		batch++
		resp, err := ingestPost(n.URL("/api/v1/events/share/batch"), "application/x-ndjson", strings.NewReader(b.String()))
		if err != nil {
			t.Fatalf("batch %d: %v (the node died?)", batch, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode == http.StatusAccepted {
			for i := range 4000 {
				acked[fmt.Sprint("art-", i%50)]++
			}
		}
		return resp.StatusCode, string(body)
	}
	var refused string
	for range 400 {
		code, body := post()
		if code == http.StatusInsufficientStorage {
			refused = body
			break
		}
		if code != http.StatusAccepted {
			t.Fatalf("batch %d: %d %s", batch, code, body)
		}
	}
	if refused == "" {
		t.Fatalf("%d batches taken and never a 507", batch)
	}
	var e struct{ Error string }
	if json.Unmarshal([]byte(refused), &e) != nil || !strings.Contains(e.Error, "disk nearly full") || !strings.Contains(e.Error, "send it again later") {
		t.Fatalf("507 body %q", refused)
	}
	t.Logf("after %d batches: %s", batch, e.Error)
	if _, err := os.Stat(filepath.Join(data, node.BallastFile)); !os.IsNotExist(err) {
		t.Errorf("the ballast is still there below the floor: %v", err)
	}
	// Reads answer; the stages say why they wait.
	var trending struct {
		Items []any `json:"items"`
	}
	if err := getJSON(n.URL("/api/v1/trending?window=24h"), &trending); err != nil {
		t.Errorf("trending while the disk is full: %v", err)
	}
	var health struct {
		Status  string   `json:"status"`
		Reasons []string `json:"reasons"`
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		getJSON(n.URL("/health/detailed"), &health)
		if !strings.Contains(strings.Join(health.Reasons, "\n"), "held: disk nearly full") {
			return fmt.Errorf("health %+v does not say the stages are held", health)
		}
		return nil
	})
	if !n.Running() {
		t.Fatal("the node died")
	}
	// Space returns: writing resumes by itself, and every share
	// acknowledged is counted once.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, func() error {
		if code, body := post(); code != http.StatusAccepted {
			return fmt.Errorf("after space returned: %d %s", code, body)
		}
		return nil
	})
	n.WaitCaughtUp(60 * time.Second)
	testutil.Eventually(t, 30*time.Second, func() error {
		for id, want := range acked {
			var sh struct {
				Counts map[string]int `json:"counts"`
			}
			if err := getJSON(n.URL("/api/v1/articles/"+id+"/shares"), &sh); err != nil {
				return err
			}
			if sh.Counts["24h"] != want {
				return fmt.Errorf("article %s: %d shares counted, %d acknowledged", id, sh.Counts["24h"], want)
			}
		}
		return nil
	})
	if err := n.Stop(syscall.SIGTERM); err != nil {
		t.Errorf("stop: %v", err)
	}
}
