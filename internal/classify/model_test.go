package classify

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/newsflow/newsflow/internal/testutil"
)

// fixtureExamples is a small hand-written training set.
func fixtureExamples() []Example {
	ex := func(topic, title, content string) Example {
		return Example{Document: Document{Title: title, Content: content}, Topic: topic}
	}
	return []Example{
		ex("business", "Shares fall as profits slump", "The company said quarterly profit fell and investors sold its shares on the stock market."),
		ex("business", "Bank raises interest rates", "The central bank raised its interest rate to curb inflation, and the pound rose."),
		ex("business", "Retailer reports record sales", "Sales at the retailer rose, lifting profit; its chief executive expects growth."),
		ex("business", "Oil prices hit a high", "Crude oil prices rose on the market as investors feared supply cuts."),
		ex("business", "Carmaker agrees merger", "The carmaker agreed a merger with a rival; shareholders will vote on the deal."),
		ex("sports", "Striker scores twice in cup win", "The striker scored two goals as the club won the cup match at the stadium."),
		ex("sports", "Coach praises young squad", "The coach said his squad played well in the league match despite the defeat."),
		ex("sports", "Champion wins tennis final", "The champion won the final in straight sets to take the title."),
		ex("sports", "Goalkeeper injured before derby", "The goalkeeper has a hamstring injury and will miss the derby match."),
		ex("sports", "Record crowd at the stadium", "A record crowd watched the team win the league title at the stadium."),
		ex("technology", "New smartphone has faster chip", "The phone maker unveiled a smartphone with a faster chip and better camera."),
		ex("technology", "Software update fixes security flaw", "The software update fixes a flaw that let hackers take over computers."),
		ex("technology", "Broadband speeds double", "Internet users will get faster broadband as the network is upgraded."),
		ex("technology", "Games console sells out", "The games console sold out online as gamers rushed to buy the device."),
		ex("technology", "AI chatbot answers questions", "The chatbot uses artificial intelligence software to answer users online."),
	}
}

