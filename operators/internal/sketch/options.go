package sketch

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"os"
	"time"
	"unsafe"

	"github.com/newsflow/newsflow/internal/option"
)

// WindowSpec describes one sliding window: Buckets buckets of width
// Size/Buckets. The width must be a positive whole number of milliseconds.
// The trending operator's exact counts use it too.
type WindowSpec struct {
	Name    string        `yaml:"name"`
	Size    time.Duration `yaml:"size"`
	Buckets int           `yaml:"buckets"`
}

// Width returns the width of one bucket.
func (s WindowSpec) Width() time.Duration { return s.Size / time.Duration(s.Buckets) }

// DefaultWindows returns the windows of the trending stage: "1m" (60
// buckets of 1 s), "1h" (60 of 1 min) and "24h" (96 of 15 min).
func DefaultWindows() []WindowSpec {
	return []WindowSpec{
		{Name: "1m", Size: time.Minute, Buckets: 60},
		{Name: "1h", Size: time.Hour, Buckets: 60},
		{Name: "24h", Size: 24 * time.Hour, Buckets: 96},
	}
}

// Limits on the options.
const (
	MaxWindows = 255     // the window index is one byte in keys
	MaxBuckets = 1 << 16 // buckets per window
	// PageSize is the number of counters in a page, the unit of memory
	// allocation and of persistence. A row is at least one page wide.
	PageSize = 256
	// MaxDepth × MaxWidth / PageSize pages per bucket: a page index is
	// 16 bits in keys.
	MaxDepth      = 16
	MaxWidth      = 1 << 20
	MaxCategories = 255 // the category slot is one byte in keys
	MaxIDLen      = 4096
)

// Options configures a [Counts]. The zero value means [DefaultOptions]:
// each zero field takes its default.
type Options struct {
	// Windows are the sliding windows, addressed by their index in this
	// slice. Empty means DefaultWindows().
	Windows []WindowSpec `yaml:"-"`
	// Epsilon sets the sketch width: ceil(e/Epsilon) rounded up to a power
	// of two (at least PageSize). The error bound of an estimate is
	// e/width × the window's mass (see the package documentation), which
	// is at most Epsilon × the mass. Default 2e-4 (width 16384).
	Epsilon float64 `yaml:"epsilon"`
	// Delta sets the sketch depth: ceil(ln(1/Delta)) rows. An estimate
	// exceeds its bound with probability at most e^-depth <= Delta.
	// Default 0.02 (depth 4).
	Delta float64 `yaml:"delta"`
	// Width, if set, is the width itself (a power of two, PageSize to
	// MaxWidth) and Epsilon is ignored.
	Width int `yaml:"width"`
	// Depth, if set, is the depth itself (1 to MaxDepth) and Delta is
	// ignored.
	Depth int `yaml:"depth"`
	// MaxK is the largest k that TopK answers with the accuracy the
	// package documents (default 100). Larger k are answered from the
	// same candidates, up to their number.
	MaxK int `yaml:"-"`
	// CandidatesPerK sets the capacity of each candidate set: MaxK ×
	// CandidatesPerK articles per window and group (default 2).
	CandidatesPerK int `yaml:"candidates_per_k"`
	// MaxCategories bounds the categories counted at once (default 64, at
	// most MaxCategories). Shares of other categories count globally only.
	MaxCategories int `yaml:"max_categories"`
	// MaxIDLen is the longest article id a candidate set keeps, and the
	// longest category name counted (default 64 bytes, at most MaxIDLen).
	// A share with a longer article id is counted but its article is
	// never reported by TopK; a longer category counts globally only.
	MaxIDLen int `yaml:"-"`
	// FreezeAfter is how far behind its window's newest bucket a bucket
	// must be (and not one of the two newest) for Flush and Load to pack
	// its counters into a few bits each, releasing its blocks; a share
	// that arrives that late unpacks it again. Default 2 minutes: the
	// buckets of the 1m window are never packed, nearly all of the 1h and
	// 24h windows' are. Negative: never. Packing changes no count.
	FreezeAfter time.Duration `yaml:"freeze_after"`
	// Prefix is the first byte of every key Flush writes (default 'k'), so
	// the sketch can share a namespace with other state.
	Prefix byte `yaml:"-"`
}

