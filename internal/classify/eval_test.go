package classify

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

func TestReadExamples(t *testing.T) {
	in := `{"topic": "sports", "title": "Cup final", "summary": "s", "content": "c", "id": 1}

{"category": "b", "title": "Shares fall", "text": "t", "url": "http://x"}
  {"category": "e", "topic": "entertainment", "text": "only text"}  
{"topic": "t", "content": "c", "text": "ignored"}
`
	got, err := ReadExamples(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []Example{
		{Document{Title: "Cup final", Summary: "s", Content: "c"}, "sports"},
		{Document{Title: "Shares fall", Content: "t"}, "b"},
		{Document{Content: "only text"}, "entertainment"},
		{Document{Content: "c"}, "t"},
	}
	if len(got) != len(want) {
		t.Fatalf("%d examples, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("example %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestReadExamplesErrors(t *testing.T) {
	good := `{"topic": "a", "title": "x"}` + "\n"
	for _, tc := range []struct {
		name, in, want string
	}{
		{"not json", good + "{topic: a}\n", "line 2:"},
		{"truncated", good + good + `{"topic": "a", "title": "x"`, "line 3:"},
		{"no topic", good + `{"title": "x"}` + "\n", "line 2: no topic or category"},
		{"blank topic", `{"topic": " ", "title": "x"}`, "line 1: no topic or category"},
		{"topic not a string", `{"topic": 3, "title": "x"}`, "line 1:"},
		{"no text", good + "\n" + `{"topic": "a", "title": ""}`, "line 3: no title, summary, content or text"},
		{"array", `["a"]`, "line 1:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadExamples(strings.NewReader(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// fixedClassifier answers with the label keyed by the document's title.
type fixedClassifier map[string]string

func (f fixedClassifier) Classify(d Document) []Label {
	if t, ok := f[d.Title]; ok {
		return []Label{{Topic: t, Confidence: 0.9}, {Topic: "other", Confidence: 0.05}}
	}
	return nil
}

func (f fixedClassifier) Topics() []string {
	var out []string
	for _, t := range f {
		out = append(out, t)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func TestEvaluate(t *testing.T) {
	ex := func(title, topic string) Example { return Example{Document: Document{Title: title}, Topic: topic} }
	exs := []Example{
		ex("1", "a"), ex("2", "a"), ex("3", "a"), ex("4", "a"), // 3 a, 1 b
		ex("5", "b"), ex("6", "b"), // 1 b, 1 none
		ex("7", "t"), ex("8", "t"), ex("9", "t"), // t, s (counts as t), b
	}
	c := fixedClassifier{"1": "a", "2": "a", "3": "a", "4": "b", "5": "b", "7": "t", "8": "s", "9": "b"}
	e := Evaluate(c, exs, map[string][]string{"t": {"s"}})
	if e.Total != 9 || e.Correct != 6 || !near(e.Accuracy(), 6.0/9) {
		t.Errorf("total %d, correct %d, accuracy %v", e.Total, e.Correct, e.Accuracy())
	}
	want := map[string]TopicScore{
		"a": {Topic: "a", Support: 4, Predicted: 3, Precision: 1, Recall: 0.75},
		"b": {Topic: "b", Support: 2, Predicted: 3, Precision: 1.0 / 3, Recall: 0.5},
		"s": {Topic: "s", Support: 0, Predicted: 1, Precision: 1, Recall: 0},
		"t": {Topic: "t", Support: 3, Predicted: 1, Precision: 1, Recall: 2.0 / 3},
	}
	scores := e.Scores()
	if len(scores) != len(want) {
		t.Fatalf("scores %+v", scores)
	}
	for _, s := range scores {
		w := want[s.Topic]
		if w.Precision+w.Recall > 0 {
			w.F1 = 2 * w.Precision * w.Recall / (w.Precision + w.Recall)
		}
		if s.Support != w.Support || s.Predicted != w.Predicted || !near(s.Precision, w.Precision) || !near(s.Recall, w.Recall) || !near(s.F1, w.F1) {
			t.Errorf("%s: %+v, want %+v", s.Topic, s, w)
		}
	}
	if n := e.Confusion["b"][""]; n != 1 {
		t.Errorf("confusion b → none = %d, want 1", n)
	}
	if n := e.Confusion["t"]["s"]; n != 1 {
		t.Errorf("confusion t → s = %d, want 1", n)
	}
	var out bytes.Buffer
	if err := e.Report(&out); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"examples 9, accuracy 0.6667 (6 correct)",
		"topic  precision  recall     f1  support  predicted",
		"    a      1.000   0.750  0.857        4          3",
		"   a  b  s  t  -",
		"a  3  1  0  0  0",
		"b  0  1  0  0  1",
		"t  0  1  1  1  0",
	} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("report lacks %q:\n%s", line, out.String())
		}
	}
}

func TestReadExamplesLongLine(t *testing.T) {
	in := `{"topic": "a", "title": "x"}` + "\n" + `{"topic": "a", "title": "` + strings.Repeat("x", 100) + `"}` + "\n"
	_, err := readExamples(strings.NewReader(in), 64)
	if err == nil || !strings.Contains(err.Error(), "line 2:") {
		t.Fatalf("error %v, want one about line 2", err)
	}
}
