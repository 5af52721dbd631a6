package query

import (
	"bytes"
	"testing"
)

// A scope is a digest that tells the path, the caller and the key apart,
// whatever bytes they hold.
func TestIdempotencyScope(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range [][3]string{{"/a", "u", "k"}, {"/a", "uk", ""}, {"/a", "", "uk"}, {"/au", "", "k"}, {"/a", "u", "K"}} {
		s := idempotencyScope([]byte(c[0]), c[1], c[2])
		if len(s) != 32 || seen[s] {
			t.Fatalf("scope of %q: %x", c, s)
		}
		seen[s] = true
	}
	if bytes.Equal(idempotencyRequestSum([]byte("/a"), []byte("b")), idempotencyRequestSum([]byte("/ab"), nil)) {
		t.Fatal("request digest does not separate path and body")
	}
}
