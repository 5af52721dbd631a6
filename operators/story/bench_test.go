package story

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/newsflow/newsflow/state/statetest"
)

// Shape of the synthetic headlines of BenchmarkAssign.
const (
	benchVocab    = 50_000 // Zipf-distributed common words
	benchZipfS    = 1.1    // skew; with benchZipfV the top word is ~1% of words
	benchZipfV    = 20
	benchEntities = 3 // rare words per story (names, places), in no other story
	// benchBuildSpan is the event time the open stories' articles span;
	// the articles measured come after it, inside the 72h window of the
	// oldest story, so no story expires during a run.
	benchBuildSpan = 60 * time.Hour
	// benchRecent is the share of stories, the newest, that follow-ups
	// of BenchmarkAssign join: follow-ups come hours, not days, after
	// the story's last article.
	benchRecent = 0.1
	// assignMinSamples is the fewest assignments BenchmarkAssign's
	// percentiles are taken from.
	assignMinSamples = 2000
	// assignCommit is how many assignments BenchmarkAssign makes between
	// two Persists (a commit of the stories task), which empty the
	// clusterer's dirty sets; Persist is not part of the latency.
	assignCommit = 500
)

// benchWord is word i of the common vocabulary: three consonant-vowel
// syllables, so the stemmer leaves it alone and no two words fold together.
func benchWord(i int) string {
	const cons, vows = "bcdfghjklmnprtvz", "aeiou"
	var b [6]byte
	for k := 2; k >= 0; k-- {
		syl := i % (len(cons) * len(vows))
		i /= len(cons) * len(vows)
		b[2*k], b[2*k+1] = cons[syl/len(vows)], vows[syl%len(vows)]
	}
	return string(b[:])
}

// benchEntity is rare word k of story s: an "x" (no common word has one)
// and the number in letters.
func benchEntity(s, k int) string {
	n := s*benchEntities + k
	b := []byte{'x'}
	for {
		b = append(b, byte('a'+n%26))
		n /= 26
		if n == 0 {
			return string(b)
		}
	}
}

// benchVocabWords is the vocabulary; the few words that are stop words
// get a "q", which no other word has.
var benchVocabWords = sync.OnceValue(func() []string {
	w := make([]string, benchVocab)
	for i := range w {
		w[i] = benchWord(i)
		if stopWords.Has(w[i]) {
			w[i] += "q"
		}
	}
	return w
})

// headlines generates synthetic articles. Story s's first article is a
// title of 2 of its rare words and 6 common ones, and a summary of its
// other rare word, 1 of the title's, and 16 common words; a follow-up
// repeats the rare words and a few of the common ones, with new common
// words around them.
type headlines struct {
	rng  *rand.Rand
	zipf *rand.Zipf
}

func newHeadlines(seed uint64) *headlines {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	return &headlines{rng: rng, zipf: rand.NewZipf(rng, benchZipfS, benchZipfV, benchVocab-1)}
}

func (h *headlines) common(dst []string, n int) []string {
	vocab := benchVocabWords()
	for range n {
		dst = append(dst, vocab[h.zipf.Uint64()])
	}
	return dst
}

// storyWords returns the words of story s's first article, the same for
// every call with the same s.
func storyWords(s int) (title, summary []string) {
	g := newHeadlines(uint64(s) + 1)
	title = g.common([]string{benchEntity(s, 0), benchEntity(s, 1)}, 6)
	summary = g.common([]string{benchEntity(s, 2), benchEntity(s, 0)}, 16)
	return title, summary
}

// followUp returns a new article about story s.
func (h *headlines) followUp(s int) Text {
	t, sum := storyWords(s)
	title := h.common(append([]string{}, t[:4]...), 4)
	summary := h.common(append([]string{}, sum[:5]...), 13)
	h.rng.Shuffle(len(title), func(i, j int) { title[i], title[j] = title[j], title[i] })
	return Text{Title: strings.Join(title, " "), Body: strings.Join(summary, " ")}
}

// first returns the first article of story s.
func first(s int) Text {
	t, sum := storyWords(s)
	return Text{Title: strings.Join(t, " "), Body: strings.Join(sum, " ")}
}

// buildOpen returns a clusterer holding open stories, each founded by one
// article, a quarter of them joined by a follow-up ten minutes later (so
// centroids have from ~24 to 64 terms), with event times spread evenly
// over benchBuildSpan from start.
//
// It founds the stories directly instead of through Assign: an article of
// new rare words would found a story there too, and searching for a story
// to join first would make building a million stories take as long as a
// million assignments. Follow-ups go through Join, as near-duplicates do.
func buildOpen(b *testing.B, open int, start int64) *Clusterer {
	b.Helper()
	c, err := NewClusterer(ClusterOptions{})
	if err != nil {
		b.Fatal(err)
	}
	h := newHeadlines(1)
	step := benchBuildSpan.Milliseconds() / int64(open)
	for s := range open {
		t := start + int64(s)*step
		v := c.Vectorize(first(s))
		num := c.newStory()
		c.add(c.open.get(num), v, t)
		if num != uint64(s) {
			b.Fatalf("story %d numbered %d", s, num)
		}
		if s%4 == 0 {
			t += (10 * time.Minute).Milliseconds()
			if !c.Join(num, c.Vectorize(h.followUp(s)), t) {
				b.Fatalf("story %d closed while building", s)
			}
		}
	}
	if c.Open() != open {
		b.Fatalf("%d open stories, want %d", c.Open(), open)
	}
	return c
}

