package fetch

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/andybalholm/brotli"
	"go.uber.org/goleak"

	"github.com/newsflow/newsflow/internal/testutil"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var loopback4 = netip.MustParsePrefix("127.0.0.1/32")

// newFetcher returns a Fetcher that may reach test servers on 127.0.0.1 and
// nothing else private. mod, if non-nil, adjusts the options first.
func newFetcher(t testing.TB, mod func(*Options)) *Fetcher {
	t.Helper()
	opts := Options{
		AllowCIDRs:     []netip.Prefix{loopback4},
		ConnectTimeout: 2 * time.Second,
		Timeout:        5 * time.Second,
	}
	if mod != nil {
		mod(&opts)
	}
	f, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.CloseIdleConnections)
	return f
}

func newServer(t testing.TB, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

const feedXML = `<?xml version="1.0"?><rss version="2.0"><channel><title>t</title>` +
	`<item><title>a</title><link>https://example.com/a</link></item></channel></rss>`

func TestFetchOK(t *testing.T) {
	var got http.Header
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		w.Header().Set("Content-Type", "application/rss+xml; charset=utf-8")
		w.Header().Set("ETag", `"v1"`)
		w.Header().Set("Last-Modified", "Mon, 02 Jan 2006 15:04:05 GMT")
		io.WriteString(w, feedXML)
	})
	f := newFetcher(t, func(o *Options) { o.UserAgent = "testbot/2.0 (+https://example.org/bot)" })
	resp, err := f.Fetch(t.Context(), Request{URL: srv.URL + "/feed.xml"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != 200 || string(resp.Body) != feedXML || resp.NotModified {
		t.Fatalf("status %d notModified %v body %q", resp.Status, resp.NotModified, resp.Body)
	}
	if resp.FinalURL != srv.URL+"/feed.xml" || resp.PermanentURL != "" {
		t.Errorf("final %q permanent %q", resp.FinalURL, resp.PermanentURL)
	}
	if resp.ETag != `"v1"` || resp.LastModified != "Mon, 02 Jan 2006 15:04:05 GMT" ||
		resp.ContentType != "application/rss+xml; charset=utf-8" {
		t.Errorf("validators %q %q type %q", resp.ETag, resp.LastModified, resp.ContentType)
	}
	if resp.Bytes != int64(len(feedXML)) {
		t.Errorf("bytes %d, want %d", resp.Bytes, len(feedXML))
	}
	if ua := got.Get("User-Agent"); ua != "testbot/2.0 (+https://example.org/bot)" {
		t.Errorf("user agent %q", ua)
	}
	if ae := got.Get("Accept-Encoding"); ae != "gzip, br" {
		t.Errorf("accept-encoding %q", ae)
	}
	if a := got.Get("Accept"); !strings.HasPrefix(a, "application/rss+xml") || !strings.Contains(a, "*/*") {
		t.Errorf("accept %q", a)
	}
	if got.Get("If-None-Match") != "" || got.Get("If-Modified-Since") != "" {
		t.Errorf("conditional headers sent without validators: %v", got)
	}
}

func TestDefaultUserAgent(t *testing.T) {
	var ua string
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) { ua = r.UserAgent() })
	f := newFetcher(t, nil)
	if _, err := f.Fetch(t.Context(), Request{URL: srv.URL}); err != nil {
		t.Fatal(err)
	}
	if ua != DefaultUserAgent || !strings.Contains(ua, "https://") {
		t.Errorf("user agent %q", ua)
	}
}

