package web

import (
	"bytes"
	"compress/gzip"
	"io"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

func request(t *testing.T, h fasthttp.RequestHandler, uri string, hdr ...string) *fasthttp.Response {
	t.Helper()
	var ctx fasthttp.RequestCtx
	ctx.Request.SetRequestURI(uri)
	for i := 0; i+1 < len(hdr); i += 2 {
		ctx.Request.Header.Set(hdr[i], hdr[i+1])
	}
	h(&ctx)
	var res fasthttp.Response
	ctx.Response.CopyTo(&res)
	return &res
}

func TestAssetsCompressedAndRevalidated(t *testing.T) {
	h := Handler()
	for _, p := range []string{"/app.js", "/app.css", "/"} {
		plain := request(t, h, p)
		if plain.StatusCode() != fasthttp.StatusOK || len(plain.Header.Peek("Content-Encoding")) != 0 {
			t.Fatalf("%s without Accept-Encoding: %d %q", p, plain.StatusCode(), plain.Header.Peek("Content-Encoding"))
		}
		gz := request(t, h, p, "Accept-Encoding", "gzip, br")
		if string(gz.Header.Peek("Content-Encoding")) != "gzip" {
			t.Fatalf("%s: not gzip-encoded: %q", p, gz.Header.Peek("Content-Encoding"))
		}
		if len(gz.Body()) >= len(plain.Body()) {
			t.Errorf("%s: gzip %d bytes, plain %d", p, len(gz.Body()), len(plain.Body()))
		}
		zr, err := gzip.NewReader(bytes.NewReader(gz.Body()))
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(zr)
		if err != nil || !bytes.Equal(got, plain.Body()) {
			t.Fatalf("%s: gzip body does not decode to the plain body (%v)", p, err)
		}
		etag := string(plain.Header.Peek("ETag"))
		if etag == "" || string(gz.Header.Peek("ETag")) != etag {
			t.Fatalf("%s: ETag %q vs %q", p, etag, gz.Header.Peek("ETag"))
		}
		if r := request(t, h, p, "If-None-Match", `"other", `+etag); r.StatusCode() != fasthttp.StatusNotModified || len(r.Body()) != 0 {
			t.Errorf("%s: If-None-Match: %d with %d bytes", p, r.StatusCode(), len(r.Body()))
		}
		if r := request(t, h, p, "If-None-Match", `"other"`); r.StatusCode() != fasthttp.StatusOK {
			t.Errorf("%s: stale If-None-Match: %d", p, r.StatusCode())
		}
		if csp := string(plain.Header.Peek("Content-Security-Policy")); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe") {
			t.Errorf("%s: CSP %q", p, csp)
		}
	}
}

func TestClientRoutesAndMissingAssets(t *testing.T) {
	h := Handler()
	index := request(t, h, "/").Body()
	for _, p := range []string{"/stories/abc", "/admin", "/search?q=x", "/topics/world"} {
		r := request(t, h, p)
		if r.StatusCode() != fasthttp.StatusOK || !bytes.Equal(r.Body(), index) || string(r.Header.Peek("Cache-Control")) != "no-cache" {
			t.Errorf("%s: %d, index %v", p, r.StatusCode(), bytes.Equal(r.Body(), index))
		}
	}
	for _, p := range []string{"/missing.js", "/static/app.js", "/../../etc/passwd.txt"} {
		r := request(t, h, p)
		if r.StatusCode() != fasthttp.StatusNotFound || !strings.Contains(string(r.Body()), `"error"`) {
			t.Errorf("%s: %d %q", p, r.StatusCode(), r.Body())
		}
	}
}

// TestNoInlineScriptsOrStyles keeps the pages within the CSP: no inline
// script, no style attribute, no inline event handler.
func TestNoInlineScriptsOrStyles(t *testing.T) {
	for _, name := range []string{"static/index.html", "static/app.js"} {
		b, err := static.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		for _, bad := range []string{"<script>", " style=\"", " onclick=", " onload=", "javascript:"} {
			if strings.Contains(s, bad) {
				t.Errorf("%s contains %q, which the CSP blocks", name, bad)
			}
		}
	}
}
