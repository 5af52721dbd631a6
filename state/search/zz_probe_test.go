package search

import (
	"syscall"
	"testing"
	"time"
)

func cpuNow() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestZZProbe(t *testing.T) {
	ix, _ := newTestIndex(t, nil)
	next := 0
	for it := 0; it < 80; it++ {
		batch := make([]Doc, 1000)
		for i := range batch {
			batch[i] = benchDoc(next)
			next++
		}
		s := time.Now()
		if err := ix.Apply(batch, nil); err != nil {
			t.Fatal(err)
		}
		_ = s
	}
}

func TestZZTotal(t *testing.T) {
	ix, _ := newTestIndex(t, nil)
	next := 0
	s := time.Now()
	c := cpuNow()
	for it := 0; it < 40; it++ {
		batch := make([]Doc, 1000)
		for i := range batch {
			batch[i] = benchDoc(next)
			next++
		}
		if err := ix.Apply(batch, nil); err != nil {
			t.Fatal(err)
		}
	}
	ix.Close()
	t.Logf("%d docs in %v: %.0f docs/s, cpu %.0f us/doc", next, time.Since(s), float64(next)/time.Since(s).Seconds(), float64((cpuNow()-c).Microseconds())/float64(next))
}