func TestConditionalGET(t *testing.T) {
	const etag, lastMod = `W/"abc"`, "Tue, 03 Jan 2006 10:00:00 GMT"
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/etag" && r.Header.Get("If-None-Match") == etag:
			w.WriteHeader(http.StatusNotModified)
		case r.URL.Path == "/lm" && r.Header.Get("If-Modified-Since") == lastMod:
			w.Header().Set("Cache-Control", "max-age=300")
			w.WriteHeader(http.StatusNotModified)
		default:
			w.Header().Set("ETag", etag)
			w.Header().Set("Last-Modified", lastMod)
			io.WriteString(w, feedXML)
		}
	})
	f := newFetcher(t, nil)
	first, err := f.Fetch(t.Context(), Request{URL: srv.URL + "/etag"})
	if err != nil || first.NotModified {
		t.Fatalf("first fetch: %v %+v", err, first)
	}
	for _, tc := range []struct {
		path string
		req  Request
	}{
		{"/etag", Request{ETag: first.ETag}},
		{"/lm", Request{LastModified: first.LastModified}},
		{"/etag", Request{ETag: first.ETag, LastModified: first.LastModified}},
	} {
		tc.req.URL = srv.URL + tc.path
		resp, err := f.Fetch(t.Context(), tc.req)
		if err != nil {
			t.Fatalf("%s: %v", tc.path, err)
		}
		if !resp.NotModified || resp.Status != 304 || resp.Body != nil {
			t.Fatalf("%s: not modified %v status %d body %q", tc.path, resp.NotModified, resp.Status, resp.Body)
		}
		// The 304 does not repeat the validators: the request's are kept.
		if resp.ETag != tc.req.ETag || resp.LastModified != tc.req.LastModified {
			t.Errorf("%s: validators %q %q, want %q %q", tc.path, resp.ETag, resp.LastModified, tc.req.ETag, tc.req.LastModified)
		}
	}
}

// brotliBytes returns b compressed with brotli.
func brotliBytes(t testing.TB, b []byte) []byte {
	t.Helper()
	return testutil.Compress(t, b, func(w io.Writer) io.WriteCloser { return brotli.NewWriter(w) })
}

// serveEncoded serves body with the given Content-Encoding.
func serveEncoded(encoding string, body []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if encoding != "" {
			w.Header().Set("Content-Encoding", encoding)
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body)
	}
}

func TestEncodings(t *testing.T) {
	plain := []byte(strings.Repeat(feedXML, 20))
	gz, br := testutil.Gzip(t, plain), brotliBytes(t, plain)
	for _, tc := range []struct {
		name, encoding string
		wire           []byte
	}{
		{"identity", "", plain},
		{"identity-explicit", "identity", plain},
		{"gzip", "gzip", gz},
		{"x-gzip", "x-gzip", gz},
		{"br", "br", br},
		{"br-upper", "BR", br},
		{"stacked", "br, gzip", testutil.Gzip(t, br)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, serveEncoded(tc.encoding, tc.wire))
			f := newFetcher(t, nil)
			resp, err := f.Fetch(t.Context(), Request{URL: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(resp.Body, plain) {
				t.Fatalf("body %d bytes, want %d", len(resp.Body), len(plain))
			}
			if resp.Bytes != int64(len(tc.wire)) {
				t.Errorf("wire bytes %d, want %d", resp.Bytes, len(tc.wire))
			}
		})
	}
	t.Run("corrupt-gzip", func(t *testing.T) {
		bad := bytes.Clone(gz)
		bad[len(bad)-5] ^= 0xff // break the CRC
		srv := newServer(t, serveEncoded("gzip", bad))
		resp, err := newFetcher(t, nil).Fetch(t.Context(), Request{URL: srv.URL})
		if err == nil || errors.Is(err, ErrTooLarge) || resp == nil || resp.Body != nil {
			t.Fatalf("err %v resp %+v", err, resp)
		}
	})
	t.Run("unsupported", func(t *testing.T) {
		srv := newServer(t, serveEncoded("zstd", plain))
		_, err := newFetcher(t, nil).Fetch(t.Context(), Request{URL: srv.URL})
		if !errors.Is(err, ErrUnsupportedEncoding) {
			t.Fatalf("err %v, want ErrUnsupportedEncoding", err)
		}
	})
}

// gzipBomb returns a gzip file of n members, each 1 MiB of zeros: a valid
// (multi-member, RFC 1952) gzip stream that inflates to n MiB, built without
// compressing n MiB.
func gzipBomb(t testing.TB, n int) []byte {
	member := testutil.Gzip(t, make([]byte, 1<<20))
	return bytes.Repeat(member, n)
}

var rewrite = flag.Bool("rewrite", false, "regenerate files in testdata")

// brotliBombSize is how much testdata/bomb.br inflates to.
const brotliBombSize = 256 << 20

