package fetch

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/andybalholm/brotli"
	"github.com/newsflow/newsflow/internal/redact"
)

// acceptHeader prefers feed types, then generic XML and JSON, then anything
// (some servers answer 406 without the */*).
const acceptHeader = "application/rss+xml, application/atom+xml, application/feed+json, " +
	"application/xml;q=0.9, text/xml;q=0.9, application/json;q=0.9, */*;q=0.8"

// maxDrain bounds how much of an unused body (a redirect or an error page) is
// read so that the connection can be reused.
const maxDrain = 64 << 10

// Request is one feed request.
type Request struct {
	// URL is the feed URL, http or https.
	URL string
	// ETag and LastModified are the validators stored from the last
	// successful fetch; when set they are sent as If-None-Match and
	// If-Modified-Since.
	ETag, LastModified string
}

// Response is the result of a fetch.
type Response struct {
	// Status is the final HTTP status code.
	Status int
	// FinalURL is the URL that gave the final response, after redirects.
	FinalURL string
	// PermanentURL is set only when the fetch was redirected and every hop
	// was a 301 or 308: it is the URL to store for the source from now on.
	// Callers should act on it only when the fetch succeeded.
	PermanentURL string
	// Body is the decompressed body, at most Options.MaxBodyBytes long. It
	// is nil for a 304 and for failed fetches.
	Body []byte
	// ETag and LastModified are the validators to send next time. On a 304
	// that does not repeat them they are the ones from the Request.
	ETag, LastModified string
	// ContentType is the Content-Type header as sent.
	ContentType string
	// NotModified is true for a 304 Not Modified: a success with no new
	// items.
	NotModified bool
	// RetryAfter is the Retry-After header (seconds or HTTP-date), zero if
	// absent, invalid or in the past; clamped to 30 days.
	RetryAfter time.Duration
	// CacheMaxAge is the Cache-Control max-age, zero if absent.
	CacheMaxAge time.Duration
	// Expires is the Expires header, zero if absent or invalid.
	Expires time.Time
	// Bytes counts body bytes received as sent on the wire (before
	// decompression), over all redirect hops.
	Bytes int64
	// Duration is the time the whole fetch took, redirects and body
	// included.
	Duration time.Duration
}

// Fetcher fetches feeds. It is safe for concurrent use.
type Fetcher struct {
	opts      Options
	guard     *guard
	transport *http.Transport
	gzipPool  sync.Pool // of *gzip.Reader, to reuse its ~40 KB of state
}

