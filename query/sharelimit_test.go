package query_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/newsflow/newsflow/query"
	"github.com/valyala/fasthttp"
)

// An anonymous client's share flood counts only up to its event limit,
// whatever the number of requests or batches: the lines beyond are
// rejected with the reason (a single share: 429), never dropped silently.
// The ingestion token and sessions are not limited.
func TestShareFloodLimited(t *testing.T) {
	n := newTestNode(t, withQuery(query.Options{RateLimits: query.RateLimits{SharesPerIP: 0.001, BurstSharesIP: 10}}))
	now := n.clock.ms(0)
	anon := []string{"X-Anonymous", "1"}
	var lines []string
	for i := range 25 {
		lines = append(lines, share(fmt.Sprintf("flood-%d", i), "flooded", now))
	}
	// Invalid lines take nothing of the budget.
	if r := n.post(t, pathBatch, "nope\n"+share("", "flooded", now)+"\n"+share("old", "flooded", 1), anon...); r.status != fasthttp.StatusBadRequest {
		t.Fatalf("invalid lines: %s", r)
	}
	// A batch of 25 fresh event ids: 10 count.
	r := n.post(t, pathBatch, strings.Join(lines, "\n"), anon...)
	b := decodeBatch(t, r)
	if r.status != fasthttp.StatusMultiStatus || *b.Accepted != 10 || *b.Rejected != 15 || len(b.Errors) != 15 || !strings.Contains(b.Errors[0].Error, "share limit") || b.Errors[0].Line != 11 {
		t.Fatalf("flood batch: %s", r)
	}
	if r.header["Retry-After"] == "" {
		t.Errorf("no Retry-After on a batch over the limit: %v", r.header)
	}
	// Then nothing more, in batches or one at a time.
	r = n.post(t, pathBatch, share("flood-more-1", "flooded", now)+"\n"+share("flood-more-2", "flooded", now), anon...)
	if b := decodeBatch(t, r); r.status != fasthttp.StatusTooManyRequests || *b.Accepted != 0 || *b.Rejected != 2 {
		t.Fatalf("batch after the limit: %s", r)
	}
	for i := range 5 {
		r := n.post(t, pathShare, share(fmt.Sprintf("flood-one-%d", i), "flooded", now), anon...)
		wantError(t, r, fasthttp.StatusTooManyRequests, "share limit")
		if r.header["Retry-After"] == "" {
			t.Fatalf("429 without Retry-After: %v", r.header)
		}
	}
	// The ingestion token and a reader's session are not limited.
	lines = lines[:0]
	for i := range 50 {
		lines = append(lines, share(fmt.Sprintf("svc-%d", i), "flooded", now))
	}
	if r := n.post(t, pathBatch, strings.Join(lines, "\n"), bearer(testIngestToken)...); r.status != fasthttp.StatusAccepted {
		t.Fatalf("ingestion token batch: %s", r)
	}
	tok := login(t, n, "/api/v1/auth/register", "sharer", "a long enough password")
	uid := userID(t, n, tok)
	lines = lines[:0]
	for i := range 20 {
		lines = append(lines, share(fmt.Sprintf("user-%d", i), "flooded", now, "user_id", uid))
	}
	if r := n.post(t, pathBatch, strings.Join(lines, "\n"), bearer(tok)...); r.status != fasthttp.StatusAccepted {
		t.Fatalf("session batch: %s", r)
	}
	// 10 anonymous, 50 from the ingestion token, and the reader's 20
	// shares of one article, which count once (trending.repeat_shares).
	n.waitShares(t, "flooded", counts(61, 61, 61))
	n.waitCaughtUp(t)
	n.waitShares(t, "flooded", counts(61, 61, 61))
}
