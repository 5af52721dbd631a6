package testutil

import (
	"os"
	"os/exec"
	"testing"
)

// PromtoolRequiredEnv names the environment variable that turns a missing
// promtool into a failure instead of a skip: CI sets it to 1 (.ci/run
// installs Debian's prometheus package, which ships promtool).
const PromtoolRequiredEnv = "NEWSFLOW_PROMTOOL_REQUIRED"

// Promtool returns the path of Prometheus's promtool, which checks and
// unit-tests rule files; without it tb is skipped, or fails if
// PromtoolRequiredEnv is 1.
func Promtool(tb testing.TB) string {
	tb.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		msg := "promtool is not installed (apt-get install prometheus, or a Prometheus release archive)"
		if os.Getenv(PromtoolRequiredEnv) == "1" {
			tb.Fatalf("%s=1 and %s", PromtoolRequiredEnv, msg)
		}
		tb.Skip(msg)
	}
	return p
}
