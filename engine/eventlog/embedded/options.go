package embedded

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/newsflow/newsflow/internal/option"
)

// FsyncPolicy says when appended records are fsynced to disk.
type FsyncPolicy string

const (
	// FsyncAlways fsyncs every Append before it returns. Appends that are in
	// flight at the same time share one fsync (group commit). This is the
	// default.
	FsyncAlways FsyncPolicy = "always"
	// FsyncInterval does not fsync appends individually; a background
	// goroutine fsyncs the write-ahead log every [Options.SyncInterval].
	// Records acknowledged during the last interval can be lost if the
	// machine crashes, and, because Pebble buffers unsynced log writes in
	// memory for a short while, possibly also if the process crashes.
	FsyncInterval FsyncPolicy = "interval"
	// FsyncNever leaves syncing to the operating system; only Close syncs.
	// Recent records can be lost on any crash.
	FsyncNever FsyncPolicy = "never"
)

// KeepForever, as [Options.RetentionAge], disables retention by age.
const KeepForever time.Duration = -1

// Options configures an embedded log. The zero value of every field means
// its default (see [DefaultOptions]); only Dir is required.
type Options struct {
	// Dir is the directory of the log's Pebble database. Required.
	Dir string `yaml:"-"`

	// Fsync is the durability policy. Default FsyncAlways.
	Fsync FsyncPolicy `yaml:"fsync"`
	// SyncInterval is how often FsyncInterval syncs. Default 100ms.
	SyncInterval time.Duration `yaml:"sync_interval"`

	// RetentionAge deletes records whose index interval holds only records
	// with timestamps older than now minus RetentionAge. Default 7 days;
	// negative (KeepForever) keeps records forever.
	RetentionAge time.Duration `yaml:"retention_age"`
	// RetentionBytes bounds the size of each partition: while a partition is
	// larger, its oldest closed interval is deleted. The open interval is
	// never deleted for size. Default 0, unlimited.
	RetentionBytes int64 `yaml:"retention_bytes"`
	// RetentionCheckInterval is how often retention runs. Default 1 minute.
	RetentionCheckInterval time.Duration `yaml:"-"`
	// MemTableSize is the size of each of the log's Pebble memtables in
	// bytes. Default 64 MiB: appends land in the memtable first, and a
	// larger one flushes less often under heavy ingestion.
	MemTableSize int64 `yaml:"memtable_size"`
	// CacheSize is the log's Pebble block cache in bytes. Readers mostly
	// read the tail, from the memtables; the cache holds the blocks of
	// older records. Default 8 MiB.
	CacheSize int64 `yaml:"-"`

	// IndexIntervalRecords and IndexIntervalBytes bound an index interval,
	// the unit of retention and of the time index. Defaults 1024 records and
	// 1 MiB.
	IndexIntervalRecords int   `yaml:"-"`
	IndexIntervalBytes   int64 `yaml:"-"`

	// MaxBatchRecords and MaxBatchBytes bound one group commit. An Append
	// larger than either is still committed whole. Defaults 16384 records
	// and 4 MiB.
	MaxBatchRecords int `yaml:"-"`
	MaxBatchBytes   int `yaml:"-"`

	// Logger receives the log's and Pebble's messages. Default: discarded.
	Logger *slog.Logger `yaml:"-"`
	// Now is the clock retention compares timestamps with. Default time.Now.
	Now func() time.Time `yaml:"-"`
}

// DefaultOptions returns the options the zero value stands for, with Dir
// empty.
func DefaultOptions() Options {
	return Options{
		Fsync:                  FsyncAlways,
		SyncInterval:           100 * time.Millisecond,
		RetentionAge:           7 * 24 * time.Hour,
		RetentionBytes:         0,
		RetentionCheckInterval: time.Minute,
		MemTableSize:           64 << 20,
		CacheSize:              8 << 20,
		IndexIntervalRecords:   1024,
		IndexIntervalBytes:     1 << 20,
		MaxBatchRecords:        16384,
		MaxBatchBytes:          4 << 20,
		Logger:                 slog.New(slog.DiscardHandler),
		Now:                    time.Now,
	}
}

// Validate reports whether the options are usable. Zero values are valid
// and mean the default.
func (o Options) Validate() error {
	var errs []error
	if o.Dir == "" {
		errs = append(errs, errors.New("dir is required"))
	}
	switch o.Fsync {
	case "", FsyncAlways, FsyncInterval, FsyncNever:
	default:
		errs = append(errs, fmt.Errorf("fsync policy %q: want always, interval or never", o.Fsync))
	}
	errs = append(errs,
		option.NotNegative("sync interval", o.SyncInterval),
		option.NotNegative("retention bytes", o.RetentionBytes),
		option.NotNegative("retention check interval", o.RetentionCheckInterval),
		option.NotNegative("index interval records", o.IndexIntervalRecords),
		option.NotNegative("index interval bytes", o.IndexIntervalBytes),
		option.NotNegative("max batch records", o.MaxBatchRecords),
		option.NotNegative("max batch bytes", o.MaxBatchBytes))
	if o.MemTableSize < 0 || o.MemTableSize >= 4<<30 {
		errs = append(errs, fmt.Errorf("memtable size %d: want 0 (the default) to 4 GiB", o.MemTableSize))
	}
	errs = append(errs, option.NotNegative("cache size", o.CacheSize))
	return option.Join("embedded log", errs...)
}

// withDefaults returns o with every zero field set to its default.
func (o Options) withDefaults() Options {
	option.Fill(&o, DefaultOptions())
	return o
}

// retentionEnabled reports whether any retention rule is active.
func (o Options) retentionEnabled() bool {
	return o.RetentionAge > 0 || o.RetentionBytes > 0
}
