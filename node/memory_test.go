package node

import (
	"testing"

	"github.com/newsflow/newsflow/operators/trending"
)

// TestMemoryPlan: a cms node gets the 384 MiB limit by default and Pebble
// sizes from it that, with the Go runtime's limit and the reserve, add up
// to at most the limit; an exact node none unless it asks; settings given
// win over the shares; a negative limit is none.
func TestMemoryPlan(t *testing.T) {
	cfg, err := Load("../configs/newsflow.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	exact := cfg.MemoryPlan()
	if exact.Limit != 0 || exact.GoLimit != 0 {
		t.Fatalf("exact by default: limit %d, go %d; want none", exact.Limit, exact.GoLimit)
	}
	if exact.LogMemTable != 64<<20 || exact.StateMemTable != 32<<20 || exact.StateCache != 64<<20 || exact.LogCache != 8<<20 {
		t.Fatalf("exact by default: %+v, want the fixed defaults", exact)
	}

	cfg.Trending.Counter = trending.CounterCMS
	cms := cfg.MemoryPlan()
	if cms.Limit != DefaultCMSMemoryLimit {
		t.Fatalf("cms limit %d, want %d", cms.Limit, DefaultCMSMemoryLimit)
	}
	if cms.LogMemTable != 12<<20 || cms.StateMemTable != 12<<20 || cms.StateCache != 24<<20 || cms.LogCache != 6<<20 {
		t.Fatalf("cms plan %+v", cms)
	}
	total := cms.GoLimit + pebbleTables*(cms.LogMemTable+cms.StateMemTable) + cms.LogCache + cms.StateCache + memoryReserve
	if total != cms.Limit || cms.GoLimit < cms.Limit/4 {
		t.Fatalf("cms plan %+v adds up to %d, want %d", cms, total, cms.Limit)
	}
	applied := cfg
	cms.apply(&applied)
	if applied.State.CacheSize != 24<<20 || applied.Log.Embedded.MemTableSize != 12<<20 {
		t.Fatalf("applied: state cache %d, log memtable %d", applied.State.CacheSize, applied.Log.Embedded.MemTableSize)
	}

	cfg.State.CacheSize = 300 << 20
	if p := cfg.MemoryPlan(); p.StateCache != 300<<20 || p.GoLimit != p.Limit/4 {
		t.Fatalf("a cache set over the limit's share: %+v, want it kept and the Go runtime at its floor", p)
	}
	cfg.State.CacheSize = 0

	cfg.MemoryLimit = 2 << 30
	if p := cfg.MemoryPlan(); p.Limit != 2<<30 || p.LogMemTable != 64<<20 || p.StateMemTable != 32<<20 || p.StateCache != 64<<20 {
		t.Fatalf("2 GiB: %+v, want the shares capped at the defaults", p)
	}
	cfg.MemoryLimit = -1
	if p := cfg.MemoryPlan(); p.Limit != 0 || p.GoLimit != 0 || p.LogMemTable != 64<<20 {
		t.Fatalf("negative limit: %+v, want none", p)
	}
}
