package state

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/newsflow/newsflow/internal/option"
)

// Options configures the state database. The zero value is valid.
type Options struct {
	// Sync makes every commit wait for fsync. State commits are atomic with
	// their input offsets, so a commit lost to a machine crash is simply
	// replayed from the log; Sync is off by default.
	Sync bool `yaml:"-"`
	// CacheSize is Pebble's block cache size in bytes (default 64 MiB).
	CacheSize int64 `yaml:"cache_size"`
	// MemTableSize is the size of each Pebble memtable in bytes (default
	// 32 MiB). Operators overwrite the same keys many times a second; a
	// larger memtable absorbs the overwrites before they reach a flush.
	MemTableSize int64 `yaml:"memtable_size"`
	// Logger receives Pebble's informational messages at debug level.
	Logger *slog.Logger `yaml:"-"`
}

// DefaultOptions returns the options used when none are given.
func DefaultOptions() Options { return Options{CacheSize: 64 << 20, MemTableSize: 32 << 20} }

// Validate reports invalid option values.
func (o Options) Validate() error {
	if o.CacheSize < 0 {
		return fmt.Errorf("state: cache size %d is negative", o.CacheSize)
	}
	if o.MemTableSize < 0 || o.MemTableSize >= 4<<30 {
		return fmt.Errorf("state: memtable size %d: want 0 (the default) to 4 GiB", o.MemTableSize)
	}
	return nil
}

// DB is a node's state database. It is safe for concurrent use.
type DB struct {
	db      *pebble.DB
	cache   *pebble.Cache // referenced until Close
	uncache sync.Once     // drops the reference
	sync    bool
	closed  atomic.Bool
}

// Open opens or creates the state database in dir.
func Open(dir string, opts Options) (*DB, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	option.Fill(&opts, DefaultOptions())
	cache := pebble.NewCache(opts.CacheSize)
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	po := &pebble.Options{Cache: cache, Logger: pebbleLogger{logger}, MemTableSize: uint64(opts.MemTableSize)}
	db, err := pebble.Open(dir, po)
	if err != nil {
		cache.Unref()
		return nil, fmt.Errorf("open state %s: %w", dir, err)
	}
	return &DB{db: db, cache: cache, sync: opts.Sync}, nil
}

// Close closes the database.
func (d *DB) Close() error {
	d.closed.Store(true)
	err := d.db.Close()
	d.uncache.Do(d.cache.Unref)
	return err
}

// restoreCacheBytes is the part of the block cache that HoldCache leaves
// to the reads it holds the rest from: enough for the index and filter
// blocks of a scan.
const restoreCacheBytes = 8 << 20

// HoldCache keeps the block cache at restoreCacheBytes (or its size, if
// smaller) until release is called. A node holds it while its tasks
// restore: their scans read whole namespaces once, and cached they would
// fill the cache with blocks that later reads seldom want, and set the
// process's peak memory (a cms node holding 10 million shares of the last
// 24 hours, default 64 MiB cache: 272-300 MB peak after a restart without
// the hold, 187-190 MB with it). release may be called more than once; it
// must be called before Close.
func (d *DB) HoldCache() (release func()) {
	n := d.cache.MaxSize() - restoreCacheBytes
	if n <= 0 {
		return func() {}
	}
	return sync.OnceFunc(d.cache.Reserve(int(n)))
}

// ErrClosed is Check's answer once the database is closed.
var ErrClosed = errors.New("state: closed")

// checkKey is the key Check reads: in no namespace ('s' prefixes them),
// never written.
var checkKey = []byte("check")

// Check reports whether the database is open and answers a read. It must
// not race with Close (a read of a closed Pebble database panics): the
// node's health check runs in the HTTP server, which stops first.
func (d *DB) Check() error {
	if d.closed.Load() {
		return ErrClosed
	}
	_, closer, err := d.db.Get(checkKey)
	switch {
	case err == nil:
		return closer.Close()
	case errors.Is(err, pebble.ErrNotFound):
		return nil
	}
	return fmt.Errorf("state: read: %w", err)
}

// Pebble exposes the underlying database for metrics and tests.
func (d *DB) Pebble() *pebble.DB { return d.db }

// Namespace returns the key space named name. Names must not contain a NUL
// byte, and no name may be a prefix of another followed by NUL.
func (d *DB) Namespace(name string) Namespace {
	p := make([]byte, 0, len(name)+2)
	p = append(p, 's')
	p = append(p, name...)
	p = append(p, 0)
	return Namespace{db: d, prefix: p}
}

// Namespace is a task's private key space. Keys passed to its methods are
// relative to the namespace. Namespace values are cheap to copy.
type Namespace struct {
	db     *DB
	prefix []byte
}

func (n Namespace) key(k []byte) []byte {
	out := make([]byte, 0, len(n.prefix)+len(k))
	return append(append(out, n.prefix...), k...)
}

// end returns the first key after the namespace.
func (n Namespace) end() []byte {
	e := bytes.Clone(n.prefix)
	e[len(e)-1]++ // prefix ends in 0x00, so this never overflows
	return e
}

// DiskUsage estimates the bytes the namespace takes on disk (Pebble's
// estimate: whole sstables, plus nothing for data still in memtables).
func (n Namespace) DiskUsage() (uint64, error) {
	return n.db.db.EstimateDiskUsage(n.prefix, n.end())
}

// Get returns a copy of the value stored at key, and whether it exists.
func (n Namespace) Get(key []byte) ([]byte, bool, error) {
	v, closer, err := n.db.db.Get(n.key(key))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	defer closer.Close()
	return bytes.Clone(v), true, nil
}

