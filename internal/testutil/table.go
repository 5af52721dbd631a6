package testutil

import (
	"fmt"
	"strconv"
	"testing"
)

// CheckFunc checks a function of one argument against a table: f(in)
// must be want[in] for every entry. Each mismatch is reported, as
// name(in) = got, want want, and the test goes on.
func CheckFunc[In, Out comparable](tb testing.TB, name string, f func(In) Out, want map[In]Out) {
	tb.Helper()
	for in, w := range want {
		if got := f(in); got != w {
			tb.Errorf("%s(%s) = %s, want %s", name, show(in), show(got), show(w))
		}
	}
}

// show formats v for a failure message: strings quoted, so that blanks
// and empty strings can be seen.
func show(v any) string {
	if s, ok := v.(string); ok {
		return strconv.Quote(s)
	}
	return fmt.Sprint(v)
}
