package testutil

import (
	"fmt"
	"strings"
	"testing"
)

// recorder is a testing.TB that records how a helper ended it.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper()                        {}
func (r *recorder) Skip(args ...any)               { r.skipped = args[0].(string) }
func (r *recorder) Fatalf(format string, a ...any) { r.failed = fmt.Sprintf(format, a...) }

func TestNoSharedData(t *testing.T) {
	t.Setenv(DataRequiredEnv, "")
	r := &recorder{TB: t}
	NoSharedData(r, "corpus %s not found", "x")
	if r.skipped != "corpus x not found" || r.failed != "" {
		t.Fatalf("without %s: skipped %q, failed %q", DataRequiredEnv, r.skipped, r.failed)
	}
	t.Setenv(DataRequiredEnv, "1")
	r = &recorder{TB: t}
	NoSharedData(r, "corpus %s not found", "x")
	if r.skipped != "" || !strings.Contains(r.failed, DataRequiredEnv) {
		t.Fatalf("with %s=1: skipped %q, failed %q", DataRequiredEnv, r.skipped, r.failed)
	}
}