// brotliBomb returns testdata/bomb.br, brotliBombSize zero bytes compressed
// at the highest quality into 421 bytes. Compressing that much takes
// seconds under -race, so the file is kept; -rewrite regenerates it.
func brotliBomb(t testing.TB) []byte {
	const path = "testdata/bomb.br"
	if *rewrite {
		var buf bytes.Buffer
		bw := brotli.NewWriterLevel(&buf, brotli.BestCompression)
		if _, err := bw.Write(make([]byte, brotliBombSize)); err != nil {
			t.Fatal(err)
		}
		if err := bw.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCompressionBomb(t *testing.T) {
	const limit = 1 << 20
	for _, tc := range []struct {
		enc      string
		inflated int
		bomb     func() []byte
	}{
		{"gzip", 256 << 20, func() []byte { return gzipBomb(t, 256) }},
		{"br", brotliBombSize, func() []byte { return brotliBomb(t) }},
	} {
		t.Run(tc.enc, func(t *testing.T) {
			bomb := tc.bomb()
			if len(bomb) > limit {
				t.Fatalf("bomb is %d bytes compressed, want < %d", len(bomb), limit)
			}
			srv := newServer(t, serveEncoded(tc.enc, bomb))
			f := newFetcher(t, func(o *Options) { o.MaxBodyBytes = limit })

			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			resp, err := f.Fetch(t.Context(), Request{URL: srv.URL})
			runtime.ReadMemStats(&after)

			if !errors.Is(err, ErrTooLarge) {
				t.Fatalf("err %v, want ErrTooLarge", err)
			}
			if !strings.Contains(err.Error(), "decompressed") {
				t.Errorf("err %q should say the decompressed cap was hit", err)
			}
			if resp == nil || resp.Status != 200 || resp.Body != nil {
				t.Errorf("resp %+v", resp)
			}
			// The decoded body is never held beyond the cap: allow the
			// capped buffer's growth (2 MiB in all) and decoder state
			// (brotli's window is 4 MiB here), far below what it
			// inflates to.
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("allocated %.1f MiB for a %d-byte bomb inflating to %d MiB", float64(alloc)/(1<<20), len(bomb), tc.inflated>>20)
			if alloc > 12<<20 || alloc > uint64(tc.inflated)/4 {
				t.Errorf("allocated %d MiB for a %d MiB cap", alloc>>20, limit>>20)
			}
		})
	}
}

func TestEndlessBody(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		chunk := bytes.Repeat([]byte("<item/>"), 4096)
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	f := newFetcher(t, func(o *Options) { o.MaxBodyBytes = 256 << 10 })
	resp, err := f.Fetch(t.Context(), Request{URL: srv.URL})
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("err %v, want ErrTooLarge", err)
	}
	if resp == nil || resp.Bytes != 256<<10+1 {
		t.Errorf("resp %+v, want %d wire bytes", resp, 256<<10+1)
	}
}

func TestContentLengthTooLarge(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "2000")
		w.Write(make([]byte, 2000))
	})
	f := newFetcher(t, func(o *Options) { o.MaxBodyBytes = 1000 })
	if _, err := f.Fetch(t.Context(), Request{URL: srv.URL}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("err %v, want ErrTooLarge", err)
	}
	// Exactly at the cap is fine.
	f = newFetcher(t, func(o *Options) { o.MaxBodyBytes = 2000 })
	if resp, err := f.Fetch(t.Context(), Request{URL: srv.URL}); err != nil || len(resp.Body) != 2000 {
		t.Fatalf("at cap: %v", err)
	}
}

func TestSlowBodyTimeout(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for range 100 {
			w.Write([]byte("x"))
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-tick.C:
			}
		}
	})
	const timeout = 300 * time.Millisecond
	f := newFetcher(t, func(o *Options) { o.Timeout = timeout })
	start := time.Now()
	resp, err := f.Fetch(t.Context(), Request{URL: srv.URL})
	elapsed := time.Since(start)
	if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want ErrTimeout and DeadlineExceeded", err)
	}
	if elapsed > timeout+time.Second {
		t.Errorf("took %v with a %v timeout", elapsed, timeout)
	}
	if resp == nil || resp.Status != 200 || resp.Body != nil || resp.Bytes < 1 {
		t.Errorf("resp %+v", resp)
	}
}

