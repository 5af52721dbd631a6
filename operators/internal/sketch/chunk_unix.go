//go:build unix

package sketch

import (
	"os"
	"syscall"
)

// allocChunk returns at least n bytes of zeros (whole pages of the
// operating system) mapped from the operating system, off the Go heap:
// the garbage collector neither scans them nor counts them in its heap
// goal, which would otherwise let the heap grow to twice the counters.
// freeChunk returns them.
func allocChunk(n int) []byte {
	page := os.Getpagesize()
	n = (n + page - 1) / page * page
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		panic("sketch: map counter memory: " + err.Error())
	}
	return b
}

func freeChunk(b []byte) {
	if err := syscall.Munmap(b); err != nil {
		panic("sketch: unmap counter memory: " + err.Error())
	}
}
