// Package feedfarm serves feeds over HTTP for offline demos, tests and
// benchmarks: the files of a directory, generated feeds, a generated news
// world, and, optionally, every way a feed server misbehaves.
//
// Routes:
//
//	/files/<path>         a file of the directory, with ETag and Last-Modified
//	                      (conditional GET answers 304) and gzip on request
//	/gen/<n>.xml          a generated RSS feed with Items items (default 50)
//	                      whose content depends only on n and the current
//	                      generation (see Farm.Advance)
//	/page/<n>/<k>         the article page of item k of generated feed n
//	                      (about 3 KB of HTML around 350 words of text)
//	/news/<n>.xml         the RSS feed of news outlet n (0 to Outlets-1): its
//	                      newest Items articles about the events of the news
//	                      world published by the current generation
//	/news/sources.opml    the outlets' feeds as OPML, with absolute URLs on
//	                      the host of the request
//	/image/<k>-<n>.png    with ArticlePages, the lead image of outlet n's
//	                      article about event k (its items' enclosure)
//	/article/<domain>/... with ArticlePages, the page of a news article
//	                      (title, outlet, date, text) at its outlet's link
//	                      moved onto the farm; /article/<domain>/ lists
//	                      the outlet's newest articles
//	/fault/<kind>         misbehaviour, when faults are enabled; Faults lists
//	                      the kinds
//
// The news world is a deterministic sequence of events of 32 kinds, four
// for each topic of configs/topics.yaml (a vote in a parliament, a
// ceasefire, a takeover, a cup final, a vaccine trial, ...), with invented
// people, organisations and places. Each event is covered by
// two to eight outlets, each with its own headline, summary, link and
// publish time: articles about one event share its names and facts, and
// articles about different events share little, so that a story clusterer
// groups them by event. Generation 0 has published Base events, Spacing
// apart; each Advance publishes PerGeneration more, spread over the time
// since the previous generation. Given the seed and the times of the
// generations (Options.Now), the feeds are the same bytes every time.
package feedfarm

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Options configures a farm. The zero value serves generated feeds and the
// news world.
type Options struct {
	// Dir is served under /files/ when set.
	Dir string
	// Faults enables /fault/ routes.
	Faults bool
	// Items per generated feed (default 50).
	Items int
	// OneLine makes generated feeds carry a one-line summary per item and
	// link each item to its article page on the farm, /page/<n>/<k>, as
	// feeds that need their pages fetched for full text do.
	OneLine bool
	// Epoch is the publish time of generation 0's newest item (default
	// 2026-01-01T00:00:00Z); items are an hour apart going back.
	Epoch time.Time

	// Outlets is the number of news outlets (default 8).
	Outlets int
	// Seed selects the news world: the same seed gives the same events.
	Seed uint64
	// Base is the number of news events generation 0 has published
	// (default 30), PerGeneration the number each Advance adds (default 1).
	// Events of one kind share some words (two vaccine trials both
	// mention a vaccine); the fewer of them in a story clusterer's window,
	// the more surely their stories stay apart.
	Base, PerGeneration int
	// Spacing is the time between the events of generation 0 (default 4m).
	Spacing time.Duration
	// ArticlePages makes the news feeds link each article to a readable
	// page on the farm, <farm>/article/<domain>/<topic>/<slug>-<event>,
	// instead of https://<domain>/<topic>/<slug>-<event> on an outlet
	// site that does not exist, so that a reader can open it offline.
	// Article ids derive from the links: they change with the option and
	// with the farm's address.
	ArticlePages bool
	// Now is the clock the time of each generation is read from: by New
	// for generation 0, by Advance for the next ones. When nil, generation
	// g is at Epoch + g·PerGeneration·Spacing.
	Now func() time.Time
}

// Faults lists the misbehaviours /fault/<kind> serves.
var Faults = []string{
	"slow",          // a valid feed at 1 byte per second
	"endless",       // a body that never ends
	"gzip-bomb",     // 1 GiB of zeros gzip-compressed to about 1 MiB
	"redirect-loop", // 302 to itself
	"301-chain",     // 301 → 301 → 301 → a valid feed (/fault/301-chain/3 ...)
	"302",           // 302 to a valid feed
	"410",           // 410 Gone
	"429",           // 429 with Retry-After: 120
	"500-burst",     // 500 three times in every four requests
	"invalid-xml",   // a truncated, malformed document
	"wrong-charset", // Windows-1251 bytes declared as UTF-8
	"html",          // an HTML page instead of a feed
}

