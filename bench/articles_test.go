package bench

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/engine/eventlog/embedded"
	"github.com/newsflow/newsflow/internal/canon"
	"github.com/newsflow/newsflow/internal/schema"
	"github.com/newsflow/newsflow/internal/testutil"
	"github.com/newsflow/newsflow/internal/tracing"
	"github.com/newsflow/newsflow/node"
	"github.com/newsflow/newsflow/operators/articles"
	"github.com/newsflow/newsflow/operators/search"
	"github.com/newsflow/newsflow/operators/searchindex"
	"github.com/newsflow/newsflow/operators/story"
	"golang.org/x/sync/errgroup"
)

// Shape of BenchmarkArticlePipeline's stream.
const (
	pipelineArticles = 50_000 // default; NEWSFLOW_BENCH_ARTICLES overrides
	// articleBatch is the records per Append: the new items of one crawl
	// of one feed, as the crawler appends them.
	articleBatch = 50
	// articleStep is the event time between consecutive articles: 50,000
	// articles span 4 days, so stories form, grow and close (72h window).
	articleStep = 4 * 24 * time.Hour / pipelineArticles
	// articlePoll is how often the benchmark polls the engine's progress.
	articlePoll = 10 * time.Millisecond
	// sharedItems and sharedUCI are the real headlines the stream is
	// built from (see ../../shared/data/README.md), read in place.
	sharedItems = "../../shared/data/streams/orx365_items.jsonl"
	sharedUCI   = "../../shared/data/clustering/uci_dev.ndjson"
)

// The stages of the article pipeline, in data-flow order.
var articleStages = []string{articles.Name, story.Name, search.Name}

// corpusItem is one real (or, without the shared data, generated) feed
// item.
type corpusItem struct {
	url, source, title, summary string
	t                           int64 // original time, ms; orders the corpus
}

// articleCorpus reads the shared headlines: the orx365 items (FT, WSJ,
// NYT, The Economist, The Atlantic; title and summary) and the UCI
// headlines (1,000+ publishers, 43 stories, titles only), each in its own
// time order, interleaved evenly so that every stretch of the stream mixes
// both. It reports what it read, or why it fell back to generated text.
var articleCorpus = sync.OnceValues(func() ([]corpusItem, string) {
	items, err1 := readItems(sharedItems, func(line []byte) (corpusItem, bool) {
		var v struct {
			Feed, Link, Title, Description string
			FirstSeen                      int64 `json:"first_seen_ts"`
		}
		if json.Unmarshal(line, &v) != nil || v.Title == "" || v.Link == "" {
			return corpusItem{}, false
		}
		return corpusItem{url: v.Link, source: v.Feed, title: v.Title, summary: v.Description, t: v.FirstSeen * 1000}, true
	})
	uci, err2 := readItems(sharedUCI, func(line []byte) (corpusItem, bool) {
		var v struct {
			Title, URL, Publisher string
			PublishedAt           time.Time `json:"published_at"`
		}
		if json.Unmarshal(line, &v) != nil || v.Title == "" || v.URL == "" {
			return corpusItem{}, false
		}
		return corpusItem{url: v.URL, source: v.Publisher, title: v.Title, t: v.PublishedAt.UnixMilli()}, true
	})
	if len(items)+len(uci) == 0 {
		return generatedArticles(), fmt.Sprintf("generated headlines: shared data not available (%v)", errors.Join(err1, err2))
	}
	byTime := func(a, b corpusItem) int { return cmp.Compare(a.t, b.t) }
	slices.SortStableFunc(items, byTime)
	slices.SortStableFunc(uci, byTime)
	out := make([]corpusItem, 0, len(items)+len(uci))
	i, j := 0, 0
	for i < len(items) || j < len(uci) {
		// Take from the list that is behind in relative position.
		if j == len(uci) || (i < len(items) && i*len(uci) <= j*len(items)) {
			out = append(out, items[i])
			i++
		} else {
			out = append(out, uci[j])
			j++
		}
	}
	desc := fmt.Sprintf("%d orx365 items and %d UCI headlines", len(items), len(uci))
	if err := errors.Join(err1, err2); err != nil {
		desc += fmt.Sprintf(" (%v)", err)
	}
	return out, desc
})

