package story

// The story stage's tuning harness: measurements for working on story
// quality, skipped unless NEWSFLOW_TUNE is set. Options come as JSON in
// STORY_OPTS (one Options value) or STORY_SWEEP (an array of them):
//
//	NEWSFLOW_TUNE=1 STORY_OPTS='{"Cluster":{"Threshold":0.12}}' \
//	  go test -run 'TestTune$' -v ./operators/story/
//
// TestTune prints B-cubed scores on uci_dev (in time order and with all
// times equal), ECB+, and the dense-stream purity at 10, 100 and 1,000
// articles a minute over three arrangements of the unrelated stream, each
// with the two halves of the stories (see half) so that a setting tuned on
// one half is reported on the other. The Diagnose and Trace tests show
// which stories split, which merge, and which join first mixed a real
// story with unrelated articles.

import (
	"cmp"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"os"
	"slices"
	"strings"
	"testing"
)

// half reports which half of a corpus a story label belongs to. ECB+
// labels are topic_subcorpus, and the two events of a topic stay in one
// half.
func half(story string) int {
	if i := strings.IndexByte(story, '_'); i > 0 && strings.HasPrefix(story[i:], "_ecb") {
		story = story[:i]
	}
	h := fnv.New32a()
	h.Write([]byte(story))
	return int(h.Sum32() % 2)
}

// scoreHalves scores the whole corpus and each half of its stories: the
// B-cubed figures of a half average over its items, with clusters counted
// whole, so a half's precision counts the other half's intruders.
func scoreHalves(truth, pred map[string]string) [3]Scores {
	out := [3]Scores{Score(truth, pred)}
	psize, tsize, joint := map[string]int{}, map[string]int{}, map[[2]string]int{}
	for id, s := range truth {
		p := pred[id]
		psize[p]++
		tsize[s]++
		joint[[2]string{s, p}]++
	}
	var n [2]int
	for id, s := range truth {
		h, p := half(s), pred[id]
		j := float64(joint[[2]string{s, p}])
		out[1+h].BCubedP += j / float64(psize[p])
		out[1+h].BCubedR += j / float64(tsize[s])
		n[h]++
	}
	for h := range 2 {
		out[1+h].BCubedP /= float64(n[h])
		out[1+h].BCubedR /= float64(n[h])
		out[1+h].BCubedF1 = f1(out[1+h].BCubedP, out[1+h].BCubedR)
	}
	return out
}

// TestTune prints the quality figures of one or more option sets.
func TestTune(t *testing.T) {
	if os.Getenv("NEWSFLOW_TUNE") == "" {
		t.Skip("set NEWSFLOW_TUNE=1")
	}
	var raw []json.RawMessage
	if s := os.Getenv("STORY_SWEEP"); s != "" {
		if err := json.Unmarshal([]byte(s), &raw); err != nil {
			t.Fatal(err)
		}
	} else {
		raw = []json.RawMessage{json.RawMessage(cmp.Or(os.Getenv("STORY_OPTS"), "{}"))}
	}
	uci := loadLabelled(t, "uci_dev.ndjson")
	ecb := loadLabelled(t, "ecbplus_docs.jsonl")
	extra := loadDistractors(t)
	for _, r := range raw {
		var opts Options
		if err := json.Unmarshal(r, &opts); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("#### %s\n", r)
		tuneOne(t, opts, uci, ecb, extra)
	}
}

