package classify

import (
	"bufio"
	"bytes"
	"cmp"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/newsflow/newsflow/internal/option"
	"github.com/newsflow/newsflow/internal/text"
)

// Example is a labelled document to train or evaluate on.
type Example struct {
	Document
	Topic string
}

// TrainOptions tunes Train. The zero value is the default.
type TrainOptions struct {
	// TitleWeight is how many times a title token counts (default 3).
	TitleWeight float64
	// Alpha is the additive (Laplace) smoothing of the token counts
	// (default 1; it must be positive, so 0 means the default).
	Alpha float64
	// Bigrams adds the pairs of adjacent tokens within one field as
	// features.
	Bigrams bool
	// MinCount drops features whose weighted count over all examples is
	// below it (default 2; 1 keeps every feature).
	MinCount float64
	// SublinearTF counts a feature that occurs with weight n in a document
	// as ln(1+n) instead of n.
	SublinearTF bool
	// MinConfidence and MaxLabels are stored in the model as its limits
	// (defaults DefaultMinConfidence and DefaultMaxLabels).
	MinConfidence float64
	MaxLabels     int
}

// ErrNoExamples is returned by Train when it has nothing to learn from.
var ErrNoExamples = errors.New("classify: no training examples")

// Default training options.
const (
	DefaultTitleWeight = 3
	DefaultAlpha       = 1
	DefaultMinCount    = 2
)

// DefaultTrainOptions returns the options the zero value stands for.
func DefaultTrainOptions() TrainOptions {
	return TrainOptions{TitleWeight: DefaultTitleWeight, Alpha: DefaultAlpha, MinCount: DefaultMinCount,
		MinConfidence: DefaultMinConfidence, MaxLabels: DefaultMaxLabels}
}

// Validate reports whether o is usable.
func (o TrainOptions) Validate() error {
	bad := func(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) || v < 0 }
	switch {
	case bad(o.TitleWeight):
		return fmt.Errorf("classify: title weight %v must be finite and not negative", o.TitleWeight)
	case bad(o.Alpha):
		return fmt.Errorf("classify: alpha %v must be finite and not negative", o.Alpha)
	case bad(o.MinCount):
		return fmt.Errorf("classify: min count %v must be finite and not negative", o.MinCount)
	case math.IsNaN(o.MinConfidence) || o.MinConfidence < 0 || o.MinConfidence > 1:
		return fmt.Errorf("classify: min confidence %v not in [0, 1]", o.MinConfidence)
	case o.MaxLabels < 0:
		return fmt.Errorf("classify: max labels %d is negative", o.MaxLabels)
	}
	return nil
}

// Model is a multinomial Naive Bayes topic classifier. It is immutable and
// safe for concurrent use.
//
// A document is a bag of features: its tokens, and (with Bigrams) the
// pairs of adjacent tokens within one field, each counted with weight
// TitleWeight in the title and 1 elsewhere (ln(1+n) of the total with
// SublinearTF). Features the model has not seen are ignored. The
// confidence of topic t is its posterior probability
//
//	P(t|d) ∝ P(t) · Π_f P(f|t)^n(f,d),   P(f|t) = (n(f,t) + α) / (N(t) + α·|V|)
//
// where P(t) is the share of training documents labelled t, n(f,t) the
// weighted count of f in them, N(t) their total and |V| the number of
// features; it is computed in log space and normalized over the topics.
type Model struct {
	topics   []string // sorted
	docs     []int    // training documents per topic
	features []string // sorted; a bigram is "first second"
	counts   []float64
	opts     TrainOptions
	limits   limits

	unigrams map[string]int32 // token → feature
	bigrams  map[uint64]int32 // feature of first<<32 | feature of second → feature
	logPrior []float64        // per topic
	logProb  []float64        // feature*len(topics) + topic
	pool     sync.Pool        // *modelScratch
}

type modelScratch struct {
	tok     text.Tokenizer
	weight  []float64 // per feature, within one document
	touched []int32
	logp    []float64 // per topic
}

