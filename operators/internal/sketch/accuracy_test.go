package sketch

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/newsflow/newsflow/internal/testutil"
)

// The accuracy scenario: Zipf(1.0) shares over `distinct` articles, each
// article in one of zipfCategories categories (rank mod zipfCategories),
// in three phases so that every default window holds millions of shares:
// the first spread over 23 hours, the second over the next 59 minutes, the
// third over the last minute. One share in ten is moved by up to ±30 s,
// so shares arrive out of order.
const zipfCategories = 8

type phase struct {
	n        int
	from, to time.Duration // from day0
}

func zipfPhases(scale int) []phase {
	return []phase{
		{2 * scale, 0, 23 * time.Hour},
		{scale, 23 * time.Hour, 24*time.Hour - time.Minute},
		{scale, 24*time.Hour - time.Minute, 24 * time.Hour},
	}
}

// rankID and idRank map ranks to article ids and back. An id is 32 hex
// digits like a real one (canon.ArticleID): rank × an odd constant, which
// is invertible mod 2^64, then a hash of it.
const rankMul = 0x9E3779B97F4A7C15

var rankInv = func() uint64 {
	x := uint64(rankMul)
	for range 6 {
		x *= 2 - rankMul*x
	}
	return x
}()

func rankID(buf *[32]byte, r int) string {
	var b [16]byte
	x := uint64(r) * rankMul
	binary.BigEndian.PutUint64(b[:], x)
	binary.BigEndian.PutUint64(b[8:], mix64(x))
	hex.Encode(buf[:], b[:])
	return string(buf[:])
}

func idRank(id string) int {
	var b [16]byte
	if _, err := hex.Decode(b[:], []byte(id)); err != nil {
		panic(err)
	}
	return int(binary.BigEndian.Uint64(b[:]) * rankInv)
}

var zipfCategoryNames = func() []string {
	out := make([]string, zipfCategories)
	for i := range out {
		out[i] = fmt.Sprintf("cat%d", i)
	}
	return out
}()

// zipfStream is a generated share sequence: rank and time (ms after day0).
type zipfStream struct {
	distinct int
	rank     []uint32
	ts       []int32
}

func genZipf(distinct int, phases []phase, seed uint64) *zipfStream {
	z := testutil.NewZipf(distinct, 1)
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	s := &zipfStream{distinct: distinct}
	for _, p := range phases {
		from, span := ms(p.from), ms(p.to-p.from)
		for i := range p.n {
			ts := from + int64(i)*span/int64(p.n)
			if rng.IntN(10) == 0 {
				ts = max(0, ts+rng.Int64N(60_001)-30_000)
			}
			s.rank = append(s.rank, uint32(z.Sample(rng)))
			s.ts = append(s.ts, int32(ts))
		}
	}
	return s
}

// feed adds every share to c and returns the time per Add.
func (s *zipfStream) feed(c *Counts) time.Duration {
	var buf [32]byte
	start := time.Now()
	for i, r := range s.rank {
		c.Add(rankID(&buf, int(r)), zipfCategoryNames[r%zipfCategories], day0+int64(s.ts[i]))
	}
	return time.Since(start) / time.Duration(len(s.rank))
}

// exactCounts returns the exact count of every rank in window spec at the
// stream's final watermark.
func (s *zipfStream) exactCounts(spec WindowSpec) []uint32 {
	wm := int64(0)
	for _, t := range s.ts {
		wm = max(wm, day0+int64(t))
	}
	width := spec.Width().Milliseconds()
	lo := wm/width - int64(spec.Buckets) + 1
	out := make([]uint32, s.distinct)
	for i, r := range s.rank {
		if (day0+int64(s.ts[i]))/width >= lo {
			out[r]++
		}
	}
	return out
}

// quality is how a top-k answer compares with exact counts.
type quality struct {
	k         int
	precision float64 // share of the answer whose exact count is >= the exact k-th count
	mre       float64 // mean relative error of the answer's counts
	maxErr    uint64  // largest count - exact
	maxBound  uint64  // largest bound
	under     int     // entries counted below their exact count
	overBound int     // entries whose error exceeds their bound
}

func (q quality) String() string {
	return fmt.Sprintf("precision %.3f, mean relative error %.5f, max error %d (bound up to %d)",
		q.precision, q.mre, q.maxErr, q.maxBound)
}

