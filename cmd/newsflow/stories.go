package main

import (
	"bufio"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/newsflow/newsflow/internal/classify"
	"github.com/newsflow/newsflow/operators/articles"
	"github.com/newsflow/newsflow/operators/story"
	"github.com/newsflow/newsflow/operators/story/model"
)

const storiesUsage = `usage:
  newsflow stories train --data FILE --out MODEL [--reference] [--decay D] [--spread D] [--seed N] [--merge-uci]
  newsflow stories eval  --data FILE [--model MODEL] [--folds K] [--decay D] [--spread D] [--seed N] [--merge-uci]

FILE is labelled NDJSON as newsflow cluster reads it (id, title, summary or
text, url, publisher, published_at, and the reference story in "story").
Articles are taken in time order (stable for equal times).

train fits the stories stage's learned model (operators/story/learned.go;
stories.model in the node's config) to FILE and writes it to MODEL, a
versioned JSON file with a hash of its content. --decay D makes the
centroids of the stories under that model decay with time constant D (a
story is compared with what it is about lately; eval trains its folds'
stage models so too). With --reference it fits the
reference model of operators/story/model, whose own clusterer keeps several
vectors per story; the stage does not run it.

eval scores with B-cubed and pairwise precision, recall and F1. Without
--model it cross-validates: FILE's stories are dealt into K folds (default
5), every article of a story in the same fold, and each fold is clustered
alone by models trained on the other folds: the reference model ("model")
and the stage's ("stage"). With --model it clusters all of FILE with MODEL.
Either way it scores the stage with its similarity thresholds ("cluster",
newsflow cluster's default) on the same articles beside it.

--spread D moves each article's time later by a random offset in [0, D),
seeded by --seed, and re-sorts: uci_dev's times are per-story crawl times
that give its labels away. eval reports the raw-time figures beside
(default 12h; 0 keeps the times). --merge-uci scores (and trains) uci_dev's
three events labelled as two stories each as one story each.
`

// cmdStories trains and evaluates the story model.
func cmdStories(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return trainEval(ctx, "stories", storiesUsage, storiesTrain, storiesEval, args, stdout, stderr)
}

// storyData is a labelled file as both story stages read it.
type storyData struct {
	docs     []model.Labelled
	articles map[string]story.Article // by input id
	sha256   string
}

// storyFlags are the flags train and eval share.
type storyFlags struct {
	fs       *flag.FlagSet
	data     *string
	spread   *time.Duration
	seed     *uint64
	mergeUCI *bool
	decay    *time.Duration
}

func newStoryFlags(name string, stderr io.Writer, spread time.Duration) storyFlags {
	fs := flag.NewFlagSet("stories "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, storiesUsage) }
	return storyFlags{
		fs:       fs,
		data:     fs.String("data", "", "labelled NDJSON articles"),
		spread:   fs.Duration("spread", spread, "move each time later by a seeded random offset in [0, D) and re-sort"),
		seed:     fs.Uint64("seed", 1, "seed of --spread"),
		mergeUCI: fs.Bool("merge-uci", false, "merge uci_dev's three day-split story pairs"),
		decay:    fs.Duration("decay", 0, "time constant of the decay of story centroids under the stage's model (0: none)"),
	}
}

// readStoryData reads a labelled file, cleaning texts as newsflow cluster
// does, in time order.
func readStoryData(ctx context.Context, path string, mergeUCI bool) (*storyData, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cls, err := classify.New(classify.Options{})
	if err != nil {
		return nil, err
	}
	op, err := articles.New(articles.Options{}, cls, nil, nil)
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	d := &storyData{articles: map[string]story.Article{}}
	sc := bufio.NewScanner(io.TeeReader(f, h))
	sc.Buffer(nil, 64<<20)
	for line := 1; sc.Scan(); line++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		a, id, label, err := decodeClusterInput(op, cls, sc.Bytes())
		if err != nil {
			return nil, fmt.Errorf("%s line %d: %w", path, line, err)
		}
		if label == "" {
			return nil, fmt.Errorf("%s line %d: no story label", path, line)
		}
		if _, dup := d.articles[id]; dup {
			return nil, fmt.Errorf("%s line %d: id %q again", path, line, id)
		}
		d.articles[id] = a
		d.docs = append(d.docs, model.Labelled{Doc: model.Doc{ID: id, Title: a.Title, Body: a.Summary, Time: a.Published}, Story: label})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(d.docs) == 0 {
		return nil, fmt.Errorf("%s: no articles", path)
	}
	d.sha256 = hex.EncodeToString(h.Sum(nil))
	slices.SortStableFunc(d.docs, func(a, b model.Labelled) int { return cmp.Compare(a.Time, b.Time) })
	if mergeUCI {
		d.docs = model.MergeLabels(d.docs, model.UCIMergedPairs)
	}
	return d, nil
}