// Topics returns the model's topics, sorted.
func (m *Model) Topics() []string { return slices.Clone(m.topics) }

// TrainOptions returns the options the model was trained with, defaults
// filled in.
func (m *Model) TrainOptions() TrainOptions { return m.opts }

// NumFeatures returns the size of the model's vocabulary.
func (m *Model) NumFeatures() int { return len(m.features) }

// Train fits a model to examples. Training is deterministic: the same
// examples in the same order with the same options give a model that Save
// writes byte for byte the same.
func Train(examples []Example, opts TrainOptions) (*Model, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	option.Fill(&opts, DefaultTrainOptions())
	if len(examples) == 0 {
		return nil, ErrNoExamples
	}
	var topics []string
	seen := map[string]bool{}
	for i, ex := range examples {
		if ex.Topic == "" {
			return nil, fmt.Errorf("classify: example %d has no topic", i)
		}
		if !seen[ex.Topic] {
			seen[ex.Topic] = true
			topics = append(topics, ex.Topic)
		}
	}
	if len(topics) < 2 {
		return nil, fmt.Errorf("classify: need examples of at least two topics, have %q", topics)
	}
	slices.Sort(topics)
	k := len(topics)

	// Count every feature; ids are in order of first appearance.
	ext := newExtractor(opts)
	var counts []float64 // id*k + topic
	docs := make([]int, k)
	var doc docVector
	for _, ex := range examples {
		t, _ := slices.BinarySearch(topics, ex.Topic)
		docs[t]++
		ext.vector(&doc, ex.Document)
		for i, id := range doc.ids {
			if n := int(id+1) * k; n > len(counts) {
				counts = append(counts, make([]float64, n-len(counts))...)
			}
			counts[int(id)*k+t] += doc.weights[i]
		}
	}
	counts = append(counts, make([]float64, len(ext.names)*k-len(counts))...)

	// Keep the features seen often enough, and bigrams only with both of
	// their tokens, then sort them by name.
	keep := make([]bool, len(ext.names))
	for id := range ext.names {
		total := 0.0
		for _, c := range counts[id*k : (id+1)*k] {
			total += c
		}
		keep[id] = total >= opts.MinCount
	}
	for id, pair := range ext.pairs {
		if pair[0] >= 0 && (!keep[pair[0]] || !keep[pair[1]]) {
			keep[id] = false
		}
	}
	var order []int32
	for id := range ext.names {
		if keep[id] {
			order = append(order, int32(id))
		}
	}
	slices.SortFunc(order, func(a, b int32) int { return cmp.Compare(ext.names[a], ext.names[b]) })
	f := &modelFile{
		Format:   modelFormat,
		Version:  modelVersion,
		Kind:     modelKind,
		Options:  fileOptionsOf(opts),
		Topics:   topics,
		Docs:     docs,
		Features: make([]string, len(order)),
		Counts:   make([][]float64, len(order)),
	}
	for i, id := range order {
		f.Features[i] = ext.names[id]
		f.Counts[i] = counts[int(id)*k : (int(id)+1)*k]
	}
	return f.model()
}

// extractor turns documents into feature vectors during training, giving
// each new feature the next id.
type extractor struct {
	opts    TrainOptions
	tok     text.Tokenizer
	ids     map[string]int32
	bigrams map[uint64]int32
	names   []string
	pairs   [][2]int32 // per feature: the unigram features of a bigram, or -1
}

func newExtractor(opts TrainOptions) *extractor {
	return &extractor{opts: opts, tok: text.NewTokenizer(tokenOptions), ids: map[string]int32{}, bigrams: map[uint64]int32{}}
}

// docVector is a document's features with their weights.
type docVector struct {
	ids     []int32
	weights []float64
	index   map[int32]int
}