func readItems(path string, parse func([]byte) (corpusItem, bool)) ([]corpusItem, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []corpusItem
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if it, ok := parse(sc.Bytes()); ok {
			out = append(out, it)
		}
	}
	return out, sc.Err()
}

// generatedArticles stands in for the shared data: 5,000 headlines of 500
// stories (ten articles each, from ten sources). A story's articles share
// its two names (words no other story has) and two common words; the
// other words are drawn from 5,000 common ones with a Zipf law.
func generatedArticles() []corpusItem {
	rng := rand.New(rand.NewPCG(11, 11))
	zipf := rand.NewZipf(rng, 1.1, 20, 4999)
	word := func(n uint64, first byte) string { // first, then n in base 26
		b := []byte{first}
		for ; n > 0 || len(b) == 1; n /= 26 {
			b = append(b, byte('a'+n%26))
		}
		return string(b)
	}
	pick := func(n int) []string {
		w := make([]string, n)
		for i := range w {
			w[i] = word(zipf.Uint64(), 'w')
		}
		return w
	}
	var out []corpusItem
	for s := range 500 {
		topic := append([]string{word(uint64(2*s), 'k'), word(uint64(2*s+1), 'k')}, pick(2)...)
		for a := range 10 {
			out = append(out, corpusItem{
				url:    fmt.Sprintf("https://src%d.example.com/%d/%d", a, s, a),
				source: fmt.Sprintf("src%d", a), title: strings.Join(append(slices.Clone(topic), pick(4)...), " "),
				summary: strings.Join(append(pick(12), topic[:2]...), " "),
				t:       int64(s*10 + a),
			})
		}
	}
	return out
}

// articleRecords builds n raw articles for articles.raw by cycling over the
// corpus: cycle c > 0 gives every item a distinct URL (the path gets a
// /c suffix). Article i has event time end - (n-i)·articleStep, is fetched
// a minute later, and is keyed and murmur2-partitioned by its article id,
// as the crawler writes it. Items whose URL does not canonicalize, or
// collides with an earlier one, are skipped.
func articleRecords(b *testing.B, n int, partitions int32) [][]*eventlog.Record {
	b.Helper()
	corpus, _ := articleCorpus()
	end := time.Now().Add(-time.Hour)
	seen := make(map[string]bool, n)
	var out [][]*eventlog.Record
	var batch []*eventlog.Record
	for k := 0; len(seen) < n; k++ {
		if k >= 2*n+len(corpus) {
			b.Fatalf("only %d distinct article URLs after %d items", len(seen), k)
		}
		it := corpus[k%len(corpus)]
		u := it.url
		if c := k / len(corpus); c > 0 {
			u = withPathSuffix(u, "/"+strconv.Itoa(c))
		}
		cu, err := canon.Canonical(u, nil)
		if err != nil {
			continue
		}
		id := canon.ArticleID(cu)
		if seen[id] {
			continue
		}
		i := len(seen)
		seen[id] = true
		pub := end.Add(-time.Duration(n-i) * articleStep)
		fetched := pub.Add(time.Minute)
		v, err := json.Marshal(schema.RawArticle{
			URL: u, SourceID: it.source, Title: it.title, Summary: it.summary,
			PublishedAt: schema.Time(pub.UTC().Format(time.RFC3339Nano)), FetchedAt: schema.Time(fetched.UTC().Format(time.RFC3339Nano)),
		})
		if err != nil {
			b.Fatal(err)
		}
		key := []byte(id)
		batch = append(batch, &eventlog.Record{Topic: schema.TopicArticlesRaw, Partition: eventlog.PartitionFor(key, partitions),
			Key: key, Value: v, Timestamp: fetched.UnixMilli(),
			Headers: []eventlog.Header{{Key: "source_id", Value: []byte(it.source)}}})
		if len(batch) == articleBatch {
			out = append(out, batch)
			batch = nil
		}
	}
	if len(batch) > 0 {
		out = append(out, batch)
	}
	return out
}

