package classify

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// testRules is a small rules file; its weights make the expected scores easy
// to compute by hand.
const testRules = `
version: 1
min_confidence: 0.01
max_labels: 5
title_weight: 3
summary_weight: 2
content_weight: 1
prior: 2
topics:
  finance:
    description: Money
    terms: {bank: 1, profit: 2, rate: 1}
    phrases: {"interest rate": 3, "central bank": 2}
    negative: {"river bank": 1.5}
  football:
    terms: {goal: 2, striker: 3, club: 1}
    phrases: {"world cup": 3}
  space:
    terms: {rocket: 2, orbit: 2, star: 1}
    negative: {"star striker": 1, "football star": 1}
`

func mustParse(t *testing.T, src string) *Rules {
	t.Helper()
	r, err := ParseRules([]byte(src))
	if err != nil {
		t.Fatalf("ParseRules: %v", err)
	}
	return r
}

// confidences returns topic → confidence of c's labels for d.
func confidences(c Classifier, d Document) map[string]float64 {
	m := map[string]float64{}
	for _, l := range c.Classify(d) {
		m[l.Topic] = l.Confidence
	}
	return m
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-12 }

func TestRulesScoreFormula(t *testing.T) {
	r := mustParse(t, testRules)
	for _, tc := range []struct {
		name   string
		doc    Document
		scores map[string]float64 // expected s_t before normalization
	}{
		{"one title term", Document{Title: "Record profit"}, map[string]float64{"finance": 2 * 3}},
		{"one summary term", Document{Summary: "record profit"}, map[string]float64{"finance": 2 * 2}},
		{"one content term", Document{Content: "record profit"}, map[string]float64{"finance": 2 * 1}},
		{
			// n matches of an entry in one field count 1 + ln n times.
			"repeats are sublinear", Document{Content: "goal, goal and another goal"},
			map[string]float64{"football": 2 * (1 + math.Log(3))},
		},
		{
			"fields add up", Document{Title: "Striker", Content: "striker"},
			map[string]float64{"football": 3*3 + 3*1},
		},
		{
			// The phrase and the terms inside it both count.
			"phrase and its terms", Document{Title: "Interest rate rise"},
			map[string]float64{"finance": (3 + 1) * 3},
		},
		{
			"phrase needs adjacent tokens", Document{Title: "Interest in the rate"},
			map[string]float64{"finance": 1 * 3},
		},
		{
			"phrase across punctuation", Document{Content: "the central-bank's decision"},
			map[string]float64{"finance": 2 + 1},
		},
		{
			// "river bank" cancels bank (1) and more; the score stays ≥ 0.
			"negative phrase", Document{Title: "Flood at the river bank", Content: "profit"},
			map[string]float64{"finance": 1*3 - 1.5*3 + 2},
		},
		{
			"negative cannot go below zero", Document{Title: "Football star striker", Content: "rocket"},
			// space: star 3 - "star striker" 3 - "football star" 3 + rocket 2 < 0.
			map[string]float64{"football": 3 * 3, "space": 0},
		},
		{
			"mixed topics", Document{Title: "Club profit", Summary: "a rocket"},
			map[string]float64{"finance": 2 * 3, "football": 1 * 3, "space": 2 * 2},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			total := 0.0
			for _, s := range tc.scores {
				total += s
			}
			got := confidences(r, tc.doc)
			for topic, s := range tc.scores {
				want := s / (2 + total)
				if s == 0 {
					if _, ok := got[topic]; ok {
						t.Errorf("%s: got label with confidence %v, want none", topic, got[topic])
					}
					continue
				}
				if !near(got[topic], want) {
					t.Errorf("%s: confidence %v, want %v (score %v of %v)", topic, got[topic], want, s, total)
				}
			}
			for topic := range got {
				if _, ok := tc.scores[topic]; !ok {
					t.Errorf("unexpected label %s (%v)", topic, got[topic])
				}
			}
		})
	}
}

func TestRulesNormalization(t *testing.T) {
	r := mustParse(t, testRules)
	for _, title := range []string{
		"PROFITS", "profit's", "Profit’s", "«profit»", "profits!", "\tprofit\n", "PROFİTS",
	} {
		got := confidences(r, Document{Title: title})
		if want := 6.0 / 8; !near(got["finance"], want) {
			t.Errorf("%q: finance %v, want %v", title, got["finance"], want)
		}
	}
	if got := r.Classify(Document{Title: "profitable nonprofit"}); got != nil {
		t.Errorf("words containing a term matched: %v", got)
	}
}

