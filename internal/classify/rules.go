package classify

import (
	"fmt"
	"math"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/newsflow/newsflow/internal/text"
	"go.yaml.in/yaml/v3"
)

// Rules is a keyword classifier compiled from a YAML rules file. It is
// immutable and safe for concurrent use.
type Rules struct {
	topics       []string // in file order
	descriptions []string
	fieldWeights [numFields]float64
	prior        float64
	limits       limits

	dict    map[string]int32 // normalized token → token id
	uni     []int32          // token id → key of the single-token entry, or -1
	phrases [][]phrase       // token id → phrases that start with it
	keys    [][]hit          // key → the topics it scores for
	pool    sync.Pool        // *ruleScratch
}

const (
	fieldTitle = iota
	fieldSummary
	fieldContent
	numFields
)

// hit is one topic's weight for a key; negative terms have weight < 0.
type hit struct {
	topic  int32
	weight float64
}

// phrase is a multi-token key: the token ids after its first token.
type phrase struct {
	key  int32
	rest []int32
}

// ruleScratch is the per-call state of Classify, pooled.
type ruleScratch struct {
	tok     text.Tokenizer
	ids     []int32
	counts  []int32 // per key, within one field
	touched []int32 // keys with counts > 0
	scores  []float64
}

// Rule file defaults, used when the file does not set them.
const (
	defaultTitleWeight   = 3
	defaultSummaryWeight = 1.5
	defaultContentWeight = 1
	defaultPrior         = 3
)

// LoadRules reads and compiles a rules file (see ParseRules).
func LoadRules(path string) (*Rules, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load rules: %w", err)
	}
	r, err := ParseRules(b)
	if err != nil {
		return nil, fmt.Errorf("load rules %s: %w", path, err)
	}
	return r, nil
}

// Topics returns the rules' topics in file order.
func (r *Rules) Topics() []string { return slices.Clone(r.topics) }

// Description returns the description of topic, or "" if it has none or is
// unknown.
func (r *Rules) Description(topic string) string {
	if i := slices.Index(r.topics, topic); i >= 0 {
		return r.descriptions[i]
	}
	return ""
}

// Classify implements Classifier.
func (r *Rules) Classify(d Document) []Label {
	s := r.pool.Get().(*ruleScratch)
	defer r.pool.Put(s)
	clear(s.scores)
	r.scoreField(s, d.Title, r.fieldWeights[fieldTitle])
	r.scoreField(s, d.Summary, r.fieldWeights[fieldSummary])
	r.scoreField(s, d.Content, r.fieldWeights[fieldContent])
	total := 0.0
	for i, v := range s.scores {
		v = max(v, 0)
		s.scores[i] = v
		total += v
	}
	if total == 0 {
		return nil
	}
	for i, v := range s.scores {
		s.scores[i] = v / (r.prior + total)
	}
	return r.limits.labels(r.topics, s.scores)
}

// scoreField adds the evidence of one field to s.scores: per key with n
// matches, weight × field weight × (1 + ln n).
func (r *Rules) scoreField(s *ruleScratch, text string, fieldWeight float64) {
	if text == "" {
		return
	}
	s.ids = s.ids[:0]
	s.tok.Reset(text)
	for s.tok.Next() {
		id, ok := r.dict[string(s.tok.Token())]
		if !ok {
			id = -1
		}
		s.ids = append(s.ids, id)
	}
	for i, id := range s.ids {
		if id < 0 {
			continue
		}
		if k := r.uni[id]; k >= 0 {
			s.bump(k)
		}
		for _, p := range r.phrases[id] {
			if end := i + 1 + len(p.rest); end <= len(s.ids) && slices.Equal(s.ids[i+1:end], p.rest) {
				s.bump(p.key)
			}
		}
	}
	for _, k := range s.touched {
		tf := 1 + math.Log(float64(s.counts[k]))
		s.counts[k] = 0
		for _, h := range r.keys[k] {
			s.scores[h.topic] += h.weight * fieldWeight * tf
		}
	}
	s.touched = s.touched[:0]
}

