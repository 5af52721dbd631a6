package query

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/newsflow/newsflow/operators/trending"
	"github.com/valyala/fasthttp"
)

// Items with an error bound (trending.counter: cms) serialise as
// encoding/json writes them: error_bound after count, left out when 0.
func TestEncodeTrendingErrorBound(t *testing.T) {
	res := trending.Result{Window: "1h", AsOf: 5, Items: []trending.Item{
		{Rank: 1, ArticleID: "a", Count: 40, Bound: 3}, {Rank: 2, ArticleID: "b", Count: 0}, {Rank: 3, ArticleID: "c", Count: 7, Bound: 7}}}
	a, err := encodeTrending(res)
	if err != nil {
		t.Fatal(err)
	}
	for k := 1; k <= 4; k++ {
		want := res
		want.Items = res.Items[:min(k, 3)]
		wantBody, _ := json.Marshal(want)
		var ctx fasthttp.RequestCtx
		a.write(&ctx, k)
		if got := ctx.Response.Body(); !bytes.Equal(got, wantBody) {
			t.Fatalf("k=%d:\n got %s\nwant %s", k, got, wantBody)
		}
	}
}