// Defaults.
const (
	DefaultEpsilon        = 2e-4
	DefaultDelta          = 0.02
	DefaultMaxK           = 100
	DefaultCandidatesPerK = 2
	DefaultMaxCategories  = 64
	DefaultMaxIDLen       = 64
	DefaultPrefix         = 'k'
	DefaultFreezeAfter    = 2 * time.Minute
)

// DefaultOptions returns the options the zero value stands for.
func DefaultOptions() Options {
	return Options{
		Windows:        DefaultWindows(),
		Epsilon:        DefaultEpsilon,
		Delta:          DefaultDelta,
		MaxK:           DefaultMaxK,
		CandidatesPerK: DefaultCandidatesPerK,
		MaxCategories:  DefaultMaxCategories,
		MaxIDLen:       DefaultMaxIDLen,
		Prefix:         DefaultPrefix,
		FreezeAfter:    DefaultFreezeAfter,
	}
}

func (o Options) withDefaults() Options {
	if len(o.Windows) == 0 {
		o.Windows = nil // empty means the default windows too
	}
	option.Fill(&o, DefaultOptions())
	return o
}

// ErrInvalidOptions is wrapped by every error Validate returns.
var ErrInvalidOptions = errors.New("sketch: invalid options")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidOptions}, args...)...)
}

// Validate reports invalid option values. Zero values are valid: they
// stand for the defaults. Each option is checked on its own first, then
// the sizes they give together, then the windows.
func (o Options) Validate() error {
	if err := o.checkDimensions(); err != nil {
		return err
	}
	if err := o.checkLimits(); err != nil {
		return err
	}
	d := o.withDefaults()
	if depth, width := d.Sizes(); width > MaxWidth || depth > MaxDepth {
		return invalid("depth %d × width %d: at most width %d and depth %d", depth, width, MaxWidth, MaxDepth)
	}
	if d.MaxK*d.CandidatesPerK > 1<<20 {
		return invalid("max_k × candidates_per_k = %d, at most %d", d.MaxK*d.CandidatesPerK, 1<<20)
	}
	buckets, err := checkWindows(o.Windows)
	if err != nil {
		return err
	}
	if depth, width := d.Sizes(); buckets*depth*width/blockSize > maxBlocks {
		return invalid("%d buckets of depth %d × width %d counters: at most %d counters over all buckets",
			buckets, depth, width, maxBlocks*blockSize)
	}
	return nil
}

// checkDimensions checks the options that set the sketch's width and
// depth, each on its own.
func (o Options) checkDimensions() error {
	switch {
	case o.Epsilon < 0 || o.Epsilon >= 1 || math.IsNaN(o.Epsilon):
		return invalid("epsilon %v not in (0, 1)", o.Epsilon)
	case o.Delta < 0 || o.Delta >= 1 || math.IsNaN(o.Delta):
		return invalid("delta %v not in (0, 1)", o.Delta)
	case o.Width < 0 || o.Width > MaxWidth || (o.Width > 0 && (o.Width < PageSize || o.Width&(o.Width-1) != 0)):
		return invalid("width %d is not a power of two from %d to %d", o.Width, PageSize, MaxWidth)
	case o.Depth < 0 || o.Depth > MaxDepth:
		return invalid("depth %d not in 1..%d", o.Depth, MaxDepth)
	}
	return nil
}

