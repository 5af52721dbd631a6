package testutil

import (
	"bytes"
	"compress/gzip"
	"io"
	"testing"
)

// Compress returns b written through the compressing writer that wrap
// puts around a buffer, and closed.
func Compress(tb testing.TB, b []byte, wrap func(io.Writer) io.WriteCloser) []byte {
	tb.Helper()
	var buf bytes.Buffer
	w := wrap(&buf)
	if _, err := w.Write(b); err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// Gzip returns b gzipped.
func Gzip(tb testing.TB, b []byte) []byte {
	tb.Helper()
	return Compress(tb, b, func(w io.Writer) io.WriteCloser { return gzip.NewWriter(w) })
}