// New returns a Fetcher. Zero fields of opts take their defaults.
func New(opts Options) (*Fetcher, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	g := &guard{off: opts.AllowPrivate}
	for _, p := range opts.AllowCIDRs {
		g.allow = append(g.allow, p.Masked())
	}
	dialer := &net.Dialer{
		Timeout:        opts.ConnectTimeout,
		KeepAlive:      30 * time.Second,
		ControlContext: g.control,
	}
	tr := &http.Transport{
		Proxy:                  nil, // never from the environment
		DialContext:            dialer.DialContext,
		TLSHandshakeTimeout:    opts.ConnectTimeout,
		DisableCompression:     true, // we ask for and decode gzip and br ourselves
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           128,
		MaxIdleConnsPerHost:    16, // hosts serving many feeds are fetched concurrently
		IdleConnTimeout:        90 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
	return &Fetcher{opts: opts, guard: g, transport: tr}, nil
}

// CloseIdleConnections closes the keep-alive connections that are not in
// use. Call it when the Fetcher is no longer needed.
func (f *Fetcher) CloseIdleConnections() {
	f.transport.CloseIdleConnections()
}

// Fetch performs one conditional GET for req, following redirects. See the
// package documentation for the meaning of its results. When err is non-nil
// the Response is non-nil only if the server answered (a *StatusError, a body
// that was too large, too slow or undecodable); it then has no Body.
func (f *Fetcher) Fetch(ctx context.Context, req Request) (*Response, error) {
	start := f.opts.Now()
	resp, err := f.fetch(ctx, req)
	elapsed := f.opts.Now().Sub(start)
	if resp != nil {
		resp.Duration = elapsed
	}
	if err != nil {
		f.opts.Logger.LogAttrs(ctx, slog.LevelDebug, "fetch failed",
			slog.String("url", redact.URL(req.URL)), slog.Duration("duration", elapsed), slog.String("err", redact.Text(err.Error())))
		return resp, fmt.Errorf("fetch %s: %w", req.URL, err)
	}
	f.opts.Logger.LogAttrs(ctx, slog.LevelDebug, "fetched",
		slog.String("url", redact.URL(req.URL)), slog.Int("status", resp.Status),
		slog.Int64("bytes", resp.Bytes), slog.Int("body", len(resp.Body)),
		slog.Duration("duration", elapsed))
	return resp, nil
}

func (f *Fetcher) fetch(ctx context.Context, req Request) (*Response, error) {
	cur, err := parseFeedURL(req.URL)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, f.opts.Timeout)
	defer cancel()

	out := &Response{}
	seen := map[string]struct{}{urlKey(cur): {}}
	permanent := true
	for hop := 0; ; hop++ {
		hr, err := f.roundTrip(ctx, cur, req)
		if err != nil {
			if hop > 0 {
				return nil, classify(ctx, fmt.Sprintf("redirect %d to %s", hop, cur), err)
			}
			return nil, classify(ctx, "request", err)
		}
		loc := hr.Header.Get("Location")
		if isRedirect(hr.StatusCode) && loc != "" {
			out.Bytes += drain(hr.Body)
			next, err := redirectTarget(cur, loc)
			if err != nil {
				return nil, fmt.Errorf("redirect %d from %s: %w", hop+1, cur, err)
			}
			if _, ok := seen[urlKey(next)]; ok {
				return nil, fmt.Errorf("%w: %s redirects back to %s", ErrRedirectLoop, cur, next)
			}
			if hop >= f.opts.MaxRedirects {
				return nil, fmt.Errorf("%w: more than %d (next %s)", ErrTooManyRedirects, f.opts.MaxRedirects, next)
			}
			seen[urlKey(next)] = struct{}{}
			permanent = permanent && (hr.StatusCode == http.StatusMovedPermanently ||
				hr.StatusCode == http.StatusPermanentRedirect)
			f.opts.Logger.LogAttrs(ctx, slog.LevelDebug, "redirect",
				slog.String("from", redact.URL(cur.String())), slog.String("to", redact.URL(next.String())),
				slog.Int("status", hr.StatusCode))
			cur = next
			continue
		}

		out.FinalURL = req.URL
		if hop > 0 {
			out.FinalURL = cur.String()
			if permanent {
				out.PermanentURL = out.FinalURL
			}
		}
		f.fillHeaders(out, hr, req)
		err = f.finish(ctx, out, hr)
		return out, err
	}
}

// finish reads or drains the final response's body and closes it.
func (f *Fetcher) finish(ctx context.Context, out *Response, hr *http.Response) error {
	switch {
	case hr.StatusCode == http.StatusNotModified:
		out.NotModified = true
		out.Bytes += drain(hr.Body)
		return nil
	case hr.StatusCode >= 200 && hr.StatusCode < 300:
		defer hr.Body.Close()
		body, n, err := f.readBody(hr)
		out.Bytes += n
		if err != nil {
			return classify(ctx, "read body", err)
		}
		out.Body = body
		return nil
	default:
		out.Bytes += drain(hr.Body)
		return &StatusError{Status: hr.StatusCode, RetryAfter: out.RetryAfter}
	}
}

func (f *Fetcher) fillHeaders(out *Response, hr *http.Response, req Request) {
	h := hr.Header
	out.Status = hr.StatusCode
	out.ETag = h.Get("ETag")
	out.LastModified = h.Get("Last-Modified")
	out.ContentType = h.Get("Content-Type")
	out.RetryAfter = parseRetryAfter(h.Get("Retry-After"), f.opts.Now())
	out.CacheMaxAge = parseMaxAge(strings.Join(h.Values("Cache-Control"), ","))
	out.Expires = parseExpires(h.Get("Expires"))
	if hr.StatusCode == http.StatusNotModified {
		if out.ETag == "" {
			out.ETag = req.ETag
		}
		if out.LastModified == "" {
			out.LastModified = req.LastModified
		}
	}
}