// BenchmarkAssign measures the latency of assigning one fresh article
// (Vectorize + Assign) with 100,000 and 1,000,000 open stories (see
// buildOpen). The clusterer's changes are staged (Persist, into a writer
// that discards them) after building and every 500 assignments, as the
// stories task commits. Half the articles are follow-ups of one of the
// newest 10% of stories (the last 6 hours), half found new stories; event
// times advance 100 ms per article, after all the stories' articles.
//
// Metrics: p50-us and p99-us of the assignment latency (target p99 <=
// 1 ms) over at least 2000 assignments, joined-% (articles that joined an
// existing story), scored/article (open stories whose similarity Assign
// computed), open-stories and heap-MB (live heap after a GC) after
// building, and build-s. ns/op also counts generating the article's text.
// open=1000000 takes about a minute to build and 1.3 GB of heap; it is
// skipped with -short.
func BenchmarkAssign(b *testing.B) {
	for _, open := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("open=%d", open), func(b *testing.B) {
			if open > 100_000 && testing.Short() {
				b.Skip("-short: skipping the build of 1,000,000 stories")
			}
			start := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
			t0 := time.Now()
			c := buildOpen(b, open, start)
			build := time.Since(t0)
			// Stage the build as one commit would, so that the dirty sets
			// start empty.
			var w discardWriter
			if err := c.Persist(&w, nil); err != nil {
				b.Fatal(err)
			}
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)

			h := newHeadlines(2)
			now := start + benchBuildSpan.Milliseconds()
			recent := int(float64(open) * (1 - benchRecent))
			var lat []time.Duration
			joined, scored := 0, 0
			assign := func() {
				var text Text
				if h.rng.IntN(2) == 0 {
					text = h.followUp(recent + h.rng.IntN(open-recent))
				} else {
					text = first(open + len(lat)) // a story of its own
				}
				now += 100
				text.Time = now
				t := time.Now()
				a := c.Assign(c.Vectorize(text), now)
				lat = append(lat, time.Since(t))
				scored += len(c.cands)
				if !a.New {
					joined++
				}
				if len(lat)%assignCommit == 0 {
					if err := c.Persist(&w, nil); err != nil {
						b.Fatal(err)
					}
				}
			}
			for b.Loop() {
				assign()
			}
			// Enough samples for a p99, however slow an assignment is.
			for len(lat) < assignMinSamples {
				assign()
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-us")
			b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99-us")
			b.ReportMetric(100*float64(joined)/float64(len(lat)), "joined-%")
			b.ReportMetric(float64(scored)/float64(len(lat)), "scored/article")
			b.ReportMetric(float64(open), "open-stories")
			b.ReportMetric(float64(ms.HeapAlloc)/1e6, "heap-MB")
			b.ReportMetric(build.Seconds(), "build-s")
		})
	}
}

// uciTopics maps UCI categories to topics.
var uciTopics = map[string]string{"b": "business", "t": "tech", "e": "entertainment", "m": "health"}

// loadUCI reads the UCI headlines in time order, with their publisher as
// source and their category as topic.
func loadUCI(b *testing.B) []Article {
	b.Helper()
	type line struct {
		ID, Title, URL, Publisher, Category string
		PublishedAt                         time.Time `json:"published_at"`
	}
	var out []Article
	readJSONLines(b, filepath.Join(sharedData, "uci_dev.ndjson"), func(r line) {
		a := Article{ID: r.ID, URL: r.URL, SourceID: r.Publisher, Source: r.Publisher, Authority: 0.5,
			Title: r.Title, Published: r.PublishedAt.UnixMilli(), Version: 1}
		if t, ok := uciTopics[r.Category]; ok {
			a.Topics = []Label{{Topic: t, Confidence: 0.8}}
		}
		out = append(out, a)
	})
	slices.SortStableFunc(out, func(x, y Article) int { return cmp.Compare(x.Published, y.Published) })
	return out
}

// discardWriter is a state.Writer that keeps nothing: Persist's encoding
// without Pebble's.
type discardWriter struct{ bytes int }

func (w *discardWriter) Set(k, v []byte) error         { w.bytes += len(k) + len(v); return nil }
func (w *discardWriter) Delete(k []byte) error         { w.bytes += len(k); return nil }
func (w *discardWriter) DeleteRange(s, e []byte) error { w.bytes += len(s) + len(e); return nil }

// BenchmarkBuilderApply measures the story stage's Builder (near-duplicate
// detection, clustering, story aggregates) over the 3,144 UCI headlines of
// 10-12 March 2014 (syndicated copies included), repeated with distinct
// ids, each repetition 1 hour after the previous one ended, so stories
// close in the 72h window and memory reaches a steady state. An op is one
// article. apply+persist also stages the changes every 1000 articles, as
// the stories task does at each commit, into a writer that discards them.
// Metrics: articles/s, and stories (new stories per 100 articles).
func BenchmarkBuilderApply(b *testing.B) {
	uci := loadUCI(b)
	span := uci[len(uci)-1].Published - uci[0].Published + time.Hour.Milliseconds()
	for _, persist := range []bool{false, true} {
		name := "apply"
		if persist {
			name = "apply+persist"
		}
		b.Run(name, func(b *testing.B) {
			bl, err := NewBuilder(Options{})
			if err != nil {
				b.Fatal(err)
			}
			var w discardWriter
			empty := statetest.Open(b).Namespace("stories")
			n, created := 0, 0
			for b.Loop() {
				rep := n / len(uci)
				a := uci[n%len(uci)]
				a.ID = fmt.Sprintf("r%d-%s", rep, a.ID)
				a.Published += int64(rep) * span
				res, err := bl.Apply(a)
				if err != nil {
					b.Fatal(err)
				}
				if res.NewStory {
					created++
				}
				n++
				if persist && n%1000 == 0 {
					if err := bl.Persist(&w, empty); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "articles/s")
			b.ReportMetric(100*float64(created)/float64(n), "stories/100")
		})
	}
}
