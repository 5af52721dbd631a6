package classify

import (
	"bufio"
	"bytes"
	"encoding/json"
	"hash/fnv"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/newsflow/newsflow/internal/testutil"
)

// Real data from /work/shared/data (see its README.md), read in place: it
// is never copied into the repository.
const (
	sharedData  = "../../../shared/data"
	bbcArchive  = sharedData + "/topics/bbc_raw.tar.xz"
	uciHeadline = sharedData + "/clustering/uci_dev.ndjson"
	rulesFile   = "../../configs/topics.yaml"
)

// datasetExample is a labelled example with a stable id, for hash splits.
type datasetExample struct {
	id    string
	group string // examples of one group stay on one side of a split
	Example
}

// bbcTopics maps the BBC folders onto the taxonomy.
var bbcTopics = map[string]string{
	"business": "business", "entertainment": "entertainment", "politics": "politics",
	"sport": "sports", "tech": "technology",
}

// uciTopics maps the UCI categories onto the taxonomy; uciAlternatives
// lists the other labels counted as correct ("t" is science and technology).
var (
	uciTopics       = map[string]string{"b": "business", "t": "technology", "e": "entertainment", "m": "health"}
	uciAlternatives = map[string][]string{"technology": {"science"}}
)

// loadBBC extracts the BBC News archive (2,225 documents in five topic
// folders) with tar into a temporary directory and reads it: the first line
// of a file is the title, the first paragraph after it the summary, the rest
// the content. It skips the test when the data or tar/xz are missing.
func loadBBC(t testing.TB) []datasetExample {
	t.Helper()
	if _, err := os.Stat(bbcArchive); err != nil {
		testutil.NoSharedData(t, "BBC News data not available (%v); see ../shared/data/README.md", err)
	}
	if _, err := exec.LookPath("tar"); err != nil {
		testutil.NoSharedData(t, "tar not installed: cannot read the BBC News archive")
	}
	if _, err := exec.LookPath("xz"); err != nil {
		testutil.NoSharedData(t, "xz not installed: cannot read the BBC News archive")
	}
	dir := t.TempDir()
	if out, err := exec.Command("tar", "-xJf", bbcArchive, "-C", dir).CombinedOutput(); err != nil {
		t.Fatalf("extract %s: %v\n%s", bbcArchive, err, out)
	}
	var out []datasetExample
	for folder, topic := range bbcTopics {
		files, err := filepath.Glob(filepath.Join(dir, "bbc", folder, "*.txt"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			title, rest, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
			rest = strings.TrimSpace(rest)
			summary, content, _ := strings.Cut(rest, "\n")
			id := folder + "/" + filepath.Base(f)
			out = append(out, datasetExample{id: id, group: id, Example: Example{
				Document: Document{Title: strings.TrimSpace(title), Summary: strings.TrimSpace(summary), Content: strings.TrimSpace(content)},
				Topic:    topic,
			}})
		}
	}
	if len(out) != 2225 {
		t.Fatalf("BBC News: read %d documents, want 2225", len(out))
	}
	slices.SortFunc(out, func(a, b datasetExample) int { return strings.Compare(a.id, b.id) })
	return out
}

// loadUCI reads the UCI News Aggregator headlines (title only). Its 3,144
// headlines come from 43 stories; the story is the split group.
func loadUCI(t testing.TB) []datasetExample {
	t.Helper()
	b, err := os.ReadFile(uciHeadline)
	if err != nil {
		testutil.NoSharedData(t, "UCI headline data not available (%v); see ../shared/data/README.md", err)
	}
	var out []datasetExample
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var v struct{ ID, Title, Category, Story string }
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatal(err)
		}
		topic, ok := uciTopics[v.Category]
		if !ok {
			t.Fatalf("UCI: unknown category %q", v.Category)
		}
		out = append(out, datasetExample{id: v.ID, group: v.Story, Example: Example{Document: Document{Title: v.Title}, Topic: topic}})
	}
	if len(out) < 3000 {
		t.Fatalf("UCI: read %d headlines, want 3,144", len(out))
	}
	return out
}

// split puts a fifth of the groups, chosen by a hash of the group, in test.
func split(exs []datasetExample) (train, test []Example) {
	for _, ex := range exs {
		h := fnv.New32a()
		h.Write([]byte(ex.group))
		if h.Sum32()%5 == 0 {
			test = append(test, ex.Example)
		} else {
			train = append(train, ex.Example)
		}
	}
	return train, test
}

func examples(exs []datasetExample) []Example {
	out := make([]Example, len(exs))
	for i, ex := range exs {
		out[i] = ex.Example
	}
	return out
}

// groupByID makes every example its own split group.
func groupByID(exs []datasetExample) []datasetExample {
	out := slices.Clone(exs)
	for i := range out {
		out[i].group = out[i].id
	}
	return out
}
