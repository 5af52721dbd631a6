package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/operators/story/model"
)

// writeStoriesFile writes a labelled file of six small stories, each about
// its own company in the same market words, over a few hours.
func writeStoriesFile(t *testing.T) string {
	t.Helper()
	names := []string{"Zorbax", "Quenlo", "Hartwick", "Ostrava Mining", "Pellin", "Vantor"}
	verbs := []string{"shares jump after", "shares slide after", "investors weigh", "analysts cut targets after", "board backs"}
	things := []string{"earnings beat", "profit warning", "merger talks", "chief executive exit", "factory fire"}
	start := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	var lines []string
	for j := range 5 {
		for i, name := range names {
			b, _ := json.Marshal(map[string]string{
				"id": fmt.Sprintf("s%d-%d", i, j), "story": fmt.Sprint("story-", i),
				"title":        fmt.Sprintf("%s %s %s %s", name, verbs[(i+j)%len(verbs)], name, things[i%len(things)]),
				"url":          fmt.Sprintf("https://news%d.example/%d/%d", j, i, j),
				"publisher":    fmt.Sprint("outlet-", j),
				"published_at": start.Add(time.Duration(j)*time.Hour + time.Duration(i)*time.Minute).Format(time.RFC3339),
			})
			lines = append(lines, string(b))
		}
	}
	path := filepath.Join(t.TempDir(), "labelled.ndjson")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestStoriesTrainEval(t *testing.T) {
	data := writeStoriesFile(t)
	out := filepath.Join(t.TempDir(), "stories.model")
	var stdout, stderr bytes.Buffer
	if err := cmdStories(context.Background(), []string{"train", "--data", data, "--out", out}, &stdout, &stderr); err != nil {
		t.Fatalf("train: %v\n%s", err, stderr.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Decode(b)
	if err != nil {
		t.Fatalf("the written model does not decode: %v", err)
	}
	if m.Trained.Articles != 30 || m.Trained.Stories != 6 {
		t.Errorf("trained on %d articles in %d stories, want 30 in 6", m.Trained.Articles, m.Trained.Stories)
	}
	if m.Stage != model.StageStories {
		t.Errorf("train wrote a model for stage %q, want the stories stage's", m.Stage)
	}
	// --reference trains operators/story/model's own clusterer.
	refOut := filepath.Join(t.TempDir(), "reference.model")
	if err := cmdStories(context.Background(), []string{"train", "--reference", "--data", data, "--out", refOut}, &stdout, &stderr); err != nil {
		t.Fatalf("train --reference: %v\n%s", err, stderr.String())
	}
	if rb, err := os.ReadFile(refOut); err != nil {
		t.Fatal(err)
	} else if rm, err := model.Decode(rb); err != nil || rm.Stage != "" {
		t.Fatalf("train --reference wrote stage %q (%v), want the reference model", rm.Stage, err)
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"eval", "--data", data, "--folds", "2"}, []string{"spread [0, 12h0m0s) seed 1   model", "spread [0, 12h0m0s) seed 1   stage", "raw                          cluster*"}},
		{[]string{"eval", "--data", data, "--model", out}, []string{"spread [0, 12h0m0s) seed 1   stage", "raw                          cluster"}},
		{[]string{"eval", "--data", data, "--model", refOut}, []string{"spread [0, 12h0m0s) seed 1   model", "raw                          cluster"}},
	} {
		args := c.args
		stdout.Reset()
		if err := cmdStories(context.Background(), args, &stdout, &stderr); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, stderr.String())
		}
		got := stdout.String()
		for _, want := range append([]string{"30 articles, 6 stories"}, c.want...) {
			if !strings.Contains(got, want) {
				t.Errorf("%v: output lacks %q:\n%s", args, want, got)
			}
		}
		if args[3] == "2" && !strings.Contains(got, "2-fold cross-validation grouped by story id") {
			t.Errorf("cross-validation output does not say how the folds are made:\n%s", got)
		}
	}
	// A model whose content no longer matches its hash is refused.
	bad := filepath.Join(t.TempDir(), "bad.model")
	if err := os.WriteFile(bad, bytes.Replace(b, []byte(`"threshold": `), []byte(`"threshold": 1`), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := cmdStories(context.Background(), []string{"eval", "--data", data, "--model", bad}, &stdout, &stderr); err == nil || !strings.Contains(err.Error(), "hash") {
		t.Errorf("eval with a tampered model: %v, want a hash error", err)
	}
}