// judge compares top with the exact counts of the ranks r with keep(r).
func judge(top []Entry, k int, exact []uint32, keep func(r int) bool) quality {
	// The exact k-th largest count, with a min-heap of the k largest.
	h := make([]uint32, 0, k)
	for r, n := range exact {
		if n == 0 || !keep(r) {
			continue
		}
		h = PushTop(h, k, n)
	}
	kth := uint32(1)
	if len(h) == k {
		kth = h[0]
	}
	q := quality{k: k}
	hits := 0
	for _, e := range top {
		x := uint64(exact[idRank(e.ArticleID)])
		if x >= uint64(kth) {
			hits++
		}
		if e.Count < x {
			q.under++
			continue
		}
		d := e.Count - x
		q.maxErr = max(q.maxErr, d)
		q.maxBound = max(q.maxBound, e.Bound)
		if d > e.Bound {
			q.overBound++
		}
		if x == 0 {
			q.mre += 1
		} else {
			q.mre += float64(d) / float64(x)
		}
	}
	q.precision = float64(hits) / float64(k)
	if len(top) > 0 {
		q.mre /= float64(len(top))
	}
	return q
}

// zipfReport evaluates every window, globally and in every category.
type zipfReport struct {
	global [][]quality // [window][0]
	cats   [][]quality // [window][category]
	worst  quality     // least precision, most error, over all answers
}

func evaluate(c *Counts, s *zipfStream, k int) zipfReport {
	var rep zipfReport
	rep.worst = quality{precision: 1}
	note := func(q quality) {
		rep.worst.precision = min(rep.worst.precision, q.precision)
		rep.worst.mre = max(rep.worst.mre, q.mre)
		rep.worst.maxErr = max(rep.worst.maxErr, q.maxErr)
		rep.worst.maxBound = max(rep.worst.maxBound, q.maxBound)
		rep.worst.under += q.under
		rep.worst.overBound += q.overBound
	}
	for w, spec := range c.Options().Windows {
		ex := s.exactCounts(spec)
		q := judge(c.TopK(w, "", k), k, ex, func(int) bool { return true })
		note(q)
		rep.global = append(rep.global, []quality{q})
		var cq []quality
		for ci, name := range zipfCategoryNames {
			q := judge(c.TopK(w, name, k), k, ex, func(r int) bool { return r%zipfCategories == ci })
			note(q)
			cq = append(cq, q)
		}
		rep.cats = append(rep.cats, cq)
	}
	return rep
}

// TestZipfAccuracy checks the default configuration against exact counts:
// 4M shares (8M increments with their categories) of Zipf(1.0) over
// 1,000,000 articles. Globally, the top 100 of every window must have
// precision >= 0.99 and mean relative error <= 1%. A category holds an
// eighth of the shares, so its 100th article is the 800th of the whole
// stream, whose count is within the sketch's noise: per category the top
// 25 must meet the same targets, the top 100 precision >= 0.95 and mean
// relative error <= 5%. Every reported count must be at least the exact
// count and within its bound of it.
func TestZipfAccuracy(t *testing.T) {
	if raceEnabled || testing.Short() {
		t.Skip("4M shares: skipped with -race and -short (the code under test is single-threaded)")
	}
	s := genZipf(1_000_000, zipfPhases(1_000_000), 1)
	c := New(Options{})
	perAdd := s.feed(c)
	check := func(what string, q quality, precision, mre float64) {
		t.Helper()
		if q.precision < precision || q.mre > mre || q.under > 0 || q.overBound > 0 {
			t.Errorf("%s: %v; %d under the exact count, %d beyond their bound", what, q, q.under, q.overBound)
		}
	}
	rep, rep25 := evaluate(c, s, 100), evaluate(c, s, 25)
	for w, spec := range c.Options().Windows {
		t.Logf("%s: %d increments; global top 100: %v", spec.Name, c.Mass(w), rep.global[w][0])
		check(spec.Name+" global top 100", rep.global[w][0], 0.99, 0.01)
		for ci, name := range zipfCategoryNames {
			check(spec.Name+" "+name+" top 100", rep.cats[w][ci], 0.95, 0.05)
			check(spec.Name+" "+name+" top 25", rep25.cats[w][ci], 0.99, 0.01)
		}
	}
	t.Logf("worst top 100: %v", rep.worst)
	t.Logf("worst top 25: %v", rep25.worst)
	t.Logf("%v per Add; %.1f MiB", perAdd, float64(c.MemoryBytes())/(1<<20))
	// Every estimate, not only the top ones, is an upper bound, within its
	// bound but with probability e^-depth.
	rng := rand.New(rand.NewPCG(2, 2))
	var buf [32]byte
	for w, spec := range c.Options().Windows {
		ex := s.exactCounts(spec)
		over := 0
		for range 2000 {
			r := rng.IntN(s.distinct)
			e := c.Count(w, rankID(&buf, r))
			if x := uint64(ex[r]); e.Count < x {
				t.Fatalf("%s: rank %d: estimate %d below exact %d", spec.Name, r, e.Count, x)
			} else if e.Count-x > e.Bound {
				over++
			}
		}
		if over > 2000/50 {
			t.Errorf("%s: %d of 2000 estimates exceed their bound", spec.Name, over)
		}
	}
}