func storiesTrain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	sf := newStoryFlags("train", stderr, 0)
	out := sf.fs.String("out", "", "model file to write")
	reference := sf.fs.Bool("reference", false, "train the reference model (operators/story/model's own clusterer), not the stories stage's")
	if err := sf.fs.Parse(args); err != nil {
		return err
	}
	if *sf.data == "" || *out == "" || sf.fs.NArg() > 0 {
		sf.fs.Usage()
		return errors.New("stories train: --data and --out are required")
	}
	d, err := readStoryData(ctx, *sf.data, *sf.mergeUCI)
	if err != nil {
		return fmt.Errorf("stories train: %w", err)
	}
	docs := model.Spread(d.docs, *sf.spread, *sf.seed)
	var m *model.Model
	if *reference {
		m, err = model.Train(docs, model.TrainOptions{})
	} else {
		m, err = story.TrainModel(docs, story.TrainOptions{DecayHours: sf.decay.Hours()})
	}
	if err != nil {
		return fmt.Errorf("stories train: %w", err)
	}
	m.Trained.Data = d.sha256
	m.Trained.Note = fmt.Sprintf("%s, times spread by [0, %s) seed %d", filepath.Base(*sf.data), *sf.spread, *sf.seed)
	if *sf.mergeUCI {
		m.Trained.Note += ", uci_dev's day-split pairs merged"
	}
	b, err := m.Encode()
	if err != nil {
		return fmt.Errorf("stories train: %w", err)
	}
	if err := os.WriteFile(*out, b, 0o644); err != nil {
		return fmt.Errorf("stories train: %w", err)
	}
	var s model.BCubedScores
	if *reference {
		s = model.BCubed(truthOfDocs(docs), model.Run(m, docs))
	} else {
		pred, err := builderStories(docs, d.articles, m)
		if err != nil {
			return fmt.Errorf("stories train: %w", err)
		}
		s = model.BCubed(truthOfDocs(docs), pred)
	}
	fmt.Fprintf(stdout, "trained on %d articles in %d stories (threshold %.2f); on the training data B-cubed P %.4f R %.4f F1 %.4f\nwrote %s (sha256 %s)\n",
		m.Trained.Articles, m.Trained.Stories, m.Threshold, s.P, s.R, s.F1, *out, m.SHA256)
	return nil
}

func truthOfDocs(docs []model.Labelled) map[string]string {
	m := make(map[string]string, len(docs))
	for _, d := range docs {
		m[d.ID] = d.Story
	}
	return m
}

func storiesEval(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	sf := newStoryFlags("eval", stderr, 12*time.Hour)
	modelPath := sf.fs.String("model", "", "model file to evaluate (default: cross-validate)")
	k := sf.fs.Int("folds", 5, "folds of the story-grouped cross-validation")
	if err := sf.fs.Parse(args); err != nil {
		return err
	}
	if *sf.data == "" || sf.fs.NArg() > 0 || *k < 2 {
		sf.fs.Usage()
		return errors.New("stories eval: --data is required, --folds at least 2")
	}
	d, err := readStoryData(ctx, *sf.data, *sf.mergeUCI)
	if err != nil {
		return fmt.Errorf("stories eval: %w", err)
	}
	var fixed *model.Model
	if *modelPath != "" {
		b, err := os.ReadFile(*modelPath)
		if err != nil {
			return fmt.Errorf("stories eval: %w", err)
		}
		if fixed, err = model.Decode(b); err != nil {
			return fmt.Errorf("stories eval: %s: %w", *modelPath, err)
		}
	}
	labels := "as labelled"
	if *sf.mergeUCI {
		labels = "uci_dev's 3 day-split story pairs merged"
	}
	fmt.Fprintf(stdout, "%s: %d articles, %d stories (%s)\n", *sf.data, len(d.docs), len(truthStories(d.docs)), labels)
	if fixed != nil {
		fmt.Fprintf(stdout, "protocol: all articles clustered by %s (trained on %d articles, data sha256 %.12s); no cross-validation\n", *modelPath, fixed.Trained.Articles, fixed.Trained.Data)
	} else {
		fmt.Fprintf(stdout, "protocol: %d-fold cross-validation grouped by story id (every article of a story in one fold; each fold clustered alone, by a model trained on the other folds)\n", *k)
	}
	fmt.Fprintf(stdout, "%-28s %-8s %7s %7s %7s %9s %8s\n", "times", "stage", "B3 P", "B3 R", "B3 F1", "pair F1", "stories")
	type mode struct {
		name   string
		spread time.Duration
	}
	modes := []mode{{fmt.Sprintf("spread [0, %s) seed %d", *sf.spread, *sf.seed), *sf.spread}, {"raw", 0}}
	if *sf.spread == 0 {
		modes = modes[1:]
	}
	for _, md := range modes {
		docs := model.Spread(d.docs, md.spread, *sf.seed)
		rows, err := evalRows(ctx, docs, d.articles, fixed, *k, *sf.seed, sf.decay.Hours())
		if err != nil {
			return fmt.Errorf("stories eval: %w", err)
		}
		truth := truthOfDocs(docs)
		for _, r := range rows {
			s := story.Score(truth, r.pred)
			fmt.Fprintf(stdout, "%-28s %-8s %7.4f %7.4f %7.4f %9.4f %8d\n", md.name, r.stage, s.BCubedP, s.BCubedR, s.BCubedF1, s.PairF1, s.Predicted)
		}
	}
	fmt.Fprintln(stdout, "model: operators/story/model's reference clusterer; stage: the stories stage's clusterer with a learned model (stories.model);")
	fmt.Fprintln(stdout, "cluster: newsflow cluster's story builder (default options, the thresholds) on the same articles, times and folds;\ncluster*: the same over the whole file at once, no folds (more stories at a time than a fold)")
	return nil
}