// withPathSuffix appends suffix to the path of URL u, before any query.
func withPathSuffix(u, suffix string) string {
	if i := strings.IndexAny(u, "?#"); i >= 0 {
		return u[:i] + suffix + u[i:]
	}
	return u + suffix
}

// articlePipeline is an in-process node's article pipeline: embedded log
// (fsync always, as configs/newsflow.yaml), state DB, and an engine with
// the articles, stories and search operators (8 partitions), running.
type articlePipeline struct {
	*pipeline
	stories *story.Operator
	search  *search.Operator
}

func startArticlePipeline(ctx context.Context, dir string, trace tracing.Options) (*articlePipeline, error) {
	cfg := node.Default()
	cfg.DataDir, cfg.Log.Partitions, cfg.Crawl.Enabled, cfg.Tracing = dir, benchPartitions, false, trace
	// Event times go back days (weeks with NEWSFLOW_BENCH_ARTICLES);
	// retention must not drop records the run still reads.
	cfg.Log.Embedded.RetentionAge = embedded.KeepForever
	cfg.Articles.Classify.RulesFile = "../configs/topics.yaml"
	n, err := node.Open(ctx, cfg, node.Options{Operators: []string{articles.Name, story.Name, search.Name}})
	if err != nil {
		return nil, err
	}
	// The crawler creates articles.raw before it appends.
	if _, err := eventlog.EnsureTopic(ctx, n.Log(), schema.TopicArticlesRaw, benchPartitions); err != nil {
		return nil, errors.Join(fmt.Errorf("ensure topic: %w", err), n.Close())
	}
	rctx, cancel := context.WithCancel(context.Background())
	p := &articlePipeline{
		pipeline: &pipeline{node: n, log: n.Log(), eng: n.Engine(), reg: n.Registry(), cancel: cancel, done: make(chan error, 1)},
		stories:  n.Stories(), search: n.Search(),
	}
	go func() { p.done <- p.eng.Run(rctx) }()
	for !p.eng.Ready() {
		select {
		case err := <-p.done:
			return nil, errors.Join(fmt.Errorf("engine stopped while starting: %w", err), n.Close())
		case <-ctx.Done():
			return nil, errors.Join(ctx.Err(), p.stop())
		case <-time.After(articlePoll):
		}
	}
	return p, nil
}

// stageDone reports, per stage, whether its tasks have committed every
// record in their inputs.
func (p *articlePipeline) stageDone(ctx context.Context) (map[string]bool, error) {
	done := map[string]bool{}
	for _, s := range articleStages {
		done[s] = true
	}
	for _, pr := range p.eng.Progress() {
		if _, ok := done[pr.Stage]; !ok {
			continue
		}
		o, err := p.log.Offsets(ctx, eventlog.TopicPartition{Topic: pr.Topic, Partition: pr.Partition})
		if err != nil {
			return nil, err
		}
		if pr.Committed < o.End {
			done[pr.Stage] = false
		}
	}
	return done, nil
}

