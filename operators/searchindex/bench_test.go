package searchindex

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Benchmarks read real headlines from ../shared/data (see its README) in
// place; without it they fall back to generated text.
const sharedStream = "../../../shared/data/streams/orx365_items.jsonl"

type benchItem struct{ title, summary, source string }

var benchCorpus = sync.OnceValue(func() []benchItem {
	f, err := os.Open(sharedStream)
	if err != nil {
		return generatedCorpus()
	}
	defer f.Close()
	var items []benchItem
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var v struct{ Feed, Title, Description string }
		if json.Unmarshal(sc.Bytes(), &v) == nil && v.Title != "" {
			items = append(items, benchItem{v.Title, v.Description, v.Feed})
		}
	}
	if len(items) == 0 {
		return generatedCorpus()
	}
	return items
})

func generatedCorpus() []benchItem {
	words := strings.Fields("market bank rate inflation election minister court police storm climate energy oil price " +
		"stock trade tariff war peace talks deal vote city school health hospital vaccine team match cup final " +
		"record growth jobs report company profit loss chip phone data privacy law plan budget tax border")
	rng := rand.New(rand.NewPCG(7, 7))
	sentence := func(n int) string {
		w := make([]string, n)
		for i := range w {
			w[i] = words[rng.IntN(len(words))]
		}
		return strings.Join(w, " ")
	}
	items := make([]benchItem, 5000)
	for i := range items {
		items[i] = benchItem{sentence(9), sentence(30), fmt.Sprintf("src%d", i%6)}
	}
	return items
}

var benchTopics = []string{"economy", "politics", "world", "tech", "sport", "health", "science", "culture"}

// benchDoc is the i-th benchmark document: real text (recombined beyond the
// corpus size so documents differ), a hex id, one or two topics, and times
// 10 s apart.
func benchDoc(i int) Doc {
	items := benchCorpus()
	a := items[i%len(items)]
	b := items[(i/len(items)*7919+i)%len(items)]
	h := fnv.New64a()
	fmt.Fprint(h, i)
	id := strconv.FormatUint(h.Sum64(), 16)
	topics := []string{benchTopics[i%len(benchTopics)]}
	if i%3 == 0 {
		topics = append(topics, benchTopics[(i/3)%len(benchTopics)])
	}
	return Doc{
		ID:          id + strconv.Itoa(i),
		Title:       a.title,
		Summary:     b.summary,
		URL:         "https://example.com/" + id,
		SourceID:    a.source,
		Source:      a.source,
		Topics:      topics,
		StoryID:     id,
		PublishedAt: t0.Add(time.Duration(i) * 10 * time.Second),
	}
}

// benchContent is about n bytes of article body for document i, made of
// other items' summaries.
func benchContent(i, n int) string {
	items := benchCorpus()
	var sb strings.Builder
	for k := 1; sb.Len() < n; k++ {
		sb.WriteString(items[(i*31+k*7)%len(items)].summary)
		sb.WriteByte(' ')
	}
	return sb.String()
}

