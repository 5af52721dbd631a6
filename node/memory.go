package node

import (
	"fmt"
	"log/slog"

	"github.com/newsflow/newsflow/operators/trending"
)

// A node's memory: Pebble's memtables and block caches live outside the
// Go heap (allocated by Pebble itself), everything else in it. A memory
// limit (Config.MemoryLimit) sizes the Pebble parts that the configuration
// leaves at 0 as shares of it and gives the rest, less what the binary and
// the C allocations take, to the Go runtime as its soft limit
// (runtime/debug.SetMemoryLimit, set by newsflow run), so that the
// collector works harder as the heap nears it instead of letting it grow
// to twice the live data. The shares, for a limit L:
//
//   - each of the log's memtables: L/32 (4 to 64 MiB), and up to three at
//     once (one filling, two flushing);
//   - each of the state's memtables: L/32 (4 to 32 MiB), three at once;
//   - the state's block cache: L/16 (4 to 64 MiB); the log's: L/64 (2 to
//     8 MiB);
//   - the Go runtime: what is left after those and memoryReserve, at least
//     L/4.
//
// Without a limit the Pebble parts have their fixed defaults (64 MiB log
// memtables, 32 MiB state memtables, a 64 MiB state cache and an 8 MiB log
// cache) and the Go runtime none.

// DefaultCMSMemoryLimit is the memory limit of a node counting with the
// sketch (trending.counter: cms) when memory_limit is 0: the counter's
// memory is fixed, so the whole node is.
const DefaultCMSMemoryLimit = 384 << 20

// memoryReserve is what a limit keeps for the binary's pages, the C
// allocations and the runtime's own structures outside its limit.
const memoryReserve = 56 << 20

// pebbleTables is how many memtables of a database may be held at once:
// the mutable one and the queued ones Pebble flushes (its default
// MemTableStopWritesThreshold is 2).
const pebbleTables = 3

// MemoryPlan is how a node divides its memory.
type MemoryPlan struct {
	// Limit is the node's memory limit in bytes, 0 for none.
	Limit int64
	// GoLimit is the Go runtime's soft limit in bytes, 0 for none.
	GoLimit                   int64
	LogMemTable, LogCache     int64
	StateMemTable, StateCache int64
}

// MemoryPlan returns the division of the node's memory its configuration
// asks for: the limit (memory_limit; 0 is DefaultCMSMemoryLimit with the
// cms counter and none with exact; negative is none) and the Pebble sizes,
// each as configured or, left at 0, from the limit.
func (c Config) MemoryPlan() MemoryPlan {
	p := MemoryPlan{Limit: c.MemoryLimit}
	switch {
	case p.Limit < 0:
		p.Limit = 0
	case p.Limit == 0 && c.Trending.Counter == trending.CounterCMS:
		p.Limit = DefaultCMSMemoryLimit
	}
	share := func(set int64, div, lo, hi, def int64) int64 {
		switch {
		case set > 0:
			return set
		case p.Limit == 0:
			return def
		}
		return min(max(p.Limit/div, lo), hi)
	}
	p.LogMemTable = share(c.Log.Embedded.MemTableSize, 32, 4<<20, 64<<20, 64<<20)
	p.LogCache = share(c.Log.Embedded.CacheSize, 64, 2<<20, 8<<20, 8<<20)
	p.StateMemTable = share(c.State.MemTableSize, 32, 4<<20, 32<<20, 32<<20)
	p.StateCache = share(c.State.CacheSize, 16, 4<<20, 64<<20, 64<<20)
	if p.Limit > 0 {
		pebble := pebbleTables*(p.LogMemTable+p.StateMemTable) + p.LogCache + p.StateCache
		p.GoLimit = max(p.Limit-pebble-memoryReserve, p.Limit/4)
	}
	return p
}

// apply sets the Pebble sizes of the plan in c.
func (p MemoryPlan) apply(c *Config) {
	c.Log.Embedded.MemTableSize, c.Log.Embedded.CacheSize = p.LogMemTable, p.LogCache
	c.State.MemTableSize, c.State.CacheSize = p.StateMemTable, p.StateCache
}

// Log describes the plan in the node's log.
func (p MemoryPlan) Log(logger *slog.Logger) {
	if p.Limit == 0 {
		logger.Info("memory: no limit (memory_limit)", "log_memtable", mib(p.LogMemTable), "state_memtable", mib(p.StateMemTable),
			"state_cache", mib(p.StateCache))
		return
	}
	logger.Info("memory limit", "limit", mib(p.Limit), "go", mib(p.GoLimit), "log_memtable", mib(p.LogMemTable),
		"log_cache", mib(p.LogCache), "state_memtable", mib(p.StateMemTable), "state_cache", mib(p.StateCache))
	if p.Limit < 4*memoryReserve {
		logger.Warn(fmt.Sprintf("memory_limit %s is below %s: the node will not keep to it", mib(p.Limit), mib(4*memoryReserve)))
	}
}
