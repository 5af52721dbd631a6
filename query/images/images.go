// Package images is the image proxy of the node's story API: GET
// /api/v1/image/{id} answers the lead image of an article, so that
// readers never load anything from an outlet. The id is story.ImageID of
// the image URL, and story JSON carries the whole path (story.ImagePath)
// in its image field. The proxy is not open: it serves only ids the story
// state knows, that is images of articles the node applied (the caller's
// resolve looks them up), and it fetches them with the crawler's fetcher
// (its SSRF guard refuses private addresses unless the crawler's options
// allow them).
//
// An image is fetched once, checked (at most MaxBytes; the bytes must be a
// JPEG, PNG, GIF, WebP, AVIF or BMP image whatever the origin says; SVG is
// refused, as it can carry scripts), and kept in a cache bounded in bytes
// that evicts the least recently used images: files in a directory, or
// memory when the node has no data directory. Concurrent requests for an
// image that is not cached share one fetch. A failed fetch is remembered
// for FailureTTL, so a broken image does not send every reader's request
// to its origin. Images are served with their sniffed type, an ETag (304
// on If-None-Match), Cache-Control max-age and a CSP that allows nothing.
package images

import (
	"bytes"
	"cmp"
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/newsflow/newsflow/internal/fetch"
	"github.com/newsflow/newsflow/internal/option"
	"github.com/newsflow/newsflow/operators/story"
	"github.com/newsflow/newsflow/query/httpkit"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
	"golang.org/x/sync/singleflight"
)

// Options configure the image proxy. The zero value is valid.
type Options struct {
	// Fetch configures the fetcher: the node passes the crawler's fetch
	// options, so the proxy dials what the crawler may dial (AllowPrivate
	// and AllowCIDRs only when the crawler's config allows them).
	// MaxBodyBytes and Timeout are replaced by MaxBytes and Timeout.
	Fetch fetch.Options
	// MaxBytes caps an image (default 5 MiB); larger ones answer 502.
	MaxBytes int64
	// Timeout bounds one fetch from the origin (default 10s).
	Timeout time.Duration
	// CacheDir is where images are cached (default <DataDir>/image-cache;
	// memory when both are empty).
	CacheDir string
	// CacheBytes bounds the cache (default 256 MiB in a directory, 32 MiB
	// in memory).
	CacheBytes int64
	// MaxAge is the Cache-Control max-age of served images (default 24h).
	MaxAge time.Duration
	// FailureTTL is how long a failed fetch is answered without asking the
	// origin again (default 5m).
	FailureTTL time.Duration
}

// DefaultOptions returns the defaults the zero value stands for
// (CacheDir and CacheBytes depend on the data directory).
func DefaultOptions() Options {
	return Options{MaxBytes: 5 << 20, Timeout: 10 * time.Second, MaxAge: 24 * time.Hour, FailureTTL: 5 * time.Minute}
}

// Validate reports invalid option values.
func (o Options) Validate() error {
	if o.MaxBytes < 0 || o.Timeout < 0 || o.CacheBytes < 0 || o.MaxAge < 0 || o.FailureTTL < 0 {
		return errors.New("images: image proxy sizes and durations must not be negative")
	}
	return o.Fetch.Validate()
}

func (o Options) withDefaults(dataDir string) Options {
	d := DefaultOptions()
	if dataDir != "" {
		d.CacheDir = filepath.Join(dataDir, "image-cache")
	}
	d.CacheBytes = 32 << 20 // in memory
	if cmp.Or(o.CacheDir, d.CacheDir) != "" {
		d.CacheBytes = 256 << 20
	}
	option.Fill(&o, d)
	o.Fetch.MaxBodyBytes, o.Fetch.Timeout = o.MaxBytes, o.Timeout
	return o
}

// maxImageFailures bounds the failures remembered.
const maxImageFailures = 4096

// Proxy fetches, checks, caches and serves images. It is safe for
// concurrent use.
type Proxy struct {
	opts    Options
	fetcher *fetch.Fetcher
	cache   *imageCache
	flight  singleflight.Group
	now     func() time.Time
	outcome *prometheus.CounterVec

	failMu struct {
		sync.Mutex
		m map[string]imageFailure // by image id
	}
}

// imageFailure is an error answer: its status and message.
type imageFailure struct {
	status int
	msg    string
	until  time.Time // when a remembered failure is forgotten
}

func (f *imageFailure) Error() string { return f.msg }

