package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/newsflow/newsflow/internal/canon"
	"github.com/newsflow/newsflow/internal/classify"
	"github.com/newsflow/newsflow/operators/articles"
	"github.com/newsflow/newsflow/operators/story"
)

const clusterUsage = `usage: newsflow cluster --input FILE.ndjson [--output FILE.tsv] [--truth] [--explain IDS] [--model MODEL]

Runs the article operators (dedup, near-duplicate and story clustering)
offline over NDJSON articles, in file order, and writes one line per input
line: the input id, a tab, and the id of the story it ended in.

Input fields: id (or doc_id), title, summary (or text), url, publisher (or
source or source_id), published_at (RFC 3339 or ms since the epoch). Lines
without a title use the first sentence of the summary. With --truth, lines
with a "story" field are scored and B-cubed and pairwise precision, recall
and F1 are printed to stderr. With --explain (input ids, comma-separated,
or "all"), the decision for each of those articles is printed to stderr:
its heaviest terms, every open story it was compared with (similarity
after the time decay, the similarity it needed, size, age, the words they
share), and whether it joined one, founded a story, joined as a near-copy
of an article, or merged stories it bridged. With --model ("builtin" or a
file from newsflow stories train), the stories stage's learned model
decides, as stories.model does in a node, and --explain prints each
candidate's rank with every feature's contribution and the join
probability against the threshold.
`

// clusterInput is one input line of newsflow cluster.
type clusterInput struct {
	ID          string          `json:"id"`
	DocID       string          `json:"doc_id"`
	Title       string          `json:"title"`
	Summary     string          `json:"summary"`
	Text        string          `json:"text"`
	URL         string          `json:"url"`
	Publisher   string          `json:"publisher"`
	Source      string          `json:"source"`
	SourceID    string          `json:"source_id"`
	PublishedAt json.RawMessage `json:"published_at"`
	Story       string          `json:"story"`
}

func cmdCluster(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("cluster", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, clusterUsage) }
	input := fs.String("input", "", "NDJSON articles")
	output := fs.String("output", "", "TSV output (default standard output)")
	truth := fs.Bool("truth", false, "score against the input's story field")
	explain := fs.String("explain", "", `explain the decision for these input ids (comma-separated, or "all")`)
	modelPath := fs.String("model", "", `the stories stage's learned model: "builtin" or a model file (default: the similarity thresholds)`)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *input == "" || fs.NArg() > 0 {
		fs.Usage()
		return errors.New("cluster: --input is required")
	}
	in, err := os.Open(*input)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	defer in.Close()
	p, err := newClusterPipeline(*modelPath)
	if err != nil {
		return err
	}
	p.explained = explainedIDs(*explain)
	p.b.SetExplain(len(p.explained) > 0)
	rows, labels, err := p.run(ctx, in, *input, stderr)
	if err != nil {
		return err
	}
	pred, err := writeClusterRows(stdout, *output, p.b, rows)
	if err != nil {
		return err
	}
	if *truth {
		s := story.Score(labels, pred)
		fmt.Fprintf(stderr, "articles %d, stories %d (reference %d)\nB-cubed   P %.4f R %.4f F1 %.4f\npairwise  P %.4f R %.4f F1 %.4f\n",
			s.Items, s.Predicted, s.Reference, s.BCubedP, s.BCubedR, s.BCubedF1, s.PairP, s.PairR, s.PairF1)
	}
	return nil
}

// clusterPipeline is what newsflow cluster runs the input through: the
// same cleaning and topic labels as the articles operator, then the story
// stage.
type clusterPipeline struct {
	cls       classify.Classifier
	articles  *articles.Operator
	b         *story.Builder
	explained map[string]bool // input ids whose decisions are explained; "all" for every one
}

// clusterRow is an input line's id and the story it ended in when it was
// applied.
type clusterRow struct{ id, story string }

// newClusterPipeline returns the pipeline with the default classifier,
// and the story stage's learned model from modelPath if it is not empty.
func newClusterPipeline(modelPath string) (*clusterPipeline, error) {
	cls, err := classify.New(classify.Options{})
	if err != nil {
		return nil, err
	}
	op, err := articles.New(articles.Options{}, cls, nil, nil)
	if err != nil {
		return nil, err
	}
	var opts story.Options
	if modelPath != "" {
		if opts.Cluster.Model, err = story.LoadModel(modelPath); err != nil {
			return nil, fmt.Errorf("cluster: %w", err)
		}
	}
	b, err := story.NewBuilder(opts)
	if err != nil {
		return nil, err
	}
	return &clusterPipeline{cls: cls, articles: op, b: b}, nil
}

// explainedIDs returns the ids of a comma-separated list, blanks dropped.
func explainedIDs(list string) map[string]bool {
	ids := map[string]bool{}
	for _, id := range strings.Split(list, ",") {
		if id = strings.TrimSpace(id); id != "" {
			ids[id] = true
		}
	}
	return ids
}

