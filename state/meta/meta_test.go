package meta

import (
	"context"
	"fmt"
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
