package neardup

// Evaluation on the shared data sets under ../shared/data/clustering (see
// their MANIFEST files). The files are read in place, never copied; the
// tests skip when the folder is absent.
//
//   - minhash_planted: news snippets concatenated into ~250-word articles,
//     with planted near-duplicates (one word inserted or deleted). The
//     Detector must find the planted pairs with precision and recall ≥ 0.99.
//   - ecbplus_docs.jsonl: news articles grouped by event; some are wire
//     copies of each other with another headline and dateline.
//   - uci_dev.ndjson: news headlines grouped by story.
//   - semeval2022_task8: article pairs graded from 1 (very similar) to 4
//     (very dissimilar) by annotators; grade 1 means the same story, usually
//     from different outlets, which is not a near-duplicate.

import (
	"bufio"
	"cmp"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cespare/xxhash/v2"
	"github.com/newsflow/newsflow/internal/testutil"
)

// sharedData is the shared data folder seen from this package's directory.
const sharedData = "../../../../shared/data"

// sharedPath returns a path under the shared data, or skips the test.
func sharedPath(tb testing.TB, rel string) string {
	tb.Helper()
	p := filepath.Join(sharedData, rel)
	if _, err := os.Stat(p); err != nil {
		abs, _ := filepath.Abs(p)
		testutil.NoSharedData(tb, "shared test data not found at %s (%v); skipping", abs, err)
	}
	return p
}

// plantedSet is one file pair of minhash_planted.
type plantedSet struct {
	ids   []string
	texts []string
	truth map[[2]int]bool // pairs of indexes into ids, lower first
}

func readPlanted(tb testing.TB, dir string, n int) plantedSet {
	tb.Helper()
	f, err := os.Open(filepath.Join(dir, fmt.Sprintf("articles_%d.train", n)))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var ps plantedSet
	index := make(map[string]int)
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		id, text, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			tb.Fatalf("articles_%d.train: line %q has no text", n, sc.Text())
		}
		index[id] = len(ps.ids)
		ps.ids = append(ps.ids, id)
		ps.texts = append(ps.texts, text)
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("articles_%d.truth", n)))
	if err != nil {
		tb.Fatal(err)
	}
	ps.truth = make(map[[2]int]bool)
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) != 2 {
			tb.Fatalf("articles_%d.truth: bad line %q", n, line)
		}
		i, ok1 := index[f[0]]
		j, ok2 := index[f[1]]
		if !ok1 || !ok2 {
			tb.Fatalf("articles_%d.truth: pair %q not in the train file", n, line)
		}
		ps.truth[[2]int{min(i, j), max(i, j)}] = true
	}
	return ps
}

