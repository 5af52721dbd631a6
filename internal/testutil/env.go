package testutil

import (
	"os"
	"strconv"
	"testing"
)

// EnvInt reads a positive integer from the environment variable name, or
// returns def if it is unset; anything else fails tb.
func EnvInt(tb testing.TB, name string, def int) int {
	tb.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v <= 0 {
		tb.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return v
}
