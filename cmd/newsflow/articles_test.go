package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/internal/canon"
	"github.com/newsflow/newsflow/internal/testutil"
	"github.com/newsflow/newsflow/operators/story"
)

// liveAssignments reads every story of a node and returns article URL →
// story id, and the number of articles counted in stories.
func liveAssignments(t *testing.T, n *nodeProc) (map[string]string, int, error) {
	t.Helper()
	out := map[string]string{}
	counted := 0
	cursor := ""
	for {
		var page struct {
			Stories []struct {
				ID           string `json:"id"`
				ArticleCount int    `json:"article_count"`
			} `json:"stories"`
			Next string `json:"next_cursor"`
		}
		if err := getJSON(n.URL("/api/v1/stories?limit=100&cursor="+url.QueryEscape(cursor)), &page); err != nil {
			return nil, 0, err
		}
		for _, st := range page.Stories {
			counted += st.ArticleCount
			var d struct {
				Articles []struct {
					URL string `json:"url"`
				} `json:"articles"`
			}
			if err := getJSON(n.URL("/api/v1/stories/"+st.ID), &d); err != nil {
				return nil, 0, err
			}
			for _, a := range d.Articles {
				out[a.URL] = st.ID
			}
		}
		if page.Next == "" {
			return out, counted, nil
		}
		cursor = page.Next
	}
}

// waitAssignments polls until want articles are in stories and the
// stories task has nothing left to apply.
func waitAssignments(t *testing.T, n *nodeProc, want int) map[string]string {
	t.Helper()
	var got map[string]string
	testutil.Eventually(t, 90*time.Second, func() error {
		var counted int
		var err error
		got, counted, err = liveAssignments(t, n)
		if err != nil || counted != want || len(got) != want {
			return fmt.Errorf("%d of %d articles in stories (%d listed), error %v", counted, want, len(got), err)
		}
		return nil
	})
	return got
}

// TestProduceArticlesLive sends the labelled headlines through a running
// node with newsflow produce articles, kills the node while it clusters
// them, and checks that the stories it serves after the restart score as
// well as the offline command, and equal what a replay of the same log
// rebuilds.
func TestProduceArticlesLive(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	input := filepath.Join(clusteringData, "uci_dev.ndjson")
	if _, err := os.Stat(input); err != nil {
		testutil.NoSharedData(t, "shared corpus not available (%v); skipping", err)
	}
	labels := map[string]string{} // canonical URL → story label
	f, err := os.Open(input)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r struct{ URL, Story string }
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		c, err := canon.Canonical(r.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		labels[c] = r.Story
	}
	f.Close()

	dir := t.TempDir()
	n := runNode(t, dir, nil)
	out, err := exec.Command(binPath, "produce", "articles", input, "--addr", "http://"+n.Addr, "--token", testIngestToken).CombinedOutput()
	if err != nil {
		t.Fatalf("produce articles: %v\n%s", err, out)
	}
	// Kill the node while the pipeline works through the articles.
	time.Sleep(300 * time.Millisecond)
	n.Kill()
	n.Start()
	n.WaitReady(30 * time.Second)
	live := waitAssignments(t, n, len(labels))

	s := story.Score(labels, live)
	t.Logf("live stories after a crash: B-cubed P %.3f R %.3f F1 %.3f; pairwise F1 %.3f; %d stories",
		s.BCubedP, s.BCubedR, s.BCubedF1, s.PairF1, s.Predicted)
	if s.BCubedF1 < 0.80 || s.BCubedP < 0.88 {
		t.Errorf("live B-cubed F1 %.3f (want ≥ 0.80), precision %.3f (want ≥ 0.88)", s.BCubedF1, s.BCubedP)
	}

	// Rebuilding stories and search from the log gives the same stories.
	n.Kill()
	cmd := exec.Command(binPath, "replay", "--config", "../../configs/newsflow.yaml", "--data", dir,
		"--from-offset", "0", "--operator", "stories,search", "--log-level", "warn")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("replay: %v\n%s", err, out)
	}
	n.Start()
	n.WaitReady(30 * time.Second)
	replayed := waitAssignments(t, n, len(labels))
	diff := 0
	for u, s := range live {
		if replayed[u] != s {
			diff++
		}
	}
	if diff > 0 {
		t.Errorf("%d of %d articles in another story after the replay", diff, len(live))
	}
}

// TestStoriesModelChangeNeedsReplay: a node clusters with stories.model:
// builtin; restarted without it, it refuses the stories the model built
// and its log names the replay that rebuilds them; after that replay it
// serves every article in a story again.
func TestStoriesModelChangeNeedsReplay(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	src := filepath.Join(clusteringData, "uci_dev.ndjson")
	b, err := os.ReadFile(src)
	if err != nil {
		testutil.NoSharedData(t, "%s: %v", src, err)
	}
	const articles = 300
	input := filepath.Join(t.TempDir(), "in.ndjson")
	if err := os.WriteFile(input, []byte(strings.Join(strings.SplitAfterN(string(b), "\n", articles+1)[:articles], "")), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	n := runNode(t, dir, []string{"NEWSFLOW_STORIES_MODEL=builtin"})
	if out, err := exec.Command(binPath, "produce", "articles", input, "--addr", "http://"+n.Addr, "--token", testIngestToken).CombinedOutput(); err != nil {
		t.Fatalf("produce articles: %v\n%s", err, out)
	}
	byModel := waitAssignments(t, n, articles)
	stopClean(t, n)

	// Without the model, the stories' state is refused, with the way out.
	plain := startNode(t, dir)
	testutil.Eventually(t, 60*time.Second, func() error {
		log := plain.LogTail(1 << 20)
		if !strings.Contains(log, "newsflow replay --operator stories --from-offset 0") || !strings.Contains(log, "built by the story model") {
			return fmt.Errorf("no refusal naming the model and the replay in the log:\n%s", plain.LogTail(3000))
		}
		return nil
	})
	plain.Kill()

	cmd := exec.Command(binPath, "replay", "--config", "../../configs/newsflow.yaml", "--data", dir,
		"--from-offset", "0", "--operator", "stories", "--log-level", "warn")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("replay: %v\n%s", err, out)
	}
	plain.Start()
	plain.WaitReady(30 * time.Second)
	rebuilt := waitAssignments(t, plain, articles)
	if len(rebuilt) != len(byModel) {
		t.Fatalf("%d articles in stories after the replay, %d before", len(rebuilt), len(byModel))
	}
}