func TestSlowHeadersTimeout(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	})
	f := newFetcher(t, func(o *Options) { o.Timeout = 200 * time.Millisecond })
	resp, err := f.Fetch(t.Context(), Request{URL: srv.URL})
	if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) || resp != nil {
		t.Fatalf("err %v resp %+v, want ErrTimeout and no response", err, resp)
	}
}

func TestCallerCancel(t *testing.T) {
	started := make(chan struct{})
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-r.Context().Done()
	})
	f := newFetcher(t, nil)
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-started
		cancel()
	}()
	_, err := f.Fetch(ctx, Request{URL: srv.URL})
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrTimeout) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
}

// redirectServer serves /r/<code>/<code>/... by redirecting with the first
// code to the rest of the path, and /r itself with a feed. Other paths are
// handled by extra.
func redirectServer(t *testing.T, extra http.HandlerFunc) *httptest.Server {
	return newServer(t, func(w http.ResponseWriter, r *http.Request) {
		rest, ok := strings.CutPrefix(r.URL.Path, "/r")
		if !ok {
			extra(w, r)
			return
		}
		if rest == "" {
			io.WriteString(w, feedXML)
			return
		}
		parts := strings.SplitN(strings.TrimPrefix(rest, "/"), "/", 2)
		code, _ := strconv.Atoi(parts[0])
		next := "/r"
		if len(parts) == 2 {
			next += "/" + parts[1]
		}
		// Alternate relative and absolute locations.
		if strings.Count(rest, "/")%2 == 0 || code == 307 {
			next = "http://" + r.Host + next
		}
		w.Header().Set("Location", next)
		w.WriteHeader(code)
		io.WriteString(w, "moved")
	})
}