// checkLimits checks the options that bound the candidates, categories,
// ids and windows, each on its own.
func (o Options) checkLimits() error {
	switch {
	case o.MaxK < 0 || o.MaxK > 100_000:
		return invalid("max_k %d not in 1..100000", o.MaxK)
	case o.CandidatesPerK < 0 || o.CandidatesPerK > 64:
		return invalid("candidates_per_k %d not in 1..64", o.CandidatesPerK)
	case o.MaxCategories < 0 || o.MaxCategories > MaxCategories:
		return invalid("max_categories %d not in 1..%d", o.MaxCategories, MaxCategories)
	case o.MaxIDLen < 0 || o.MaxIDLen > MaxIDLen:
		return invalid("max_id_len %d not in 1..%d", o.MaxIDLen, MaxIDLen)
	case len(o.Windows) > MaxWindows:
		return invalid("%d windows, at most %d", len(o.Windows), MaxWindows)
	}
	return nil
}

// checkWindows checks each window (a unique name, a positive size and a
// bucket width of whole milliseconds) and returns their buckets' total.
func checkWindows(windows []WindowSpec) (int, error) {
	seen := make(map[string]bool, len(windows))
	buckets := 0
	for i, w := range windows {
		switch {
		case w.Name == "":
			return 0, invalid("window %d has no name", i)
		case seen[w.Name]:
			return 0, invalid("window name %q is used twice", w.Name)
		case w.Buckets <= 0 || w.Buckets > MaxBuckets:
			return 0, invalid("window %q: %d buckets, want 1..%d", w.Name, w.Buckets, MaxBuckets)
		case w.Size <= 0:
			return 0, invalid("window %q: size %v is not positive", w.Name, w.Size)
		case w.Size%time.Duration(w.Buckets) != 0 || w.Width()%time.Millisecond != 0 || w.Width() < time.Millisecond:
			return 0, invalid("window %q: bucket width %v/%d is not a whole number of milliseconds", w.Name, w.Size, w.Buckets)
		}
		seen[w.Name] = true
		buckets += w.Buckets
	}
	return buckets, nil
}

// Sizes returns the sketch depth (rows) and width (counters per row) that
// the options give, defaults filled in.
func (o Options) Sizes() (depth, width int) {
	o = o.withDefaults()
	depth, width = o.Depth, o.Width
	if depth == 0 {
		depth = max(1, int(math.Ceil(math.Log(1/o.Delta)-1e-9)))
	}
	if width == 0 {
		want := math.Ceil(math.E/o.Epsilon - 1e-9)
		if want > MaxWidth {
			return depth, 2 * MaxWidth // refused by Validate
		}
		width = max(PageSize, 1<<bits.Len(uint(want)-1))
	}
	return depth, width
}

// Capacity returns the number of articles a candidate set holds.
func (o Options) Capacity() int {
	o = o.withDefaults()
	return o.MaxK * o.CandidatesPerK
}

