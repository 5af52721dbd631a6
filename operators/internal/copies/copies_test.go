package copies

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/newsflow/newsflow/state"
)

// TestAwait: a read waits until the partition's copy has applied the
// offset asked for, a partition without a copy is ErrUnavailable at once,
// a copy that never gets there ends with the context, and a partition
// beyond the set is an error.
func TestAwait(t *testing.T) {
	db, err := state.Open(t.TempDir(), state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r := db.Namespace("t")
	s := New(2)
	ctx := context.Background()
	if _, err := s.Await(ctx, 0, 0); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("no copy: %v, want ErrUnavailable", err)
	}
	if err := s.Publish(0, r, 3); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		_, err := s.Await(ctx, 0, 5)
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("returned before offset 5 was applied: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	if err := s.Publish(0, r, 5); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("after offset 5: %v", err)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := s.Await(short, 0, 6); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("never applied: %v, want the deadline", err)
	}
	if _, err := s.Await(ctx, 2, 0); err == nil || s.Check(2) == nil || s.Check(1) != nil {
		t.Fatal("partition 2 of 2 was not refused")
	}
	// A stored position.
	b := db.Namespace("t").NewBatch()
	if err := WritePosition(b, []byte{'o'}, 42); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if pos, err := s.PublishStored(1, r, []byte{'o'}); err != nil || pos != 42 {
		t.Fatalf("stored position %d, %v; want 42", pos, err)
	}
	if _, err := s.Await(ctx, 1, 42); err != nil {
		t.Fatal(err)
	}
}
