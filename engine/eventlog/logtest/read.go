package logtest

import (
	"context"
	"testing"
	"time"

	"github.com/newsflow/newsflow/engine/eventlog"
)

// ReadN polls r until it has returned n records, asking for at most max a
// poll, and returns them. It fails the test on an error, on a poll that
// breaks the Reader contract (no record, or more than asked for), and when
// the records do not arrive within 20 seconds.
func ReadN(tb testing.TB, r eventlog.Reader, n, max int) []*eventlog.Record {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out []*eventlog.Record
	for len(out) < n {
		ask := min(max, n-len(out))
		recs, err := r.Poll(ctx, ask)
		if err != nil {
			tb.Fatalf("poll after %d of %d records: %v", len(out), n, err)
		}
		if len(recs) == 0 || len(recs) > ask {
			tb.Fatalf("poll(max %d) returned %d records", ask, len(recs))
		}
		out = append(out, recs...)
	}
	return out
}
