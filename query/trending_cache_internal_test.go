package query

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/newsflow/newsflow/operators/trending"
	"github.com/valyala/fasthttp"
)

// The precomputed answer for every k is byte for byte what encoding/json
// writes for the computed answer truncated to k, whatever the strings hold.
func TestEncodeTrendingIsEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	odd := []string{"", "plain", "tech", `quo"te`, `back\slash`, "<b>&amp;</b>", "ünïcødé", "line\nbreak\ttab\x01",
		"\u2028\u2029", "bad utf-8 \xff\xfe", "emoji 😀", "nul\x00"}
	pick := func() string {
		if rng.IntN(3) == 0 {
			return odd[rng.IntN(len(odd))]
		}
		return "article-" + string(rune('a'+rng.IntN(26)))
	}
	for range 300 {
		res := trending.Result{Window: pick(), Category: pick(), AsOf: rng.Int64N(1 << 45)}
		if rng.IntN(2) == 0 {
			res.AsOf = 0
		}
		for range rng.IntN(4) {
			res.Partial = append(res.Partial, rng.Int32N(64))
		}
		n := rng.IntN(12)
		res.Items = make([]trending.Item, n)
		for i := range res.Items {
			res.Items[i] = trending.Item{Rank: i + 1, ArticleID: pick(), Count: rng.Uint64N(1 << 40)}
		}
		a, err := encodeTrending(res)
		if err != nil {
			t.Fatal(err)
		}
		for k := 1; k <= n+2; k++ {
			want := res
			want.Items = res.Items[:min(k, n)]
			wantBody, err := json.Marshal(want)
			if err != nil {
				t.Fatal(err)
			}
			var ctx fasthttp.RequestCtx
			a.write(&ctx, k)
			if got := ctx.Response.Body(); !bytes.Equal(got, wantBody) {
				t.Fatalf("k=%d of %+v:\n got %s\nwant %s", k, res, got, wantBody)
			}
			if ct := string(ctx.Response.Header.ContentType()); ct != "application/json" || ctx.Response.StatusCode() != fasthttp.StatusOK {
				t.Fatalf("k=%d: %d %s", k, ctx.Response.StatusCode(), ct)
			}
		}
	}
}

// BenchmarkEncodeTrending serialises a top 100, as a rebuild does.
func BenchmarkEncodeTrending(b *testing.B) {
	res := trending.Result{Window: "1h", AsOf: 1763726400000, Items: make([]trending.Item, 100)}
	for i := range res.Items {
		res.Items[i] = trending.Item{Rank: i + 1, ArticleID: "art-" + string(rune('a'+i%26)) + "0012345", Count: uint64(100000 - i)}
	}
	for b.Loop() {
		if _, err := encodeTrending(res); err != nil {
			b.Fatal(err)
		}
	}
}
