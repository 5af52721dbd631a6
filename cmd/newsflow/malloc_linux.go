//go:build linux && cgo

package main

/*
#include <malloc.h>
*/
import "C"

import "os"

// Pebble allocates its memtables (4 to 64 MiB each) and block cache
// outside the Go heap with the C allocator. glibc serves such large blocks
// from its heap arenas once its mmap threshold has risen past them (it
// rises after each large block is freed), and then keeps the freed space
// resident: under steady ingestion, memtable after memtable, that grew a
// node's RSS by a hundred megabytes beyond what Pebble held. A fixed
// 128 KiB threshold (which also stops it rising) gives each large block
// its own mapping, returned to the system when Pebble frees it, and two
// arenas bound the per-thread heaps. MALLOC_MMAP_THRESHOLD_ or
// MALLOC_ARENA_MAX in the environment win.
func init() {
	if os.Getenv("MALLOC_MMAP_THRESHOLD_") == "" {
		C.mallopt(C.M_MMAP_THRESHOLD, 128<<10)
	}
	if os.Getenv("MALLOC_ARENA_MAX") == "" {
		C.mallopt(C.M_ARENA_MAX, 2)
	}
}