// Farm is an http.Handler. It is safe for concurrent use.
type Farm struct {
	opts       Options
	generation atomic.Int64 // written under mu, after times
	requests   atomic.Int64
	burst      atomic.Int64

	mu struct {
		sync.Mutex
		// times are the times of the generations, by number.
		times []time.Time
	}
}

// New returns a farm.
func New(opts Options) *Farm {
	if opts.Items <= 0 {
		opts.Items = 50
	}
	if opts.Epoch.IsZero() {
		opts.Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	if opts.Outlets <= 0 {
		opts.Outlets = 8
	}
	if opts.Base <= 0 {
		opts.Base = 30
	}
	if opts.PerGeneration <= 0 {
		opts.PerGeneration = 1
	}
	if opts.Spacing <= 0 {
		opts.Spacing = 4 * time.Minute
	}
	f := &Farm{opts: opts}
	f.mu.times = []time.Time{f.clock(0)}
	return f
}

// Advance moves generated feeds to the next generation: each gains one new
// item at the top (an hour after the previous newest) and drops its oldest;
// the news world publishes PerGeneration new events.
func (f *Farm) Advance() {
	f.mu.Lock()
	defer f.mu.Unlock()
	g := int64(len(f.mu.times))
	t := f.clock(g)
	if prev := f.mu.times[g-1]; t.Before(prev) {
		t = prev // a generation is never older than the one before
	}
	f.mu.times = append(f.mu.times, t)
	f.generation.Store(g)
}

// Generation returns the current generation.
func (f *Farm) Generation() int64 { return f.generation.Load() }

// clock returns the time of generation g.
func (f *Farm) clock(g int64) time.Time {
	if f.opts.Now != nil {
		return f.opts.Now().UTC()
	}
	return f.opts.Epoch.Add(time.Duration(g) * time.Duration(f.opts.PerGeneration) * f.opts.Spacing)
}

// times returns the times of generations 0 to g. Elements are never
// changed once appended, so the slice may be read without the lock.
func (f *Farm) times(g int64) []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := g + 1
	return f.mu.times[:n:n]
}

// Requests counts the requests served.
func (f *Farm) Requests() int64 { return f.requests.Load() }

func (f *Farm) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.requests.Add(1)
	p := r.URL.Path
	switch {
	case strings.HasPrefix(p, "/files/") && f.opts.Dir != "":
		f.serveFile(w, r, strings.TrimPrefix(p, "/files/"))
	case strings.HasPrefix(p, "/page/"):
		f.servePage(w, r, strings.TrimPrefix(p, "/page/"))
	case strings.HasPrefix(p, "/gen/"):
		f.serveGenerated(w, r, strings.TrimSuffix(strings.TrimPrefix(p, "/gen/"), ".xml"))
	case strings.HasPrefix(p, "/news/"):
		f.serveNews(w, r, strings.TrimPrefix(p, "/news/"))
	case strings.HasPrefix(p, "/article/") && f.opts.ArticlePages:
		f.serveArticle(w, r, strings.TrimPrefix(p, "/article/"))
	case strings.HasPrefix(p, "/image/") && f.opts.ArticlePages:
		f.serveImage(w, r, strings.TrimPrefix(p, "/image/"))
	case strings.HasPrefix(p, "/fault/") && f.opts.Faults:
		f.serveFault(w, r, strings.TrimPrefix(p, "/fault/"))
	default:
		http.NotFound(w, r)
	}
}

func (f *Farm) serveFile(w http.ResponseWriter, r *http.Request, rel string) {
	clean := path.Clean("/" + rel)
	full := filepath.Join(f.opts.Dir, filepath.FromSlash(clean))
	b, err := os.ReadFile(full)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	st, _ := os.Stat(full)
	serveBytes(w, r, b, contentTypeOf(full), st.ModTime())
}

// gzipWriters are reused: a gzip.Writer costs hundreds of KB to create.
var gzipWriters = sync.Pool{New: func() any { return gzip.NewWriter(io.Discard) }}