// waitStages polls until ingestion has ended (ingested is closed) and
// every stage has committed everything in its inputs, and returns when
// each stage first finished, from start. A stage counts as finished only
// once the stages before it have.
func (p *articlePipeline) waitStages(ctx context.Context, start time.Time, ingested <-chan struct{}, timeout time.Duration) (map[string]time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	finished := map[string]time.Duration{}
	for {
		if isClosed(ingested) {
			done, err := p.stageDone(ctx)
			if err != nil {
				return nil, fmt.Errorf("progress: %w", err)
			}
			for _, s := range articleStages {
				if !done[s] {
					break
				}
				if _, ok := finished[s]; !ok {
					finished[s] = time.Since(start)
				}
			}
			if len(finished) == len(articleStages) {
				return finished, nil
			}
		}
		select {
		case err := <-p.done:
			p.done <- err
			return nil, fmt.Errorf("engine stopped: %v", err)
		case <-ctx.Done():
			return nil, fmt.Errorf("not caught up after %v (finished %v): %w", timeout, finished, ctx.Err())
		case <-time.After(articlePoll):
		}
	}
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// commitSeconds is the time a stage's tasks spent committing (appending
// outputs, Flush, the state commit), summed over its tasks, or -1.
func (p *articlePipeline) commitSeconds(stage string) float64 {
	mfs, err := p.reg.Gather()
	if err != nil {
		return -1
	}
	for _, mf := range mfs {
		if mf.GetName() != "newsflow_commit_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "stage" && lp.GetValue() == stage {
					return m.GetHistogram().GetSampleSum()
				}
			}
		}
	}
	return -1
}

