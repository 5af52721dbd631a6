package testutil

import (
	"fmt"
	"slices"
	"testing"
)

// errorsTB records the errors reported to it.
type errorsTB struct {
	testing.TB
	errors []string
}

func (e *errorsTB) Helper() {}

func (e *errorsTB) Errorf(format string, args ...any) {
	e.errors = append(e.errors, fmt.Sprintf(format, args...))
}

func TestCheckFunc(t *testing.T) {
	tb := &errorsTB{TB: t}
	CheckFunc(tb, "double", func(n int) int { return 2 * n }, map[int]int{1: 2, 2: 4})
	if tb.errors != nil {
		t.Fatalf("a right table failed: %q", tb.errors)
	}
	CheckFunc(tb, "tail", func(s string) string { return s[1:] }, map[string]string{"ab": "b", "xy": "x", " z": ""})
	slices.Sort(tb.errors)
	want := []string{`tail(" z") = "z", want ""`, `tail("xy") = "y", want "x"`}
	if !slices.Equal(tb.errors, want) {
		t.Fatalf("wrong entries reported as %q, want %q", tb.errors, want)
	}
}