// New returns a proxy with its cache in opts.CacheDir (default
// <dataDir>/image-cache, memory when both are empty), counting requests by
// outcome in reg.
func New(opts Options, dataDir string, now func() time.Time, reg prometheus.Registerer) (*Proxy, error) {
	opts = opts.withDefaults(dataDir)
	f, err := fetch.New(opts.Fetch)
	if err != nil {
		return nil, fmt.Errorf("images: %w", err)
	}
	c, err := openImageCache(opts.CacheDir, opts.CacheBytes)
	if err != nil {
		f.CloseIdleConnections()
		return nil, err
	}
	p := &Proxy{opts: opts, fetcher: f, cache: c, now: now}
	p.failMu.m = map[string]imageFailure{}
	p.outcome = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "newsflow_image_proxy_requests_total",
		Help: "Image proxy requests by outcome: hit (cached), fetched (from the origin), unknown (an id no article has), failed (the origin or the image was refused).",
	}, []string{"outcome"})
	if err := reg.Register(p.outcome); err != nil {
		f.CloseIdleConnections()
		return nil, fmt.Errorf("images: metrics: %w", err)
	}
	return p, nil
}

// Close closes the fetcher's idle connections.
func (p *Proxy) Close() {
	if p != nil {
		p.fetcher.CloseIdleConnections()
	}
}

// failed returns the remembered failure of image id, if any.
func (p *Proxy) failed(id string) (imageFailure, bool) {
	p.failMu.Lock()
	defer p.failMu.Unlock()
	f, ok := p.failMu.m[id]
	if ok && !p.now().Before(f.until) {
		delete(p.failMu.m, id)
		return imageFailure{}, false
	}
	return f, ok
}

func (p *Proxy) remember(id string, f imageFailure) {
	p.failMu.Lock()
	defer p.failMu.Unlock()
	if len(p.failMu.m) >= maxImageFailures {
		now := p.now()
		for k, v := range p.failMu.m {
			if !now.Before(v.until) {
				delete(p.failMu.m, k)
			}
		}
		if len(p.failMu.m) >= maxImageFailures {
			clear(p.failMu.m)
		}
	}
	f.until = p.now().Add(p.opts.FailureTTL)
	p.failMu.m[id] = f
}

// load returns image id from the cache, or fetches it from rawURL, checks
// it and caches it. Concurrent loads of one id share one fetch.
func (p *Proxy) load(id, rawURL string) (cachedImage, error) {
	v, err, _ := p.flight.Do(id, func() (any, error) {
		if img, ok := p.cache.get(id); ok {
			return img, nil
		}
		img, ferr := p.fetch(rawURL)
		if ferr != nil {
			p.remember(id, *ferr)
			return nil, ferr
		}
		return p.cache.put(id, img.ctype, img.data), nil
	})
	if err != nil {
		return cachedImage{}, err
	}
	return v.(cachedImage), nil
}

// fetch gets an image from its origin and checks it.
func (p *Proxy) fetch(rawURL string) (cachedImage, *imageFailure) {
	ctx, cancel := context.WithTimeout(context.Background(), p.opts.Timeout)
	defer cancel()
	resp, err := p.fetcher.Fetch(ctx, fetch.Request{URL: rawURL})
	var se *fetch.StatusError
	switch {
	case errors.Is(err, fetch.ErrBlockedAddress):
		return cachedImage{}, &imageFailure{status: fasthttp.StatusForbidden, msg: "the image's host is an address the node does not fetch from"}
	case errors.Is(err, fetch.ErrTooLarge):
		return cachedImage{}, &imageFailure{status: fasthttp.StatusBadGateway, msg: fmt.Sprintf("the image is larger than %d bytes", p.opts.MaxBytes)}
	case errors.As(err, &se):
		return cachedImage{}, &imageFailure{status: fasthttp.StatusBadGateway, msg: fmt.Sprintf("the image's origin answered %d", se.Status)}
	case errors.Is(err, fetch.ErrTimeout):
		return cachedImage{}, &imageFailure{status: fasthttp.StatusGatewayTimeout, msg: "the image's origin did not answer in time"}
	case err != nil:
		return cachedImage{}, &imageFailure{status: fasthttp.StatusBadGateway, msg: "cannot fetch the image: " + err.Error()}
	case resp.NotModified || len(resp.Body) == 0:
		return cachedImage{}, &imageFailure{status: fasthttp.StatusBadGateway, msg: "the image's origin sent no body"}
	}
	ctype, reason := imageType(resp.ContentType, resp.Body)
	if reason != "" {
		return cachedImage{}, &imageFailure{status: fasthttp.StatusBadGateway, msg: reason}
	}
	return cachedImage{ctype: ctype, data: resp.Body}, nil
}