// gauge is the value of an unlabelled gauge, or -1.
func (p *articlePipeline) gauge(family string) float64 {
	mfs, err := p.reg.Gather()
	if err != nil {
		return -1
	}
	for _, mf := range mfs {
		if mf.GetName() == family && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return -1
}

// verifyArticles checks that every stage applied all n articles, none of
// them dropped, dead-lettered or missing from the search index.
func (p *articlePipeline) verifyArticles(ctx context.Context, n int) error {
	var errs []error
	if v := p.counter("newsflow_articles_total", "outcome", "new"); int(v) != n {
		errs = append(errs, fmt.Errorf("articles: %v new articles, want %d", v, n))
	}
	for _, s := range articleStages {
		if v := p.counter("newsflow_records_in_total", "stage", s); int(v) != n {
			errs = append(errs, fmt.Errorf("%s applied %v records, want %d", s, v, n))
		}
	}
	if v := p.counter("newsflow_dead_letters_total", "", ""); v != 0 {
		errs = append(errs, fmt.Errorf("%v dead letters", v))
	}
	res, err := p.search.Search(ctx, searchindex.Request{Limit: 1})
	switch {
	case err != nil:
		errs = append(errs, fmt.Errorf("search: %w", err))
	case res.Partial || res.Total != uint64(n):
		errs = append(errs, fmt.Errorf("search index holds %d articles (partial %v), want %d", res.Total, res.Partial, n))
	}
	return errors.Join(errs...)
}

// articleRecordBytes reads the first records of the articles topic, checks
// that each carries the features of its text (the stories task's work the
// articles operator does), and returns their mean size.
func (p *articlePipeline) articleRecordBytes(ctx context.Context) (float64, error) {
	r, err := p.log.NewReader(map[eventlog.TopicPartition]int64{{Topic: schema.TopicArticles, Partition: 0}: 0})
	if err != nil {
		return 0, err
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	recs, err := r.Poll(ctx, 1000)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", schema.TopicArticles, err)
	}
	size := 0
	for _, rec := range recs {
		var pa schema.ProcessedArticle
		if err := json.Unmarshal(rec.Value, &pa); err != nil || pa.Features == nil || pa.Features.Version < 1 {
			return 0, fmt.Errorf("%s record without features (%v): %.300s", schema.TopicArticles, err, rec.Value)
		}
		size += len(rec.Value)
	}
	return float64(size) / float64(len(recs)), nil
}

// articleResult is what one pipeline run measured.
type articleResult struct {
	elapsed   time.Duration
	cpu       time.Duration            // process CPU time (user + system) over elapsed
	finished  map[string]time.Duration // stage → when it had committed everything
	commit    map[string]float64       // stage → seconds its tasks spent committing
	busy      map[string]float64       // stage → seconds its tasks spent applying and committing
	stories   float64                  // stories founded
	open      float64                  // stories open at the end
	peakRSSMB float64
	// recordBytes is the mean size of the first records of the articles
	// topic.
	recordBytes float64
}

// BenchmarkArticlePipeline measures articles per second through the whole
// article pipeline of an in-process node: raw articles appended to
// articles.raw (batches of 50, the new items of one feed crawl, from 4
// goroutines, keyed and murmur2-partitioned by article id as the crawler
// writes them) until the search operator has committed every one, through
// the articles operator (JSON, canonical URL, cleaning, topic rules from
// configs/topics.yaml), the stories operator (near-duplicates, TF-IDF
// clustering, story aggregates; one task) and the search operator (Bleve,
// 8 partitions). The log is embedded with fsync always and the engine has
// its default options, as configs/newsflow.yaml.
//
// The articles are real headlines (see articleCorpus), cycled with
// distinct URLs: 50,000 by default, NEWSFLOW_BENCH_ARTICLES=N for another
// size. They are appended as fast as the log takes them, or, with
// NEWSFLOW_BENCH_RATE=R, at R articles a second: then articles/s is at
// most R, and stories-utilisation says how busy the story task is at
// that rate. Event times are articleStep apart (12,500 articles a day), so
// stories form and close in the 72h window.
//
// Metrics: articles/s (first append to the search stage caught up; the
// target is >= 5,000 on two cores); cpu-us/article, the process's CPU time
// over the run per article (two busy cores give 400 at 5,000/s; it varies
// less than articles/s on a shared machine); peak-rss-MB (VmHWM of the
// process, reset after the stream was generated); article-record-bytes,
// the mean size of a record of the articles topic, which carries the
// features of its text (checked); stories (founded) and
// open-stories (at the end); and articles-done-s, stories-done-s and
// search-done-s, when each stage had committed every article, in seconds
// from the first append (the stages run concurrently, so the slowest one
// sets the rate); stories-commit-s and search-commit-s, the time the
// stage's tasks spent committing, summed over tasks (the single stories
// task processes nothing meanwhile; a search commit is mostly Bleve
// indexing the batch); stories-utilisation, the share of the time until
// the stories stage had committed everything that its one task spent
// applying and committing (newsflow_task_busy_seconds_total): below 1,
// the task waited for articles; stories-busy-us/article, that busy time
// per article (wall time: on two busy cores it includes time waiting for
// a core; BenchmarkStoryTask in operators/story measures the task's CPU
// time per article alone).
func BenchmarkArticlePipeline(b *testing.B) {
	n := testutil.EnvInt(b, "NEWSFLOW_BENCH_ARTICLES", pipelineArticles)
	rate := testutil.EnvInt(b, "NEWSFLOW_BENCH_RATE", 0)
	name := fmt.Sprintf("articles=%d", n)
	if rate > 0 {
		name += fmt.Sprintf("/rate=%d", rate)
	}
	trace, traced := benchTracing(b)
	if traced {
		name += fmt.Sprintf("/trace=%v", max(trace.SampleRatio, 0))
	}
	b.Run(name, func(b *testing.B) {
		_, from := articleCorpus()
		b.Logf("stream of %d articles from %s", n, from)
		batches := articleRecords(b, n, benchPartitions)
		if traced {
			traceRecords(b, batches, trace)
		}
		var runs []articleResult
		for b.Loop() {
			runs = append(runs, runArticlePipeline(b, n, rate, batches, trace))
		}
		var total time.Duration
		for _, r := range runs {
			total += r.elapsed
		}
		last := runs[len(runs)-1]
		b.ReportMetric(float64(n*len(runs))/total.Seconds(), "articles/s")
		b.ReportMetric(float64(last.cpu.Microseconds())/float64(n), "cpu-us/article")
		b.ReportMetric(last.peakRSSMB, "peak-rss-MB")
		b.ReportMetric(last.recordBytes, "article-record-bytes")
		b.ReportMetric(last.stories, "stories")
		b.ReportMetric(last.open, "open-stories")
		for _, s := range articleStages {
			b.ReportMetric(last.finished[s].Seconds(), s+"-done-s")
		}
		for _, s := range []string{story.Name, search.Name} {
			b.ReportMetric(last.commit[s], s+"-commit-s")
		}
		// The single story task's share of its time busy until it had
		// committed every article, and its busy time per article.
		b.ReportMetric(last.busy[story.Name]/last.finished[story.Name].Seconds(), "stories-utilisation")
		b.ReportMetric(last.busy[story.Name]*1e6/float64(n), "stories-busy-us/article")
	})
}

// appendPaced appends the batches as appendBatches does, but no faster
// than rate articles a second: a batch is appended once the articles before
// it are due.
func appendPaced(ctx context.Context, l eventlog.Log, batches [][]*eventlog.Record, rate int) error {
	start := time.Now()
	due := make([]time.Time, len(batches))
	sent := 0
	for i, batch := range batches {
		due[i] = start.Add(time.Duration(sent) * time.Second / time.Duration(rate))
		sent += len(batch)
	}
	var next atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	for range appendWorkers {
		g.Go(func() error {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(batches) {
					return nil
				}
				select {
				case <-gctx.Done():
					return gctx.Err()
				case <-time.After(time.Until(due[i])):
				}
				if err := l.Append(gctx, batches[i]); err != nil {
					return fmt.Errorf("append batch %d: %w", i, err)
				}
			}
		})
	}
	return g.Wait()
}

