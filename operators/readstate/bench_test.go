package readstate

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/enginetest"
	"github.com/newsflow/newsflow/internal/meta"
	"github.com/newsflow/newsflow/operators/story"
	"github.com/newsflow/newsflow/state"
)

// BenchmarkUnreadCounts counts a reader's unread articles over 20,000
// stories of 5 articles (the story view at about 100,000 articles a day)
// with 1,000 article marks, 100 read stories and everything read up to the
// middle of the day: what /api/v1/me/unread does per request, less the
// reads of the stories a watermark cuts through (counted in
// detail_loads).
func BenchmarkUnreadCounts(b *testing.B) {
	ctx := context.Background()
	s := newStore(b)
	const stories, per = 20000, 5
	heads := make([]*story.Story, stories)
	details := make(map[string]*story.Detail, stories)
	for i := range heads {
		first := int64(i) * 4000 // one story every 4 s over a day
		st := &story.Story{ID: fmt.Sprintf("s%d", i), Articles: per, FirstSeen: first, LastSeen: first + 600_000,
			Sources: []story.SourceCount{{SourceID: fmt.Sprintf("src%d", i%50), Articles: per}},
			Topics:  []story.Label{{Topic: fmt.Sprintf("t%d", i%12)}}}
		d := &story.Detail{Story: *st}
		for k := range per {
			d.Articles = append(d.Articles, story.ArticleRecord{Article: story.Article{ID: fmt.Sprintf("a%d-%d", i, k), SourceID: st.Sources[0].SourceID, Published: first + int64(k)*150_000}})
		}
		heads[i], details[st.ID] = st, d
	}
	for i := 0; i < 1000; i++ {
		d := details[fmt.Sprintf("s%d", i*19)]
		if err := s.MarkArticles(ctx, "u", true, ArticleOf(d.Articles[0].Article, d.ID)); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; i < 100; i++ {
		if err := s.MarkScope(ctx, "u", Scope{Kind: ScopeStory, Value: fmt.Sprintf("s%d", i*7)}, heads[i*7].LastSeen); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.MarkScope(ctx, "u", Scope{Kind: ScopeAll}, int64(stories/2)*4000); err != nil {
		b.Fatal(err)
	}
	loads := 0
	b.ResetTimer()
	for b.Loop() {
		st, err := s.Load(ctx, "u")
		if err != nil {
			b.Fatal(err)
		}
		total := 0
		for _, h := range heads {
			n, _, err := st.Unread(h, func() (*story.Detail, error) { loads++; return details[h.ID], nil })
			if err != nil {
				b.Fatal(err)
			}
			total += n
		}
		if total == 0 || total >= stories*per {
			b.Fatalf("%d unread", total)
		}
	}
	b.ReportMetric(float64(loads)/float64(b.N), "detail_loads/op")
}

// BenchmarkMarkArticles marks 100 articles read for one reader per op, in
// parallel, each op a reader not yet marked until b.N readers (run with
// -benchtime 1000000x for a million readers with 100 marks each):
// through the readstate operator (one action on the readers' topic,
// synced before it is acknowledged as the embedded log does by default,
// applied by the engine's default options over 8 partitions), and through
// the metadata store as releases before it did (one durable write per
// article, on a single node). It reports marks/s, the p99 latency of a
// request and the state on disk per reader.
func BenchmarkMarkArticles(b *testing.B) {
	arts := make([]Article, 100)
	for i := range arts {
		arts[i] = Article{ID: fmt.Sprintf("article-%03d", i), StoryID: "s", SourceID: "src", Published: int64(i)}
	}
	run := func(b *testing.B, s *Store, db *pebble.DB) {
		var n atomic.Int64
		var mu sync.Mutex
		var lat []time.Duration
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			var mine []time.Duration
			for pb.Next() {
				t0 := time.Now()
				if err := s.MarkArticles(context.Background(), fmt.Sprint("user-", n.Add(1)), true, arts...); err != nil {
					b.Error(err)
					return
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
		b.StopTimer()
		b.ReportMetric(float64(b.N*len(arts))/b.Elapsed().Seconds(), "marks/s")
		slices.Sort(lat)
		if len(lat) > 0 {
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99_ms")
		}
		if err := db.Flush(); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(db.Metrics().DiskSpaceUsage())/float64(b.N), "disk_B/reader")
	}
	b.Run("operator", func(b *testing.B) {
		r := enginetest.NewDurable(b, map[string]int32{Topic: 8})
		op := NewOperator(8, r.Log)
		opts := engine.DefaultOptions()
		opts.Partitions = 8
		r.Start(opts, op)
		run(b, op.Store(meta.NewLocal(r.DB), nil), r.DB.Pebble())
	})
	b.Run("metadata", func(b *testing.B) {
		db, err := state.Open(b.TempDir(), state.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		run(b, New(meta.NewLocal(db), nil), db.Pebble())
	})
}
