package state

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

func TestNamespacesAreIsolatedAndBatchesAtomic(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	a, b := db.Namespace("task/x/1"), db.Namespace("task/x/10")
	ba := a.NewBatch()
	for i := 0; i < 5; i++ {
		ba.Set(fmt.Appendf(nil, "k%d", i), []byte{byte(i)})
	}
	bb := b.NewBatch()
	bb.Set([]byte("k0"), []byte("other"))
	if err := bb.Commit(); err != nil {
		t.Fatal(err)
	}
	// Nothing of an uncommitted batch is visible.
	if _, ok, _ := a.Get([]byte("k0")); ok {
		t.Fatal("uncommitted write visible")
	}
	if err := ba.Commit(); err != nil {
		t.Fatal(err)
	}
	var keys []string
	if err := a.Scan(nil, nil, func(k, v []byte) error { keys = append(keys, string(k)); return nil }); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(keys) != "[k0 k1 k2 k3 k4]" {
		t.Fatalf("scan of namespace a = %v (leaked across namespaces?)", keys)
	}
	d := a.NewBatch()
	d.DeleteRange([]byte("k1"), []byte("k3"))
	d.Delete([]byte("k4"))
	if err := d.Commit(); err != nil {
		t.Fatal(err)
	}
	keys = nil
	a.Scan(nil, nil, func(k, v []byte) error { keys = append(keys, string(k)); return nil })
	if fmt.Sprint(keys) != "[k0 k3]" {
		t.Fatalf("after deletes: %v", keys)
	}
	if err := a.Clear(); err != nil {
		t.Fatal(err)
	}
	if v, ok, _ := b.Get([]byte("k0")); !ok || !bytes.Equal(v, []byte("other")) {
		t.Fatalf("Clear of a touched b: %q %v", v, ok)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// Durable across reopen.
	db, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if v, ok, _ := db.Namespace("task/x/10").Get([]byte("k0")); !ok || string(v) != "other" {
		t.Fatalf("after reopen: %q %v", v, ok)
	}
	if _, ok, _ := db.Namespace("task/x/1").Get([]byte("k0")); ok {
		t.Fatal("cleared key back after reopen")
	}
}

// TestHoldCache: while the cache is held, a scan of a database opened
// again (as a restart restores) leaves at most restoreCacheBytes in the
// block cache; once released, the same scan caches more.
func TestHoldCache(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{CacheSize: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	val := make([]byte, 1000)
	for b := range 40 {
		bt := db.Namespace("t").NewBatch()
		for i := range 1000 {
			for j := range val {
				val[j] = byte(rng.Uint32())
			}
			if err := bt.Set(fmt.Appendf(nil, "k%02d-%04d", b, i), val); err != nil {
				t.Fatal(err)
			}
		}
		if err := bt.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if db, err = Open(dir, Options{CacheSize: 64 << 20}); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ns := db.Namespace("t")
	scan := func() {
		n := 0
		if err := ns.Scan(nil, nil, func(_, _ []byte) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
		if n != 40_000 {
			t.Fatalf("scanned %d keys, want 40000", n)
		}
	}
	release := db.HoldCache()
	scan()
	held := db.cache.Size()
	if held > restoreCacheBytes {
		t.Fatalf("held: %d bytes cached after scanning 40 MB, want at most %d", held, restoreCacheBytes)
	}
	release()
	release() // a second call does nothing
	scan()
	if size := db.cache.Size(); size < held+4<<20 {
		t.Fatalf("released: %d bytes cached after scanning 40 MB, held %d: want more", size, held)
	}
}

// Check answers nil while the database is open, ErrClosed once closed.
func TestCheck(t *testing.T) {
	db, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Check(); err != nil {
		t.Fatalf("open: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Check(); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed: %v", err)
	}
}

// A snapshot shows its namespace as it was when taken, and only it:
// later writes, deletions and other namespaces do not show.
func TestSnapshotIsPointInTime(t *testing.T) {
	db, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	a, other := db.Namespace("meta"), db.Namespace("metb")
	write := func(ns Namespace, k, v string) {
		b := ns.NewBatch()
		if v == "" {
			b.Delete([]byte(k))
		} else {
			b.Set([]byte(k), []byte(v))
		}
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	write(a, "k1", "old")
	write(a, "k2", "kept")
	write(other, "k0", "other namespace")
	s := a.Snapshot()
	write(a, "k1", "new")
	write(a, "k2", "")
	write(a, "k3", "later")
	var got []string
	if err := s.Scan(nil, nil, func(k, v []byte) error {
		got = append(got, string(k)+"="+string(v))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[k1=old k2=kept]" {
		t.Fatalf("snapshot holds %v, want [k1=old k2=kept]", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if v, ok, _ := a.Get([]byte("k1")); !ok || string(v) != "new" {
		t.Fatalf("k1 now %q %v", v, ok)
	}
}