func TestRulesTitleWeighsMore(t *testing.T) {
	r := mustParse(t, testRules)
	// The same evidence for two topics, one in the title, one in the
	// content: the title's topic wins.
	got := r.Classify(Document{Title: "Rocket", Content: "goal"})
	if len(got) != 2 || got[0].Topic != "space" || got[1].Topic != "football" {
		t.Fatalf("labels %v, want space before football", got)
	}
	got = r.Classify(Document{Title: "Goal", Content: "rocket"})
	if len(got) != 2 || got[0].Topic != "football" {
		t.Fatalf("labels %v, want football first", got)
	}
}

func TestRulesLimits(t *testing.T) {
	doc := Document{Title: "Striker", Summary: "profit", Content: "rocket"}
	// Scores: football 9, finance 4, space 2; total 15, prior 2.
	all := []Label{{"football", 9.0 / 17}, {"finance", 4.0 / 17}, {"space", 2.0 / 17}}
	for _, tc := range []struct {
		min  float64
		max  int
		want []Label
	}{
		{0.01, 5, all},
		{0.01, 2, all[:2]},
		{0.01, 1, all[:1]},
		{4.0 / 17, 5, all[:2]}, // the minimum is inclusive
		{0.3, 5, all[:1]},
		{0.6, 5, nil},
	} {
		src := strings.Replace(testRules, "min_confidence: 0.01", "min_confidence: "+ftoa(tc.min), 1)
		src = strings.Replace(src, "max_labels: 5", "max_labels: "+itoa(tc.max), 1)
		got := mustParse(t, src).Classify(doc)
		if !labelsNear(got, tc.want) {
			t.Errorf("min %v max %d: labels %v, want %v", tc.min, tc.max, got, tc.want)
		}
	}
}

func TestRulesTiesSortByTopic(t *testing.T) {
	r := mustParse(t, testRules)
	got := r.Classify(Document{Title: "rocket goal"})
	want := []Label{{"football", 6.0 / 14}, {"space", 6.0 / 14}}
	if !labelsNear(got, want) {
		t.Fatalf("labels %v, want %v", got, want)
	}
}

func TestRulesNoEvidence(t *testing.T) {
	r := mustParse(t, testRules)
	for _, d := range []Document{{}, {Title: "Nothing to see here"}, {Content: "river bank"}} {
		if got := r.Classify(d); got != nil {
			t.Errorf("%+v: labels %v, want none", d, got)
		}
	}
}

func TestRulesDefaults(t *testing.T) {
	r := mustParse(t, "topics:\n  a:\n    terms: {x: 1}\n  b:\n    terms: {y: 1}\n")
	if r.limits.minConfidence != DefaultMinConfidence || r.limits.maxLabels != DefaultMaxLabels {
		t.Errorf("limits %+v, want the defaults", r.limits)
	}
	// One title match of weight 1: 1×3 / (3 + 3).
	if got := confidences(r, Document{Title: "x"}); !near(got["a"], 0.5) {
		t.Errorf("confidence %v, want 0.5", got["a"])
	}
	if got := r.Topics(); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("topics %v", got)
	}
}