// BenchmarkApply measures indexing throughput for batches of new documents
// (headline and summary, about 300 bytes; content=N adds N bytes of body).
func BenchmarkApply(b *testing.B) {
	for _, tc := range []struct{ size, content int }{{1, 0}, {10, 0}, {100, 0}, {1000, 0}, {5000, 0}, {1000, 1 << 10}, {1000, 4 << 10}} {
		name := fmt.Sprintf("batch=%d", tc.size)
		if tc.content > 0 {
			name += fmt.Sprintf("/content=%d", tc.content)
		}
		b.Run(name, func(b *testing.B) {
			ix, _ := newTestIndex(b, nil)
			next := 0
			batch := make([]Doc, tc.size)
			cpu0 := cpuTime()
			for b.Loop() {
				for i := range batch {
					batch[i] = benchDoc(next)
					if tc.content > 0 {
						batch[i].Content = benchContent(next, tc.content)
					}
					next++
				}
				if err := ix.Apply(batch, nil); err != nil {
					b.Fatal(err)
				}
			}
			// Process CPU time per document counts the background merges
			// too, and stays meaningful on a busy machine.
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(next), "cpu-µs/doc")
			b.ReportMetric(float64(next)/b.Elapsed().Seconds(), "docs/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkSearch measures search latency over an index of
// NEWSFLOW_BENCH_SEARCH_DOCS documents (default 100,000) and reports the
// 50th and 99th percentiles; text-common and text-rare run only the
// queries that match at least 5% and at most 0.1% of the documents.
// Benchmarks read the corpus relative to this directory, so run a compiled
// test binary from here too. NEWSFLOW_BENCH_INDEX_DIR keeps the index in
// that directory and reuses it when it already holds the right number of
// documents (building a million takes minutes).
func BenchmarkSearch(b *testing.B) {
	n := 100_000
	if s := os.Getenv("NEWSFLOW_BENCH_SEARCH_DOCS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v <= 0 {
			b.Fatalf("NEWSFLOW_BENCH_SEARCH_DOCS=%q", s)
		}
		n = v
	}
	dir := os.Getenv("NEWSFLOW_BENCH_INDEX_DIR")
	if dir == "" {
		dir = b.TempDir()
	}
	ix, err := Open(dir, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = ix.Close() }()
	if have, err := ix.Count(); err != nil || have != uint64(n) {
		if err := ix.Close(); err != nil {
			b.Fatal(err)
		}
		if err := Destroy(dir); err != nil {
			b.Fatal(err)
		}
		if ix, err = Open(dir, Options{}); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		const batchSize = 5000
		for lo := 0; lo < n; lo += batchSize {
			docs := make([]Doc, min(batchSize, n-lo))
			for i := range docs {
				docs[i] = benchDoc(lo + i)
			}
			if err := ix.Apply(docs, nil); err != nil {
				b.Fatal(err)
			}
		}
		took := time.Since(start)
		b.Logf("built %d docs in %v (%.0f docs/s)", n, took.Round(time.Millisecond), float64(n)/took.Seconds())
	}
	b.Logf("%d docs, %.1f MiB on disk", n, float64(dirSize(b, dir))/(1<<20))

	queries := benchQueries(200)
	last := t0.Add(time.Duration(n) * 10 * time.Second)
	page2 := make([]*Cursor, len(queries))
	totals := make([]uint64, len(queries))
	for i, q := range queries {
		res, err := ix.Search(context.Background(), Request{Query: q})
		if err != nil {
			b.Fatal(err)
		}
		page2[i], totals[i] = res.Next, res.Total
	}
	// Common queries match at least 5% of the documents, rare ones at
	// most 0.1% (and at least one).
	var common, rare []string
	for i, q := range queries {
		switch {
		case totals[i] >= uint64(n)/20:
			common = append(common, q)
		case totals[i] > 0 && totals[i] <= uint64(n)/1000:
			rare = append(rare, q)
		}
	}
	b.Logf("%d common queries (≥ 5%% of the documents), %d rare (≤ 0.1%%)", len(common), len(rare))
	for _, tc := range []struct {
		name string
		req  func(i int) Request
	}{
		{"text", func(i int) Request { return Request{Query: queries[i]} }},
		{"text-common", func(i int) Request { return Request{Query: common[i%len(common)]} }},
		{"text-common+topic", func(i int) Request {
			return Request{Query: common[i%len(common)], Topic: benchTopics[i%len(benchTopics)]}
		}},
		{"text-rare", func(i int) Request { return Request{Query: rare[i%len(rare)]} }},
		{"text-rare+topic", func(i int) Request {
			return Request{Query: rare[i%len(rare)], Topic: benchTopics[i%len(benchTopics)]}
		}},
		{"text+topic", func(i int) Request { return Request{Query: queries[i], Topic: benchTopics[i%len(benchTopics)]} }},
		{"text+page2", func(i int) Request { return Request{Query: queries[i], After: page2[i]} }},
		{"text+week", func(i int) Request { return Request{Query: queries[i], From: last.Add(-7 * 24 * time.Hour)} }},
		{"newest", func(int) Request { return Request{} }},
		{"newest+topic", func(i int) Request { return Request{Topic: benchTopics[i%len(benchTopics)]} }},
		{"newest+source+day", func(i int) Request {
			return Request{Source: benchCorpus()[i].source, From: last.Add(-24 * time.Hour)}
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var lat []time.Duration
			i := 0
			cpu0 := cpuTime()
			for b.Loop() {
				r := tc.req(i % len(queries))
				s := time.Now()
				if _, err := ix.Search(context.Background(), r); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(s))
				i++
			}
			slices.Sort(lat)
			pct := func(p float64) float64 {
				return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
			}
			b.ReportMetric(pct(0.50), "p50-ms")
			b.ReportMetric(pct(0.99), "p99-ms")
			// Mean process CPU per search: the latency a search would have
			// on an idle core, less sensitive to a busy machine.
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(len(lat)), "cpu-ms/op")
		})
	}
}

// benchQueries picks one to three words of four letters or more from
// random headlines.
func benchQueries(n int) []string {
	rng := rand.New(rand.NewPCG(11, 13))
	items := benchCorpus()
	var qs []string
	for len(qs) < n {
		var words []string
		for _, w := range strings.Fields(items[rng.IntN(len(items))].title) {
			w = strings.Trim(w, ".,:;'\"‘’“”?!()")
			if len(w) >= 4 {
				words = append(words, w)
			}
		}
		if len(words) == 0 {
			continue
		}
		k := 1 + rng.IntN(min(3, len(words)))
		start := rng.IntN(len(words) - k + 1)
		qs = append(qs, strings.Join(words[start:start+k], " "))
	}
	return qs
}

func dirSize(b *testing.B, dir string) int64 {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			info, err := d.Info()
			if err != nil {
				return err
			}
			n += info.Size()
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// cpuTime is the CPU time (user and system) the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
