package classify

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// maxExampleLine bounds one NDJSON example line.
const maxExampleLine = 64 << 20

// ReadExamples reads labelled documents as NDJSON, one JSON object a line:
// the label in "topic" (or "category"), the text in "title", "summary" and
// "content" (or "text"). Other fields are ignored, and so are blank lines.
// An error names the line.
func ReadExamples(r io.Reader) ([]Example, error) {
	return readExamples(r, maxExampleLine)
}

func readExamples(r io.Reader, maxLine int) ([]Example, error) {
	var out []Example
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, min(64<<10, maxLine)), maxLine)
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var v struct {
			Topic    *string `json:"topic"`
			Category *string `json:"category"`
			Title    string  `json:"title"`
			Summary  string  `json:"summary"`
			Content  string  `json:"content"`
			Text     string  `json:"text"`
		}
		if err := json.Unmarshal(b, &v); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		ex := Example{Document: Document{Title: v.Title, Summary: v.Summary, Content: v.Content}}
		switch {
		case v.Topic != nil:
			ex.Topic = *v.Topic
		case v.Category != nil:
			ex.Topic = *v.Category
		}
		if strings.TrimSpace(ex.Topic) == "" {
			return nil, fmt.Errorf("line %d: no topic or category", line)
		}
		if ex.Content == "" {
			ex.Content = v.Text
		}
		if ex.Title == "" && ex.Summary == "" && ex.Content == "" {
			return nil, fmt.Errorf("line %d: no title, summary, content or text", line)
		}
		out = append(out, ex)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("line %d: %w", line+1, err)
	}
	return out, nil
}

// Evaluation scores a classifier's top label against labelled examples.
type Evaluation struct {
	Total, Correct int
	// Confusion[label][predicted] counts examples by their label and the
	// classifier's top label ("" when it gave none).
	Confusion map[string]map[string]int

	predicted, predictedOK map[string]int // by top label
	support, supportOK     map[string]int // by example label
}

// TopicScore is the precision and recall of one topic. Support is the
// number of examples labelled with it, Predicted the number it was the top
// label of.
type TopicScore struct {
	Topic                 string
	Support, Predicted    int
	Precision, Recall, F1 float64
}

// Evaluate classifies every example and compares its top label with the
// example's topic. alternatives lists, per example topic, other labels that
// also count as correct (nil for none).
func Evaluate(c Classifier, examples []Example, alternatives map[string][]string) *Evaluation {
	e := &Evaluation{
		Confusion: map[string]map[string]int{},
		predicted: map[string]int{}, predictedOK: map[string]int{},
		support: map[string]int{}, supportOK: map[string]int{},
	}
	for _, ex := range examples {
		pred := ""
		if labels := c.Classify(ex.Document); len(labels) > 0 {
			pred = labels[0].Topic
		}
		ok := pred != "" && (pred == ex.Topic || slices.Contains(alternatives[ex.Topic], pred))
		e.Total++
		e.support[ex.Topic]++
		e.predicted[pred]++
		row := e.Confusion[ex.Topic]
		if row == nil {
			row = map[string]int{}
			e.Confusion[ex.Topic] = row
		}
		row[pred]++
		if ok {
			e.Correct++
			e.supportOK[ex.Topic]++
			e.predictedOK[pred]++
		}
	}
	return e
}

// Accuracy is the share of examples whose top label is correct.
func (e *Evaluation) Accuracy() float64 {
	if e.Total == 0 {
		return 0
	}
	return float64(e.Correct) / float64(e.Total)
}

// Scores returns the precision and recall of every topic that is an
// example's label or a top label, sorted by topic.
func (e *Evaluation) Scores() []TopicScore {
	var out []TopicScore
	for _, t := range e.topics() {
		s := TopicScore{Topic: t, Support: e.support[t], Predicted: e.predicted[t]}
		if s.Predicted > 0 {
			s.Precision = float64(e.predictedOK[t]) / float64(s.Predicted)
		}
		if s.Support > 0 {
			s.Recall = float64(e.supportOK[t]) / float64(s.Support)
		}
		if s.Precision+s.Recall > 0 {
			s.F1 = 2 * s.Precision * s.Recall / (s.Precision + s.Recall)
		}
		out = append(out, s)
	}
	return out
}

// topics returns the example labels and top labels, sorted, without "".
func (e *Evaluation) topics() []string {
	var ts []string
	for t := range e.support {
		ts = append(ts, t)
	}
	for t := range e.predicted {
		if t != "" && e.support[t] == 0 {
			ts = append(ts, t)
		}
	}
	slices.Sort(ts)
	return ts
}

// Report writes the accuracy, the per-topic scores and the confusion matrix
// as text.
func (e *Evaluation) Report(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "examples %d, accuracy %.4f (%d correct)\n\n", e.Total, e.Accuracy(), e.Correct)
	fmt.Fprintln(tw, "topic\tprecision\trecall\tf1\tsupport\tpredicted\t")
	for _, s := range e.Scores() {
		fmt.Fprintf(tw, "%s\t%.3f\t%.3f\t%.3f\t%d\t%d\t\n", s.Topic, s.Precision, s.Recall, s.F1, s.Support, s.Predicted)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nconfusion (rows: label, columns: top label, -: none)")
	cols := e.topics()
	if e.predicted[""] > 0 {
		cols = append(cols, "")
	}
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "\t")
	for _, c := range cols {
		fmt.Fprintf(tw, "%s\t", cmpName(c))
	}
	fmt.Fprintln(tw)
	for _, r := range e.topics() {
		if e.support[r] == 0 {
			continue
		}
		fmt.Fprintf(tw, "%s\t", r)
		for _, c := range cols {
			fmt.Fprintf(tw, "%d\t", e.Confusion[r][c])
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

func cmpName(t string) string {
	if t == "" {
		return "-"
	}
	return t
}