func TestParseRulesErrors(t *testing.T) {
	topic := func(body string) string { return "topics:\n  sports:\n" + body }
	for _, tc := range []struct {
		name, src string
		want      []string // substrings of the error
	}{
		{"syntax", "topics: [", []string{"rules:"}},
		{"empty", "", []string{"empty document"}},
		{"not a mapping", "- a\n- b\n", []string{"top level must be a mapping"}},
		{"no topics", "min_confidence: 0.2\n", []string{"no topics"}},
		{"empty topics", "topics: {}\n", []string{"no topics"}},
		{"unknown setting", "min_confidense: 0.2\n" + topic("    terms: {goal: 1}\n"), []string{"min_confidense", "unknown field", "line 1"}},
		{"version", "version: 2\n" + topic("    terms: {goal: 1}\n"), []string{"version", "unsupported version 2"}},
		{"min confidence range", "min_confidence: 1.5\n" + topic("    terms: {goal: 1}\n"), []string{"min_confidence", "not in [0, 1]"}},
		{"max labels", "max_labels: 0\n" + topic("    terms: {goal: 1}\n"), []string{"max_labels", "must be positive"}},
		{"field weight", "title_weight: -1\n" + topic("    terms: {goal: 1}\n"), []string{"title_weight", "must be positive"}},
		{"prior", "prior: -1\n" + topic("    terms: {goal: 1}\n"), []string{"prior", "not negative"}},
		{"setting twice", "prior: 1\nprior: 2\n" + topic("    terms: {goal: 1}\n"), []string{"prior set twice"}},
		{"topics not a mapping", "topics: [a, b]\n", []string{"topics: must be a mapping"}},
		{"bad topic name", "topics:\n  Sports News:\n    terms: {goal: 1}\n", []string{`topic "Sports News"`, "lower-case"}},
		{"topic twice", topic("    terms: {goal: 1}\n") + "  sports:\n    terms: {ball: 1}\n", []string{`topic "sports"`, "defined twice"}},
		{"null topic", topic(""), []string{`topic "sports"`, "no terms or phrases"}},
		{"topic not a mapping", topic("    - goal\n"), []string{`topic "sports"`, "must be a mapping"}},
		{"only negatives", topic("    negative: {goal: 1}\n"), []string{`topic "sports"`, "no terms or phrases"}},
		{"empty terms", topic("    terms: {}\n"), []string{`topic "sports"`, "no terms or phrases"}},
		{"unknown topic field", topic("    terms: {goal: 1}\n    keywords: {ball: 1}\n"), []string{`topic "sports"`, `unknown field "keywords"`, "line 4"}},
		{"field twice", topic("    terms: {goal: 1}\n    terms: {ball: 1}\n"), []string{`topic "sports"`, "terms: set twice"}},
		{"terms as a list", topic("    terms: [goal, ball]\n"), []string{`topic "sports"`, "terms: must be a mapping"}},
		{"zero weight", topic("    terms: {goal: 0}\n"), []string{`topic "sports"`, `terms: "goal"`, "weight 0 must be positive"}},
		{"negative weight", topic("    terms: {goal: 1}\n    phrases: {\"world cup\": -2}\n"), []string{`topic "sports"`, `phrases: "world cup"`, "must be positive"}},
		{"negative entry weight", topic("    terms: {goal: 1}\n    negative: {own goal: 0}\n"), []string{`topic "sports"`, `negative: "own goal"`, "must be positive"}},
		{"nan weight", topic("    terms: {goal: .nan}\n"), []string{`topic "sports"`, `terms: "goal"`, "must be positive"}},
		{"infinite weight", topic("    terms: {goal: .inf}\n"), []string{`topic "sports"`, `terms: "goal"`, "must be positive"}},
		{"text weight", topic("    terms: {goal: high}\n"), []string{`topic "sports"`, `terms: "goal"`, `invalid value "high"`}},
		{"missing weight", topic("    terms: {goal: }\n"), []string{`topic "sports"`, `terms: "goal"`}},
		{"term of two words", topic("    terms: {world cup: 1}\n"), []string{`topic "sports"`, `terms: "world cup"`, "list it under phrases"}},
		{"hyphenated term", topic("    terms: {e-sports: 1}\n"), []string{`terms: "e-sports"`, `"e sport"`, "list it under phrases"}},
		{"phrase of one word", topic("    terms: {goal: 1}\n    phrases: {football: 1}\n"), []string{`topic "sports"`, `phrases: "football"`, "list it under terms"}},
		{"no letters", topic("    terms: {\"--\": 1}\n"), []string{`topic "sports"`, `terms: "--"`, "no letters or digits"}},
		{"same after normalization", topic("    terms: {goal: 1, Goals: 2}\n"), []string{`topic "sports"`, `"Goals"`, `"goal"`, "same after normalization"}},
		{"term and negative alike", topic("    terms: {goal: 1}\n    negative: {goals: 1}\n"), []string{`negative: "goals"`, `terms: "goal"`, "same after normalization"}},
		{"description not text", topic("    description: {a: b}\n    terms: {goal: 1}\n"), []string{`topic "sports"`, "description"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseRules([]byte(tc.src))
			if err == nil {
				t.Fatalf("no error; topics %v", r.Topics())
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestParseRulesAcceptsAliasesAndBlockStyle(t *testing.T) {
	r := mustParse(t, `
topics:
  a:
    terms: &shared
      alpha: 1
      beta: 2
  b:
    terms: *shared
    negative:
      gamma delta: 1
`)
	if got := confidences(r, Document{Title: "beta"}); !near(got["a"], 6.0/15) || !near(got["b"], 6.0/15) {
		t.Errorf("confidences %v", got)
	}
}

func TestLoadRules(t *testing.T) {
	if _, err := LoadRules("testdata/does-not-exist.yaml"); err == nil || !strings.Contains(err.Error(), "load rules") {
		t.Errorf("missing file: error %v", err)
	}
}

func labelsNear(got, want []Label) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i].Topic != want[i].Topic || !near(got[i].Confidence, want[i].Confidence) {
			return false
		}
	}
	return true
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
func itoa(i int) string     { return strconv.Itoa(i) }