// TestPlantedPairs finds all near-duplicate pairs of each minhash_planted
// file with the Index (candidates within Borderline) and the Detector, and
// scores them against the planted pairs.
func TestPlantedPairs(t *testing.T) {
	t.Parallel()
	dir := sharedPath(t, "clustering/minhash_planted")
	det, err := NewDetector(Options{})
	if err != nil {
		t.Fatal(err)
	}
	opts := det.Options()
	for _, n := range []int{100, 1000, 2500} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			ps := readPlanted(t, dir, n)
			docs := make([]Doc, len(ps.texts))
			ix := NewIndex()
			for i, text := range ps.texts {
				docs[i] = det.Doc("", text)
				ix.Add(uint64(i), docs[i].FP)
			}

			found := make(map[[2]int]Decision)
			candidates := 0
			for i, d := range docs {
				err := ix.Query(d.FP, opts.Borderline, func(id, _ uint64, _ int) bool {
					j := int(id)
					if j <= i {
						return true
					}
					candidates++
					if dec := det.Decide(d, docs[j]); dec.Duplicate() {
						found[[2]int{i, j}] = dec
					}
					return true
				})
				if err != nil {
					t.Fatal(err)
				}
			}

			tp, byDecision := 0, make(map[Decision]int)
			for p, dec := range found {
				byDecision[dec]++
				if ps.truth[p] {
					tp++
				} else {
					t.Logf("false positive %s %s: %v", ps.ids[p[0]], ps.ids[p[1]], dec)
				}
			}
			for p := range ps.truth {
				if _, ok := found[p]; !ok {
					i, j := p[0], p[1]
					t.Logf("missed %s %s: distance %d, similarity %.3f", ps.ids[i], ps.ids[j],
						Hamming(docs[i].FP, docs[j].FP), Similarity(docs[i].Sig, docs[j].Sig))
				}
			}
			precision := float64(tp) / float64(max(len(found), 1))
			recall := float64(tp) / float64(len(ps.truth))

			// What the thresholds work with, over all pairs: the planted ones
			// and the rest. This also checks the Index candidates against
			// brute force. Similarities of all pairs are slow under the race
			// detector, and only logged, so they are skipped there.
			var plantedDist []int
			var plantedSim []float64
			bruteCandidates, minOtherDist, maxOtherSim, sumOtherSim := 0, 64, 0.0, 0.0
			for i := range docs {
				for j := i + 1; j < len(docs); j++ {
					dist := Hamming(docs[i].FP, docs[j].FP)
					if dist <= opts.Borderline {
						bruteCandidates++
					}
					if ps.truth[[2]int{i, j}] {
						sim := Similarity(docs[i].Sig, docs[j].Sig)
						plantedDist = append(plantedDist, dist)
						plantedSim = append(plantedSim, sim)
						if dist > opts.K {
							t.Logf("planted pair %s %s beyond K: distance %d, similarity %.3f", ps.ids[i], ps.ids[j], dist, sim)
						}
						continue
					}
					minOtherDist = min(minOtherDist, dist)
					if !raceEnabled {
						sim := Similarity(docs[i].Sig, docs[j].Sig)
						maxOtherSim = max(maxOtherSim, sim)
						sumOtherSim += sim
					}
				}
			}
			others := len(docs)*(len(docs)-1)/2 - len(ps.truth)
			slices.Sort(plantedDist)
			slices.Sort(plantedSim)
			t.Logf("articles_%d: %d articles, %d planted pairs, %d candidates within %d bits; found %d (%d by fingerprint, %d by shingles), %d planted: precision %.4f, recall %.4f",
				n, len(docs), len(ps.truth), candidates, opts.Borderline, len(found),
				byDecision[CloseFingerprints], byDecision[SimilarShingles], tp, precision, recall)
			t.Logf("articles_%d: planted pairs: distances %v, similarity ≥ %.3f; other %d pairs: distance ≥ %d",
				n, plantedDist, plantedSim[0], others, minOtherDist)
			if !raceEnabled {
				t.Logf("articles_%d: other pairs: similarity ≤ %.3f, mean %.4f", n, maxOtherSim, sumOtherSim/float64(others))
			}

			if candidates != bruteCandidates {
				t.Errorf("Index gave %d candidate pairs within %d bits, brute force %d", candidates, opts.Borderline, bruteCandidates)
			}
			if precision < 0.99 || recall < 0.99 {
				t.Errorf("precision %.4f, recall %.4f; want both ≥ 0.99", precision, recall)
			}
		})
	}
}

