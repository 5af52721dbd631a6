// Package sketch counts shares per article over sliding event-time windows
// in memory fixed by configuration, whatever the number of distinct
// articles: a Count-Min Sketch with conservative update per window bucket,
// and a bounded candidate set per window and group for top-K. [Counts]
// offers what trending.Counts offers (Add, AddToCategory, TooOld,
// Watermark, TopK, Count, CategoryCount, MemoryBytes, Flush, Load), with
// estimates that carry an error bound instead of exact counts.
//
// # Windows
//
// The window rules are those of trending.Counts. Only event time (the
// share's timestamp, ms since the Unix epoch) is used, never the clock.
//
//   - The watermark W is the largest timestamp added so far.
//   - Each window is a ring of Buckets buckets of width Size/Buckets; the
//     bucket of a share is floor(ts/width). At watermark W a window covers
//     the buckets [floor(W/width) - (Buckets-1), floor(W/width)].
//   - A share counts in every window that covers its bucket at the
//     watermark, whatever order it arrives in, until W moves past its
//     bucket, which then expires: expiry is exact per bucket. A share older
//     than every window is not applied (Add returns false; TooOld tells
//     beforehand).
//   - Every share counts in the global group. A share with a category
//     counts in that category's group too; [Counts.AddToCategory] counts a
//     share in a category's group only (for a share Add counted globally
//     under no category that also counts under its article's topics).
//
// # Estimates
//
// Each bucket of each window holds a sketch of depth rows of width
// counters (uint32): a key hashes to one counter per row. Adding a key to
// a bucket increments only those of its counters that equal their least
// (conservative update). Each window also keeps the sum of its live
// buckets' sketches (uint64), updated on every Add and when a bucket
// expires; the estimate of a key in a window is the least, over rows, of
// its counter in that sum. Every counter of a bucket is at least the count
// in that bucket of every key that hashes to it, so the estimate is never
// below the key's count in the window.
//
// The keys of one window's sketches are the article (global group) and
// the (category, article) pairs. The mass of a window is the number of
// increments its live buckets took: one per share counted globally and one
// per share counted in a category. The error bound of an estimate n is
// min(n, ceil(e/width × mass)): the estimate exceeds the count by more
// than that with probability at most e^-depth (the Count-Min bound, which
// conservative update only tightens). With Epsilon and Delta, width is
// ceil(e/Epsilon) rounded up to a power of two and depth ceil(ln(1/Delta)),
// so the bound is at most Epsilon × mass with probability at least
// 1 - Delta. The probability is per estimate: the articles TopK reports
// are those whose estimates are high, so the bound of a reported count is
// a statement about that article, not a guarantee over a whole answer; in
// the tests no reported count exceeded its bound (the largest error is far
// below it).
//
// A category estimate is the lesser of the pair's estimate and the
// article's global estimate. That relies on AddToCategory's contract: no
// category count exceeds its article's global count. The global estimate
// is the more accurate one for an article whose shares all carry one
// category.
//
// # Top-K
//
// Every window and group (global, or one category) has a candidate set of
// at most MaxK × CandidatesPerK articles with their estimates, in a heap
// whose root is the member TopK ranks last. On each Add the article's new
// estimate in the window (computed by the update anyway) updates it if it
// is a member, and otherwise admits it if the set has room or it ranks
// before the root, which it replaces. When buckets of a window expire,
// the candidates whose counters (those of the article's global key, and
// in a category's set of its category key) held shares in them are
// re-estimated: each takes the lesser of its estimate and the article's
// current one, and those at zero leave. The other candidates' estimates
// read no counter the expiry lowered. A member's estimate is therefore
// the least of the article's estimates since its last Add: an upper
// bound of its count, and at most its current estimate (Count and
// CategoryCount report the lesser of the two, so they agree with TopK).
// TopK sorts the set: estimate descending, then article id ascending.
//
// Each window keeps an index from its counters to the candidates whose
// estimates read them, so that an expiry costs in proportion to the
// counters of the expired buckets, not to the number of candidates: with
// a few shares a second, the 1m window expires a bucket every second.
//
// What the candidates can miss: an article that never ranked among the
// set's members when it was shared is not reported later, even if the
// expiry of older shares of others would rank it in the top k. For that,
// more than (CandidatesPerK - 1) × MaxK members must rank above it at its
// last share and fall below it by expiry while it gets no share. An
// article id longer than MaxIDLen is counted but never a candidate.
//
// # Accuracy
//
// The default options (width 16384, depth 4, 200 candidates) were measured
// against exact counts on Zipf(1.0) shares, each article in one of 8
// categories, in three phases so that the 1m, 1h and 24h windows hold
// 0.5M, 2M and 4M shares over 1M distinct articles (twice as many shares
// over 10M), one in ten moved by up to ±30 s (TestZipfAccuracy;
// BenchmarkZipf10M). Worst over the three windows:
//
//	                          1M articles          10M articles
//	global top 100
//	  precision               1.00                 1.00
//	  mean relative error     0.001%               0.006%
//	  largest error (bound)   1 (1321)             1 (2641)
//	per category, top 25
//	  precision               1.00                 1.00
//	  mean relative error     0.02%                0.02%
//	per category, top 100
//	  precision               0.97                 0.97
//	  mean relative error     2.4%                 2.8%
//	  largest error           25                   38
//
// with no reported count below its exact count or beyond its bound. The
// 100th article of a category that holds an eighth of the shares is the
// 800th of the whole stream: its count is close to the noise of the
// sketch, which is proportional to the window's mass over the width.
// Within a cluster each partition holds an eighth of the articles (with 8
// partitions) and the merged top 100 takes about 12 from each, which is
// where a partition's estimates are accurate.
//
// # Memory
//
// Memory does not depend on the number of distinct articles. With B
// buckets over all windows, W windows, C = 1 + MaxCategories groups and
// K = MaxK × CandidatesPerK candidates per set, Counts holds at most:
//
//   - counters: a bucket that few shares touched holds its nonzero
//     counters as cells, 8 bytes each and a slot of an index (2 or 4
//     bytes), at most depth × width / 32 of them. A bucket with more holds
//     them in blocks of 64 counters of one row, allocated as counters are
//     first incremented and freed when the bucket expires (the next bucket
//     of its ring slot starts in blocks if it ended with more than half as
//     many nonzero counters). A block stores its counters in 8
//     bits until one of them passes 255, then in 16 bits until one passes
//     65,535, then in 32, and never narrower again while its bucket lives:
//     with its owner it takes 68, 132 or 260 bytes, and its bucket keeps
//     its reference and a bit per counter (whether it is nonzero), 12
//     bytes per block of the bucket. At most B × depth × width / 64 blocks
//     of 272 bytes in all (a bucket's cells take less than its blocks
//     could), and per class a few chunks of free or unused slots (below);
//     per bucket a list of the pages that changed since the last Flush;
//   - window sums: W × depth × width × 8 bytes;
//   - candidate sets: W × C × K entries (about 90 bytes each with their
//     index), and the article ids they refer to, each kept once, at most
//     W × C × K ids of at most MaxIDLen bytes (about 80 bytes more each
//     in their table), and a 64 KiB filter of them;
//   - the windows' indexes from counters to candidates: W × depth × width
//     × 4 bytes, and per candidate 2 × depth entries of 8 bytes and about
//     60 bytes more;
//   - categories: at most MaxCategories names of at most MaxIDLen bytes;
//   - the hashes of ids the next Flush writes or deletes: at most four
//     per candidate, 8 bytes each.
//
// The blocks of each width are slots of one slab, in chunks of 65 to 68
// KiB mapped from the operating system, off the Go heap, as are the
// buckets' tables of blocks: the garbage collector neither scans them nor
// counts them in its heap goal (which would let the heap grow to twice the
// counters), and the references to them hold no pointers. A freed slot is
// reused by the next block of its width; once a slab has more free slots
// than two buckets' blocks (a bucket's expiry frees about as many as the
// next bucket takes), its last blocks move into them and the chunks left
// empty are returned to the operating system, but one spare.
// [Counts.Release] returns the memory of a Counts its owner drops (the
// garbage collector does when the owner forgets).
//
// A bucket in blocks that its window has moved well past (at least
// Options.FreezeAfter, default 2 minutes, behind the newest bucket, and
// not one of the two newest) is rarely written again: Flush freezes it
// once its pages are stored, and Load as it reads it. Its counters are
// packed into one buffer off the Go heap, per block with a nonzero bit a
// byte w then its nonzero counters less one in w bits each (w the fewest
// that hold the block's largest), and its blocks are released; its tables
// stay. A share that lands in a frozen bucket thaws it back into blocks;
// expiry subtracts the packed counters without thawing. Freezing changes
// no counter: answers, Flush and Load are as without it (TestFreeze). A
// bucket is left in blocks if its packed form, in whole pages of the
// operating system, would not be smaller.
//
// [Options.MaxMemoryBytes] computes that bound, and [Counts.MemoryBytes]
// the current use, both on the Go heap and off it. With the default
// options (windows 1m/1h/24h of 60/60/96 buckets, width 16384, depth 4, 64
// categories, 200 candidates, ids up to 64 bytes) the bound is 77 MiB per
// partition, 58 MiB of it counter blocks and their tables and 5 MiB the
// indexes from counters to candidates: every block 32-bit, which takes a
// counter above 65,535 in each block of each bucket. What a partition
// holds is far less (BenchmarkPartitionMemory): at the product's target of
// 10 million shares a day on a node of 8 partitions (1.25 million shares
// over 24 hours, Zipf-popular articles among 625,000 or 1.25 million, 8
// categories), 9.5 MiB, of which 4.9 MiB off the heap (the buckets'
// tables, 2.6 MiB; the packed counters of the frozen buckets of the 1h and
// 24h windows, about 2 KiB and 20 KiB each; the blocks of their newest
// buckets; the 1m window's cells) and 4.0 MiB of Go heap (1.5 MiB of it
// the window sums), in 3,200 heap objects. Before buckets were frozen the
// same partition held 16.9 MiB, 12.4 MiB of it in blocks (nearly all
// 8-bit, a block for nearly every 64 counters of the 1h and 24h windows'
// buckets); whole pages of 32-bit counters on the heap took 51 MiB of heap in 49,000
// objects. A partition whose every bucket is dense at the design's rate
// (12,500 shares a second; BenchmarkLoad) holds 36 MiB.
//
// # Determinism
//
// Hashes are xxHash64 (seed 0) of the article id and of the category name,
// mixed with fixed constants: every process computes the same counters.
// Nothing depends on map iteration order or the clock. So:
//
//   - The same calls in the same order give the same state, the same
//     answers and byte-identical Flushes, wherever Flush is called in
//     between (Flush does not change what c counts; flushing at other
//     points stores the same state).
//   - Load of flushed state gives identical answers, and the loaded Counts
//     behaves as the flushed one under further calls.
//   - A different order of the same calls, as the engine allows between a
//     live run and a replay (a task interleaves its own partition with
//     forwarded records however reading and forwarding happened to
//     interleave them), keeps identical: the watermark, which shares count
//     in which window, the masses and so every bound, and the categories
//     counted. It does not keep the estimates: conservative update and the
//     candidate sets depend on the order within a bucket. Each estimate is
//     still at least the exact count and within its bound of it, and the
//     top of a window differs only where estimates are within their error
//     of each other.
//
// # Persistence
//
// [Counts.Flush] stages into the task's batch only what changed since the
// previous Flush. Keys are relative to the task's namespace and start with
// Options.Prefix (P):
//
//	P 'c'                                       → layout: version, depth, width,
//	                                              page size, category cap, windows
//	P 'm'                                       → watermark (uint64 BE)
//	P 'b' | window | bucket (uint64 BE)         → uvarint(mass)
//	P 'b' | window | bucket | page (uint16 BE)  → page of PageSize counters
//	P 'g' | slot                                → newest share (uint64 BE) | name
//	P 'i' | article hash (uint64 BE)            → article id
//	P 'k' | window | slot                       → candidates in heap order:
//	                                              (article hash uint64 BE,
//	                                              uvarint(estimate))*
//
// Slot 0 is the global group, 1..MaxCategories the categories. A page is
// written when one of its counters changed (a share dirties at most one
// page per row, key and window: 24 with the defaults), encoded as one
// format byte then either PageSize uvarints or (uvarint zeros skipped,
// uvarint count) pairs, whichever is shorter; a page of zeros is never
// stored. A bucket's mass is written when it changed, a candidate set when
// it changed, an article id when it entered a set and deleted when it left
// the last one. Expired buckets are removed with one DeleteRange per
// window. Values are absolute, so re-applying a batch is harmless.
// [Counts.Load] scans the keys once; it refuses state written with another
// layout ([ErrLayoutChanged]) and state it cannot decode ([ErrCorrupt]).
// The full state of a partition at the defaults (every page allocated,
// every candidate set full) is about 24 MB and loads in 0.1 to 0.3 s on a
// shared 2-core machine (BenchmarkLoad).
//
// # Limits
//
// A counter saturates at 2^32-1 increments in one bucket: beyond that its
// key's further shares in the bucket are not counted. A category name or
// article id longer than MaxIDLen is handled as documented at
// [Options.MaxIDLen]. Two article ids with the same 64-bit hash cannot
// both be candidates of one set at a time.
//
// # Concurrency
//
// Counts is not safe for concurrent use by writers: the owner serializes
// Add, AddToCategory, Flush and Load with every other call. The query
// methods (Count, CategoryCount, TopK, Categories, Watermark, Mass,
// MemoryBytes) only read, and may run concurrently with each other.
package sketch
