package story

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/internal/feed"
	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/internal/text"
	"github.com/newsflow/newsflow/operators/internal/features"
	"github.com/newsflow/newsflow/state/statetest"
)

// taskRecords returns the records of the articles topic for one
// repetition of the stream of BenchmarkStoryTask: the UCI headlines among
// the orx365 items (cleaned, as the articles operator cleans them), ids
// prefixed with the repetition and times shifted by rep·span, as the
// articles operator writes them: with features, or without (as before
// features existed).
func taskRecords(b *testing.B, stream []labelled, rep int, span int64, withFeatures bool) [][]byte {
	b.Helper()
	ext := features.NewExtractor()
	out := make([][]byte, 0, len(stream))
	for i, d := range stream {
		id := fmt.Sprintf("r%d-%s", rep, d.ID)
		pa := schema.ProcessedArticle{Article: schema.Article{ID: id, URL: "https://example.com/" + id, SourceID: fmt.Sprint("src", i%40),
			Source: fmt.Sprint("Source ", i%40), Authority: 0.5, Title: d.Title, Summary: d.Body,
			PublishedAt: d.Time + int64(rep)*span, FetchedAt: d.Time + int64(rep)*span + 60_000, Version: 1,
			Topics: []schema.Label{{Topic: "business", Confidence: 0.5}}}}
		if withFeatures {
			pa.Features = ext.Compute(pa.Title, pa.Summary)
		}
		v, err := json.Marshal(pa)
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

// BenchmarkStoryTask measures the CPU time of the single stories task per
// article: Process (decoding the record, near-copies, clustering, story
// aggregates) and, every 1000 articles, the Flush of a commit into a
// writer that discards it. The stream is the UCI headlines among the
// orx365 items (14,000 articles, titles and summaries), repeated with
// distinct ids, each repetition an hour after the previous one ended, so
// that stories close in the 72h window. records=features are records as
// the articles operator writes them, with the features of their text;
// records=plain are records without features (written before them), whose
// features the task computes. An op is one article.
func BenchmarkStoryTask(b *testing.B) {
	stream := withDistractors(b, loadLabelled(b, "uci_dev.ndjson"))
	for i := range stream {
		stream[i].Title, stream[i].Body = text.Clean(stream[i].Title, feed.MaxTitleBytes), text.Clean(stream[i].Body, feed.MaxSummaryBytes)
	}
	span := stream[len(stream)-1].Time - stream[0].Time + 3_600_000
	for _, c := range []struct {
		withFeatures bool
		model        string
	}{{true, ""}, {false, ""}, {true, "builtin"}} {
		withFeatures := c.withFeatures
		name := "records=features"
		if !withFeatures {
			name = "records=plain"
		}
		if c.model != "" {
			name += "/model=" + c.model
		}
		b.Run(name, func(b *testing.B) {
			op, err := New(OperatorOptions{Model: c.model}, 8, nil)
			if err != nil {
				b.Fatal(err)
			}
			tk, err := op.NewTask(engine.TaskContext{Operator: Name, Partition: engine.SingletonPartition})
			if err != nil {
				b.Fatal(err)
			}
			if err := tk.Restore(statetest.Open(b).Namespace("stories/0")); err != nil {
				b.Fatal(err)
			}
			var w discardWriter
			var recs [][]byte
			bytes := 0
			b.ResetTimer()
			for n := 0; n < b.N; n++ {
				if n%len(stream) == 0 {
					b.StopTimer()
					recs = taskRecords(b, stream, n/len(stream), span, withFeatures)
					b.StartTimer()
				}
				v := recs[n%len(stream)]
				bytes += len(v)
				if err := tk.Process(&engine.ProcessContext{}, &eventlog.Record{Value: v}); err != nil {
					b.Fatal(err)
				}
				if (n+1)%1000 == 0 {
					if err := tk.Flush(&w); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "articles/s")
			b.ReportMetric(float64(bytes)/float64(b.N), "record-bytes")
		})
	}
}
