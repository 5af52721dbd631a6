// Package embedded is the default, single-node backend of [eventlog.Log]: a
// durable partitioned log kept in its own Pebble database on local disk.
//
// # Layout
//
// All keys of one partition are contiguous, so a partition is read with one
// bounded iterator and trimmed with one range deletion:
//
//	"mv"                                  format version (1 byte)
//	"mt" | topic name                     topic id u32 BE | partition count u32 BE
//	"ms" | topic id u32 | partition u32   start offset u64 BE, written by retention
//	'r'  | topic id u32 | partition u32 | offset u64 BE     a record (see below)
//	'i'  | topic id u32 | partition u32 | end offset u64 BE  an index interval
//
// A record's value is flags byte | varint timestamp | uvarint key length |
// key | uvarint header count | headers | value, each header being uvarint
// key length | key | uvarint value length plus one (0 for nil) | value. The
// flags say whether key and value are nil, so nil and empty both round-trip
// exactly.
//
// # Index intervals
//
// The records of a partition are grouped, in offset order, into intervals of
// at most [Options.IndexIntervalRecords] records or about
// [Options.IndexIntervalBytes] bytes. When an interval fills up, an index
// entry holding its first offset, its largest timestamp and its size is
// written in the same Pebble batch as the record that closes it; the last
// interval of a partition is open and has no entry yet. The entries, also
// kept in memory, serve two purposes:
//
//   - OffsetForTime finds the first interval whose largest timestamp is >= ts
//     (every earlier record is older) and scans only from there.
//   - Retention deletes whole intervals from the front of a partition, so
//     offsets of the records that remain never change.
//
// # Concurrency
//
// One appender goroutine owns all writes to records and all per-partition
// write state. Append validates and encodes records in the caller's
// goroutine and sends them through a bounded channel (backpressure); the
// appender takes everything that is queued (up to [Options.MaxBatchRecords]
// and [Options.MaxBatchBytes]), assigns offsets, commits one Pebble batch
// (fsynced under [FsyncAlways], so concurrent Appends share one fsync) and
// only then publishes the new end offsets and wakes readers. Readers never
// look past a partition's published end, so a record is never visible
// before its batch is committed. Retention runs in the same goroutine,
// between batches, so it never races an append.
//
// Lock order: Log.topicMu, then Log.closeMu, then partition.mu, then
// partition.waiters.
package embedded