// runArticlePipeline is one run: set up with the timer stopped, append and
// wait with it running, then verify and tear down with it stopped.
func runArticlePipeline(b *testing.B, n, rate int, batches [][]*eventlog.Record, trace tracing.Options) articleResult {
	b.Helper()
	b.StopTimer()
	ctx := context.Background()
	sctx, cancel := context.WithTimeout(ctx, setupTimeout)
	p, err := startArticlePipeline(sctx, b.TempDir(), trace)
	cancel()
	if err != nil {
		b.Fatalf("start pipeline: %v", err)
	}
	runtime.GC()
	resetPeakRSS()
	b.StartTimer()

	start, cpu0 := time.Now(), processCPU()
	ictx, stopIngest := context.WithCancel(ctx)
	ingested := make(chan struct{})
	var ingestErr error
	go func() {
		defer close(ingested)
		if rate > 0 {
			ingestErr = appendPaced(ictx, p.log, batches, rate)
		} else {
			ingestErr = appendBatches(ictx, p.log, batches)
		}
	}()
	// Generous: a tenth of the target rate.
	finished, err := p.waitStages(ctx, start, ingested, catchUpTimeout+time.Duration(n)*2*time.Millisecond)
	elapsed, cpu := time.Since(start), processCPU()-cpu0

	b.StopTimer()
	stopIngest()
	<-ingested
	if ingestErr != nil {
		err = errors.Join(err, fmt.Errorf("ingest: %w", ingestErr))
	}
	res := articleResult{elapsed: elapsed, cpu: cpu, finished: finished, peakRSSMB: selfPeakRSSMB(b)}
	if err == nil {
		err = p.verifyArticles(ctx, n)
	}
	if err == nil {
		res.recordBytes, err = p.articleRecordBytes(ctx)
	}
	res.stories = p.counter("newsflow_story_assignments_total", "kind", "new")
	res.open = p.gauge("newsflow_stories_open")
	res.commit, res.busy = map[string]float64{}, map[string]float64{}
	for _, s := range articleStages {
		res.commit[s] = p.commitSeconds(s)
		res.busy[s] = p.counter("newsflow_task_busy_seconds_total", "stage", s)
	}
	if err = errors.Join(err, p.stop()); err != nil {
		b.Fatal(err)
	}
	b.StartTimer()
	return res
}
