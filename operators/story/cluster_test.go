package story

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/newsflow/newsflow/internal/testutil"
	"github.com/newsflow/newsflow/state/statetest"
)

// labelled is one article of a labelled clustering corpus.
type labelled struct {
	ID, Story   string
	Title, Body string
	Time        int64
}

const sharedData = "../../../shared/data/clustering"

// readJSONLines decodes each line of the shared file at path into a T
// and passes it to fn. The test is skipped when the file is absent.
func readJSONLines[T any](tb testing.TB, path string, fn func(r T)) {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		msg := fmt.Sprintf("shared data not available (%v); skipping", err)
		if b, ok := tb.(*testing.B); ok && !testing.Verbose() { // a benchmark's skip message shows only with -v
			fmt.Printf("--- SKIP: %s\n    %s\n", b.Name(), msg)
		}
		testutil.NoSharedData(tb, "%s", msg)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		var r T
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			tb.Fatalf("%s: %v", path, err)
		}
		fn(r)
	}
	if err := sc.Err(); err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
}

func loadLabelled(t testing.TB, name string) []labelled {
	t.Helper()
	type line struct {
		ID          string `json:"id"`
		DocID       string `json:"doc_id"`
		Story       string `json:"story"`
		Title       string `json:"title"`
		Text        string `json:"text"`
		PublishedAt string `json:"published_at"`
	}
	var out []labelled
	readJSONLines(t, filepath.Join(sharedData, name), func(r line) {
		l := labelled{ID: r.ID, Story: r.Story, Title: r.Title, Body: r.Text}
		if l.ID == "" {
			l.ID = r.DocID
		}
		if r.PublishedAt != "" {
			ts, err := time.Parse(time.RFC3339, r.PublishedAt)
			if err != nil {
				t.Fatal(err)
			}
			l.Time = ts.UnixMilli()
		}
		out = append(out, l)
	})
	return out
}

// clusterAll runs a fresh Clusterer over docs and returns id → story.
func clusterAll(t testing.TB, docs []labelled, opts ClusterOptions) map[string]string {
	c, err := NewClusterer(opts)
	if err != nil {
		t.Fatal(err)
	}
	r := newRun()
	for _, d := range docs {
		r.assign(c, d)
	}
	return r.stories()
}

// run records the story each article was assigned to and which stories
// merged into which.
type run struct {
	story    map[string]uint64
	redirect map[uint64]uint64
}

func newRun() *run { return &run{story: map[string]uint64{}, redirect: map[uint64]uint64{}} }

// assign gives d to c and records the outcome.
func (r *run) assign(c *Clusterer, d labelled) {
	a := c.Assign(c.Vectorize(Text{Title: d.Title, Body: d.Body, Time: d.Time}), d.Time)
	r.story[d.ID] = a.Story
	for _, m := range a.Merged {
		r.redirect[m] = a.Story
	}
}

// stories returns id → the story each article is part of at the end,
// merges followed.
func (r *run) stories() map[string]string {
	out := make(map[string]string, len(r.story))
	for id, s := range r.story {
		out[id] = fmt.Sprint(follow(r.redirect, s))
	}
	return out
}

func truthOf(docs []labelled) map[string]string {
	m := map[string]string{}
	for _, d := range docs {
		m[d.ID] = d.Story
	}
	return m
}

