package readstate

import (
	"context"
	"fmt"
	"testing"

	"github.com/newsflow/newsflow/engine"
	"github.com/newsflow/newsflow/engine/enginetest"
	"github.com/newsflow/newsflow/internal/meta"
)

// BenchmarkLoad reads one reader's state (20 marks, 2 stars), as every
// logged-in feed, story list and story request does, in parallel: through
// the readstate operator and through the metadata store.
func BenchmarkLoad(b *testing.B) {
	fill := func(b *testing.B, s *Store) {
		var arts []Article
		for i := range 20 {
			arts = append(arts, Article{ID: fmt.Sprint("a", i), StoryID: "s", Published: int64(i)})
		}
		if err := s.MarkArticles(context.Background(), "u", true, arts...); err != nil {
			b.Fatal(err)
		}
		for _, a := range arts[:2] {
			if _, err := s.SetStar(context.Background(), "u", a, true); err != nil {
				b.Fatal(err)
			}
		}
	}
	run := func(b *testing.B, s *Store) {
		fill(b, s)
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				st, err := s.Load(context.Background(), "u")
				if err != nil || len(st.marks) != 20 {
					b.Error(err)
					return
				}
			}
		})
	}
	b.Run("operator", func(b *testing.B) {
		r := enginetest.New(b, map[string]int32{Topic: 8})
		op := NewOperator(8, r.Log)
		opts := engine.DefaultOptions()
		opts.Partitions = 8
		r.Start(opts, op)
		run(b, op.Store(meta.NewLocal(r.DB), nil))
	})
	b.Run("metadata", func(b *testing.B) {
		s, _ := newMetaStore(b)
		run(b, s)
	})
}
