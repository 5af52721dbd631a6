package query_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/internal/testutil"
	"github.com/newsflow/newsflow/query"
	"github.com/valyala/fasthttp"
)

// An Idempotency-Key retry that reaches another node of the cluster gets
// the first response back and appends nothing; the same event (same
// event_id) sent without a key to two nodes counts once. Counts are read
// through both nodes.
func TestClusterIngestOnce(t *testing.T) {
	c := newClusterNet(t, map[string][]int32{"a": {0, 2}, "b": {1, 3}}, withQuery(query.Options{PeerTimeout: time.Second}))
	a, b := c.node("a"), c.node("b")
	now := c.clock.ms(0)
	var batch strings.Builder
	for i := range 20 {
		fmt.Fprintln(&batch, share(fmt.Sprint("k", i), fmt.Sprint("idem-", i%4), now))
	}
	first := a.post(t, pathBatch, batch.String(), query.HeaderIdempotencyKey, "batch-1")
	wantFresh(t, first, fasthttp.StatusAccepted)
	before := b.appended(t)
	testutil.Eventually(t, 5*time.Second, func() error {
		r := b.post(t, pathBatch, batch.String(), query.HeaderIdempotencyKey, "batch-1")
		if r.header[replayedHeader] != "true" {
			return fmt.Errorf("retry through b was applied again: %s", r)
		}
		wantReplay(t, first, r)
		return nil
	})
	if got := b.appended(t); got != before {
		t.Fatalf("the retry through b appended %d records", got-before)
	}
	// The same event through both nodes, without a key.
	ev := share("twice", "idem-dup", now)
	wantFresh(t, a.post(t, pathShare, ev), fasthttp.StatusAccepted)
	wantFresh(t, b.post(t, pathShare, ev), fasthttp.StatusAccepted)
	for _, n := range []*testNode{a, b} {
		n.waitCaughtUp(t)
	}
	for _, n := range []*testNode{a, b} {
		for i := range 4 {
			n.waitShares(t, fmt.Sprint("idem-", i), counts(5, 5, 5))
		}
		n.waitShares(t, "idem-dup", counts(1, 1, 1))
	}
}
