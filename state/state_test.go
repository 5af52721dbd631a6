package state

import (
	"bytes"
	"fmt"
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