// imageType returns the type of an image body, sniffed from its bytes, or
// why it is not served: the declared type (when there is one, and it is
// not the generic application/octet-stream) must be image/* other than
// SVG, and the bytes must be a JPEG, PNG, GIF, WebP, AVIF or BMP image.
func imageType(declared string, body []byte) (ctype, reason string) {
	if declared != "" {
		mt, _, err := mime.ParseMediaType(declared)
		switch {
		case err != nil:
			return "", "the origin sent an unreadable content type"
		case mt == "image/svg+xml":
			return "", "SVG images are not served"
		case !strings.HasPrefix(mt, "image/") && mt != "application/octet-stream" && mt != "binary/octet-stream":
			return "", "the origin sent " + mt + ", not an image"
		}
	}
	if len(body) >= 12 && string(body[4:8]) == "ftyp" && (string(body[8:12]) == "avif" || string(body[8:12]) == "avis") {
		return "image/avif", ""
	}
	switch ct := http.DetectContentType(body); ct {
	case "image/jpeg", "image/png", "image/gif", "image/webp", "image/bmp":
		return ct, ""
	case "text/xml; charset=utf-8":
		if bytes.Contains(body[:min(len(body), 1024)], []byte("<svg")) {
			return "", "SVG images are not served"
		}
	}
	return "", "the content is not a JPEG, PNG, GIF, WebP, AVIF or BMP image"
}

// Serve answers image id (a valid story.ImageID): from the cache, as a
// failure remembered for FailureTTL, or fetched from the URL resolve gives
// (found false: no article has it), checked and cached.
func (p *Proxy) Serve(ctx *fasthttp.RequestCtx, id string, resolve func() (url string, found bool, err error)) {
	if img, ok := p.cache.get(id); ok {
		p.outcome.WithLabelValues("hit").Inc()
		p.serve(ctx, img)
		return
	}
	if f, ok := p.failed(id); ok {
		p.outcome.WithLabelValues("failed").Inc()
		httpkit.WriteError(ctx, f.status, f.msg)
		return
	}
	u, found, err := resolve()
	switch {
	case err != nil:
		httpkit.WriteError(ctx, fasthttp.StatusServiceUnavailable, "cannot look the image up: "+err.Error())
		return
	case !found:
		p.outcome.WithLabelValues("unknown").Inc()
		httpkit.WriteError(ctx, fasthttp.StatusNotFound, "no article has image "+id)
		return
	}
	img, err := p.load(id, u)
	var f *imageFailure
	switch {
	case errors.As(err, &f):
		p.outcome.WithLabelValues("failed").Inc()
		httpkit.WriteError(ctx, f.status, f.msg)
		return
	case err != nil:
		p.outcome.WithLabelValues("failed").Inc()
		httpkit.WriteError(ctx, fasthttp.StatusBadGateway, err.Error())
		return
	}
	p.outcome.WithLabelValues("fetched").Inc()
	p.serve(ctx, img)
}

// serve writes an image with its caching headers, or 304 when the
// request's If-None-Match names its ETag.
func (p *Proxy) serve(ctx *fasthttp.RequestCtx, img cachedImage) {
	h := &ctx.Response.Header
	h.Set("ETag", img.etag)
	h.Set("Cache-Control", "public, max-age="+strconv.Itoa(int(p.opts.MaxAge.Seconds())))
	// Nothing in an image may run or load anything, whatever it holds.
	h.Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'; sandbox")
	if inm := ctx.Request.Header.Peek("If-None-Match"); len(inm) > 0 && httpkit.ETagMatches(string(inm), img.etag) {
		ctx.SetStatusCode(fasthttp.StatusNotModified)
		return
	}
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentType(img.ctype)
	ctx.SetBody(img.data)
}

// cachedImage is an image as the cache holds it.
type cachedImage struct {
	ctype string
	etag  string
	data  []byte
}

// imageCache keeps images up to a number of bytes, evicting the least
// recently used: in files of a directory (the index in memory, rebuilt
// from the files on open, oldest first), or in memory when dir is "".
// It is safe for concurrent use.
type imageCache struct {
	dir string
	max int64

	mu struct {
		sync.Mutex
		lru  *list.List               // of *cacheEntry, most recent first
		byID map[string]*list.Element // by image id
		size int64
	}
}

// cacheEntry is the index entry of a cached image.
type cacheEntry struct {
	id   string
	size int64
	img  cachedImage // data only in memory mode
}