func (f *Fetcher) roundTrip(ctx context.Context, u *url.URL, req Request) (*http.Response, error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	h := hreq.Header
	h.Set("User-Agent", f.opts.UserAgent)
	h.Set("Accept", acceptHeader)
	h.Set("Accept-Encoding", "gzip, br")
	if req.ETag != "" && validHeaderValue(req.ETag) {
		h.Set("If-None-Match", req.ETag)
	}
	if req.LastModified != "" && validHeaderValue(req.LastModified) {
		h.Set("If-Modified-Since", req.LastModified)
	}
	return f.transport.RoundTrip(hreq)
}

// readBody decodes the body through two caps: one on the wire and one on the
// decompressed stream, so neither an endless body nor a compression bomb can
// make it allocate more than MaxBodyBytes+1 (plus decoder state). It returns
// the body and the wire bytes read.
func (f *Fetcher) readBody(hr *http.Response) ([]byte, int64, error) {
	limit := f.opts.MaxBodyBytes
	if hr.ContentLength > limit {
		return nil, 0, fmt.Errorf("%w: content-length %d exceeds %d", ErrTooLarge, hr.ContentLength, limit)
	}
	wire := &capReader{r: hr.Body, left: limit}
	var (
		r    io.Reader = wire
		hint int64     = hr.ContentLength
	)
	encs := contentEncodings(hr.Header)
	// Encodings are listed in the order they were applied; undo them in
	// reverse.
	for i := len(encs) - 1; i >= 0; i-- {
		switch encs[i] {
		case "identity":
		case "gzip", "x-gzip":
			zr, err := f.gzipReader(r)
			if err != nil {
				return nil, wire.n, wireErr(wire, limit, fmt.Errorf("gzip header: %w", err))
			}
			defer f.gzipPool.Put(zr)
			r, hint = zr, -1
		case "br":
			r, hint = brotli.NewReader(r), -1
		default:
			return nil, 0, fmt.Errorf("%w %q", ErrUnsupportedEncoding, encs[i])
		}
	}
	body, err := readCapped(r, limit, hint)
	if err != nil {
		if errors.Is(err, ErrTooLarge) && !wire.exceeded {
			return nil, wire.n, fmt.Errorf("%w: more than %d bytes decompressed", ErrTooLarge, limit)
		}
		return nil, wire.n, wireErr(wire, limit, err)
	}
	if len(encs) > 0 {
		// A decoder may stop at the end of its stream before the wire
		// reports EOF; read the rest so the connection can be reused.
		if _, err := io.CopyN(io.Discard, wire, maxDrain); err != nil && !errors.Is(err, io.EOF) {
			return nil, wire.n, wireErr(wire, limit, fmt.Errorf("after encoded body: %w", err))
		}
	}
	return body, wire.n, nil
}

// gzipReader returns a pooled gzip reader reset to read r.
func (f *Fetcher) gzipReader(r io.Reader) (*gzip.Reader, error) {
	zr, ok := f.gzipPool.Get().(*gzip.Reader)
	if !ok {
		return gzip.NewReader(r)
	}
	if err := zr.Reset(r); err != nil {
		f.gzipPool.Put(zr) // Reset recovers from any previous state
		return nil, err
	}
	return zr, nil
}

// wireErr reports ErrTooLarge if the wire cap was hit (decoders may turn it
// into their own errors), else err.
func wireErr(wire *capReader, limit int64, err error) error {
	if wire.exceeded {
		return fmt.Errorf("%w: more than %d bytes on the wire", ErrTooLarge, limit)
	}
	return err
}