func (e *extractor) vector(v *docVector, d Document) {
	v.ids, v.weights = v.ids[:0], v.weights[:0]
	if v.index == nil {
		v.index = map[int32]int{}
	}
	clear(v.index)
	add := func(id int32, w float64) {
		i, ok := v.index[id]
		if !ok {
			i = len(v.ids)
			v.index[id] = i
			v.ids = append(v.ids, id)
			v.weights = append(v.weights, 0)
		}
		v.weights[i] += w
	}
	for field, text := range [numFields]string{d.Title, d.Summary, d.Content} {
		w := 1.0
		if field == fieldTitle {
			w = e.opts.TitleWeight
		}
		if w == 0 {
			continue
		}
		prev := int32(-1)
		e.tok.Reset(text)
		for e.tok.Next() {
			tok := e.tok.Token()
			id, ok := e.ids[string(tok)]
			if !ok {
				id = e.newFeature(string(tok), [2]int32{-1, -1})
				e.ids[string(tok)] = id
			}
			add(id, w)
			if e.opts.Bigrams && prev >= 0 {
				key := uint64(prev)<<32 | uint64(id)
				b, ok := e.bigrams[key]
				if !ok {
					b = e.newFeature(e.names[prev]+" "+e.names[id], [2]int32{prev, id})
					e.bigrams[key] = b
				}
				add(b, w)
			}
			prev = id
		}
	}
	if e.opts.SublinearTF {
		for i, w := range v.weights {
			v.weights[i] = math.Log1p(w)
		}
	}
}

func (e *extractor) newFeature(name string, pair [2]int32) int32 {
	id := int32(len(e.names))
	e.names = append(e.names, name)
	e.pairs = append(e.pairs, pair)
	return id
}

// Classify implements Classifier.
func (m *Model) Classify(d Document) []Label {
	s := m.pool.Get().(*modelScratch)
	defer m.pool.Put(s)
	k := len(m.topics)
	for field, text := range [numFields]string{d.Title, d.Summary, d.Content} {
		w := 1.0
		if field == fieldTitle {
			w = m.opts.TitleWeight
		}
		if text == "" || w == 0 {
			continue
		}
		prev := int32(-1)
		s.tok.Reset(text)
		for s.tok.Next() {
			id, ok := m.unigrams[string(s.tok.Token())]
			if !ok {
				prev = -1
				continue
			}
			s.add(id, w)
			if prev >= 0 && m.bigrams != nil {
				if b, ok := m.bigrams[uint64(prev)<<32|uint64(id)]; ok {
					s.add(b, w)
				}
			}
			prev = id
		}
	}
	if len(s.touched) == 0 {
		return nil
	}
	copy(s.logp, m.logPrior)
	for _, f := range s.touched {
		n := s.weight[f]
		s.weight[f] = 0
		if m.opts.SublinearTF {
			n = math.Log1p(n)
		}
		lp := m.logProb[int(f)*k : (int(f)+1)*k]
		for t := range s.logp {
			s.logp[t] += n * lp[t]
		}
	}
	s.touched = s.touched[:0]
	// Softmax, shifted by the maximum so that exp does not underflow to 0
	// for every topic.
	top := math.Inf(-1)
	for _, v := range s.logp {
		top = max(top, v)
	}
	sum := 0.0
	for t, v := range s.logp {
		s.logp[t] = math.Exp(v - top)
		sum += s.logp[t]
	}
	for t := range s.logp {
		s.logp[t] /= sum
	}
	return m.limits.labels(m.topics, s.logp)
}

func (s *modelScratch) add(f int32, w float64) {
	if s.weight[f] == 0 {
		s.touched = append(s.touched, f)
	}
	s.weight[f] += w
}

// The model file: JSON, optionally gzip-compressed.
const (
	modelFormat  = "newsflow-topic-model"
	modelVersion = 1
	modelKind    = "multinomial-naive-bayes"
)

type modelFile struct {
	Format   string      `json:"format"`
	Version  int         `json:"version"`
	Kind     string      `json:"kind"`
	Options  fileOptions `json:"options"`
	Topics   []string    `json:"topics"`
	Docs     []int       `json:"docs"`
	Features []string    `json:"features"`
	// Counts[i][t] is the weighted count of Features[i] in the training
	// documents of Topics[t].
	Counts [][]float64 `json:"counts"`
}

