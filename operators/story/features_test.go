package story

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/operators/internal/features"
	"github.com/newsflow/newsflow/state/statetest"
)

// withEdits returns the stream with edits: every 97th article comes again
// 20 articles later with a new title (version 2), and every 89th again
// unchanged.
func withEdits(stream []Article) []Article {
	var out []Article
	later := map[int][]Article{}
	for i, a := range stream {
		out = append(out, a)
		out = append(out, later[i]...)
		if i%97 == 0 {
			e := a
			e.Title, e.Version = "UPDATE 1-"+a.Title+" (adds detail)", 2
			later[i+20] = append(later[i+20], e)
		}
		if i%89 == 0 {
			later[i+5] = append(later[i+5], a)
		}
	}
	return out
}

// record returns the article's record on the articles topic: with the
// features the articles operator computes, or without features, as
// records written before them.
func record(t testing.TB, a Article, ext *features.Extractor) []byte {
	t.Helper()
	pa := schema.ProcessedArticle{Article: schema.Article{ID: a.ID, URL: a.URL, SourceID: a.SourceID, Source: a.Source,
		Authority: a.Authority, Title: a.Title, Summary: a.Summary, Content: "content the story stage skips",
		ImageURL: a.ImageURL, Topics: a.Topics, PublishedAt: a.Published, FetchedAt: a.Published + 60_000, Version: a.Version}}
	if ext != nil {
		pa.Features = ext.Compute(a.Title, a.Summary)
	}
	v, err := json.Marshal(pa)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestFeaturesUpstreamSameStories runs two builders over real streams,
// with edits and repeats: one given the features decoded from records the
// articles operator writes, the other computing them from the text of
// records without features. Every article must get the same result (story,
// near-copy, merges), and the state both commit every 500 articles must be
// the same, byte for byte.
func TestFeaturesUpstreamSameStories(t *testing.T) {
	for name, stream := range featureStreams(t) {
		t.Run(name, func(t *testing.T) {
			stream = withEdits(stream)
			ext := features.NewExtractor()
			up, local := newTestBuilder(t, Options{}), newTestBuilder(t, Options{})
			db := statetest.Open(t)
			nsUp, nsLocal := db.Namespace("stories/up"), db.Namespace("stories/local")
			commit := func() {
				statetest.Commit(t, builderFlusher{up, nsUp}, nsUp)
				statetest.Commit(t, builderFlusher{local, nsLocal}, nsLocal)
			}
			dUp, dLocal := new(inputDecoder), new(inputDecoder)
			var newStories, dups, merges, updates int
			for i, a := range stream {
				inUp, err := dUp.decode(record(t, a, ext))
				if err != nil {
					t.Fatal(err)
				}
				plain := record(t, a, nil)
				inLocal, err := dLocal.decode(plain)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(inUp.forward, plain) || !bytes.Equal(inLocal.forward, plain) {
					t.Fatalf("article %d: passed on as\n%s\n%s, want\n%s", i, inUp.forward, inLocal.forward, plain)
				}
				if inUp.features == nil || inLocal.features != nil {
					t.Fatalf("article %d: features %v upstream, %v in a record without", i, inUp.features != nil, inLocal.features != nil)
				}
				if !reflect.DeepEqual(inUp.Article, a) || !reflect.DeepEqual(inLocal.Article, a) {
					t.Fatalf("article %d decoded as\n%+v\n%+v, want\n%+v", i, inUp.Article, inLocal.Article, a)
				}
				rUp, err := up.ApplyFeatures(inUp.Article, inUp.features)
				if err != nil {
					t.Fatal(err)
				}
				rLocal, err := local.ApplyFeatures(inLocal.Article, nil)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(rUp, rLocal) {
					t.Fatalf("article %d (%s): %+v with the record's features, %+v computing them", i, a.ID, rUp, rLocal)
				}
				switch {
				case rUp.Update:
					updates++
				case rUp.NewStory:
					newStories++
				case rUp.DuplicateOf != "":
					dups++
				}
				merges += len(rUp.Merged)
				if (i+1)%500 == 0 {
					commit()
				}
			}
			commit()
			a, b := dump(t, nsUp), dump(t, nsLocal)
			if !reflect.DeepEqual(a, b) {
				t.Errorf("committed state differs: %d keys with the record's features, %d computing them", len(a), len(b))
			}
			t.Logf("%d articles: %d stories, %d near-copies, %d merges, %d edits or repeats: the same both ways; state of %d keys the same",
				len(stream), newStories, dups, merges, updates, len(a))
		})
	}
}

// TestTaskMixedRecords runs the stories task over records with features,
// without them, and with features of another version, mixed, and over the
// same records all without features: both commit the same state.
func TestTaskMixedRecords(t *testing.T) {
	stream := withEdits(featureStreams(t)["uci+orx365"])
	ext := features.NewExtractor()
	run := func(mixed bool) map[string]string {
		op, err := New(OperatorOptions{}, 8, nil)
		if err != nil {
			t.Fatal(err)
		}
		tk, err := op.NewTask(engine.TaskContext{Operator: Name, Partition: engine.SingletonPartition})
		if err != nil {
			t.Fatal(err)
		}
		ns := statetest.Open(t).Namespace("stories/0")
		if err := tk.Restore(ns); err != nil {
			t.Fatal(err)
		}
		for i, a := range stream {
			var v []byte
			switch {
			case !mixed || i%3 == 1:
				v = record(t, a, nil)
			case i%3 == 0:
				v = record(t, a, ext)
			default:
				v = record(t, a, ext)
				version := fmt.Appendf(nil, `"features":{"v":%d,`, features.Version)
				if !bytes.Contains(v, version) {
					t.Fatalf("no %s in %s", version, v)
				}
				v = bytes.Replace(v, version, []byte(`"features":{"v":9999,`), 1)
			}
			if err := tk.Process(&engine.ProcessContext{}, &eventlog.Record{Value: v}); err != nil {
				t.Fatalf("article %d: %v", i, err)
			}
			if (i+1)%500 == 0 {
				statetest.Commit(t, tk, ns)
			}
		}
		statetest.Commit(t, tk, ns)
		return dump(t, ns)
	}
	if mixed, plain := run(true), run(false); !reflect.DeepEqual(mixed, plain) {
		t.Errorf("state differs: %d keys from mixed records, %d from records without features", len(mixed), len(plain))
	}
}