func tuneOne(t *testing.T, opts Options, uci, ecb, extra []labelled) {
	f := func(s Scores) string { return fmt.Sprintf("P %.3f R %.3f F1 %.3f", s.BCubedP, s.BCubedR, s.BCubedF1) }
	h := scoreHalves(truthOf(uci), clusterAll(t, uci, opts.Cluster))
	fmt.Printf("uci   all %s | A %s | B %s\n", f(h[0]), f(h[1]), f(h[2]))
	h = scoreHalves(truthOf(ecb), clusterAll(t, ecb, opts.Cluster))
	fmt.Printf("ecb   all %s | A %s | B %s\n", f(h[0]), f(h[1]), f(h[2]))
	flat := make([]labelled, len(uci))
	for i, d := range uci {
		d.Time = 0
		flat[i] = d
	}
	h = scoreHalves(truthOf(uci), clusterAll(t, flat, opts.Cluster))
	fmt.Printf("uci0  all %s | A %s | B %s\n", f(h[0]), f(h[1]), f(h[2]))
	for _, d := range []int{10, 100, 1000} {
		var sp, sc float64
		var line string
		for r := range 3 {
			// Rotations of the unrelated stream give other arrangements.
			k := r * len(extra) / 3
			rot := append(append([]labelled(nil), extra[k:]...), extra[:k]...)
			p := measurePurity(t, opts, denseMix(uci, rot, d), truthOf(uci))
			sp += p.BCubedP / 3
			sc += p.Contaminated / 3
			line += fmt.Sprintf(" | P %.3f c %.1f%% L %d", p.BCubedP, 100*p.Contaminated, p.Largest)
		}
		fmt.Printf("dense %4d mean P %.3f contaminated %.1f%%%s\n", d, sp, 100*sc, line)
	}
}

// TestDiagnoseSplits prints, for each labelled story, the stories its
// articles ended in (set CORPUS to score another corpus than uci_dev).
func TestDiagnoseSplits(t *testing.T) {
	opts := tuneOptions(t)
	docs := loadLabelled(t, cmp.Or(os.Getenv("CORPUS"), "uci_dev.ndjson"))
	pred := clusterAll(t, docs, opts.Cluster)
	byLabel := map[string][]labelled{}
	for _, d := range docs {
		byLabel[d.Story] = append(byLabel[d.Story], d)
	}
	predSize := map[string]int{}
	for _, p := range pred {
		predSize[p]++
	}
	for l, ds := range byLabel {
		parts := map[string][]labelled{}
		for _, d := range ds {
			parts[pred[d.ID]] = append(parts[pred[d.ID]], d)
		}
		var ps []string
		for p := range parts {
			ps = append(ps, p)
		}
		slices.SortFunc(ps, func(a, b string) int { return len(parts[b]) - len(parts[a]) })
		fmt.Printf("== %s %d articles in %d stories\n", l, len(ds), len(ps))
		for i, p := range ps {
			if i >= 8 {
				break
			}
			fmt.Printf("   %3d of story %s (size %d): %q / %q\n", len(parts[p]), p, predSize[p], parts[p][0].Title, parts[p][len(parts[p])-1].Title)
		}
	}
}

// TestTraceContamination follows the dense stream and prints each join or
// merge that first mixes real and unrelated articles in a story.
func TestTraceContamination(t *testing.T) {
	opts := tuneOptions(t)
	uci := loadLabelled(t, "uci_dev.ndjson")
	extra := loadDistractors(t)
	density := 100
	fmt.Sscan(os.Getenv("DENSITY"), &density)
	all := denseMix(uci, extra, density)
	b, err := NewBuilder(opts)
	if err != nil {
		t.Fatal(err)
	}
	members := map[string][]labelled{}
	kind := func(ms []labelled) (u, o int) {
		for _, m := range ms {
			if strings.HasPrefix(m.ID, "orx-") {
				o++
			} else {
				u++
			}
		}
		return
	}
	show := func(ms []labelled) string {
		var s []string
		for i, m := range ms {
			if i >= 4 {
				break
			}
			s = append(s, fmt.Sprintf("%q", m.Title))
		}
		return strings.Join(s, ", ")
	}
	for _, d := range all {
		r, err := b.Apply(Article{ID: d.ID, Title: d.Title, Summary: d.Body, Published: d.Time, SourceID: "s"})
		if err != nil {
			t.Fatal(err)
		}
		st := members[r.Story]
		u0, o0 := kind(st)
		mixed0 := u0 > 0 && o0 > 0
		for _, m := range r.Merged {
			mu, mo := kind(members[m])
			if !mixed0 && ((u0+mu > 0 && o0+mo > 0) && !(mu > 0 && mo > 0)) {
				fmt.Printf("MERGE via %q: [%d uci %d orx: %s] + [%d uci %d orx: %s]\n", d.Title, u0, o0, show(st), mu, mo, show(members[m]))
			}
			st = append(st, members[m]...)
			delete(members, m)
			u0, o0 = kind(st)
			mixed0 = u0 > 0 && o0 > 0
		}
		isOrx := strings.HasPrefix(d.ID, "orx-")
		if !mixed0 && ((isOrx && u0 > 0) || (!isOrx && o0 > 0)) && r.DuplicateOf == "" {
			fmt.Printf("JOIN %q -> [%d uci %d orx: %s]\n", d.Title, u0, o0, show(st))
		}
		members[r.Story] = append(st, d)
	}
}