// serveBytes answers with b, honouring conditional GET and gzip.
func serveBytes(w http.ResponseWriter, r *http.Request, b []byte, ctype string, mod time.Time) {
	sum := sha256.Sum256(b)
	etag := `"` + hex.EncodeToString(sum[:8]) + `"`
	w.Header().Set("ETag", etag)
	w.Header().Set("Last-Modified", mod.UTC().Format(http.TimeFormat))
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	if ims, err := http.ParseTime(r.Header.Get("If-Modified-Since")); err == nil && r.Header.Get("If-None-Match") == "" && !mod.Truncate(time.Second).After(ims) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Type", ctype)
	if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzipWriters.Get().(*gzip.Writer)
		zw.Reset(w)
		zw.Write(b)
		zw.Close()
		gzipWriters.Put(zw)
		return
	}
	w.Write(b)
}

func contentTypeOf(name string) string {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".json":
		return "application/feed+json"
	case ".atom":
		return "application/atom+xml"
	case ".html", ".htm":
		return "text/html; charset=utf-8"
	}
	return "application/xml"
}

// Generated returns generated feed n at generation g.
func (f *Farm) Generated(n int, g int64) []byte { return f.generated(n, g, "") }

// generated returns generated feed n at generation g; with OneLine its
// items link to their pages on host.
func (f *Farm) generated(n int, g int64, host string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `<?xml version="1.0" encoding="UTF-8"?>`+"\n"+`<rss version="2.0"><channel><title>Generated feed %d</title><link>https://gen.example/%d/</link><description>feed %d</description>`+"\n", n, n, n)
	for i := 0; i < f.opts.Items; i++ {
		k := g - int64(i) // item number, newest first
		pub := f.opts.Epoch.Add(time.Duration(k) * time.Hour)
		if f.opts.OneLine && host != "" {
			fmt.Fprintf(&b, `<item><title>Feed %d reports development number %d in a continuing story</title>`+
				`<link>http://%s/page/%d/%d</link><guid isPermaLink="false">gen-%d-%d</guid>`+
				`<pubDate>%s</pubDate><description>Officials announced %d new measures.</description></item>`+"\n",
				n, k, host, n, k, n, k, pub.Format(time.RFC1123Z), k%17)
			continue
		}
		fmt.Fprintf(&b, `<item><title>Feed %d reports development number %d in a continuing story</title>`+
			`<link>https://gen.example/%d/items/%d?utm_source=rss</link><guid isPermaLink="false">gen-%d-%d</guid>`+
			`<pubDate>%s</pubDate><description>&lt;p&gt;Item %d of feed %d: officials said on %s that the %d measures would take effect &lt;b&gt;soon&lt;/b&gt;. Analysts expect further changes as the situation develops across the region and markets react.&lt;/p&gt;</description></item>`+"\n",
			n, k, n, k, n, k, pub.Format(time.RFC1123Z), k, n, pub.Format("Monday"), k%17)
	}
	b.WriteString("</channel></rss>\n")
	return b.Bytes()
}

func (f *Farm) serveGenerated(w http.ResponseWriter, r *http.Request, name string) {
	n, err := strconv.Atoi(name)
	if err != nil || n < 0 {
		http.NotFound(w, r)
		return
	}
	g := f.generation.Load()
	serveBytes(w, r, f.generated(n, g, r.Host), "application/rss+xml", f.opts.Epoch.Add(time.Duration(g)*time.Hour))
}

// servePage serves the article page of item k of generated feed n.
func (f *Farm) servePage(w http.ResponseWriter, r *http.Request, name string) {
	var n, k int
	if _, err := fmt.Sscanf(name, "%d/%d", &n, &k); err != nil || n < 0 {
		http.NotFound(w, r)
		return
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, `<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>Development %d | Feed %d</title></head><body>`+
		`<header><nav><a href="/">Home</a> <a href="/world">World</a> <a href="/business">Business</a> <a href="/subscribe">Subscribe</a></nav></header>`+
		`<main><article><h1>Feed %d reports development number %d in a continuing story</h1>`, k, n, n, k)
	for p := range 8 {
		fmt.Fprintf(&b, `<p>Paragraph %d of development %d: officials of region %d said on Monday that the %d measures would take effect within weeks, `+
			`after talks that lasted most of the night. Analysts expect further changes as the situation develops across the region, `+
			`and markets reacted calmly to the announcement, which had been widely expected since the spring.</p>`, p+1, k, n, k%17)
	}
	b.WriteString(`</article></main><aside><h2>Most read</h2><ul><li><a href="/a">Another story</a></li><li><a href="/b">And another</a></li></ul></aside>` +
		`<footer>© Generated feed farm</footer></body></html>`)
	serveBytes(w, r, b.Bytes(), "text/html; charset=utf-8", f.opts.Epoch)
}