// TestShingleChoice compares word and character shingles: how similar the
// planted pairs of articles_1000 stay, how similar the most similar of its
// other pairs gets, and how similar headlines about different stories get
// (UCI news aggregator titles; pairs with equal normalized titles are left
// out, since the data set files some identical titles under two stories).
// It logs the figures behind ShingleWords and checks that the chosen
// shingles separate planted from other pairs by a wide margin.
func TestShingleChoice(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("measurement; skipped in -short mode and under the race detector")
	}
	t.Parallel()
	ps := readPlanted(t, sharedPath(t, "clustering/minhash_planted"), 1000)
	titles, stories := readUCI(t)
	mh := NewMinHasher(DefaultPermutations, 0)
	schemes := []struct {
		name     string
		shingles func(string) []uint64
	}{
		{"2 words", func(s string) []uint64 { return wordShingles(s, 2) }},
		{"3 words (chosen)", Shingles},
		{"5 characters", func(s string) []uint64 { return charShingles(s, 5) }},
	}
	for _, sc := range schemes {
		sigs := make([][]uint32, len(ps.texts))
		for i, text := range ps.texts {
			sigs[i] = mh.Signature(sc.shingles(text))
		}
		minPlanted, maxOther := 1.0, 0.0
		for i := range sigs {
			for j := i + 1; j < len(sigs); j++ {
				s := Similarity(sigs[i], sigs[j])
				if ps.truth[[2]int{i, j}] {
					minPlanted = min(minPlanted, s)
				} else {
					maxOther = max(maxOther, s)
				}
			}
		}

		heads := make([][]uint32, len(titles))
		norm := make([]string, len(titles))
		for i, title := range titles {
			heads[i] = mh.Signature(sc.shingles(title))
			norm[i] = normalize(title)
		}
		rng := rand.New(rand.NewPCG(1, 1))
		var cross []float64
		for len(cross) < 200_000 {
			i, j := rng.IntN(len(titles)), rng.IntN(len(titles))
			if stories[i] != stories[j] && norm[i] != norm[j] {
				cross = append(cross, Similarity(heads[i], heads[j]))
			}
		}
		slices.Sort(cross)
		q := func(p float64) float64 { return cross[int(p*float64(len(cross)-1))] }
		t.Logf("%-17s articles_1000: planted pairs ≥ %.3f, other pairs ≤ %.3f; headlines of different stories: 99th percentile %.3f, 99.99th %.3f",
			sc.name, minPlanted, maxOther, q(0.99), q(0.9999))
		if sc.name == "3 words (chosen)" && minPlanted-maxOther < 0.5 {
			t.Errorf("chosen shingles: planted ≥ %.3f, other ≤ %.3f; want a margin of 0.5", minPlanted, maxOther)
		}
	}
}

// readUCI returns the titles and story ids of the UCI news aggregator
// sample.
func readUCI(tb testing.TB) (titles, stories []string) {
	f, err := os.Open(sharedPath(tb, "clustering/uci_dev.ndjson"))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r struct{ Title, Story string }
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			tb.Fatal(err)
		}
		titles = append(titles, r.Title)
		stories = append(stories, r.Story)
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return titles, stories
}

// wordShingles is Shingles with k-word shingles, hashed on their text.
func wordShingles(s string, k int) []uint64 {
	toks := tokenize(s)
	var out []uint64
	for i := 0; i+k <= len(toks); i++ {
		out = append(out, xxhash.Sum64String(strings.Join(toks[i:i+k], " ")))
	}
	return out
}

// charShingles hashes every run of k runes of the normalized text.
func charShingles(s string, k int) []uint64 {
	n := normalize(s)
	var out []uint64
	for i := 0; i < len(n); {
		j := i
		for c := 0; c < k && j < len(n); c++ {
			_, size := utf8.DecodeRuneInString(n[j:])
			j += size
		}
		out = append(out, xxhash.Sum64String(n[i:j]))
		if j == len(n) {
			break
		}
		_, size := utf8.DecodeRuneInString(n[i:])
		i += size
	}
	return out
}

// TestECBPlus: articles about the same event come from different writers
// except for wire copies. No two articles about different events may be
// near-duplicates; the near-duplicates found within events are logged.
func TestECBPlus(t *testing.T) {
	t.Parallel()
	f, err := os.Open(sharedPath(t, "clustering/ecbplus_docs.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type doc struct {
		ID    string `json:"doc_id"`
		Story string `json:"story"`
		Text  string `json:"text"`
	}
	var raw []doc
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<22)
	for sc.Scan() {
		var d doc
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			t.Fatal(err)
		}
		raw = append(raw, d)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	det, err := NewDetector(Options{})
	if err != nil {
		t.Fatal(err)
	}
	docs := make([]Doc, len(raw))
	for i, d := range raw {
		docs[i] = det.Doc("", d.Text)
	}
	var sameSims []float64
	crossMinDist, crossMaxSim, dups := 64, 0.0, 0
	for i := range docs {
		for j := i + 1; j < len(docs); j++ {
			dist := Hamming(docs[i].FP, docs[j].FP)
			dec := det.Decide(docs[i], docs[j])
			if raw[i].Story != raw[j].Story {
				crossMinDist = min(crossMinDist, dist)
				if dec.Duplicate() {
					t.Errorf("%s and %s, about different events: %v (distance %d)", raw[i].ID, raw[j].ID, dec, dist)
				}
				if !raceEnabled { // only logged, and slow under the race detector
					crossMaxSim = max(crossMaxSim, Similarity(docs[i].Sig, docs[j].Sig))
				}
				continue
			}
			sim := Similarity(docs[i].Sig, docs[j].Sig)
			sameSims = append(sameSims, sim)
			if dec.Duplicate() || dist <= MaxDistance {
				t.Logf("same event %s %s: distance %d, similarity %.3f: %v", raw[i].ID, raw[j].ID, dist, sim, dec)
			}
			if dec.Duplicate() {
				dups++
			}
		}
	}
	slices.Sort(sameSims)
	t.Logf("%d articles: %d near-duplicate pairs within events; same-event similarity median %.3f, 99th percentile %.3f; different events: distance ≥ %d, similarity ≤ %.3f",
		len(docs), dups, sameSims[len(sameSims)/2], sameSims[len(sameSims)*99/100], crossMinDist, crossMaxSim)
}