// MaxMemoryBytes returns the most memory a [Counts] with these options can
// hold, on the Go heap and off it, whatever its input (see Memory in the
// package documentation). It assumes valid options.
func (o Options) MaxMemoryBytes() int {
	o = o.withDefaults()
	depth, width := o.Sizes()
	cells := depth * width
	pagesPerBucket := cells / PageSize
	buckets := 0
	for _, w := range o.Windows {
		buckets += w.Buckets
	}
	nw := len(o.Windows)
	n := int(unsafe.Sizeof(Counts{})) + int(unsafe.Sizeof(page{}))
	// Counter blocks: one per block position at most, 32-bit at most,
	// with its owner, and in its bucket's tables its reference and
	// nonzero bits. A class holds at most the free slots it keeps (two
	// buckets' blocks, or a chunk's), a chunk it has not filled and a
	// spare chunk (see slab.compact), and an Add may take a few blocks
	// before its compaction: the kept slots and four chunks more per
	// class, whose chunk lists are grown by doubling.
	positions := buckets * cells / blockSize
	n += positions * (blockSize*4 + 4 + 4 + 8)
	bl := newBlocks()
	for _, s := range []int{bl.b8.chunkBytes(), bl.b16.chunkBytes(), bl.b32.chunkBytes()} {
		chunks := (positions*(blockSize*4+4)+s-1)/s + 4
		n += 4*s + 2*chunks*(3*int(unsafe.Sizeof([]byte(nil)))+8)
	}
	n += 2 * cells / blockSize * (blockSize*(1+2+4) + 3*4) // the kept slots of each class
	// A bucket's tables are whole pages of the operating system.
	n += int(unsafe.Sizeof(blocks{})) + buckets*(2*int(unsafe.Sizeof([]byte(nil)))+os.Getpagesize())
	// A bucket holds cells (at most maxCells of 8 bytes and an index of
	// at most 4 × maxCells slots of 2 bytes) or blocks, not both: the
	// bound of its blocks covers its cells. Flush sorts a copy of them.
	// Per bucket: its dirty pages (list and bits).
	n += min(cells/cellListDivisor, maxCellsLimit) * 8
	n += buckets * (pagesPerBucket*4 + (pagesPerBucket+63)/64*8)
	n += buckets * int(unsafe.Sizeof(bucket{}))
	// Window totals.
	n += nw * (cells*8 + int(unsafe.Sizeof(window{})) + (o.MaxCategories+1)*8)
	// Candidate sets and the article ids they refer to (each kept once).
	sets := nw * (o.MaxCategories + 1)
	entries := sets * o.Capacity()
	// A set's index table has at most 2 slots per member (table.grow),
	// and so has the table of ids.
	n += sets * (int(unsafe.Sizeof(cset{})) + 2*o.Capacity()*int(unsafe.Sizeof(tableSlot[int32]{})))
	n += entries * (int(unsafe.Sizeof(entry{})) + 4 + 4) // entry, where, free
	n += 2*entries*int(unsafe.Sizeof(tableSlot[idRef]{})) + entries*o.MaxIDLen
	n += 2 << idFilterBits // idFilter
	// The windows' watch indexes: a chain head per counter, and per
	// candidate its nodes (2 × depth), its record, and its places in the
	// free list and the list of candidates an expiry touched.
	n += nw * (cells*4 + cells/8)
	n += entries * (2*depth*int(unsafe.Sizeof(watchNode{})) + int(unsafe.Sizeof(watcher{})) + 4 + 4 + int(unsafe.Sizeof(change{})) + 8)
	n += entries/8 + nw*8 // a bit per candidate: touched
	// Hashes of the ids the next Flush deletes, and its scratch for those
	// it writes: at most one per candidate each, in slices grown by
	// doubling.
	n += 4 * entries * 8
	// Categories.
	n += (o.MaxCategories + 1) * (int(unsafe.Sizeof(category{})) + catMapEntry + 2*o.MaxIDLen)
	// TopK's sort buffer, allocated per call.
	n += o.Capacity() * int(unsafe.Sizeof(entry{}))
	return n
}

// catMapEntry is the cost of an entry of the map of categories, used by
// MemoryBytes: key and value, padded, divided by the swiss table's load
// factor (7/8), plus control bytes.
const catMapEntry = 32 // string → int

// PushTop keeps h a min-heap of the (at most) k largest values pushed: h[0]
// is the k-th largest once k values are in. Trending's exact top-K uses it
// too.
func PushTop(h []uint32, k int, v uint32) []uint32 {
	if len(h) < k {
		h = append(h, v)
		for i := len(h) - 1; i > 0; {
			p := (i - 1) / 2
			if h[p] <= h[i] {
				break
			}
			h[p], h[i] = h[i], h[p]
			i = p
		}
		return h
	}
	if v <= h[0] {
		return h
	}
	h[0] = v
	for i := 0; ; {
		l, m := 2*i+1, i
		if l < len(h) && h[l] < h[m] {
			m = l
		}
		if r := l + 1; r < len(h) && h[r] < h[m] {
			m = r
		}
		if m == i {
			return h
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}
