package main

import (
	"compress/gzip"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/newsflow/newsflow/internal/classify"
)

const topicsUsage = `usage:
  newsflow topics train --data FILE --out MODEL [--title-weight N] [--alpha A]
                        [--bigrams] [--min-count N] [--sublinear-tf]
                        [--min-confidence C] [--max-labels N] [--map MAP]
  newsflow topics eval  --data FILE [--model MODEL | --rules FILE]
                        [--min-confidence C] [--max-labels N] [--map MAP]

FILE is NDJSON, one example a line: the label in "topic" (or "category"),
the text in "title", "summary" and "content" (or "text").
MODEL is written as JSON, gzip-compressed if its name ends in .gz.
MAP renames data labels, e.g. sport=sports,tech=technology; in eval,
t=technology|science also counts science as correct for label t.
`

// cmdTopics trains and evaluates topic classifiers.
func cmdTopics(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return trainEval(ctx, "topics", topicsUsage, topicsTrain, topicsEval, args, stdout, stderr)
}

// trainEval runs the train or eval subcommand of command name.
func trainEval(ctx context.Context, name, usage string, train, eval func(context.Context, []string, io.Writer, io.Writer) error,
	args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("%s: want a subcommand: train or eval", name)
	}
	sub, args := args[0], args[1:]
	switch sub {
	case "train":
		return train(ctx, args, stdout, stderr)
	case "eval":
		return eval(ctx, args, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("%s: unknown subcommand %q", name, sub)
}

func topicsFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("topics "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, topicsUsage) }
	return fs
}

func topicsTrain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := topicsFlags("train", stderr)
	data := fs.String("data", "", "labelled NDJSON examples")
	out := fs.String("out", "", "model file to write (.gz: gzip-compressed)")
	mapping := fs.String("map", "", "label renames, e.g. sport=sports,tech=technology")
	var o classify.TrainOptions
	fs.Float64Var(&o.TitleWeight, "title-weight", classify.DefaultTitleWeight, "times a title token counts")
	fs.Float64Var(&o.Alpha, "alpha", classify.DefaultAlpha, "additive (Laplace) smoothing")
	fs.BoolVar(&o.Bigrams, "bigrams", false, "add pairs of adjacent tokens as features")
	fs.Float64Var(&o.MinCount, "min-count", classify.DefaultMinCount, "drop features seen less often than this")
	fs.BoolVar(&o.SublinearTF, "sublinear-tf", false, "count a feature n times in a document as ln(1+n)")
	fs.Float64Var(&o.MinConfidence, "min-confidence", classify.DefaultMinConfidence, "smallest confidence of a label, stored in the model")
	fs.IntVar(&o.MaxLabels, "max-labels", classify.DefaultMaxLabels, "most labels per document, stored in the model")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *data == "" || *out == "" || fs.NArg() > 0 {
		fmt.Fprint(stderr, topicsUsage)
		return errors.New("topics train: want --data FILE and --out MODEL")
	}
	labels, err := parseLabelMap(*mapping)
	if err != nil {
		return fmt.Errorf("topics train: %w", err)
	}
	examples, err := readExamples(*data, labels)
	if err != nil {
		return fmt.Errorf("topics train: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	m, err := classify.Train(examples, o)
	if err != nil {
		return fmt.Errorf("topics train: %w", err)
	}
	size, err := writeModel(*out, m)
	if err != nil {
		return fmt.Errorf("topics train: %w", err)
	}
	counts := map[string]int{}
	for _, ex := range examples {
		counts[ex.Topic]++
	}
	fmt.Fprintf(stdout, "trained on %d examples, %d features; wrote %s (%d bytes)\n", len(examples), m.NumFeatures(), *out, size)
	for _, t := range m.Topics() {
		fmt.Fprintf(stdout, "  %-16s %d\n", t, counts[t])
	}
	return nil
}

func topicsEval(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := topicsFlags("eval", stderr)
	data := fs.String("data", "", "labelled NDJSON examples")
	mapping := fs.String("map", "", "label renames, e.g. sport=sports,t=technology|science")
	var o classify.Options
	fs.StringVar(&o.ModelFile, "model", "", "model file written by topics train")
	fs.StringVar(&o.RulesFile, "rules", "", "rules file (default: the built-in "+classify.DefaultRulesFile+")")
	fs.Float64Var(&o.MinConfidence, "min-confidence", 0, "override the smallest confidence of a label")
	fs.IntVar(&o.MaxLabels, "max-labels", 0, "override the most labels per document")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *data == "" || fs.NArg() > 0 {
		fmt.Fprint(stderr, topicsUsage)
		return errors.New("topics eval: want --data FILE")
	}
	if o.ModelFile != "" && o.RulesFile != "" {
		return errors.New("topics eval: use --model or --rules, not both")
	}
	labels, err := parseLabelMap(*mapping)
	if err != nil {
		return fmt.Errorf("topics eval: %w", err)
	}
	examples, err := readExamples(*data, labels)
	if err != nil {
		return fmt.Errorf("topics eval: %w", err)
	}
	c, err := classify.New(o)
	if err != nil {
		return fmt.Errorf("topics eval: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return classify.Evaluate(c, examples, labels.alternatives()).Report(stdout)
}

// labelMap renames data labels: label → the topic and the other topics
// that count as correct in an evaluation.
type labelMap map[string][]string

// parseLabelMap parses "from=to[|also...],...".
func parseLabelMap(s string) (labelMap, error) {
	m := labelMap{}
	if strings.TrimSpace(s) == "" {
		return m, nil
	}
	for _, pair := range strings.Split(s, ",") {
		from, to, ok := strings.Cut(strings.TrimSpace(pair), "=")
		topics := strings.Split(to, "|")
		if !ok || from == "" || slices.Contains(topics, "") {
			return nil, fmt.Errorf("--map: %q is not label=topic[|topic...]", pair)
		}
		if _, dup := m[from]; dup {
			return nil, fmt.Errorf("--map: label %q mapped twice", from)
		}
		m[from] = topics
	}
	return m, nil
}

// alternatives returns, per mapped topic, the other topics that count as
// correct.
func (m labelMap) alternatives() map[string][]string {
	alts := map[string][]string{}
	for _, topics := range m {
		if len(topics) > 1 {
			alts[topics[0]] = append(alts[topics[0]], topics[1:]...)
		}
	}
	return alts
}

// readExamples reads the NDJSON examples of path and renames their labels.
func readExamples(path string, labels labelMap) ([]classify.Example, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	examples, err := classify.ReadExamples(f)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(examples) == 0 {
		return nil, fmt.Errorf("read %s: no examples", path)
	}
	for i := range examples {
		if topics, ok := labels[examples[i].Topic]; ok {
			examples[i].Topic = topics[0]
		}
	}
	return examples, nil
}

// writeModel writes m to path through a temporary file, so that a failed
// write leaves any previous model in place; a name ending in .gz gets
// gzip-compressed JSON. It returns the file's size.
func writeModel(path string, m *classify.Model) (int64, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return 0, err
	}
	defer os.Remove(tmp.Name()) // after the rename, this fails harmlessly
	err = func() error {
		if !strings.HasSuffix(path, ".gz") {
			return m.Save(tmp)
		}
		zw := gzip.NewWriter(tmp)
		if err := m.Save(zw); err != nil {
			return err
		}
		return zw.Close()
	}()
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, fmt.Errorf("write %s: %w", path, err)
	}
	fi, err := os.Stat(tmp.Name())
	if err != nil {
		return 0, err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return 0, err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return 0, err
	}
	return fi.Size(), nil
}