// TestDiagnoseMerged prints the stories that hold articles of several
// labelled stories (FLAT=1 gives every article the same time).
func TestDiagnoseMerged(t *testing.T) {
	opts := tuneOptions(t)
	docs := loadLabelled(t, cmp.Or(os.Getenv("CORPUS"), "uci_dev.ndjson"))
	if os.Getenv("FLAT") != "" {
		for i := range docs {
			docs[i].Time = 0
		}
	}
	pred := clusterAll(t, docs, opts.Cluster)
	first := map[string]string{}
	for _, d := range docs {
		if _, ok := first[d.Story]; !ok {
			first[d.Story] = d.Title
		}
	}
	comp := map[string]map[string]int{}
	size := map[string]int{}
	for _, d := range docs {
		p := pred[d.ID]
		if comp[p] == nil {
			comp[p] = map[string]int{}
		}
		comp[p][d.Story]++
		size[p]++
	}
	var ps []string
	for p, m := range comp {
		if len(m) > 1 {
			ps = append(ps, p)
		}
	}
	slices.SortFunc(ps, func(a, b string) int { return size[b] - size[a] })
	for _, p := range ps {
		fmt.Printf("== story %s size %d\n", p, size[p])
		for l, n := range comp[p] {
			if n > 1 {
				fmt.Printf("   %4d %q\n", n, first[l])
			}
		}
	}
}

// TestLargest prints the six largest stories of the dense stream at each
// density, with what they hold.
func TestLargest(t *testing.T) {
	opts := tuneOptions(t)
	uci := loadLabelled(t, "uci_dev.ndjson")
	extra := loadDistractors(t)
	for _, density := range []int{10, 100, 1000} {
		all := denseMix(uci, extra, density)
		byID := map[string]labelled{}
		for _, d := range all {
			byID[d.ID] = d
		}
		pred := buildStories(t, opts, all)
		members := map[string][]string{}
		for _, d := range all {
			members[pred[d.ID]] = append(members[pred[d.ID]], d.ID)
		}
		var ss []string
		for s := range members {
			ss = append(ss, s)
		}
		slices.SortFunc(ss, func(a, b string) int { return len(members[b]) - len(members[a]) })
		fmt.Printf("== %d/min\n", density)
		for _, s := range ss[:6] {
			labels := map[string]int{}
			for _, id := range members[s] {
				if strings.HasPrefix(id, "orx-") {
					labels["orx"]++
				} else {
					labels[byID[id].Story[:6]]++
				}
			}
			fmt.Printf("  %4d %v e.g. %q / %q\n", len(members[s]), labels, byID[members[s][0]].Title, byID[members[s][len(members[s])/2]].Title)
		}
	}
}

// tuneOptions skips the test unless NEWSFLOW_TUNE is set, and reads
// builder options as JSON from $STORY_OPTS.
func tuneOptions(t *testing.T) Options {
	t.Helper()
	if os.Getenv("NEWSFLOW_TUNE") == "" {
		t.Skip("set NEWSFLOW_TUNE=1")
	}
	var opts Options
	if s := os.Getenv("STORY_OPTS"); s != "" {
		if err := json.Unmarshal([]byte(s), &opts); err != nil {
			t.Fatal(err)
		}
	}
	return opts
}
