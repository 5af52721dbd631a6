// Package web serves the reader and admin web UI: static assets embedded
// in the binary (no CDN; it works offline), a single page application in
// plain ES modules that talks to the JSON API.
//
// Assets are compressed once at start and served gzip-encoded to clients
// that accept it, with strong ETags for revalidation. Pages carry a
// Content-Security-Policy that allows only the node's own scripts, styles
// and API.
package web

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"path"
	"strings"

	"github.com/newsflow/newsflow/query/httpkit"
	"github.com/valyala/fasthttp"
)

//go:embed static
var static embed.FS

// CSP is the Content-Security-Policy of the UI's pages: everything from the
// node itself, nothing inline, no frames.
const CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// asset is one embedded file, ready to serve.
type asset struct {
	body, gzipped []byte // gzipped is nil when compression does not pay
	etag          string
	contentType   string
	cacheControl  string
}

func newAsset(name string, b []byte) asset {
	a := asset{body: b, contentType: mime.TypeByExtension(path.Ext(name)), cacheControl: "public, max-age=300"}
	if a.contentType == "" {
		a.contentType = "application/octet-stream"
	}
	switch name {
	case "index.html":
		a.contentType, a.cacheControl = "text/html; charset=utf-8", "no-cache"
	case "sw.js":
		// A new service worker must reach browsers at once.
		a.cacheControl = "no-cache"
	case "manifest.webmanifest":
		a.contentType = "application/manifest+json"
	}
	sum := sha256.Sum256(b)
	a.etag = `"` + hex.EncodeToString(sum[:12]) + `"`
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	zw.Write(b)
	zw.Close()
	if buf.Len() < len(b)*9/10 {
		a.gzipped = buf.Bytes()
	}
	return a
}

// Handler serves the UI: files under static/, and index.html for every
// other path that is not an API path (client-side routes).
func Handler() fasthttp.RequestHandler {
	files, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	assets := map[string]asset{}
	err = fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(files, p)
		if err != nil {
			return err
		}
		assets[p] = newAsset(p, b)
		return nil
	})
	if err != nil {
		panic(err)
	}
	index, ok := assets["index.html"]
	if !ok {
		panic("web: static/index.html is missing")
	}
	return func(ctx *fasthttp.RequestCtx) {
		p := strings.TrimPrefix(path.Clean("/"+string(ctx.Path())), "/")
		a, ok := assets[p]
		if !ok {
			if p != "" && strings.Contains(path.Base(p), ".") {
				ctx.SetStatusCode(fasthttp.StatusNotFound)
				ctx.SetContentType("application/json")
				ctx.SetBodyString(`{"error":"not found"}`)
				return
			}
			a = index // a client-side route
		}
		serve(ctx, a)
	}
}

func serve(ctx *fasthttp.RequestCtx, a asset) {
	h := &ctx.Response.Header
	h.Set("Content-Security-Policy", CSP)
	h.Set("Cache-Control", a.cacheControl)
	h.Set("ETag", a.etag)
	h.Set("Vary", "Accept-Encoding")
	h.SetContentType(a.contentType)
	if inm := ctx.Request.Header.Peek("If-None-Match"); len(inm) > 0 && httpkit.ETagMatches(string(inm), a.etag) {
		ctx.SetStatusCode(fasthttp.StatusNotModified)
		return
	}
	if a.gzipped != nil && ctx.Request.Header.HasAcceptEncoding("gzip") {
		h.Set("Content-Encoding", "gzip")
		ctx.SetBody(a.gzipped)
		return
	}
	ctx.SetBody(a.body)
}