type fileOptions struct {
	TitleWeight   float64 `json:"title_weight"`
	Alpha         float64 `json:"alpha"`
	Bigrams       bool    `json:"bigrams"`
	MinCount      float64 `json:"min_count"`
	SublinearTF   bool    `json:"sublinear_tf"`
	MinConfidence float64 `json:"min_confidence"`
	MaxLabels     int     `json:"max_labels"`
}

func fileOptionsOf(o TrainOptions) fileOptions { return fileOptions(o) }

func (f fileOptions) trainOptions() TrainOptions { return TrainOptions(f) }

// Save writes the model as JSON: its options, topics, documents per topic
// and per-feature counts, from which LoadModel recomputes the
// probabilities.
func (m *Model) Save(w io.Writer) error {
	f := modelFile{
		Format:   modelFormat,
		Version:  modelVersion,
		Kind:     modelKind,
		Options:  fileOptionsOf(m.opts),
		Topics:   m.topics,
		Docs:     m.docs,
		Features: m.features,
		Counts:   make([][]float64, len(m.features)),
	}
	k := len(m.topics)
	for i := range f.Features {
		f.Counts[i] = m.counts[i*k : (i+1)*k]
	}
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&f); err != nil {
		return fmt.Errorf("save model: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("save model: %w", err)
	}
	return nil
}

// ErrModelFormat is returned (wrapped) for a file that is not a model this
// version can read.
var ErrModelFormat = errors.New("not a newsflow topic model")

// LoadModel reads a model that Save wrote, plain or gzip-compressed.
func LoadModel(path string) (*Model, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load model: %w", err)
	}
	defer fh.Close()
	m, err := ReadModel(fh)
	if err != nil {
		return nil, fmt.Errorf("load model %s: %w", path, err)
	}
	return m, nil
}

// ReadModel reads a model that Save wrote, plain or gzip-compressed.
func ReadModel(r io.Reader) (*Model, error) {
	br := bufio.NewReader(r)
	if magic, _ := br.Peek(2); bytes.Equal(magic, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, err
		}
		defer zr.Close()
		br = bufio.NewReader(zr)
	}
	var f modelFile
	dec := json.NewDecoder(br)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrModelFormat, err)
	}
	return f.model()
}

// model validates f, an untrusted file, and builds the model it describes.
// The checks run in order: the header and options, the topics and their
// document counts, then the features and their counts.
func (f *modelFile) model() (*Model, error) {
	opts, err := f.options()
	if err != nil {
		return nil, err
	}
	totalDocs, err := f.checkTopics()
	if err != nil {
		return nil, err
	}
	if len(f.Counts) != len(f.Features) {
		return nil, fmt.Errorf("model: %d features with %d count rows", len(f.Features), len(f.Counts))
	}
	k := len(f.Topics)
	m := &Model{
		topics:   f.Topics,
		docs:     f.Docs,
		features: f.Features,
		counts:   make([]float64, 0, len(f.Features)*k),
		opts:     opts,
		limits:   limits{minConfidence: opts.MinConfidence, maxLabels: opts.MaxLabels},
		unigrams: map[string]int32{},
		logPrior: make([]float64, k),
		logProb:  make([]float64, len(f.Features)*k),
	}
	if opts.Bigrams {
		m.bigrams = map[uint64]int32{}
	}
	if err := m.addFeatures(f.Features, f.Counts); err != nil {
		return nil, err
	}
	if err := m.indexBigrams(); err != nil {
		return nil, err
	}
	m.setProbabilities(totalDocs)
	nf := len(f.Features)
	m.pool.New = func() any {
		return &modelScratch{tok: text.NewTokenizer(tokenOptions), weight: make([]float64, nf), logp: make([]float64, k)}
	}
	return m, nil
}