// openImageCache opens (creating) a cache in dir, or in memory.
func openImageCache(dir string, max int64) (*imageCache, error) {
	c := &imageCache{dir: dir, max: max}
	c.mu.lru, c.mu.byID = list.New(), map[string]*list.Element{}
	if dir == "" {
		return c, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("query: image cache: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("query: image cache: %w", err)
	}
	type file struct {
		id   string
		size int64
		mod  time.Time
	}
	var files []file
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		if !story.ValidImageID(e.Name()) {
			_ = os.Remove(filepath.Join(dir, e.Name())) // a write cut short
			continue
		}
		files = append(files, file{e.Name(), info.Size(), info.ModTime()})
	}
	slices.SortFunc(files, func(a, b file) int { return a.mod.Compare(b.mod) })
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, f := range files {
		c.mu.byID[f.id] = c.mu.lru.PushFront(&cacheEntry{id: f.id, size: f.size})
		c.mu.size += f.size
	}
	c.evictLocked()
	return c, nil
}

// get returns a cached image and marks it recently used.
func (c *imageCache) get(id string) (cachedImage, bool) {
	c.mu.Lock()
	el, ok := c.mu.byID[id]
	if !ok {
		c.mu.Unlock()
		return cachedImage{}, false
	}
	c.mu.lru.MoveToFront(el)
	e := el.Value.(*cacheEntry)
	if c.dir == "" {
		c.mu.Unlock()
		return e.img, true
	}
	c.mu.Unlock()
	b, err := os.ReadFile(filepath.Join(c.dir, id))
	img, ok := decodeCacheFile(b)
	if err != nil || !ok {
		c.remove(id)
		return cachedImage{}, false
	}
	return img, true
}

// put caches an image (unless it alone exceeds the cache) and returns it
// with its ETag. A file that cannot be written leaves the image uncached.
func (c *imageCache) put(id, ctype string, data []byte) cachedImage {
	sum := sha256.Sum256(data)
	img := cachedImage{ctype: ctype, etag: `"` + hex.EncodeToString(sum[:16]) + `"`, data: data}
	e := &cacheEntry{id: id, size: int64(len(data))}
	if c.dir == "" {
		e.img = img
	} else {
		b := encodeCacheFile(img)
		e.size = int64(len(b))
		if e.size > c.max || writeFileAtomic(c.dir, id, b) != nil {
			return img
		}
	}
	if e.size > c.max {
		return img
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.mu.byID[id]; ok {
		c.mu.size -= old.Value.(*cacheEntry).size
		c.mu.lru.Remove(old)
	}
	c.mu.byID[id] = c.mu.lru.PushFront(e)
	c.mu.size += e.size
	c.evictLocked()
	return img
}

// remove forgets an image whose file is gone or damaged.
func (c *imageCache) remove(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.mu.byID[id]; ok {
		c.mu.size -= el.Value.(*cacheEntry).size
		c.mu.lru.Remove(el)
		delete(c.mu.byID, id)
		if c.dir != "" {
			_ = os.Remove(filepath.Join(c.dir, id)) // it may already be gone
		}
	}
}

// evictLocked removes the least recently used images until the cache
// fits.
func (c *imageCache) evictLocked() {
	for c.mu.size > c.max {
		el := c.mu.lru.Back()
		e := el.Value.(*cacheEntry)
		c.mu.lru.Remove(el)
		delete(c.mu.byID, e.id)
		c.mu.size -= e.size
		if c.dir != "" {
			_ = os.Remove(filepath.Join(c.dir, e.id)) // a reader may have removed it first
		}
	}
}

// A cache file is the content type and the ETag on one line, then the
// image.
func encodeCacheFile(img cachedImage) []byte {
	b := make([]byte, 0, len(img.ctype)+len(img.etag)+2+len(img.data))
	b = append(append(append(append(b, img.ctype...), ' '), img.etag...), '\n')
	return append(b, img.data...)
}

func decodeCacheFile(b []byte) (cachedImage, bool) {
	head, data, ok := bytes.Cut(b, []byte("\n"))
	if !ok {
		return cachedImage{}, false
	}
	ctype, etag, ok := strings.Cut(string(head), " ")
	if !ok || !strings.HasPrefix(ctype, "image/") || etag == "" {
		return cachedImage{}, false
	}
	return cachedImage{ctype: ctype, etag: etag, data: data}, true
}

// writeFileAtomic writes dir/name through a temporary file and a rename,
// so that a reader never sees half an image.
func writeFileAtomic(dir, name string, b []byte) error {
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	_, werr := f.Write(b)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		_ = os.Remove(f.Name()) // best effort; openImageCache removes leftovers
		return err
	}
	if err := os.Rename(f.Name(), filepath.Join(dir, name)); err != nil {
		_ = os.Remove(f.Name()) // best effort, as above
		return err
	}
	return nil
}