func (s *ruleScratch) bump(k int32) {
	if s.counts[k] == 0 {
		s.touched = append(s.touched, k)
	}
	s.counts[k]++
}

// topicNameRE is what a topic name may look like: it is used in URLs,
// metrics and other operators' keys.
var topicNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

// ruleEntry is one weighted term, phrase or negative term of a topic.
type ruleEntry struct {
	field  string
	line   int
	text   string
	tokens []string
	weight float64
}

type topicSpec struct {
	name        string
	description string
	entries     []ruleEntry // terms, phrases, then negatives (weight < 0)
}

// ParseRules parses and compiles a YAML rules file:
//
//	version: 1              # optional; 1 is the only version
//	min_confidence: 0.25    # labels below this confidence are dropped
//	max_labels: 3           # at most this many labels per document
//	title_weight: 3         # what a match counts for in each field
//	summary_weight: 1.5
//	content_weight: 1
//	prior: 3                # evidence of "no topic" (see the package doc)
//	topics:
//	  sports:
//	    description: Sport of all kinds
//	    terms: {football: 2, goalkeeper: 3}     # single words
//	    phrases: {"world cup": 3}               # several words
//	    negative: {"political football": 2}     # words or phrases; subtract
//
// Every setting is optional; weights must be positive and finite. Unknown
// fields, topics without terms or phrases, terms that are not one word
// after normalization, phrases that are, and entries that normalize to the
// same tokens as another entry of the same topic are errors; each error
// names the topic, the field and the line.
func ParseRules(data []byte) (*Rules, error) {
	root, err := rulesRoot(data)
	if err != nil {
		return nil, err
	}
	r := &Rules{
		fieldWeights: [numFields]float64{defaultTitleWeight, defaultSummaryWeight, defaultContentWeight},
		prior:        defaultPrior,
		limits:       limits{minConfidence: DefaultMinConfidence, maxLabels: DefaultMaxLabels},
	}
	var specs []topicSpec
	seen := map[string]bool{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], resolve(root.Content[i+1])
		if seen[k.Value] {
			return nil, fmt.Errorf("rules: line %d: %s set twice", k.Line, k.Value)
		}
		seen[k.Value] = true
		if k.Value == "topics" {
			if specs, err = parseTopics(v); err != nil {
				return nil, fmt.Errorf("rules: %w", err)
			}
			continue
		}
		if err := r.setting(k.Value, v); err != nil {
			return nil, fmt.Errorf("rules: %s: %w (line %d)", k.Value, err, k.Line)
		}
	}
	if len(specs) == 0 {
		return nil, fmt.Errorf("rules: no topics")
	}
	r.compile(specs)
	return r, nil
}

// rulesRoot returns the top-level mapping of a YAML rules file.
func rulesRoot(data []byte) (*yaml.Node, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, fmt.Errorf("rules: empty document")
	}
	root := resolve(doc.Content[0])
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("rules: line %d: top level must be a mapping", root.Line)
	}
	return root, nil
}

// setting decodes the value of a top-level field other than topics into
// r; the error does not name the field.
func (r *Rules) setting(field string, v *yaml.Node) error {
	switch field {
	case "version":
		return decodeVersion(v)
	case "min_confidence":
		return decodeConfidence(v, &r.limits.minConfidence)
	case "max_labels":
		return decodeMaxLabels(v, &r.limits.maxLabels)
	case "title_weight":
		return decodeWeight(v, &r.fieldWeights[fieldTitle])
	case "summary_weight":
		return decodeWeight(v, &r.fieldWeights[fieldSummary])
	case "content_weight":
		return decodeWeight(v, &r.fieldWeights[fieldContent])
	case "prior":
		return decodePrior(v, &r.prior)
	}
	return fmt.Errorf("unknown field")
}

