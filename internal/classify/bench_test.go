package classify

import "testing"

// benchHeadline is a typical feed item: a headline and a one-sentence
// summary.
var benchHeadline = Document{
	Title:   "Central bank holds interest rates as inflation eases",
	Summary: "Policymakers signalled that cuts could come later in the year, sending shares higher and the pound lower against the dollar.",
}

// BenchmarkClassify measures Classify on a headline and summary, and on the
// full BBC News articles (title, summary and content), with the default
// rules and with Naive Bayes trained on BBC News.
func BenchmarkClassify(b *testing.B) {
	rules, err := LoadRules(rulesFile)
	if err != nil {
		b.Fatal(err)
	}
	bbc := loadBBC(b)
	model := mustTrain(b, examples(bbc), TrainOptions{})
	bigrams := mustTrain(b, examples(bbc), TrainOptions{Bigrams: true})
	for _, c := range []struct {
		name string
		c    Classifier
	}{{"rules", rules}, {"model", model}, {"model-bigrams", bigrams}} {
		b.Run(c.name+"/headline", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c.c.Classify(benchHeadline)
			}
		})
		b.Run(c.name+"/article", func(b *testing.B) {
			b.ReportAllocs()
			bytes := 0
			for _, ex := range bbc {
				bytes += len(ex.Title) + len(ex.Summary) + len(ex.Content)
			}
			b.SetBytes(int64(bytes / len(bbc)))
			i := 0
			for b.Loop() {
				c.c.Classify(bbc[i%len(bbc)].Document)
				i++
			}
		})
	}
}

// BenchmarkTrain measures training Naive Bayes on all of BBC News.
func BenchmarkTrain(b *testing.B) {
	exs := examples(loadBBC(b))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Train(exs, TrainOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}
