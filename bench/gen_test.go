package bench

import (
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/internal/schema"
)

// Shape of the generated traffic.
const (
	benchArticles   = 100_000 // distinct articles
	benchPartitions = 8
	batchSize       = 1000 // records per Append or HTTP batch, as HTTP ingestion does
	zipfS           = 1.1  // skew of article popularity
)

var (
	categories = []string{"world", "business", "tech", "science", "sports", "culture", "politics", "health"}
	shareTypes = []string{"link", "email", "facebook", "x", "whatsapp", "copy"}
)

// stream describes n share events whose times rise evenly from start over
// span: event i has time start + i*span/n (plus nothing else, so every
// partition and every source sees its events in time order). Articles are
// Zipf-distributed over benchArticles; an article's category is fixed.
type stream struct {
	n     int
	start int64 // ms since the epoch of event 0
	span  int64 // ms
	seed  uint64
}

// newStream returns a stream of n events ending about now and spanning span.
func newStream(n int, span time.Duration, seed uint64) stream {
	now := time.Now().UnixMilli()
	return stream{n: n, start: now - span.Milliseconds(), span: span.Milliseconds(), seed: seed}
}

func (s stream) ts(i int) int64 { return s.start + int64(i)*s.span/int64(s.n) }

// articleKeys are the article ids, indexed by article number.
var articleKeys = func() [][]byte {
	keys := make([][]byte, benchArticles)
	for i := range keys {
		keys[i] = []byte("art-" + strconv.Itoa(100000 + i)[1:])
	}
	return keys
}()

// gen produces the events of a stream; one gen per goroutine.
type gen struct {
	s    stream
	rng  *rand.Rand
	zipf *rand.Zipf
}

func (s stream) gen(salt uint64) *gen {
	rng := rand.New(rand.NewPCG(s.seed, salt))
	return &gen{s: s, rng: rng, zipf: rand.NewZipf(rng, zipfS, 1, benchArticles-1)}
}

// article draws an article number. Popularity ranks are scattered over the
// id space (and so over partitions) by a multiplicative permutation.
func (g *gen) article() int {
	rank := g.zipf.Uint64()
	return int((rank*7919 + 13) % benchArticles)
}

// appendEvent appends event i as one JSON line (no newline) and returns the
// article it is about.
func (g *gen) appendEvent(dst []byte, i int) ([]byte, int) {
	a := g.article()
	dst = append(dst, `{"event_id":"ev-`...)
	dst = strconv.AppendUint(dst, g.s.seed, 36)
	dst = append(dst, '-')
	dst = strconv.AppendInt(dst, int64(i), 10)
	dst = append(dst, `","article_id":"`...)
	dst = append(dst, articleKeys[a]...)
	dst = append(dst, `","user_id":"u-`...)
	dst = strconv.AppendInt(dst, int64(g.rng.IntN(2_000_000)), 10)
	dst = append(dst, `","share_type":"`...)
	dst = append(dst, shareTypes[g.rng.IntN(len(shareTypes))]...)
	dst = append(dst, `","category":"`...)
	dst = append(dst, categories[a%len(categories)]...)
	dst = append(dst, `","timestamp":`...)
	dst = strconv.AppendInt(dst, g.s.ts(i), 10)
	dst = append(dst, '}')
	return dst, a
}

// ndjson appends events [from, to) as NDJSON lines.
func (g *gen) ndjson(dst []byte, from, to int) []byte {
	for i := from; i < to; i++ {
		dst, _ = g.appendEvent(dst, i)
		dst = append(dst, '\n')
	}
	return dst
}

// partitioner chooses the partition of record i with the given key.
type partitioner func(i int, key []byte) int32

func murmur2(_ int, key []byte) int32  { return eventlog.PartitionFor(key, benchPartitions) }
func roundRobin(i int, _ []byte) int32 { return int32(i % benchPartitions) }

// recordBatches pre-generates the stream as batches of batchSize records
// for the shares topic, keyed by article id, with record time = event time.
func recordBatches(s stream, part partitioner) [][]*eventlog.Record {
	g := s.gen(1)
	var out [][]*eventlog.Record
	for from := 0; from < s.n; from += batchSize {
		to := min(from+batchSize, s.n)
		buf := make([]byte, 0, (to-from)*200)
		recs := make([]eventlog.Record, to-from)
		batch := make([]*eventlog.Record, to-from)
		for i := from; i < to; i++ {
			n := len(buf)
			var a int
			buf, a = g.appendEvent(buf, i)
			r := &recs[i-from]
			*r = eventlog.Record{Topic: schema.TopicShares, Partition: part(i, articleKeys[a]), Key: articleKeys[a],
				Value: buf[n:len(buf):len(buf)], Timestamp: s.ts(i)}
			batch[i-from] = r
		}
		out = append(out, batch)
	}
	return out
}

// ndjsonBatches pre-generates the stream as NDJSON bodies of batchSize lines.
func ndjsonBatches(s stream) [][]byte {
	g := s.gen(1)
	var out [][]byte
	for from := 0; from < s.n; from += batchSize {
		to := min(from+batchSize, s.n)
		out = append(out, g.ndjson(make([]byte, 0, (to-from)*200), from, to))
	}
	return out
}