// decodeVersion checks that the rules file's version is 1.
func decodeVersion(n *yaml.Node) error {
	var ver int
	if err := decodeScalar(n, &ver); err != nil {
		return err
	}
	if ver != 1 {
		return fmt.Errorf("unsupported version %d (want 1)", ver)
	}
	return nil
}

// decodeConfidence decodes a confidence, in [0, 1].
func decodeConfidence(n *yaml.Node, c *float64) error {
	if err := decodeScalar(n, c); err != nil {
		return err
	}
	if math.IsNaN(*c) || *c < 0 || *c > 1 {
		return fmt.Errorf("%v not in [0, 1]", *c)
	}
	return nil
}

// decodeMaxLabels decodes a positive number of labels.
func decodeMaxLabels(n *yaml.Node, labels *int) error {
	if err := decodeScalar(n, labels); err != nil {
		return err
	}
	if *labels <= 0 {
		return fmt.Errorf("%d must be positive", *labels)
	}
	return nil
}

// decodePrior decodes a prior, finite and not negative.
func decodePrior(n *yaml.Node, p *float64) error {
	if err := decodeScalar(n, p); err != nil {
		return err
	}
	if math.IsNaN(*p) || math.IsInf(*p, 0) || *p < 0 {
		return fmt.Errorf("%v must be finite and not negative", *p)
	}
	return nil
}

func parseTopics(n *yaml.Node) ([]topicSpec, error) {
	if n.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("topics: must be a mapping of topic names (line %d)", n.Line)
	}
	var specs []topicSpec
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], resolve(n.Content[i+1])
		name := k.Value
		if !topicNameRE.MatchString(name) {
			return nil, fmt.Errorf("topic %q: name must be lower-case letters, digits, '-' or '_' (line %d)", name, k.Line)
		}
		if slices.ContainsFunc(specs, func(s topicSpec) bool { return s.name == name }) {
			return nil, fmt.Errorf("topic %q: defined twice (line %d)", name, k.Line)
		}
		spec, err := parseTopic(name, v)
		if err != nil {
			return nil, fmt.Errorf("topic %q: %w", name, err)
		}
		specs = append(specs, spec)
	}
	return specs, nil
}

func parseTopic(name string, n *yaml.Node) (topicSpec, error) {
	spec := topicSpec{name: name}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return spec, fmt.Errorf("no terms or phrases (line %d)", n.Line)
	}
	if n.Kind != yaml.MappingNode {
		return spec, fmt.Errorf("must be a mapping with terms, phrases, negative (line %d)", n.Line)
	}
	lists := map[string][]ruleEntry{}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], resolve(n.Content[i+1])
		if seen[k.Value] {
			return spec, fmt.Errorf("%s: set twice (line %d)", k.Value, k.Line)
		}
		seen[k.Value] = true
		switch k.Value {
		case "description":
			if err := decodeScalar(v, &spec.description); err != nil {
				return spec, fmt.Errorf("description: %w (line %d)", err, k.Line)
			}
		case "terms", "phrases", "negative":
			entries, err := parseEntries(k.Value, v)
			if err != nil {
				return spec, fmt.Errorf("%s: %w", k.Value, err)
			}
			lists[k.Value] = entries
		default:
			return spec, fmt.Errorf("unknown field %q (line %d); want description, terms, phrases or negative", k.Value, k.Line)
		}
	}
	if len(lists["terms"])+len(lists["phrases"]) == 0 {
		return spec, fmt.Errorf("no terms or phrases (line %d)", n.Line)
	}
	for _, e := range lists["negative"] {
		e.weight = -e.weight
		spec.entries = append(spec.entries, e)
	}
	spec.entries = append(append(lists["terms"], lists["phrases"]...), spec.entries...)
	// Two entries of a topic that normalize alike would silently add up.
	byKey := map[string]ruleEntry{}
	for _, e := range spec.entries {
		key := strings.Join(e.tokens, " ")
		if prev, ok := byKey[key]; ok {
			return spec, fmt.Errorf("%s: %q (line %d) and %s: %q (line %d) are the same after normalization (%q)",
				e.field, e.text, e.line, prev.field, prev.text, prev.line, key)
		}
		byKey[key] = e
	}
	return spec, nil
}