// TestRedirects is one scenario checked step by step (cyclomatic 29): the steps
// depend on each other's state, so they stay in order in one function.
func TestRedirects(t *testing.T) {
	srv := redirectServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/loop/a":
			http.Redirect(w, r, "/loop/b", http.StatusFound)
		case "/loop/b":
			http.Redirect(w, r, "/loop/a#frag", http.StatusMovedPermanently)
		case "/self":
			http.Redirect(w, r, "/self", http.StatusTemporaryRedirect)
		case "/gone-after":
			http.Redirect(w, r, "/gone", http.StatusMovedPermanently)
		case "/gone":
			w.WriteHeader(http.StatusGone)
		case "/ftp":
			w.Header().Set("Location", "ftp://example.com/feed")
			w.WriteHeader(http.StatusFound)
		case "/no-location":
			w.WriteHeader(http.StatusMovedPermanently)
		default:
			http.NotFound(w, r)
		}
	})
	final := srv.URL + "/r"
	for _, tc := range []struct {
		path      string
		permanent bool
	}{
		{"/r/301", true},
		{"/r/301/301/301", true},
		{"/r/308", true},
		{"/r/308/301", true},
		{"/r/301/302", false},
		{"/r/302/301", false},
		{"/r/302", false},
		{"/r/303", false},
		{"/r/307", false},
		{"/r/308/307", false},
		{"/r/301/301/301/301/301", true}, // exactly MaxRedirects
	} {
		t.Run(tc.path, func(t *testing.T) {
			resp, err := newFetcher(t, nil).Fetch(t.Context(), Request{URL: srv.URL + tc.path})
			if err != nil {
				t.Fatal(err)
			}
			if resp.FinalURL != final || string(resp.Body) != feedXML {
				t.Errorf("final %q body %q", resp.FinalURL, resp.Body)
			}
			want := ""
			if tc.permanent {
				want = final
			}
			if resp.PermanentURL != want {
				t.Errorf("permanent %q, want %q", resp.PermanentURL, want)
			}
		})
	}

	for _, tc := range []struct {
		name, path   string
		maxRedirects int
		want         error
	}{
		{"loop", "/loop/a", 0, ErrRedirectLoop},
		{"self", "/self", 0, ErrRedirectLoop},
		{"too-many", "/r/301/302/301/302/301/302", 0, ErrTooManyRedirects},
		{"limit-2", "/r/301/301/301", 2, ErrTooManyRedirects},
		{"none", "/r/301", -1, ErrTooManyRedirects},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFetcher(t, func(o *Options) { o.MaxRedirects = tc.maxRedirects })
			resp, err := f.Fetch(t.Context(), Request{URL: srv.URL + tc.path})
			if !errors.Is(err, tc.want) || resp != nil {
				t.Fatalf("err %v resp %+v, want %v", err, resp, tc.want)
			}
			if IsPermanent(err) || IsRateLimited(err) {
				t.Errorf("%v classified as permanent or rate limited", err)
			}
		})
	}

	t.Run("gone-after-redirect", func(t *testing.T) {
		resp, err := newFetcher(t, nil).Fetch(t.Context(), Request{URL: srv.URL + "/gone-after"})
		if !IsGone(err) || resp == nil || resp.FinalURL != srv.URL+"/gone" || resp.Status != 410 {
			t.Fatalf("err %v resp %+v", err, resp)
		}
	})
	t.Run("bad-scheme", func(t *testing.T) {
		_, err := newFetcher(t, nil).Fetch(t.Context(), Request{URL: srv.URL + "/ftp"})
		if err == nil || !strings.Contains(err.Error(), `scheme "ftp"`) || IsPermanent(err) {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("no-location", func(t *testing.T) {
		resp, err := newFetcher(t, nil).Fetch(t.Context(), Request{URL: srv.URL + "/no-location"})
		var se *StatusError
		if !errors.As(err, &se) || se.Status != 301 || resp.Status != 301 {
			t.Fatalf("err %v resp %+v", err, resp)
		}
	})
}

func TestStatusErrors(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	date := now.Add(90 * time.Second).Format(http.TimeFormat)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if ra := r.URL.Query().Get("ra"); ra != "" {
			w.Header().Set("Retry-After", ra)
		}
		code, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/"))
		w.WriteHeader(code)
		io.WriteString(w, "error page")
	})
	f := newFetcher(t, func(o *Options) { o.Now = func() time.Time { return now } })
	for _, tc := range []struct {
		path                string
		gone, limited, perm bool
		retryAfter          time.Duration
		messageContains     string
	}{
		{path: "/410", gone: true, perm: true, messageContains: "410 Gone: the server says the feed was removed permanently"},
		{path: "/429?ra=120", limited: true, retryAfter: 2 * time.Minute, messageContains: "429 Too Many Requests (retry after 2m0s)"},
		{path: "/429?ra=" + strings.ReplaceAll(date, " ", "+"), limited: true, retryAfter: 90 * time.Second},
		{path: "/429", limited: true},
		{path: "/503?ra=5", limited: true, retryAfter: 5 * time.Second},
		{path: "/503?ra=" + strings.ReplaceAll(date, " ", "+"), limited: true, retryAfter: 90 * time.Second},
		{path: "/500", messageContains: "http 500 Internal Server Error"},
		{path: "/500?ra=60", retryAfter: time.Minute},
		{path: "/404"},
		{path: "/403"},
		{path: "/401"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			resp, err := f.Fetch(t.Context(), Request{URL: srv.URL + tc.path})
			var se *StatusError
			if !errors.As(err, &se) {
				t.Fatalf("err %v, want *StatusError", err)
			}
			code, _ := strconv.Atoi(tc.path[1:4])
			if se.Status != code || resp == nil || resp.Status != code || resp.Body != nil {
				t.Fatalf("status %d resp %+v", se.Status, resp)
			}
			if IsGone(err) != tc.gone || IsRateLimited(err) != tc.limited || IsPermanent(err) != tc.perm {
				t.Errorf("gone %v limited %v permanent %v", IsGone(err), IsRateLimited(err), IsPermanent(err))
			}
			if se.RetryAfter != tc.retryAfter || RetryAfter(err) != tc.retryAfter || resp.RetryAfter != tc.retryAfter {
				t.Errorf("retry after %v / %v / %v, want %v", se.RetryAfter, RetryAfter(err), resp.RetryAfter, tc.retryAfter)
			}
			if !strings.Contains(err.Error(), tc.messageContains) || !strings.HasPrefix(err.Error(), "fetch ") {
				t.Errorf("message %q, want it to contain %q", err, tc.messageContains)
			}
		})
	}
}

