package feedfarm

import (
	"bytes"
	"html/template"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The article pages of the news world (Options.ArticlePages): every
// article's outlet link, https://<domain>/<topic>/<slug>-<event>, is served
// by the farm at /article/<domain>/<topic>/<slug>-<event>, as a plain page
// with the title, the outlet, the date and a few paragraphs about the
// event; /article/<domain>/ lists the outlet's newest articles.

// pageURL moves an outlet's link onto the farm at base; with base "" it
// returns the link unchanged.
func pageURL(base, link string) string {
	if base == "" {
		return link
	}
	return strings.TrimSuffix(base, "/") + "/article/" + strings.TrimPrefix(link, "https://")
}

// outletByDomain returns the outlet whose domain is domain, or -1.
func (f *Farm) outletByDomain(domain string) int {
	for n := range f.opts.Outlets {
		if f.Outlet(n).Domain == domain {
			return n
		}
	}
	return -1
}

// serveArticle serves /article/<domain>/<rest>: an article page, or with
// no rest the outlet's page.
func (f *Farm) serveArticle(w http.ResponseWriter, r *http.Request, name string) {
	domain, rest, _ := strings.Cut(name, "/")
	n := f.outletByDomain(domain)
	if n < 0 {
		http.NotFound(w, r)
		return
	}
	g := f.generation.Load()
	if rest == "" {
		f.serveOutletPage(w, r, n, g)
		return
	}
	a, text, ok := f.articlePage(n, g, "https://"+domain+"/"+rest)
	if !ok {
		http.NotFound(w, r)
		return
	}
	out := f.Outlet(n)
	var b bytes.Buffer
	err := articleTmpl.Execute(&b, map[string]any{
		"Title": a.Title, "Outlet": out.Name, "Home": "/article/" + out.Domain + "/", "Topic": upperFirst(a.Topic),
		"ISO": a.Published.UTC().Format(time.RFC3339), "Date": a.Published.UTC().Format("Monday 2 January 2006, 15:04 UTC"),
		"Paragraphs": text,
	})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	serveBytes(w, r, b.Bytes(), "text/html; charset=utf-8", a.Published)
}

// articlePage returns the article of outlet n with the given link, if
// generation g has published it, and the paragraphs of its page: the
// summary, then what else the outlet's sources say about the event.
func (f *Farm) articlePage(n int, g int64, link string) (Article, []string, bool) {
	i := strings.LastIndexByte(link, '-')
	k, err := strconv.Atoi(link[i+1:])
	if i < 0 || err != nil || k < 0 || k >= f.Events(g) {
		return Article{}, nil, false
	}
	e := f.eventAt(k, f.times(g))
	rank := slices.Index(e.outlets, n)
	if rank < 0 {
		return Article{}, nil, false
	}
	a := f.article(e, n, rank)
	if a.Link != link {
		return Article{}, nil, false
	}
	text := []string{a.Summary}
	var more []string
	for _, tmpl := range slices.Concat(e.kind.seconds, e.kind.thirds) {
		if s := e.write(tmpl); !strings.Contains(a.Summary, s) {
			more = append(more, s)
		}
	}
	if len(more) > 0 {
		text = append(text, strings.Join(more, " "))
	}
	text = append(text, f.Outlet(n).Name+" will update this story as it develops.")
	return a, text, true
}

// serveOutletPage lists the newest articles of outlet n.
func (f *Farm) serveOutletPage(w http.ResponseWriter, r *http.Request, n int, g int64) {
	out := f.Outlet(n)
	type item struct {
		Title, Path, Date string
	}
	var items []item
	for _, a := range f.Articles(n, g, f.opts.Items) {
		items = append(items, item{a.Title, "/article/" + strings.TrimPrefix(a.Link, "https://"), a.Published.UTC().Format("2 Jan 2006 15:04")})
	}
	var b bytes.Buffer
	if err := outletTmpl.Execute(&b, map[string]any{"Outlet": out.Name, "Home": "/article/" + out.Domain + "/", "Items": items}); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	serveBytes(w, r, b.Bytes(), "text/html; charset=utf-8", f.times(g)[g])
}

const pageStyle = `<meta name="viewport" content="width=device-width, initial-scale=1"><style>` +
	`body{max-width:42rem;margin:2rem auto;padding:0 1rem;font:1.1rem/1.6 Georgia,serif;color:#222;background:#fff}` +
	`header a{color:#444;text-decoration:none;font:600 1rem system-ui,sans-serif}h1{line-height:1.25}` +
	`.meta{color:#666;font:.9rem system-ui,sans-serif}li{margin:.5rem 0}` +
	`footer{margin-top:3rem;padding-top:1rem;border-top:1px solid #ddd;color:#777;font:.8rem system-ui,sans-serif}</style>`

const pageFooter = `<footer>A page of the newsflow feed farm: the outlets, people, places and events are invented.</footer>`

var articleTmpl = template.Must(template.New("article").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}} | {{.Outlet}}</title>` + pageStyle + `</head><body>
<header><a href="{{.Home}}">{{.Outlet}}</a></header>
<main><article>
<p class="meta">{{.Topic}}</p>
<h1>{{.Title}}</h1>
<p class="meta">By {{.Outlet}} staff · <time datetime="{{.ISO}}">{{.Date}}</time></p>
{{range .Paragraphs}}<p>{{.}}</p>
{{end}}</article></main>
` + pageFooter + `
</body></html>
`))

var outletTmpl = template.Must(template.New("outlet").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Outlet}}</title>` + pageStyle + `</head><body>
<header><a href="{{.Home}}">{{.Outlet}}</a></header>
<main><h1>Latest from {{.Outlet}}</h1><ul>
{{range .Items}}<li><a href="{{.Path}}">{{.Title}}</a> <span class="meta">{{.Date}}</span></li>
{{end}}</ul></main>
` + pageFooter + `
</body></html>
`))
