package meta

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/newsflow/newsflow/state"
)

func TestLocal(t *testing.T) {
	dir := t.TempDir()
	db, err := state.Open(dir, state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s := NewLocal(db)
	for i := 0; i < 3; i++ {
		if err := s.Put(ctx, "sources", fmt.Sprint("s", i), []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	// A collection whose name is a prefix of another stays separate.
	if err := s.Put(ctx, "source", "x", []byte("other")); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "sources", "s1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "sources", "missing"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db, err = state.Open(dir, state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s = NewLocal(db)
	var keys []string
	if err := s.Scan(ctx, "sources", func(k string, v []byte) error { keys = append(keys, fmt.Sprintf("%s=%d", k, v[0])); return nil }); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(keys) != "[s0=0 s2=2]" {
		t.Fatalf("after reopen: %v", keys)
	}
	if v, ok, err := s.Get(ctx, "source", "x"); err != nil || !ok || string(v) != "other" {
		t.Fatalf("Get = %q %v %v", v, ok, err)
	}
	if _, ok, _ := s.Get(ctx, "sources", "s1"); ok {
		t.Fatal("deleted key still there")
	}
	if err := s.Put(ctx, "a\x00b", "k", nil); err != ErrBadName {
		t.Fatalf("NUL in collection: %v", err)
	}
}

// Of writers that read the same value, one Swap wins; the rest conflict.
func TestLocalSwap(t *testing.T) {
	db, err := state.Open(t.TempDir(), state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	s := NewLocal(db)
	if err := s.Swap(ctx, "c", "k", nil, []byte("v1")); !errors.Is(err, ErrConflict) {
		t.Fatalf("swap of a missing key: %v", err)
	}
	if err := s.Put(ctx, "c", "k", []byte("v0")); err != nil {
		t.Fatal(err)
	}
	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			switch err := s.Swap(ctx, "c", "k", []byte("v0"), []byte(fmt.Sprint("w", i))); {
			case err == nil:
				wins.Add(1)
			case !errors.Is(err, ErrConflict):
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d swaps from the same value won, want 1", wins.Load())
	}
	if v, _, _ := s.Get(ctx, "c", "k"); len(v) != 2 || v[0] != 'w' {
		t.Fatalf("value after the swaps: %q", v)
	}
}

// TestLocalPutBatch: a batch writes pairs of several collections; a batch
// with a bad pair writes none.
func TestLocalPutBatch(t *testing.T) {
	db, err := state.Open(t.TempDir(), state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	s := NewLocal(db)
	if err := s.PutBatch(ctx, []Pair{{"outbox", "a", []byte("1")}, {"mark", "m", []byte("2")}}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []Pair{{"outbox", "a", []byte("1")}, {"mark", "m", []byte("2")}} {
		if v, ok, err := s.Get(ctx, p.Collection, p.Key); err != nil || !ok || string(v) != string(p.Value) {
			t.Errorf("%s/%s: %q %v %v", p.Collection, p.Key, v, ok, err)
		}
	}
	if err := s.PutBatch(ctx, []Pair{{"outbox", "b", []byte("3")}, {"bad\x00", "x", nil}}); !errors.Is(err, ErrBadName) {
		t.Errorf("a batch with a bad collection: %v", err)
	}
	if _, ok, _ := s.Get(ctx, "outbox", "b"); ok {
		t.Error("a batch that failed wrote a pair")
	}
}