// TestSemEvalGrades measures how fingerprint distance and shingle
// similarity follow the annotators' grades of same-language pairs. Pairs
// graded 1 are the same story, mostly from different outlets, so only a
// few may be near-duplicates; they must still be closer, on average, than
// pairs graded 4.
func TestSemEvalGrades(t *testing.T) {
	f, err := os.Open(sharedPath(t, "clustering/semeval2022_task8/training_set.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := make(map[string]int)
	for i, name := range recs[0] {
		col[name] = i
	}
	for _, name := range []string{"lang1", "lang2", "text1", "text2", "Overall"} {
		if _, ok := col[name]; !ok {
			t.Fatalf("training_set.csv has no column %q", name)
		}
	}
	det, err := NewDetector(Options{})
	if err != nil {
		t.Fatal(err)
	}
	type stats struct {
		n, dups int
		dists   []int
		sumDist int
		sumSim  float64
		sims    []float64
	}
	grades := map[string]*stats{"1.0": {}, "4.0": {}}
	for _, r := range recs[1:] {
		st := grades[r[col["Overall"]]]
		if st == nil || r[col["lang1"]] != r[col["lang2"]] {
			continue
		}
		a, b := det.Doc("", r[col["text1"]]), det.Doc("", r[col["text2"]])
		dist, sim := Hamming(a.FP, b.FP), Similarity(a.Sig, b.Sig)
		st.n++
		st.sumDist += dist
		st.sumSim += sim
		st.dists = append(st.dists, dist)
		st.sims = append(st.sims, sim)
		if dec := det.Decide(a, b); dec.Duplicate() {
			st.dups++
			t.Logf("grade %s pair %s is a near-duplicate: %v (distance %d, similarity %.3f)", r[col["Overall"]], r[col["pair_id"]], dec, dist, sim)
		}
	}
	mean := func(st *stats) (float64, float64) {
		return float64(st.sumDist) / float64(st.n), st.sumSim / float64(st.n)
	}
	for _, g := range []string{"1.0", "4.0"} {
		st := grades[g]
		if st.n < 50 {
			t.Fatalf("only %d same-language pairs graded %s", st.n, g)
		}
		slices.Sort(st.dists)
		slices.SortFunc(st.sims, cmp.Compare)
		d, s := mean(st)
		t.Logf("grade %s: %d pairs; distance mean %.2f, min %d, median %d; similarity mean %.4f, median %.4f, max %.3f; %d near-duplicates",
			g, st.n, d, st.dists[0], st.dists[st.n/2], s, st.sims[st.n/2], st.sims[st.n-1], st.dups)
		if st.dups*20 > st.n {
			t.Errorf("grade %s: %d of %d pairs are near-duplicates, want ≤ 5%%", g, st.dups, st.n)
		}
	}
	d1, s1 := mean(grades["1.0"])
	d4, s4 := mean(grades["4.0"])
	if d1 >= d4 {
		t.Errorf("mean distance of grade 1 pairs %.2f, of grade 4 pairs %.2f; want grade 1 closer", d1, d4)
	}
	if s1 <= s4 {
		t.Errorf("mean similarity of grade 1 pairs %.4f, of grade 4 pairs %.4f; want grade 1 more similar", s1, s4)
	}
}