// parseEntries parses a mapping of term → weight.
func parseEntries(field string, n *yaml.Node) ([]ruleEntry, error) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil, nil
	}
	if n.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("must be a mapping of %s to weights, like {word: 1.5} (line %d)", field, n.Line)
	}
	var entries []ruleEntry
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], resolve(n.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("line %d: key must be a string", k.Line)
		}
		e := ruleEntry{field: field, line: k.Line, text: k.Value, tokens: tokenize(k.Value)}
		if err := decodeWeight(v, &e.weight); err != nil {
			return nil, fmt.Errorf("%q: %w (line %d)", k.Value, err, v.Line)
		}
		switch {
		case len(e.tokens) == 0:
			return nil, fmt.Errorf("%q: no letters or digits (line %d)", k.Value, k.Line)
		case field == "terms" && len(e.tokens) > 1:
			return nil, fmt.Errorf("%q: %d words after normalization (%q); list it under phrases (line %d)",
				k.Value, len(e.tokens), strings.Join(e.tokens, " "), k.Line)
		case field == "phrases" && len(e.tokens) == 1:
			return nil, fmt.Errorf("%q: one word; list it under terms (line %d)", k.Value, k.Line)
		}
		entries = append(entries, e)
	}
	return entries, nil
}

func resolve(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func decodeScalar(n *yaml.Node, v any) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("must be a scalar")
	}
	if err := n.Decode(v); err != nil {
		return fmt.Errorf("invalid value %q", n.Value)
	}
	return nil
}

func decodeWeight(n *yaml.Node, w *float64) error {
	if err := decodeScalar(n, w); err != nil {
		return fmt.Errorf("weight: %w", err)
	}
	if math.IsNaN(*w) || math.IsInf(*w, 0) || *w <= 0 {
		return fmt.Errorf("weight %v must be positive", *w)
	}
	return nil
}

// compile builds the lookup tables: every token of every entry gets an id;
// single-token entries are found through uni, multi-token ones through the
// phrases that start with their first token. Entries of different topics
// that normalize alike share one key.
func (r *Rules) compile(specs []topicSpec) {
	r.dict = map[string]int32{}
	keyOf := map[string]int32{}
	tokenID := func(t string) int32 {
		id, ok := r.dict[t]
		if !ok {
			id = int32(len(r.dict))
			r.dict[t] = id
			r.uni = append(r.uni, -1)
			r.phrases = append(r.phrases, nil)
		}
		return id
	}
	for ti, spec := range specs {
		r.topics = append(r.topics, spec.name)
		r.descriptions = append(r.descriptions, spec.description)
		for _, e := range spec.entries {
			ks := strings.Join(e.tokens, " ")
			k, ok := keyOf[ks]
			if !ok {
				k = int32(len(r.keys))
				keyOf[ks] = k
				r.keys = append(r.keys, nil)
				ids := make([]int32, len(e.tokens))
				for i, t := range e.tokens {
					ids[i] = tokenID(t)
				}
				if len(ids) == 1 {
					r.uni[ids[0]] = k
				} else {
					r.phrases[ids[0]] = append(r.phrases[ids[0]], phrase{key: k, rest: ids[1:]})
				}
			}
			r.keys[k] = append(r.keys[k], hit{topic: int32(ti), weight: e.weight})
		}
	}
	nkeys, ntopics := len(r.keys), len(r.topics)
	r.pool.New = func() any {
		return &ruleScratch{tok: text.NewTokenizer(tokenOptions), counts: make([]int32, nkeys), scores: make([]float64, ntopics)}
	}
}
