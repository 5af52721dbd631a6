// Package tick runs periodic work.
package tick

import (
	"context"
	"time"
)

// Every calls fn every d, the first time d after the call, until ctx is
// done; then it returns nil. fn runs on the caller's goroutine, so a slow
// call delays the next one rather than overlapping it.
func Every(ctx context.Context, d time.Duration, fn func()) error {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			fn()
		}
	}
}