// readCapped reads r to EOF and fails with ErrTooLarge as soon as more than
// limit bytes arrive. It never holds more than limit+1 bytes of data; hint
// (when positive) sizes the first buffer.
func readCapped(r io.Reader, limit, hint int64) ([]byte, error) {
	size := int64(512)
	if hint >= 0 {
		size = hint + 1 // +1 so that reading EOF does not grow the buffer
	}
	b := make([]byte, 0, min(size, limit+1))
	for {
		if int64(len(b)) > limit {
			return nil, ErrTooLarge
		}
		if len(b) == cap(b) {
			// Double (append grows large slices by only 1.25x, which
			// costs several copies for a typical feed), within the cap.
			nb := make([]byte, len(b), min(2*int64(cap(b)), limit+1))
			copy(nb, b)
			b = nb
		}
		end := min(int64(cap(b)), limit+1)
		n, err := r.Read(b[len(b):end])
		b = b[:len(b)+n]
		if err == io.EOF {
			if int64(len(b)) > limit {
				return nil, ErrTooLarge
			}
			return b, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// capReader passes through at most left bytes and fails with ErrTooLarge
// once a byte beyond them arrives.
type capReader struct {
	r        io.Reader
	left     int64
	n        int64
	exceeded bool
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.exceeded {
		return 0, ErrTooLarge
	}
	if int64(len(p)) > c.left+1 {
		p = p[:c.left+1]
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	c.left -= int64(n)
	if c.left < 0 {
		c.exceeded = true
		return n, ErrTooLarge
	}
	return n, err
}

// drain reads and discards at most maxDrain bytes of an unused body, then
// closes it, so that small bodies leave the connection reusable. It returns
// the bytes read.
func drain(body io.ReadCloser) int64 {
	n, _ := io.CopyN(io.Discard, body, maxDrain)
	_ = body.Close() // the body was only read to be thrown away
	return n
}

// classify turns transport and body errors into ones the caller can branch
// on: timeouts wrap ErrTimeout (and context.DeadlineExceeded when a deadline
// expired), cancellation wraps context.Canceled.
func classify(ctx context.Context, stage string, err error) error {
	switch {
	case errors.Is(err, ErrBlockedAddress), errors.Is(err, ErrTooLarge):
		return fmt.Errorf("%s: %w", stage, err)
	}
	if cerr := ctx.Err(); cerr != nil {
		if errors.Is(cerr, context.DeadlineExceeded) {
			return fmt.Errorf("%s: %w (%w)", stage, ErrTimeout, context.DeadlineExceeded)
		}
		return fmt.Errorf("%s: %w", stage, cerr)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("%s: %w: %w", stage, ErrTimeout, err)
	}
	return fmt.Errorf("%s: %w", stage, err)
}

func contentEncodings(h http.Header) []string {
	var encs []string
	for _, v := range h.Values("Content-Encoding") {
		for e := range strings.SplitSeq(v, ",") {
			if e = strings.ToLower(strings.TrimSpace(e)); e != "" {
				encs = append(encs, e)
			}
		}
	}
	return encs
}

func isRedirect(status int) bool {
	switch status {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}

// parseFeedURL parses a request URL; the errors wrap ErrInvalidURL.
func parseFeedURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidURL, err)
	}
	if err := checkURL(u); err != nil {
		return nil, fmt.Errorf("%w %q: %w", ErrInvalidURL, raw, err)
	}
	u.Fragment, u.RawFragment = "", ""
	return u, nil
}

// redirectTarget resolves a Location header against the current URL.
func redirectTarget(cur *url.URL, loc string) (*url.URL, error) {
	next, err := cur.Parse(loc)
	if err != nil {
		return nil, fmt.Errorf("location %q: %w", loc, err)
	}
	if err := checkURL(next); err != nil {
		return nil, fmt.Errorf("location %q: %w", loc, err)
	}
	next.Fragment, next.RawFragment = "", ""
	return next, nil
}

func checkURL(u *url.URL) error {
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("scheme %q is not http or https", u.Scheme)
	}
	if u.Hostname() == "" {
		return errors.New("no host")
	}
	return nil
}

// urlKey identifies a URL for redirect-loop detection.
func urlKey(u *url.URL) string {
	return u.Scheme + "://" + strings.ToLower(u.Host) + u.RequestURI()
}

// validHeaderValue reports whether v can be sent as a header value; stored
// validators that cannot are skipped rather than failing every fetch.
func validHeaderValue(v string) bool {
	return !strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 && r != '\t' || r == 0x7f })
}

// Client returns an HTTP client for requests other than feed fetches
// (webhook deliveries): the same SSRF guard on every address it dials, no
// proxy from the environment, and no redirects followed (a 3xx is the
// answer).
func (f *Fetcher) Client(timeout time.Duration) *http.Client {
	return &http.Client{Transport: f.transport, Timeout: timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}
