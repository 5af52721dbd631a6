package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/newsflow/newsflow/internal/testutil"
	"github.com/newsflow/newsflow/operators/story"
)

const clusteringData = "../../../shared/data/clustering"

// runCluster runs the newsflow binary's cluster command over input and
// returns its TSV output.
func runCluster(t *testing.T, input string) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out.tsv")
	cmd := exec.Command(binPath, "cluster", "--input", input, "--output", out)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("newsflow cluster: %v\n%s", err, stderr.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// labelsOf reads the story labels of a labelled corpus.
func labelsOf(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	labels := map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		var r struct{ ID, DocID, Story string }
		if err := json.Unmarshal(sc.Bytes(), &struct {
			ID    *string `json:"id"`
			DocID *string `json:"doc_id"`
			Story *string `json:"story"`
		}{&r.ID, &r.DocID, &r.Story}); err != nil {
			t.Fatal(err)
		}
		if r.ID == "" {
			r.ID = r.DocID
		}
		labels[r.ID] = r.Story
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return labels
}

// parseAssignments reads id<TAB>story_id lines.
func parseAssignments(t *testing.T, tsv []byte) map[string]string {
	t.Helper()
	m := map[string]string{}
	for i, line := range strings.Split(strings.TrimRight(string(tsv), "\n"), "\n") {
		id, s, ok := strings.Cut(line, "\t")
		if !ok || id == "" || s == "" || strings.Contains(s, "\t") {
			t.Fatalf("output line %d %q is not id<TAB>story_id", i+1, line)
		}
		if _, dup := m[id]; dup {
			t.Fatalf("output line %d: id %s twice", i+1, id)
		}
		m[id] = s
	}
	return m
}

func scoreCluster(t *testing.T, name string) story.Scores {
	t.Helper()
	input := filepath.Join(clusteringData, name)
	if _, err := os.Stat(input); err != nil {
		testutil.NoSharedData(t, "shared corpus %s not available (%v); skipping", name, err)
	}
	labels := labelsOf(t, input)
	out := runCluster(t, input)
	pred := parseAssignments(t, out)
	if len(pred) != len(labels) {
		t.Fatalf("%d assignments for %d input articles", len(pred), len(labels))
	}
	s := story.Score(labels, pred)
	t.Logf("%s: B-cubed P %.3f R %.3f F1 %.3f; pairwise P %.3f R %.3f F1 %.3f; %d stories (reference %d)",
		name, s.BCubedP, s.BCubedR, s.BCubedF1, s.PairP, s.PairR, s.PairF1, s.Predicted, s.Reference)
	// The same input processed again gives byte-identical assignments.
	if again := runCluster(t, input); !bytes.Equal(again, out) {
		t.Errorf("%s: a second run gave different assignments", name)
	}
	return s
}

func TestClusterCommandQualityUCI(t *testing.T) {
	s := scoreCluster(t, "uci_dev.ndjson")
	if s.BCubedF1 < 0.80 || s.BCubedP < 0.90 {
		t.Errorf("B-cubed F1 %.3f (want ≥ 0.80) and precision %.3f (want ≥ 0.90)", s.BCubedF1, s.BCubedP)
	}
}

func TestClusterCommandQualityECBPlus(t *testing.T) {
	s := scoreCluster(t, "ecbplus_docs.jsonl")
	if s.BCubedF1 < 0.70 {
		t.Errorf("B-cubed F1 %.3f, want ≥ 0.70", s.BCubedF1)
	}
}

func TestClusterCommandBadInput(t *testing.T) {
	for name, tc := range map[string]struct{ input, want string }{
		"malformed":     {`{"id":"1","title":"a"}` + "\n" + `{"id":`, "line 2: malformed JSON"},
		"missing id":    {`{"title":"Storm hits coast"}`, "line 1: missing id"},
		"missing title": {`{"id":"1","summary":"  "}`, "line 1: missing title"},
		"bad time":      {`{"id":"1","title":"x","published_at":"yesterday"}`, "line 1: published_at"},
	} {
		t.Run(name, func(t *testing.T) {
			in := filepath.Join(t.TempDir(), "in.ndjson")
			if err := os.WriteFile(in, []byte(tc.input), 0o644); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), []string{"cluster", "--input", in}, &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"cluster"}, &stdout, &stderr); err == nil {
		t.Fatal("no error without --input")
	}
}

// TestClusterCommandDedup checks that re-crawls and tracking-parameter
// variants of one URL are one article, and that a syndicated copy under
// another URL joins the story of the article it copies.
func TestClusterCommandDedup(t *testing.T) {
	lines := []string{
		`{"id":"a","title":"Volcano erupts near Reykjavik, flights grounded","url":"https://news.example/volcano","publisher":"x","published_at":"2026-03-01T10:00:00Z"}`,
		`{"id":"b","title":"Volcano erupts near Reykjavik, flights grounded","url":"HTTPS://News.Example:443/volcano/?utm_source=rss#top","publisher":"x","published_at":"2026-03-01T10:05:00Z"}`,
		`{"id":"c","title":"Volcano erupts near Reykjavik; flights grounded","url":"https://wire.example/story/123","publisher":"y","published_at":"2026-03-01T10:20:00Z"}`,
		`{"id":"d","title":"Central bank raises interest rates by half a point","url":"https://biz.example/rates","publisher":"z","published_at":"2026-03-01T10:30:00Z"}`,
	}
	in := filepath.Join(t.TempDir(), "in.ndjson")
	if err := os.WriteFile(in, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got := parseAssignments(t, runCluster(t, in))
	if got["a"] != got["b"] || got["a"] != got["c"] {
		t.Errorf("copies of one article in different stories: %v", got)
	}
	if got["d"] == got["a"] {
		t.Errorf("unrelated article joined the volcano story: %v", got)
	}
}

// TestClusterCommandExplain: --explain says, for the articles asked, which
// stories each was compared with, what it shared with them and what it
// decided; it says nothing of the others and changes no decision.
func TestClusterCommandExplain(t *testing.T) {
	in := filepath.Join(t.TempDir(), "in.ndjson")
	lines := []string{
		`{"id":"a1","title":"Earthquake of magnitude 7 hits Chile","publisher":"Wire","published_at":"2024-03-01T10:00:00Z"}`,
		`{"id":"a2","title":"Chile earthquake: magnitude 7 quake kills 12","publisher":"Daily","published_at":"2024-03-01T10:05:00Z"}`,
		`{"id":"a3","title":"Pension vote in France delayed again","publisher":"Wire","published_at":"2024-03-01T10:06:00Z"}`,
		`{"id":"a4","title":"France pension vote delayed as unions strike","publisher":"Daily","published_at":"2024-03-01T10:09:00Z"}`,
	}
	if err := os.WriteFile(in, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if err := cmdCluster(context.Background(), []string{"--input", in, "--explain", "a1,a2,a3"}, &stdout, &stderr); err != nil {
		t.Fatalf("cluster --explain: %v\n%s", err, stderr.String())
	}
	blocks := map[string]string{}
	var cur string
	for _, l := range strings.Split(stderr.String(), "\n") {
		if l != "" && !strings.HasPrefix(l, " ") {
			cur = strings.Fields(l)[0]
		}
		blocks[cur] += l + "\n"
	}
	if b := blocks["a1"]; !strings.Contains(b, "founded a new story") {
		t.Errorf("a1:\n%s", b)
	}
	b := blocks["a2"]
	if !strings.Contains(b, `joined story`) || !strings.Contains(b, `"Earthquake of magnitude 7 hits Chile": similarity`) {
		t.Errorf("a2 does not say it joined a1's story:\n%s", b)
	}
	if !strings.Contains(b, "shared: ") || !strings.Contains(b[strings.Index(b, "shared: "):], "chile") || !strings.Contains(b, "earthquake") {
		t.Errorf("a2 does not list the shared words:\n%s", b)
	}
	if b := blocks["a3"]; !strings.Contains(b, "founded a new story") || strings.Contains(b, "joined") {
		t.Errorf("a3:\n%s", b)
	}
	if _, ok := blocks["a4"]; ok {
		t.Errorf("a4 was not asked for but explained:\n%s", stderr.String())
	}
	var plain, plainErr bytes.Buffer
	if err := cmdCluster(context.Background(), []string{"--input", in}, &plain, &plainErr); err != nil {
		t.Fatal(err)
	}
	if plain.String() != stdout.String() {
		t.Errorf("--explain changed the stories:\n%s\nwithout:\n%s", stdout.String(), plain.String())
	}
	st := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(st) != 4 || strings.Fields(st[0])[1] != strings.Fields(st[1])[1] || strings.Fields(st[2])[1] != strings.Fields(st[3])[1] ||
		strings.Fields(st[0])[1] == strings.Fields(st[2])[1] {
		t.Errorf("stories %q, want a1 with a2 and a3 with a4", st)
	}
}

// TestClusterCommandExplainModel: with the builtin learned model, the
// explanation gives the model, each candidate's rank with the features
// that made it, and the join probability against the threshold; and
// explaining changes no story.
func TestClusterCommandExplainModel(t *testing.T) {
	in := filepath.Join(t.TempDir(), "in.ndjson")
	lines := []string{
		`{"id":"a1","title":"Earthquake of magnitude 7 hits Chile","publisher":"Wire","published_at":"2024-03-01T10:00:00Z"}`,
		`{"id":"a2","title":"Chile earthquake: magnitude 7 quake kills 12","publisher":"Daily","published_at":"2024-03-01T10:05:00Z"}`,
		`{"id":"a3","title":"Pension vote in France delayed again","publisher":"Wire","published_at":"2024-03-01T10:06:00Z"}`,
	}
	if err := os.WriteFile(in, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if err := cmdCluster(context.Background(), []string{"--input", in, "--model", "builtin", "--explain", "all"}, &stdout, &stderr); err != nil {
		t.Fatalf("cluster --model builtin --explain: %v\n%s", err, stderr.String())
	}
	m, err := story.LoadModel("builtin")
	if err != nil {
		t.Fatal(err)
	}
	got := stderr.String()
	for _, want := range []string{
		"decided by the story model " + m.SHA256[:12],
		`"Earthquake of magnitude 7 hits Chile": ranked first at`,
		fmt.Sprintf("at least the %.2f it needed", m.Threshold),
		"cos 0.", "gap_newest_3h 1.000×",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("explanation lacks %q:\n%s", want, got)
		}
	}
	var plain, plainErr bytes.Buffer
	if err := cmdCluster(context.Background(), []string{"--input", in, "--model", "builtin"}, &plain, &plainErr); err != nil {
		t.Fatal(err)
	}
	if plain.String() != stdout.String() {
		t.Errorf("--explain changed the stories:\n%s\nwithout:\n%s", stdout.String(), plain.String())
	}
	if err := cmdCluster(context.Background(), []string{"--input", in, "--model", filepath.Join(t.TempDir(), "none.json")}, &plain, &plainErr); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("a missing model: %v", err)
	}
}

// TestClusterCommandExplainSameStoriesUCI: explaining every article of
// uci_dev's first 5,000 gives the same stories as not explaining.
func TestClusterCommandExplainSameStoriesUCI(t *testing.T) {
	src := filepath.Join(clusteringData, "uci_dev.ndjson")
	b, err := os.ReadFile(src)
	if err != nil {
		testutil.NoSharedData(t, "%s: %v", src, err)
	}
	lines := strings.SplitAfterN(string(b), "\n", 5001)
	in := filepath.Join(t.TempDir(), "in.ndjson")
	if err := os.WriteFile(in, []byte(strings.Join(lines[:min(len(lines), 5000)], "")), 0o644); err != nil {
		t.Fatal(err)
	}
	var with, without, errs bytes.Buffer
	if err := cmdCluster(context.Background(), []string{"--input", in, "--explain", "all"}, &with, &errs); err != nil {
		t.Fatal(err)
	}
	explained := strings.Count(errs.String(), "\n  terms: ") + strings.Count(errs.String(), "as a near-copy of article")
	errs.Reset()
	if err := cmdCluster(context.Background(), []string{"--input", in}, &without, &errs); err != nil {
		t.Fatal(err)
	}
	if with.String() != without.String() {
		t.Error("--explain all changed the stories of uci_dev's first 5,000 articles")
	}
	if rows := strings.Count(with.String(), "\n"); explained < rows*9/10 {
		t.Errorf("%d of %d articles explained", explained, rows)
	}
}