// options checks the file's format, kind and version, and returns its
// training options if they are valid.
func (f *modelFile) options() (TrainOptions, error) {
	if f.Format != modelFormat || f.Kind != modelKind {
		return TrainOptions{}, fmt.Errorf("%w: format %q, kind %q", ErrModelFormat, f.Format, f.Kind)
	}
	if f.Version != modelVersion {
		return TrainOptions{}, fmt.Errorf("%w: version %d (this build reads %d)", ErrModelFormat, f.Version, modelVersion)
	}
	opts := f.Options.trainOptions()
	if err := opts.Validate(); err != nil {
		return TrainOptions{}, fmt.Errorf("model options: %w", err)
	}
	if opts.Alpha <= 0 || opts.MaxLabels <= 0 {
		return TrainOptions{}, fmt.Errorf("model options: alpha %v and max labels %d must be positive", opts.Alpha, opts.MaxLabels)
	}
	return opts, nil
}

// checkTopics checks the file's topics (at least two, sorted, unique and
// non-empty) and their document counts, and returns the documents' total.
func (f *modelFile) checkTopics() (int, error) {
	k := len(f.Topics)
	if k < 2 || len(f.Docs) != k {
		return 0, fmt.Errorf("model: %d topics with %d document counts", k, len(f.Docs))
	}
	if !slices.IsSorted(f.Topics) || len(slices.Compact(slices.Clone(f.Topics))) != k || f.Topics[0] == "" {
		return 0, fmt.Errorf("model: topics not sorted, unique and non-empty")
	}
	totalDocs := 0
	for _, n := range f.Docs {
		if n < 0 {
			return 0, fmt.Errorf("model: negative document count")
		}
		totalDocs += n
	}
	if totalDocs == 0 {
		return 0, fmt.Errorf("model: no documents")
	}
	return totalDocs, nil
}

// addFeatures checks the features (sorted, unique, non-empty) and their
// counts (one per topic, finite and not negative), appends the counts to
// m.counts and indexes the unigrams.
func (m *Model) addFeatures(features []string, counts [][]float64) error {
	k := len(m.topics)
	for i, name := range features {
		if len(counts[i]) != k {
			return fmt.Errorf("model: feature %q has %d counts for %d topics", name, len(counts[i]), k)
		}
		for _, c := range counts[i] {
			if math.IsNaN(c) || math.IsInf(c, 0) || c < 0 {
				return fmt.Errorf("model: feature %q has count %v", name, c)
			}
		}
		if i > 0 && features[i-1] >= name {
			return fmt.Errorf("model: features not sorted and unique at %q", name)
		}
		m.counts = append(m.counts, counts[i]...)
		if !strings.Contains(name, " ") {
			if name == "" {
				return fmt.Errorf("model: empty feature")
			}
			m.unigrams[name] = int32(i)
		}
	}
	return nil
}

// indexBigrams indexes the bigram features by their tokens' features; it
// fails on a bigram without both of its tokens among the unigrams, or in
// a model without bigrams.
func (m *Model) indexBigrams() error {
	for i, name := range m.features {
		a, b, ok := strings.Cut(name, " ")
		if !ok {
			continue
		}
		ia, oka := m.unigrams[a]
		ib, okb := m.unigrams[b]
		if m.bigrams == nil || !oka || !okb || strings.Contains(b, " ") {
			return fmt.Errorf("model: bigram %q without both of its tokens, or in a model without bigrams", name)
		}
		m.bigrams[uint64(ia)<<32|uint64(ib)] = int32(i)
	}
	return nil
}

// setProbabilities computes the log priors and the smoothed log
// probabilities from the counts, summing in feature order so that they do
// not depend on anything but the file.
func (m *Model) setProbabilities(totalDocs int) {
	k := len(m.topics)
	totals := make([]float64, k)
	for i := range m.features {
		for t, c := range m.counts[i*k : (i+1)*k] {
			totals[t] += c
		}
	}
	v := float64(len(m.features))
	for t := range k {
		m.logPrior[t] = math.Log(float64(m.docs[t]) / float64(totalDocs))
		denom := math.Log(totals[t] + m.opts.Alpha*v)
		for i := range m.features {
			m.logProb[i*k+t] = math.Log(m.counts[i*k+t]+m.opts.Alpha) - denom
		}
	}
}
