// Package testutil holds what tests across the module share that is not a
// process harness (see internal/nodeproc).
package testutil

import (
	"testing"
	"time"
)

// Poll is how often Eventually checks.
const Poll = 20 * time.Millisecond

// Eventually calls check every Poll until it returns nil and returns how
// long that took; it fails the test with check's last error once timeout
// has passed. It is the one way the tests wait for a condition.
func Eventually(tb testing.TB, timeout time.Duration, check func() error) time.Duration {
	tb.Helper()
	start := time.Now()
	for {
		err := check()
		if err == nil {
			return time.Since(start)
		}
		if time.Since(start) > timeout {
			tb.Fatalf("not within %s: %v", timeout, err)
		}
		time.Sleep(Poll)
	}
}
