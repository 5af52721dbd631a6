package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/newsflow/newsflow/internal/classify"
)

// topicsTrainData is a small labelled set in the shapes the CLI accepts:
// "category" or "topic", and "text" or "title"/"summary"/"content".
const topicsTrainData = `{"category": "biz", "title": "Shares fall as profits slump", "text": "The company said quarterly profit fell and investors sold its shares."}
{"category": "biz", "title": "Bank raises interest rates", "text": "The central bank raised its interest rate to curb inflation."}
{"category": "biz", "title": "Retailer reports record sales", "text": "Sales at the retailer rose, lifting profit and the share price."}
{"category": "biz", "title": "Oil prices hit a high", "text": "Crude oil prices rose as investors feared supply cuts."}
{"category": "sport", "title": "Striker scores twice in cup win", "text": "The striker scored two goals as the club won the cup match."}
{"category": "sport", "title": "Coach praises young squad", "text": "The coach said his squad played well in the league match."}
{"category": "sport", "title": "Champion wins tennis final", "text": "The champion won the final in straight sets to take the title."}

{"topic": "technology", "title": "New smartphone has faster chip", "summary": "A phone with a faster chip.", "content": "The phone maker unveiled a smartphone with a faster chip."}
{"topic": "technology", "title": "Software update fixes security flaw", "content": "The software update fixes a flaw that let hackers in."}
{"topic": "technology", "title": "Broadband speeds double", "content": "Internet users will get faster broadband as the network is upgraded."}
`

const topicsTestData = `{"category": "biz", "title": "Investors cheer bank profits", "text": "Shares in the bank rose after profit beat forecasts."}
{"category": "sport", "title": "Club wins the derby", "text": "The striker scored in the final minute of the match."}
{"topic": "technology", "title": "Hackers target smartphone users", "text": "A flaw in the phone software lets hackers in."}
`

func writeTopicsFile(t *testing.T, name, data string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func runTopics(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err = run(context.Background(), append([]string{"topics"}, args...), &out, &errOut)
	return out.String(), errOut.String(), err
}

func TestTopicsTrainEval(t *testing.T) {
	train := writeTopicsFile(t, "train.ndjson", topicsTrainData)
	test := writeTopicsFile(t, "test.ndjson", topicsTestData)
	dir := t.TempDir()
	model := filepath.Join(dir, "model.json.gz")
	out, _, err := runTopics(t, "train", "--data", train, "--out", model, "--title-weight", "2",
		"--min-count", "1", "--bigrams", "--map", "biz=business,sport=sports")
	if err != nil {
		t.Fatalf("train: %v", err)
	}
	for _, want := range []string{"trained on 10 examples", "business", "sports", "technology", model} {
		if !strings.Contains(out, want) {
			t.Errorf("train output lacks %q:\n%s", want, out)
		}
	}
	m, err := classify.LoadModel(model)
	if err != nil {
		t.Fatal(err)
	}
	if o := m.TrainOptions(); o.TitleWeight != 2 || !o.Bigrams || o.MinCount != 1 {
		t.Errorf("model options %+v, want the flags' values", o)
	}
	// The same data give the same file.
	again := filepath.Join(dir, "again.json.gz")
	if _, _, err := runTopics(t, "train", "--data", train, "--out", again, "--title-weight", "2",
		"--min-count", "1", "--bigrams", "--map", "biz=business,sport=sports"); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(model)
	b, _ := os.ReadFile(again)
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Error("training twice on the same data gave different model files")
	}

	out, _, err = runTopics(t, "eval", "--data", test, "--model", model, "--map", "biz=business,sport=sports")
	if err != nil {
		t.Fatalf("eval: %v", err)
	}
	for _, want := range []string{"examples 3, accuracy 1.0000 (3 correct)", "precision", "confusion"} {
		if !strings.Contains(out, want) {
			t.Errorf("eval output lacks %q:\n%s", want, out)
		}
	}

	// The default rules, with a mapping that lets two topics count.
	out, _, err = runTopics(t, "eval", "--data", test, "--rules", "../../configs/topics.yaml",
		"--map", "biz=business,sport=sports|entertainment")
	if err != nil {
		t.Fatalf("eval rules: %v", err)
	}
	if !strings.Contains(out, "examples 3, accuracy 1.0000") {
		t.Errorf("eval with the default rules:\n%s", out)
	}
}

func TestTopicsErrors(t *testing.T) {
	good := writeTopicsFile(t, "good.ndjson", topicsTrainData)
	badJSON := writeTopicsFile(t, "bad.ndjson", topicsTrainData+"{\"topic\": \"x\", \"title\": \n")
	noTopic := writeTopicsFile(t, "notopic.ndjson", "{\"title\": \"x\"}\n")
	noText := writeTopicsFile(t, "notext.ndjson", topicsTestData+"{\"topic\": \"x\"}\n")
	empty := writeTopicsFile(t, "empty.ndjson", "\n\n")
	out := filepath.Join(t.TempDir(), "m.json")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no subcommand", nil, "want a subcommand"},
		{"unknown subcommand", []string{"fit"}, `unknown subcommand "fit"`},
		{"train without data", []string{"train", "--out", out}, "want --data FILE and --out MODEL"},
		{"train without out", []string{"train", "--data", good}, "want --data FILE and --out MODEL"},
		{"train stray argument", []string{"train", "--data", good, "--out", out, "extra"}, "want --data"},
		{"bad json line", []string{"train", "--data", badJSON, "--out", out}, "line 12:"}, // the blank line 8 counts
		{"no topic", []string{"train", "--data", noTopic, "--out", out}, "line 1: no topic or category"},
		{"no text", []string{"eval", "--data", noText}, "line 4: no title, summary, content or text"},
		{"no examples", []string{"train", "--data", empty, "--out", out}, "no examples"},
		{"missing file", []string{"eval", "--data", filepath.Join(t.TempDir(), "nope.ndjson")}, "no such file"},
		{"bad option", []string{"train", "--data", good, "--out", out, "--title-weight", "-1"}, "title weight"},
		{"bad map", []string{"train", "--data", good, "--out", out, "--map", "biz"}, `--map: "biz"`},
		{"map twice", []string{"eval", "--data", good, "--map", "a=b,a=c"}, `label "a" mapped twice`},
		{"model and rules", []string{"eval", "--data", good, "--model", "m", "--rules", "r"}, "not both"},
		{"missing model", []string{"eval", "--data", good, "--model", filepath.Join(t.TempDir(), "m.json")}, "load model"},
		{"bad min confidence", []string{"eval", "--data", good, "--min-confidence", "2"}, "min confidence"},
		{"out in missing dir", []string{"train", "--data", good, "--out", filepath.Join(t.TempDir(), "no", "m.json")}, "topics train"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := runTopics(t, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if err.Error() != strings.ToLower(err.Error()[:1])+err.Error()[1:] {
				t.Errorf("error %q does not start in lower case", err)
			}
		})
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("failed trainings left %s behind (%v)", out, err)
	}
}
