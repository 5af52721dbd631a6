// Package web serves the reader and admin web UI: static assets embedded
// in the binary (no CDN; it works offline), a single page application in
// plain ES modules that talks to the JSON API.
package web

import (
	"embed"
	"io/fs"
	"mime"
	"path"
	"strings"

	"github.com/valyala/fasthttp"
)

//go:embed static
var static embed.FS

// Handler serves the UI: files under static/, and index.html for every
// other path that is not an API path (client-side routes).
func Handler() fasthttp.RequestHandler {
	files, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	index, err := fs.ReadFile(files, "index.html")
	if err != nil {
		panic(err)
	}
	return func(ctx *fasthttp.RequestCtx) {
		p := strings.TrimPrefix(path.Clean("/"+string(ctx.Path())), "/")
		if p != "" && p != "index.html" {
			if b, err := fs.ReadFile(files, p); err == nil {
				ct := mime.TypeByExtension(path.Ext(p))
				if ct == "" {
					ct = "application/octet-stream"
				}
				ctx.SetContentType(ct)
				ctx.Response.Header.Set("Cache-Control", "public, max-age=300")
				ctx.SetBody(b)
				return
			}
			if strings.Contains(path.Base(p), ".") {
				ctx.SetStatusCode(fasthttp.StatusNotFound)
				ctx.SetContentType("application/json")
				ctx.SetBodyString(`{"error":"not found"}`)
				return
			}
		}
		ctx.SetContentType("text/html; charset=utf-8")
		ctx.Response.Header.Set("Cache-Control", "no-cache")
		ctx.SetBody(index)
	}
}