func TestClustererQualityUCI(t *testing.T) {
	docs := loadLabelled(t, "uci_dev.ndjson")
	s := Score(truthOf(docs), clusterAll(t, docs, ClusterOptions{}))
	t.Logf("uci_dev in time order: B-cubed P %.3f R %.3f F1 %.3f; pairwise P %.3f R %.3f F1 %.3f; %d stories for %d labelled",
		s.BCubedP, s.BCubedR, s.BCubedF1, s.PairP, s.PairR, s.PairF1, s.Predicted, s.Reference)
	if s.BCubedF1 < 0.80 || s.BCubedP < 0.90 {
		t.Errorf("B-cubed F1 %.3f (want ≥ 0.80), precision %.3f (want ≥ 0.90)", s.BCubedF1, s.BCubedP)
	}

	// Shuffled arrival order: the clusterer must not depend on articles of
	// one story arriving together.
	shuffled := append([]labelled(nil), docs...)
	rand.New(rand.NewPCG(7, 11)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	s = Score(truthOf(docs), clusterAll(t, shuffled, ClusterOptions{}))
	t.Logf("uci_dev shuffled: B-cubed P %.3f R %.3f F1 %.3f; pairwise F1 %.3f", s.BCubedP, s.BCubedR, s.BCubedF1, s.PairF1)
	if s.BCubedF1 < 0.75 {
		t.Errorf("shuffled B-cubed F1 %.3f, want ≥ 0.75", s.BCubedF1)
	}
}

func TestClustererQualityECBPlus(t *testing.T) {
	docs := loadLabelled(t, "ecbplus_docs.jsonl")
	s := Score(truthOf(docs), clusterAll(t, docs, ClusterOptions{}))
	t.Logf("ecbplus full text: B-cubed P %.3f R %.3f F1 %.3f; pairwise P %.3f R %.3f F1 %.3f; %d stories for %d labelled",
		s.BCubedP, s.BCubedR, s.BCubedF1, s.PairP, s.PairR, s.PairF1, s.Predicted, s.Reference)
	if s.BCubedF1 < 0.70 {
		t.Errorf("B-cubed F1 %.3f, want ≥ 0.70", s.BCubedF1)
	}
}

// TestClustererRestoreContinuesIdentically checkpoints the clusterer every
// few hundred articles through a state DB and restores it, and checks the
// assignments equal those of one uninterrupted run.
// A clusterer restored from its state every 337 articles assigns as one
// that never stopped: with the default window, and with a 2h one, over
// whose 18 generations terms are forgotten and their ids reused.
func TestClustererRestoreContinuesIdentically(t *testing.T) {
	docs := loadLabelled(t, "uci_dev.ndjson")
	for _, opts := range []ClusterOptions{{}, {Window: 2 * time.Hour}} {
		t.Run(fmt.Sprint("window=", opts.Window), func(t *testing.T) {
			want := clusterAll(t, docs, opts)
			ns := statetest.Open(t).Namespace("cluster")
			prefix := []byte("c")
			c, err := NewClusterer(opts)
			if err != nil {
				t.Fatal(err)
			}
			r := newRun()
			maxTerms := 0
			for i, d := range docs {
				r.assign(c, d)
				maxTerms = max(maxTerms, c.Terms())
				if i%337 == 336 {
					b := ns.NewBatch()
					if err := c.Persist(b, prefix); err != nil {
						t.Fatal(err)
					}
					if err := b.Commit(); err != nil {
						t.Fatal(err)
					}
					if c, err = RestoreClusterer(opts, ns, prefix); err != nil {
						t.Fatal(err)
					}
				}
			}
			for id, got := range r.stories() {
				if got != want[id] {
					t.Fatalf("article %s: story %s after restores, %s without", id, got, want[id])
				}
			}
			if opts.Window != 0 && len(c.words) >= maxTerms+len(c.freeIDs) && len(c.freeIDs) == 0 {
				t.Fatalf("no term was forgotten: %d ids, %d free", len(c.words), len(c.freeIDs))
			}
			t.Logf("%d terms at the end, %d ids, at most %d terms at once", c.Terms(), len(c.words), maxTerms)
		})
	}
}

func TestClustererOptionsValidate(t *testing.T) {
	for _, o := range []ClusterOptions{
		{Threshold: 1.5}, {Decay: -1}, {ShortTerms: 200, LongTerms: 100}, {Window: -time.Second}, {ProbeDepth: -1},
	} {
		if _, err := NewClusterer(o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}