// evalRow is one stage's stories of a file.
type evalRow struct {
	stage string
	pred  map[string]string
}

// evalRows clusters docs in k folds grouped by story, each by models
// trained on the other folds (the reference model and the stage's), and
// by the thresholds; with fixed, all of docs by that model (one fold).
// Story ids are prefixed by their fold.
func evalRows(ctx context.Context, docs []model.Labelled, arts map[string]story.Article, fixed *model.Model, k int, seed uint64, decayHours float64) ([]evalRow, error) {
	folds, nf := make([]int, len(docs)), 1
	if fixed == nil {
		folds, nf = model.Folds(docs, k, seed), k
	}
	ref, stage, thresholds := evalRow{"model", map[string]string{}}, evalRow{"stage", map[string]string{}}, evalRow{"cluster", map[string]string{}}
	put := func(r evalRow, f int, pred map[string]string) {
		for id, s := range pred {
			r.pred[id] = fmt.Sprintf("%d/%s", f, s)
		}
	}
	for f := range nf {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		train, test := model.Split(docs, folds, f)
		rm, sm := fixed, fixed
		var err error
		if fixed == nil {
			if rm, err = model.Train(train, model.TrainOptions{}); err != nil {
				return nil, fmt.Errorf("fold %d: %w", f, err)
			}
			if sm, err = story.TrainModel(train, story.TrainOptions{DecayHours: decayHours}); err != nil {
				return nil, fmt.Errorf("fold %d: %w", f, err)
			}
		}
		if rm.Stage == "" {
			put(ref, f, model.Run(rm, test))
		}
		if sm.Stage == model.StageStories {
			ps, err := builderStories(test, arts, sm)
			if err != nil {
				return nil, err
			}
			put(stage, f, ps)
		}
		pb, err := builderStories(test, arts, nil)
		if err != nil {
			return nil, err
		}
		put(thresholds, f, pb)
	}
	var rows []evalRow
	for _, r := range []evalRow{ref, stage, thresholds} {
		if len(r.pred) > 0 {
			rows = append(rows, r)
		}
	}
	if fixed == nil {
		whole, err := builderStories(docs, arts, nil)
		if err != nil {
			return nil, err
		}
		rows = append(rows, evalRow{"cluster*", whole})
	}
	return rows, nil
}

func truthStories(docs []model.Labelled) map[string]bool {
	m := map[string]bool{}
	for _, d := range docs {
		m[d.Story] = true
	}
	return m
}

// builderStories runs newsflow cluster's story builder over docs in order,
// with the docs' times, and returns input id → story.
func builderStories(docs []model.Labelled, arts map[string]story.Article, m *model.Model) (map[string]string, error) {
	opts := story.Options{}
	opts.Cluster.Model = m
	b, err := story.NewBuilder(opts)
	if err != nil {
		return nil, err
	}
	raw := make(map[string]string, len(docs))
	for _, d := range docs {
		a := arts[d.ID]
		a.Published = d.Time
		res, err := b.Apply(a)
		if err != nil {
			return nil, err
		}
		raw[d.ID] = res.Story
	}
	for id, s := range raw {
		raw[id] = b.Current(s)
	}
	return raw, nil
}