// Scan calls fn for each key in [lower, upper) in order; a nil upper means
// the end of the namespace. The key and value passed to fn are only valid
// during the call. Scan stops at the first error fn returns.
func (n Namespace) Scan(lower, upper []byte, fn func(key, value []byte) error) error {
	return n.scan(n.db.db, lower, upper, fn)
}

// iterable is what Scan reads: the database, or a snapshot of it.
type iterable interface {
	NewIter(*pebble.IterOptions) (*pebble.Iterator, error)
}

func (n Namespace) scan(r iterable, lower, upper []byte, fn func(key, value []byte) error) error {
	hi := n.end()
	if upper != nil {
		hi = n.key(upper)
	}
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: n.key(lower), UpperBound: hi})
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			it.Close()
			return err
		}
		if err := fn(it.Key()[len(n.prefix):], v); err != nil {
			it.Close()
			return err
		}
	}
	if err := it.Error(); err != nil {
		it.Close()
		return err
	}
	return it.Close()
}

// Snapshot is a point-in-time view of a namespace: later writes do not
// show in it. Close releases it; it is safe for concurrent use.
type Snapshot struct {
	ns   Namespace
	snap *pebble.Snapshot
}

// Snapshot returns a view of the namespace as it is now, without copying
// it: a cheap call, so a caller that must not block (a Raft FSM) can take
// it and read it later.
func (n Namespace) Snapshot() *Snapshot {
	return &Snapshot{ns: n, snap: n.db.db.NewSnapshot()}
}

// Scan is Namespace.Scan over the snapshot.
func (s *Snapshot) Scan(lower, upper []byte, fn func(key, value []byte) error) error {
	return s.ns.scan(s.snap, lower, upper, fn)
}

// Close releases the snapshot.
func (s *Snapshot) Close() error { return s.snap.Close() }

// Clear deletes every key of the namespace.
func (n Namespace) Clear() error {
	return n.db.db.DeleteRange(n.prefix, n.end(), pebble.Sync)
}

// NewBatch starts an atomic group of writes to the namespace.
func (n Namespace) NewBatch() *Batch {
	return &Batch{ns: n, b: n.db.db.NewBatch()}
}

// PrefixEnd returns the least key greater than every key that starts
// with p (nil if there is none), the upper bound of a prefix scan.
func PrefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// Reader reads committed state of one namespace. Namespace implements it.
type Reader interface {
	Get(key []byte) ([]byte, bool, error)
	Scan(lower, upper []byte, fn func(key, value []byte) error) error
}

var _ Reader = Namespace{}

// Writer stages writes. Keys are relative to the namespace; the batch copies
// keys and values, so callers may reuse their buffers.
type Writer interface {
	Set(key, value []byte) error
	Delete(key []byte) error
	DeleteRange(start, end []byte) error
}

// Batch is an atomic group of writes to one namespace. It is not safe for
// concurrent use.
type Batch struct {
	ns  Namespace
	b   *pebble.Batch
	buf []byte
}

var _ Writer = (*Batch)(nil)

func (b *Batch) abs(k []byte) []byte {
	b.buf = append(append(b.buf[:0], b.ns.prefix...), k...)
	return b.buf
}

// Set stages key = value.
func (b *Batch) Set(key, value []byte) error { return b.b.Set(b.abs(key), value, nil) }

// Delete stages the removal of key.
func (b *Batch) Delete(key []byte) error { return b.b.Delete(b.abs(key), nil) }

// DeleteRange stages the removal of every key in [start, end).
func (b *Batch) DeleteRange(start, end []byte) error {
	s := bytes.Clone(b.abs(start))
	return b.b.DeleteRange(s, b.abs(end), nil)
}

// Len returns the number of staged operations.
func (b *Batch) Len() int { return int(b.b.Count()) }

// Commit applies the batch atomically and releases it.
func (b *Batch) Commit() error {
	opt := pebble.NoSync
	if b.ns.db.sync {
		opt = pebble.Sync
	}
	err := b.b.Commit(opt)
	b.b.Close()
	return err
}

// CommitSync applies the batch atomically and waits for it to be on disk,
// whatever the database's Sync option; for metadata that must survive a
// machine crash once acknowledged.
func (b *Batch) CommitSync() error {
	err := b.b.Commit(pebble.Sync)
	b.b.Close()
	return err
}

// Discard releases the batch without applying it.
func (b *Batch) Discard() { b.b.Close() }

type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	p.l.Debug(fmt.Sprintf(format, args...), "component", "pebble")
}
func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error(fmt.Sprintf(format, args...), "component", "pebble")
}
func (p pebbleLogger) Fatalf(format string, args ...any) {
	p.l.Error(fmt.Sprintf(format, args...), "component", "pebble")
	panic(fmt.Sprintf(format, args...))
}

// Memory is what a Pebble database holds outside the Go heap: its
// memtables (and large batches), the memtables flushed but still read by
// an iterator (zombies), and its block cache.
type Memory struct {
	MemTables, ZombieMemTables, BlockCache int64
}

// PebbleMemory returns a database's Memory.
func PebbleMemory(db *pebble.DB) Memory {
	m := db.Metrics()
	return Memory{MemTables: int64(m.MemTable.Size), ZombieMemTables: int64(m.MemTable.ZombieSize), BlockCache: m.BlockCache.Size}
}

// Memory returns the state database's Memory (zero once it is closed).
func (d *DB) Memory() Memory {
	if d == nil || d.closed.Load() {
		return Memory{}
	}
	return PebbleMemory(d.db)
}