func (f *Farm) serveFault(w http.ResponseWriter, r *http.Request, kind string) {
	feed := f.Generated(0, f.generation.Load())
	switch {
	case kind == "slow":
		w.Header().Set("Content-Type", "application/rss+xml")
		fl, _ := w.(http.Flusher)
		for i := range feed {
			if _, err := w.Write(feed[i : i+1]); err != nil {
				return
			}
			if fl != nil {
				fl.Flush()
			}
			select {
			case <-r.Context().Done():
				return
			case <-time.After(time.Second):
			}
		}
	case kind == "endless":
		w.Header().Set("Content-Type", "application/rss+xml")
		chunk := bytes.Repeat([]byte("<item><title>again</title></item>"), 1024)
		w.Write([]byte(`<rss version="2.0"><channel>`))
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	case kind == "gzip-bomb":
		w.Header().Set("Content-Type", "application/rss+xml")
		w.Header().Set("Content-Encoding", "gzip")
		w.Write(gzipBomb())
	case kind == "redirect-loop":
		http.Redirect(w, r, "/fault/redirect-loop", http.StatusFound)
	case strings.HasPrefix(kind, "301-chain"):
		hops := 3
		if s, ok := strings.CutPrefix(kind, "301-chain/"); ok {
			hops, _ = strconv.Atoi(s)
		}
		if hops <= 0 {
			serveBytes(w, r, feed, "application/rss+xml", f.opts.Epoch)
			return
		}
		http.Redirect(w, r, fmt.Sprintf("/fault/301-chain/%d", hops-1), http.StatusMovedPermanently)
	case kind == "302":
		http.Redirect(w, r, "/gen/0.xml", http.StatusFound)
	case kind == "410":
		http.Error(w, "this feed is gone", http.StatusGone)
	case kind == "429":
		w.Header().Set("Retry-After", "120")
		http.Error(w, "slow down", http.StatusTooManyRequests)
	case kind == "500-burst":
		if f.burst.Add(1)%4 != 0 {
			http.Error(w, "internal error", http.StatusInternalServerError)
			return
		}
		serveBytes(w, r, feed, "application/rss+xml", f.opts.Epoch)
	case kind == "invalid-xml":
		w.Header().Set("Content-Type", "application/rss+xml")
		w.Write([]byte(`<?xml version="1.0"?><rss version="2.0"><channel><title>Broken</title><item><title>Unclosed & bad <b></item>`))
	case kind == "wrong-charset":
		w.Header().Set("Content-Type", "application/rss+xml; charset=utf-8")
		// "Новости" in Windows-1251, declared as UTF-8.
		cp1251 := []byte{0xcd, 0xee, 0xe2, 0xee, 0xf1, 0xf2, 0xe8}
		var b bytes.Buffer
		b.WriteString(`<?xml version="1.0" encoding="utf-8"?><rss version="2.0"><channel><title>`)
		b.Write(cp1251)
		b.WriteString(`</title><item><title>`)
		b.Write(cp1251)
		b.WriteString(` 1</title><link>https://gen.example/cp1251/1</link></item></channel></rss>`)
		w.Write(b.Bytes())
	case kind == "html":
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte(`<!doctype html><html><head><title>News</title><link rel="alternate" type="application/rss+xml" href="/gen/0.xml"></head><body><h1>Not a feed</h1></body></html>`))
	default:
		http.NotFound(w, r)
	}
}

var bomb atomic.Pointer[[]byte]

// gzipBomb is 1 GiB of zeros: one gzip member of 1 MiB of zeros repeated
// 1024 times (a valid multi-member gzip stream), built once.
func gzipBomb() []byte {
	if b := bomb.Load(); b != nil {
		return *b
	}
	var member bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&member, gzip.BestCompression)
	zw.Write(make([]byte, 1<<20))
	zw.Close()
	b := bytes.Repeat(member.Bytes(), 1024)
	bomb.Store(&b)
	return b
}
