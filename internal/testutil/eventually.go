// Package testutil holds what tests across the module share that is not a
// process harness (see cmd/newsflow/nodeproc).
package testutil

import (
	"testing"
	"time"
)

// Poll is how often Eventually checks.
const Poll = 20 * time.Millisecond

// Eventually calls check every Poll until it returns nil and returns how
// long that took; it fails the test with check's last error once timeout
// has passed. It, or EventuallyEvery, is the one way the tests wait for a
// condition.
func Eventually(tb testing.TB, timeout time.Duration, check func() error) time.Duration {
	tb.Helper()
	return EventuallyEvery(tb, timeout, Poll, check)
}

// EventuallyEvery is Eventually checking every interval instead of every
// Poll: for a check that compares answers which must be that far apart,
// or a wait whose duration is measured more finely than Poll.
func EventuallyEvery(tb testing.TB, timeout, interval time.Duration, check func() error) time.Duration {
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
		time.Sleep(interval)
	}
}
