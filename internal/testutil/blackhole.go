package testutil

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BlackHole is a TCP server that accepts connections and never answers:
// a receiver that hangs. It counts the connections it accepted and those
// the sender has not hung up yet, and notes when it accepted each. It
// closes when the test ends.
type BlackHole struct {
	ln       net.Listener
	accepted atomic.Int32
	open     atomic.Int32
	mu       sync.Mutex
	at       []time.Time // of the accepts
}

// NewBlackHole listens on a free port of 127.0.0.1.
func NewBlackHole(tb testing.TB) *BlackHole {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	b := &BlackHole{ln: ln}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			b.mu.Lock()
			b.at = append(b.at, time.Now())
			b.mu.Unlock()
			b.accepted.Add(1)
			b.open.Add(1)
			wg.Go(func() {
				_, _ = io.Copy(io.Discard, c) // until the sender hangs up
				b.open.Add(-1)
			})
		}
	})
	tb.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return b
}

// Addr is the address it listens on (host:port).
func (b *BlackHole) Addr() string { return b.ln.Addr().String() }

// Accepted counts the connections accepted so far.
func (b *BlackHole) Accepted() int { return int(b.accepted.Load()) }

// Open counts the accepted connections the sender has not closed.
func (b *BlackHole) Open() int { return int(b.open.Load()) }

// Crowded returns the shortest time within which n+1 connections were
// accepted (0 when there were not that many).
func (b *BlackHole) Crowded(n int) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	var least time.Duration
	for i := 0; i+n < len(b.at); i++ {
		if d := b.at[i+n].Sub(b.at[i]); i == 0 || d < least {
			least = d
		}
	}
	return least
}