func TestTrainFixture(t *testing.T) {
	m, err := Train(fixtureExamples(), TrainOptions{MinCount: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Topics(); !slices.Equal(got, []string{"business", "sports", "technology"}) {
		t.Fatalf("topics %v", got)
	}
	for _, tc := range []struct {
		doc  Document
		want string
	}{
		{Document{Title: "Profits rise at the bank", Summary: "Investors cheered as the shares rose."}, "business"},
		{Document{Title: "Club wins the derby", Summary: "The striker scored in the final minute."}, "sports"},
		{Document{Title: "Hackers target smartphone users", Summary: "A flaw in the software lets hackers in."}, "technology"},
	} {
		got := m.Classify(tc.doc)
		if len(got) == 0 || got[0].Topic != tc.want {
			t.Errorf("%q: labels %v, want %s first", tc.doc.Title, got, tc.want)
		}
		sum := 0.0
		for _, l := range got {
			sum += l.Confidence
		}
		if sum > 1+1e-9 {
			t.Errorf("%q: confidences sum to %v", tc.doc.Title, sum)
		}
	}
	if got := m.Classify(Document{Title: "Zzyzx qwerty"}); got != nil {
		t.Errorf("unknown words: labels %v, want none", got)
	}
}

// TestTrainPosteriorByHand checks the smoothing, the title weight and the
// posterior against numbers worked out by hand.
func TestTrainPosteriorByHand(t *testing.T) {
	exs := []Example{
		{Document: Document{Title: "x", Content: "y y"}, Topic: "a"},
		{Document: Document{Title: "z", Content: "y"}, Topic: "b"},
	}
	m, err := Train(exs, TrainOptions{TitleWeight: 2, Alpha: 1, MinCount: 1, MinConfidence: 1e-9, MaxLabels: 2})
	if err != nil {
		t.Fatal(err)
	}
	// Counts: a: x 2, y 2 (total 4); b: z 2, y 1 (total 3); |V| = 3.
	// P(x|a) = 3/7, P(y|a) = 3/7, P(z|a) = 1/7;
	// P(x|b) = 1/6, P(y|b) = 2/6, P(z|b) = 3/6; P(a) = P(b) = 1/2.
	for _, tc := range []struct {
		doc    Document
		pa, pb float64 // unnormalized
	}{
		{Document{Content: "y x"}, 3.0 / 7 * 3.0 / 7, 1.0 / 6 * 2.0 / 6},
		{Document{Title: "z"}, math.Pow(1.0/7, 2), math.Pow(3.0/6, 2)},
		{Document{Title: "z", Summary: "w y", Content: "x"}, math.Pow(1.0/7, 2) * 3.0 / 7 * 3.0 / 7, math.Pow(3.0/6, 2) * 2.0 / 6 * 1.0 / 6},
	} {
		got := confidences(m, tc.doc)
		wa, wb := tc.pa/(tc.pa+tc.pb), tc.pb/(tc.pa+tc.pb)
		if math.Abs(got["a"]-wa) > 1e-12 || math.Abs(got["b"]-wb) > 1e-12 {
			t.Errorf("%+v: P(a) = %v, P(b) = %v; want %v, %v", tc.doc, got["a"], got["b"], wa, wb)
		}
	}
}

func TestTrainTitleWeight(t *testing.T) {
	exs := []Example{
		{Document: Document{Content: "alpha gamma"}, Topic: "a"},
		{Document: Document{Content: "beta gamma"}, Topic: "b"},
	}
	doc := Document{Title: "alpha", Content: "beta beta"}
	for _, tc := range []struct {
		weight float64
		want   string
	}{{1, "b"}, {3, "a"}} {
		m, err := Train(exs, TrainOptions{TitleWeight: tc.weight, MinCount: 1})
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Classify(doc); len(got) == 0 || got[0].Topic != tc.want {
			t.Errorf("title weight %v: labels %v, want %s first", tc.weight, got, tc.want)
		}
	}
}

func TestTrainBigrams(t *testing.T) {
	// Both topics have the same words; only their order tells them apart.
	exs := []Example{
		{Document: Document{Content: "new york city hall"}, Topic: "a"},
		{Document: Document{Content: "york new hall city"}, Topic: "b"},
	}
	doc := Document{Content: "new york"}
	m, err := Train(exs, TrainOptions{MinCount: 1, MinConfidence: 1e-9})
	if err != nil {
		t.Fatal(err)
	}
	if got := confidences(m, doc); !near(got["a"], 0.5) || !near(got["b"], 0.5) {
		t.Errorf("unigrams only: %v, want a tie", got)
	}
	m, err = Train(exs, TrainOptions{MinCount: 1, Bigrams: true, MinConfidence: 1e-9})
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Classify(doc); len(got) != 2 || got[0].Topic != "a" || got[0].Confidence < 0.6 {
		t.Errorf("with bigrams: %v, want a first", got)
	}
	if n := m.NumFeatures(); n != 4+6 {
		t.Errorf("%d features, want 4 unigrams and 6 bigrams", n)
	}
}

func TestTrainMinCount(t *testing.T) {
	exs := []Example{
		{Document: Document{Content: "common rare"}, Topic: "a"},
		{Document: Document{Content: "common common"}, Topic: "b"},
	}
	m, err := Train(exs, TrainOptions{MinCount: 2, Bigrams: true})
	if err != nil {
		t.Fatal(err)
	}
	// "rare" (1) goes, and with it "common rare"; "common common" (1) goes.
	if !slices.Equal(m.features, []string{"common"}) {
		t.Errorf("features %q, want [common]", m.features)
	}
}

func TestTrainErrors(t *testing.T) {
	two := fixtureExamples()[4:6]
	for _, tc := range []struct {
		name string
		exs  []Example
		opts TrainOptions
		want string
	}{
		{"no examples", nil, TrainOptions{}, "no training examples"},
		{"one topic", fixtureExamples()[:5], TrainOptions{}, "at least two topics"},
		{"no topic", append(slices.Clone(two), Example{Document: Document{Title: "x"}}), TrainOptions{}, "example 2 has no topic"},
		{"negative title weight", two, TrainOptions{TitleWeight: -1}, "title weight"},
		{"nan alpha", two, TrainOptions{Alpha: math.NaN()}, "alpha"},
		{"min confidence", two, TrainOptions{MinConfidence: 2}, "min confidence"},
		{"max labels", two, TrainOptions{MaxLabels: -1}, "max labels"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Train(tc.exs, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	if _, err := Train(nil, TrainOptions{}); !errors.Is(err, ErrNoExamples) {
		t.Errorf("no examples: error %v, want ErrNoExamples", err)
	}
}

func save(t *testing.T, m *Model) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := m.Save(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestModelSaveLoad(t *testing.T) {
	m, err := Train(fixtureExamples(), TrainOptions{Bigrams: true, MinCount: 1, TitleWeight: 2.5, MaxLabels: 2})
	if err != nil {
		t.Fatal(err)
	}
	b := save(t, m)
	dir := t.TempDir()
	plain := filepath.Join(dir, "model.json")
	if err := os.WriteFile(plain, b, 0o644); err != nil {
		t.Fatal(err)
	}
	packed := filepath.Join(dir, "model.json.gz")
	if err := os.WriteFile(packed, testutil.Gzip(t, b), 0o644); err != nil {
		t.Fatal(err)
	}
	docs := append(fixtureExamples(), Example{Document: Document{Title: "Bank hackers steal shares", Content: "the striker's phone"}})
	for _, path := range []string{plain, packed} {
		loaded, err := LoadModel(path)
		if err != nil {
			t.Fatal(err)
		}
		if again := save(t, loaded); !bytes.Equal(again, b) {
			t.Errorf("%s: saved again, the file differs", path)
		}
		if loaded.TrainOptions() != m.TrainOptions() {
			t.Errorf("%s: options %+v, want %+v", path, loaded.TrainOptions(), m.TrainOptions())
		}
		for _, ex := range docs {
			if got, want := loaded.Classify(ex.Document), m.Classify(ex.Document); !slices.Equal(got, want) {
				t.Errorf("%s: %q: labels %v, want %v", path, ex.Title, got, want)
			}
		}
	}
	if _, err := LoadModel(filepath.Join(dir, "missing.json")); err == nil {
		t.Error("missing file: no error")
	}
}

func TestTrainDeterministic(t *testing.T) {
	exs := fixtureExamples()
	first := save(t, mustTrain(t, exs, TrainOptions{Bigrams: true}))
	if again := save(t, mustTrain(t, exs, TrainOptions{Bigrams: true})); !bytes.Equal(first, again) {
		t.Fatal("two trainings on the same examples differ")
	}
	// Counts are sums of integers, so the order of the examples does not
	// matter either.
	rng := rand.New(rand.NewPCG(1, 2))
	for range 5 {
		shuffled := slices.Clone(exs)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		if got := save(t, mustTrain(t, shuffled, TrainOptions{Bigrams: true})); !bytes.Equal(first, got) {
			t.Fatal("training on shuffled examples gives a different file")
		}
	}
}

func mustTrain(t testing.TB, exs []Example, opts TrainOptions) *Model {
	t.Helper()
	m, err := Train(exs, opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestReadModelErrors(t *testing.T) {
	m := mustTrain(t, fixtureExamples(), TrainOptions{Bigrams: true, MinCount: 1})
	var good map[string]any
	if err := json.Unmarshal(save(t, m), &good); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		change func(f map[string]any)
		want   string
	}{
		{"format", func(f map[string]any) { f["format"] = "something-else" }, "not a newsflow topic model"},
		{"version", func(f map[string]any) { f["version"] = 2 }, "version 2"},
		{"unknown field", func(f map[string]any) { f["extra"] = 1 }, "unknown field"},
		{"one topic", func(f map[string]any) { f["topics"] = []string{"a"}; f["docs"] = []int{1} }, "topics"},
		{"unsorted topics", func(f map[string]any) { f["topics"] = []string{"sports", "business", "technology"} }, "not sorted"},
		{"docs", func(f map[string]any) { f["docs"] = []int{0, 0, 0} }, "no documents"},
		{"counts rows", func(f map[string]any) { f["counts"] = f["counts"].([]any)[1:] }, "count rows"},
		{"counts width", func(f map[string]any) { f["counts"].([]any)[0] = []float64{1} }, "has 1 counts"},
		{"negative count", func(f map[string]any) { f["counts"].([]any)[0] = []float64{-1, 0, 0} }, "count -1"},
		{"unsorted features", func(f map[string]any) {
			fs := f["features"].([]any)
			fs[0], fs[1] = fs[1], fs[0]
		}, "not sorted"},
		{"bigram without its tokens", func(f map[string]any) {
			fs := f["features"].([]any)
			fs[0] = "00 00" // sorts first
		}, "bigram"},
		{"alpha", func(f map[string]any) { f["options"].(map[string]any)["alpha"] = 0 }, "alpha"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var f map[string]any
			b, _ := json.Marshal(good)
			if err := json.Unmarshal(b, &f); err != nil {
				t.Fatal(err)
			}
			tc.change(f)
			b, _ = json.Marshal(f)
			_, err := ReadModel(bytes.NewReader(b))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	for _, bad := range []string{"", "{", "[]", "\x1f\x8bnot gzip"} {
		if _, err := ReadModel(strings.NewReader(bad)); err == nil {
			t.Errorf("ReadModel(%q): no error", bad)
		}
	}
}
