package classify

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/newsflow/newsflow/configs"
)

// Document is the text of an article to classify.
type Document struct {
	Title, Summary, Content string
}

// Label is a topic with the classifier's confidence in it, in [0, 1].
type Label struct {
	Topic      string  `json:"topic"`
	Confidence float64 `json:"confidence"`
}

// Classifier labels documents. Implementations are safe for concurrent use.
type Classifier interface {
	// Classify returns the labels of d sorted by confidence, highest first
	// (ties by topic name), only those with at least the configured minimum
	// confidence, and at most the configured number of labels. It returns
	// no labels when nothing in d is evidence for any topic.
	Classify(d Document) []Label
	// Topics lists every topic the classifier can label.
	Topics() []string
}

// DefaultRulesFile is the file the built-in rules come from: New uses the
// copy compiled into the binary (package configs) when Options names
// neither a rules file nor a model.
const DefaultRulesFile = "configs/topics.yaml"

// Defaults used when neither Options nor the rules file or model set them.
const (
	DefaultMinConfidence = 0.25
	DefaultMaxLabels     = 3
)

// Options selects and tunes the classifier that New builds. The zero value
// is the default: the built-in keyword rules (DefaultRulesFile as compiled
// in), with their own thresholds.
type Options struct {
	// RulesFile is a YAML rules file (see ParseRules). Empty means the
	// built-in rules. It is not read when ModelFile is set.
	RulesFile string `yaml:"topics_rules"`
	// ModelFile is a model written by (*Model).Save. When set, the model
	// classifies instead of the rules.
	ModelFile string `yaml:"topics_model"`
	// MinConfidence overrides the rules' or the model's minimum confidence
	// of a label when positive. It must be in [0, 1].
	MinConfidence float64 `yaml:"min_confidence"`
	// MaxLabels overrides the rules' or the model's largest number of labels
	// per document when positive. It must not be negative.
	MaxLabels int `yaml:"max_labels"`
}

// DefaultOptions returns the default options.
func DefaultOptions() Options {
	return Options{}
}

// Validate reports whether o is usable. It does not read the files.
func (o Options) Validate() error {
	if math.IsNaN(o.MinConfidence) || o.MinConfidence < 0 || o.MinConfidence > 1 {
		return fmt.Errorf("classify: min confidence %v not in [0, 1]", o.MinConfidence)
	}
	if o.MaxLabels < 0 {
		return fmt.Errorf("classify: max labels %d is negative", o.MaxLabels)
	}
	return nil
}

// New builds the classifier o selects: the model in o.ModelFile if set, else
// the rules in o.RulesFile (or DefaultRulesFile).
func New(o Options) (Classifier, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.ModelFile != "" {
		m, err := LoadModel(o.ModelFile)
		if err != nil {
			return nil, err
		}
		m.limits = m.limits.override(o.MinConfidence, o.MaxLabels)
		return m, nil
	}
	var r *Rules
	var err error
	if o.RulesFile == "" {
		r, err = ParseRules(configs.TopicRules)
	} else {
		r, err = LoadRules(o.RulesFile)
	}
	if err != nil {
		return nil, err
	}
	r.limits = r.limits.override(o.MinConfidence, o.MaxLabels)
	return r, nil
}

// limits are the thresholds that turn per-topic confidences into labels.
type limits struct {
	minConfidence float64
	maxLabels     int
}

func (l limits) override(minConfidence float64, maxLabels int) limits {
	if minConfidence > 0 {
		l.minConfidence = minConfidence
	}
	if maxLabels > 0 {
		l.maxLabels = maxLabels
	}
	return l
}

// labels returns the labels for per-topic confidences conf (indexed like
// topics): confidence > 0 and ≥ the minimum, best first, at most maxLabels.
func (l limits) labels(topics []string, conf []float64) []Label {
	n := 0
	for _, c := range conf {
		if c > 0 && c >= l.minConfidence {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	out := make([]Label, 0, n)
	for i, c := range conf {
		if c > 0 && c >= l.minConfidence {
			out = append(out, Label{Topic: topics[i], Confidence: c})
		}
	}
	slices.SortFunc(out, func(a, b Label) int {
		if c := cmp.Compare(b.Confidence, a.Confidence); c != 0 {
			return c
		}
		return cmp.Compare(a.Topic, b.Topic)
	})
	if l.maxLabels > 0 && len(out) > l.maxLabels {
		out = out[:l.maxLabels]
	}
	return out
}
