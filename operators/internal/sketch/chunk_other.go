//go:build !unix

package sketch

// allocChunk returns n bytes of zeros (on the Go heap where memory cannot
// be mapped).
func allocChunk(n int) []byte { return make([]byte, n) }

func freeChunk([]byte) {}