func TestCacheHeaders(t *testing.T) {
	expires := time.Date(2026, 5, 1, 8, 30, 0, 0, time.UTC)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Cache-Control", "public")
		w.Header().Add("Cache-Control", "max-age=600, must-revalidate")
		w.Header().Set("Expires", expires.Format(http.TimeFormat))
		w.Header().Set("Retry-After", "30")
		io.WriteString(w, feedXML)
	})
	resp, err := newFetcher(t, nil).Fetch(t.Context(), Request{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	if resp.CacheMaxAge != 10*time.Minute || !resp.Expires.Equal(expires) || resp.RetryAfter != 30*time.Second {
		t.Errorf("max-age %v expires %v retry-after %v", resp.CacheMaxAge, resp.Expires, resp.RetryAfter)
	}
}

func TestInvalidURL(t *testing.T) {
	f := newFetcher(t, nil)
	for _, u := range []string{"", "ftp://example.com/feed", "http://", "://x", "example.com/feed", "file:///etc/passwd"} {
		resp, err := f.Fetch(t.Context(), Request{URL: u})
		if !errors.Is(err, ErrInvalidURL) || !IsPermanent(err) || resp != nil {
			t.Errorf("%q: err %v resp %+v, want permanent ErrInvalidURL", u, err, resp)
		}
	}
}

func TestInvalidValidatorsSkipped(t *testing.T) {
	var inm string
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) { inm = r.Header.Get("If-None-Match") })
	_, err := newFetcher(t, nil).Fetch(t.Context(), Request{URL: srv.URL, ETag: "\"a\"\r\nX-Evil: 1"})
	if err != nil || inm != "" {
		t.Fatalf("err %v if-none-match %q", err, inm)
	}
}

func TestConcurrentFetches(t *testing.T) {
	gz := testutil.Gzip(t, []byte(strings.Repeat(feedXML, 50)))
	srv := newServer(t, serveEncoded("gzip", gz))
	f := newFetcher(t, nil)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for i := range 8 {
		wg.Go(func() {
			for j := range 10 {
				resp, err := f.Fetch(t.Context(), Request{URL: fmt.Sprintf("%s/%d/%d", srv.URL, i, j)})
				if err == nil && len(resp.Body) != 50*len(feedXML) {
					err = fmt.Errorf("body %d bytes", len(resp.Body))
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

func TestOptions(t *testing.T) {
	f, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.CloseIdleConnections()
	d := DefaultOptions()
	if f.opts.UserAgent != d.UserAgent || f.opts.Timeout != 30*time.Second || f.opts.ConnectTimeout != 10*time.Second ||
		f.opts.MaxBodyBytes != 10<<20 || f.opts.MaxRedirects != 5 || f.opts.AllowPrivate || f.guard.off {
		t.Errorf("defaults not applied: %+v", f.opts)
	}
	if err := d.Validate(); err != nil {
		t.Errorf("defaults invalid: %v", err)
	}
	for _, o := range []Options{
		{UserAgent: "bot\r\nX: y"},
		{ConnectTimeout: -1},
		{Timeout: -time.Second},
		{MaxBodyBytes: -1},
		{AllowCIDRs: []netip.Prefix{{}}},
	} {
		if err := o.Validate(); err == nil {
			t.Errorf("%+v: want an error", o)
		}
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v): want an error", o)
		}
	}
}

func TestHTTPS(t *testing.T) {
	gz := testutil.Gzip(t, []byte(feedXML))
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 2 {
			t.Errorf("proto %s, want HTTP/2", r.Proto)
		}
		if r.URL.Path == "/old" {
			http.Redirect(w, r, "/feed", http.StatusPermanentRedirect)
			return
		}
		if r.Header.Get("If-None-Match") == `"x"` {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("ETag", `"x"`)
		serveEncoded("gzip", gz)(w, r)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	f := newFetcher(t, nil)
	f.transport.TLSClientConfig = srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()

	resp, err := f.Fetch(t.Context(), Request{URL: srv.URL + "/old"})
	if err != nil {
		t.Fatal(err)
	}
	if string(resp.Body) != feedXML || resp.PermanentURL != srv.URL+"/feed" {
		t.Fatalf("body %q permanent %q", resp.Body, resp.PermanentURL)
	}
	resp, err = f.Fetch(t.Context(), Request{URL: resp.PermanentURL, ETag: resp.ETag})
	if err != nil || !resp.NotModified {
		t.Fatalf("err %v resp %+v", err, resp)
	}
}
