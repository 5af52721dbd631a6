package classify

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the golden files in testdata")

// TestDefaultRulesGolden classifies the hand-written headlines of
// testdata/headlines.txt with the default rules and compares the labels with
// testdata/headlines.golden, so that a change to the rules shows up as a
// reviewable diff. It also checks that the intended topic comes first for
// most of them.
func TestDefaultRulesGolden(t *testing.T) {
	r, err := LoadRules(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open("testdata/headlines.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out strings.Builder
	total, correct := 0, 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		topic, text, ok := strings.Cut(line, ": ")
		if !ok {
			t.Fatalf("bad line %q", line)
		}
		title, summary, _ := strings.Cut(text, " | ")
		labels := r.Classify(Document{Title: title, Summary: summary})
		total++
		if len(labels) > 0 && labels[0].Topic == topic {
			correct++
		}
		fmt.Fprintf(&out, "%s\n ", line)
		if len(labels) == 0 {
			out.WriteString(" -")
		}
		for _, l := range labels {
			fmt.Fprintf(&out, " %s %.2f", l.Topic, l.Confidence)
		}
		out.WriteString("\n")
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	const golden = "testdata/headlines.golden"
	if *rewrite {
		if err := os.WriteFile(golden, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != string(want) {
		t.Errorf("labels differ from %s (run with -rewrite and review the diff):\n%s", golden, diffLines(string(want), got))
	}
	acc := float64(correct) / float64(total)
	t.Logf("default rules, hand-written headlines: %d/%d = %.3f with the intended topic first", correct, total, acc)
	if acc < 0.9 {
		t.Errorf("intended topic first for %.3f of the headlines, want ≥ 0.9", acc)
	}
}

// diffLines lists the lines of want and got that differ, by line number.
func diffLines(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := range max(len(w), len(g)) {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "line %d:\n  want %s\n  got  %s\n", i+1, wl, gl)
		}
	}
	return b.String()
}
