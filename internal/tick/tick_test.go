package tick

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

func TestEvery(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var n atomic.Int32
	done := make(chan error, 1)
	go func() { done <- Every(ctx, time.Millisecond, func() { n.Add(1) }) }()
	for deadline := time.Now().Add(5 * time.Second); n.Load() < 3; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d calls in 5s", n.Load())
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	after := n.Load()
	time.Sleep(10 * time.Millisecond)
	if n.Load() != after {
		t.Error("called after ctx was done")
	}
}