// run applies the articles of in (the file name), line by line in order,
// and writes the explanations asked for to stderr. It returns a row per
// article and the stories of the lines that have one, by input id.
func (p *clusterPipeline) run(ctx context.Context, in io.Reader, name string, stderr io.Writer) ([]clusterRow, map[string]string, error) {
	var rows []clusterRow
	labels := map[string]string{}
	sc := bufio.NewScanner(in)
	sc.Buffer(nil, 64<<20)
	for line := 1; sc.Scan(); line++ {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		a, id, label, err := decodeClusterInput(p.articles, p.cls, sc.Bytes())
		if err != nil {
			return nil, nil, fmt.Errorf("cluster: %s line %d: %w", name, line, err)
		}
		res, err := p.b.Apply(a)
		if err != nil {
			return nil, nil, fmt.Errorf("cluster: %s line %d: %w", name, line, err)
		}
		if (p.explained["all"] || p.explained[id]) && !res.Update {
			if err := story.WriteExplanation(stderr, id, a.Title, p.b.LastExplanation()); err != nil {
				return nil, nil, err
			}
		}
		rows = append(rows, clusterRow{id, res.Story})
		if label != "" {
			labels[id] = label
		}
	}
	if err := sc.Err(); err != nil {
		return nil, nil, fmt.Errorf("cluster: read %s: %w", name, err)
	}
	return rows, labels, nil
}

// writeClusterRows writes a line per row, its id and the story it is in
// now (after merges), to the file output, or to stdout if output is
// empty. It returns those stories by id.
func writeClusterRows(stdout io.Writer, output string, b *story.Builder, rows []clusterRow) (map[string]string, error) {
	out := stdout
	if output != "" {
		f, err := os.Create(output)
		if err != nil {
			return nil, fmt.Errorf("cluster: %w", err)
		}
		defer f.Close()
		out = f
	}
	w := bufio.NewWriter(out)
	pred := make(map[string]string, len(rows))
	for _, r := range rows {
		s := b.Current(r.story)
		pred[r.id] = s
		fmt.Fprintf(w, "%s\t%s\n", r.id, s)
	}
	if err := w.Flush(); err != nil {
		return nil, fmt.Errorf("cluster: write: %w", err)
	}
	if f, ok := out.(*os.File); ok && output != "" {
		if err := f.Close(); err != nil {
			return nil, fmt.Errorf("cluster: write: %w", err)
		}
	}
	return pred, nil
}

// decodeClusterInput maps one input line to an article. The article id is
// the hash of the canonical URL, as in the live pipeline, or of the input
// id when the line has no usable URL.
func decodeClusterInput(op *articles.Operator, cls classify.Classifier, line []byte) (a story.Article, id, label string, err error) {
	var in clusterInput
	if err := json.Unmarshal(line, &in); err != nil {
		return a, "", "", fmt.Errorf("malformed JSON: %w", err)
	}
	id = in.ID
	if id == "" {
		id = in.DocID
	}
	if id == "" {
		return a, "", "", errors.New("missing id")
	}
	summary := in.Summary
	if summary == "" {
		summary = in.Text
	}
	title := in.Title
	if title == "" {
		title = firstSentence(summary)
	}
	a.Title, a.Summary, _ = op.CleanText(title, summary, "")
	for _, l := range cls.Classify(classify.Document{Title: a.Title, Summary: a.Summary}) {
		a.Topics = append(a.Topics, story.Label{Topic: l.Topic, Confidence: l.Confidence})
	}
	if strings.TrimSpace(a.Title) == "" {
		return a, "", "", errors.New("missing title")
	}
	a.SourceID = in.SourceID
	for _, s := range []string{in.Publisher, in.Source} {
		if a.SourceID == "" {
			a.SourceID = s
		}
	}
	a.Source = a.SourceID
	a.Authority = 0.5
	a.Version = 1
	if in.URL != "" {
		if c, err := canon.Canonical(in.URL, nil); err == nil {
			a.URL = c
			a.ID = canon.ArticleID(c)
		}
	}
	if a.ID == "" {
		sum := sha256.Sum256([]byte("id:" + id))
		a.ID = hex.EncodeToString(sum[:16])
	}
	if a.Published, err = parseEventTime(in.PublishedAt); err != nil {
		return a, "", "", fmt.Errorf("published_at: %w", err)
	}
	return a, id, in.Story, nil
}

// parseEventTime reads a time given as RFC 3339 or ms since the epoch;
// absent means 0.
func parseEventTime(raw json.RawMessage) (int64, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, nil
	}
	var ms int64
	if err := json.Unmarshal(raw, &ms); err == nil {
		return ms, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return 0, errors.New("must be an RFC 3339 string or ms since the epoch")
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return 0, err
	}
	return t.UnixMilli(), nil
}

// firstSentence returns the text up to the first line break or sentence
// end, at most 300 bytes.
func firstSentence(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, "\n"); i >= 0 {
		s = s[:i]
	}
	if i := strings.Index(s, ". "); i >= 0 {
		s = s[:i+1]
	}
	if len(s) > 300 {
		s = s[:300]
		for len(s) > 0 && s[len(s)-1]&0xc0 == 0x80 {
			s = s[:len(s)-1]
		}
	}
	return s
}
