package query

import (
	"fmt"
	"strings"
	"testing"

	"github.com/newsflow/newsflow/operators/readstate"
	"github.com/valyala/fasthttp"
)

// TestReadStateUnavailableIs503: while this node has no copy of a
// reader's partition (its task moves away and the standby copy starts),
// a request that reads the reader's state answers 503 with Retry-After,
// which the client may send again, not 500.
func TestReadStateUnavailableIs503(t *testing.T) {
	var ctx fasthttp.RequestCtx
	metaError(&ctx, "read state", fmt.Errorf("load: %w", readstate.ErrUnavailable))
	if ctx.Response.StatusCode() != fasthttp.StatusServiceUnavailable || len(ctx.Response.Header.Peek("Retry-After")) == 0 {
		t.Fatalf("status %d, Retry-After %q; want 503 with Retry-After", ctx.Response.StatusCode(), ctx.Response.Header.Peek("Retry-After"))
	}
	if !strings.Contains(string(ctx.Response.Body()), "try again") {
		t.Errorf("body %s does not say to try again", ctx.Response.Body())
	}
}
