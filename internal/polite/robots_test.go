package polite

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/newsflow/newsflow/internal/testutil"
)

const testUA = "newsflow/1.0 (+https://github.com/newsflow/newsflow)"

// fakeSite answers robots.txt fetches from a table and counts them.
type fakeSite struct {
	mu      sync.Mutex
	answers map[string]fakeAnswer // by robots URL
	calls   map[string]int
	gate    chan struct{} // when set, fetches wait for it to close
}

type fakeAnswer struct {
	status int
	body   string
	err    error
}

func newFakeSite() *fakeSite {
	return &fakeSite{answers: map[string]fakeAnswer{}, calls: map[string]int{}}
}

func (s *fakeSite) set(robotsURL string, a fakeAnswer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answers[robotsURL] = a
}

func (s *fakeSite) count(robotsURL string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[robotsURL]
}

func (s *fakeSite) fetch(ctx context.Context, robotsURL string) (int, []byte, error) {
	s.mu.Lock()
	s.calls[robotsURL]++
	a, ok := s.answers[robotsURL]
	gate := s.gate
	s.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return 0, nil, ctx.Err()
		}
	}
	if !ok {
		return 404, nil, nil
	}
	return a.status, []byte(a.body), a.err
}

func newTestRobots(t *testing.T, site *fakeSite, opts RobotsOptions) *Robots {
	t.Helper()
	r, err := NewRobots(site.fetch, opts)
	if err != nil {
		t.Fatalf("new robots: %v", err)
	}
	return r
}

// exampleRobots is the robots.txt most tests serve.
const exampleRobots = "https://example.com/robots.txt"

// serveRobots returns a site that answers exampleRobots with body.
func serveRobots(body string) *fakeSite {
	site := newFakeSite()
	site.set(exampleRobots, fakeAnswer{status: 200, body: body})
	return site
}

// allowedAt asks r whether our user agent may fetch path of
// https://example.com.
func allowedAt(ctx context.Context, r *Robots, path string) (bool, error) {
	ok, _, err := r.Allowed(ctx, testUA, "https://example.com"+path)
	return ok, err
}

// checkPaths reports each path of https://example.com whose answer is not
// want[path].
func checkPaths(t *testing.T, r *Robots, want map[string]bool) {
	t.Helper()
	for path, want := range want {
		if ok, err := allowedAt(t.Context(), r, path); err != nil || ok != want {
			t.Errorf("%s: allowed %v, %v; want %v", path, ok, err, want)
		}
	}
}

func TestRobotsRules(t *testing.T) {
	type check struct {
		ua, path string
		allowed  bool
		delay    time.Duration
	}
	for _, tc := range []struct {
		name   string
		body   string
		checks []check
	}{
		{
			name: "our group beats star",
			body: "User-agent: *\nDisallow: /\n\nUser-agent: newsflow\nDisallow: /private\nCrawl-delay: 2.5\n",
			checks: []check{
				{testUA, "/feed.xml", true, 2500 * time.Millisecond},
				{testUA, "/private/x", false, 2500 * time.Millisecond},
				{"OtherBot/2.0", "/feed.xml", false, 0},
			},
		},
		{
			name: "product token matched case-insensitively",
			body: "User-agent: NewsFlow\nDisallow: /a\n\nUser-agent: *\nDisallow: /\n",
			checks: []check{
				{testUA, "/b", true, 0},
				{"NEWSFLOW", "/a", false, 0},
			},
		},
		{
			name: "a group named by a prefix of our token is not ours",
			body: "User-agent: news\nDisallow: /\n\nUser-agent: *\nDisallow: /star-only\n",
			checks: []check{
				{testUA, "/feed", true, 0},
				{testUA, "/star-only", false, 0},
				{"news/1.0", "/feed", false, 0},
			},
		},
		{
			name: "a longer group name is not ours either",
			body: "User-agent: newsflowbot\nDisallow: /\n",
			checks: []check{
				{testUA, "/feed", true, 0},
				{"NewsflowBot/3", "/feed", false, 0},
			},
		},
		{
			name:   "no matching group and no star: no rules",
			body:   "User-agent: googlebot\nDisallow: /\n",
			checks: []check{{testUA, "/anything", true, 0}},
		},
		{
			name: "empty disallow allows all and ends the group",
			body: "User-agent: newsflow\nDisallow:\n\nUser-agent: *\nDisallow: /\n",
			checks: []check{
				{testUA, "/x", true, 0},
				{"other", "/x", false, 0},
			},
		},
		{
			name: "consecutive user-agent lines share a group",
			body: "User-agent: a\nUser-agent: newsflow\nDisallow: /shared\n",
			checks: []check{
				{testUA, "/shared", false, 0},
				{"a", "/shared", false, 0},
				{"b", "/shared", true, 0},
			},
		},
		{
			name: "groups for the same agent merge",
			body: "User-agent: newsflow\nDisallow: /a\n\nUser-agent: *\nDisallow: /z\n\nUser-agent: newsflow\nDisallow: /b\n",
			checks: []check{
				{testUA, "/a", false, 0},
				{testUA, "/b", false, 0},
				{testUA, "/z", true, 0},
			},
		},
		{
			name: "longest match wins",
			body: "User-agent: *\nDisallow: /news\nAllow: /news/feed\n",
			checks: []check{
				{testUA, "/news/page", false, 0},
				{testUA, "/news/feed.xml", true, 0},
				{testUA, "/other", true, 0},
			},
		},
		{
			name: "wildcards and end anchor",
			body: "User-agent: *\nDisallow: /*.php$\nDisallow: /tmp*/cache\n",
			checks: []check{
				{testUA, "/index.php", false, 0},
				{testUA, "/index.php?x=1", true, 0},
				{testUA, "/tmp1/cache/a", false, 0},
				{testUA, "/tmp1/other", true, 0},
			},
		},
		{
			name: "query is part of the match",
			body: "User-agent: *\nDisallow: /feed?format=atom\n",
			checks: []check{
				{testUA, "/feed?format=atom", false, 0},
				{testUA, "/feed?format=rss", true, 0},
			},
		},
		{
			name: "robots.txt itself is always allowed",
			body: "User-agent: *\nDisallow: /\n",
			checks: []check{
				{testUA, "/robots.txt", true, 0},
				{testUA, "/", false, 0},
			},
		},
		{
			name: "rules before the first user-agent are ignored, not fatal",
			body: "Disallow: /everything\nCrawl-delay: 9\nUser-agent: *\nDisallow: /x\n",
			checks: []check{
				{testUA, "/everything", true, 0},
				{testUA, "/x", false, 0},
			},
		},
		{
			name: "invalid crawl-delay is ignored, the rest kept",
			body: "User-agent: newsflow\nCrawl-delay: soon\nDisallow: /x\nCrawl-delay: -1\n",
			checks: []check{
				{testUA, "/x", false, 0},
				{testUA, "/y", true, 0},
			},
		},
		{
			name:   "crawl-delay capped",
			body:   "User-agent: *\nCrawl-delay: 86400\n",
			checks: []check{{testUA, "/", true, 2 * time.Minute}},
		},
		{
			name: "comments, CRLF, byte order mark, odd spacing",
			body: "\ufeff# hello\r\nUser-Agent :newsflow # us\r\nDISALLOW:/private # secret\r\n",
			checks: []check{
				{testUA, "/private", false, 0},
				{testUA, "/public", true, 0},
			},
		},
		{
			name:   "empty file",
			body:   "",
			checks: []check{{testUA, "/", true, 0}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			site := serveRobots(tc.body)
			r := newTestRobots(t, site, RobotsOptions{})
			for _, c := range tc.checks {
				ok, delay, err := r.Allowed(t.Context(), c.ua, "https://example.com"+c.path)
				if err != nil {
					t.Fatalf("Allowed(%q, %q): %v", c.ua, c.path, err)
				}
				if ok != c.allowed || delay != c.delay {
					t.Errorf("Allowed(%q, %q) = %v, %v; want %v, %v", c.ua, c.path, ok, delay, c.allowed, c.delay)
				}
			}
			if n := site.count(exampleRobots); n != 1 {
				t.Errorf("robots.txt fetched %d times, want 1", n)
			}
			if s := r.Stats(); s.ParseErrors != 0 {
				t.Errorf("parse errors: %d", s.ParseErrors)
			}
		})
	}
}

func TestRobotsStatuses(t *testing.T) {
	netErr := errors.New("connection refused")
	for _, tc := range []struct {
		name        string
		answer      fakeAnswer
		allowed     bool
		unreachable bool
	}{
		{"404 allows all", fakeAnswer{status: 404, body: "User-agent: *\nDisallow: /"}, true, false},
		{"403 allows all", fakeAnswer{status: 403}, true, false},
		{"401 allows all", fakeAnswer{status: 401}, true, false},
		{"410 allows all", fakeAnswer{status: 410}, true, false},
		{"unfollowed redirect allows all", fakeAnswer{status: 301}, true, false},
		{"429 disallows", fakeAnswer{status: 429}, false, true},
		{"500 disallows", fakeAnswer{status: 500}, false, true},
		{"503 disallows", fakeAnswer{status: 503}, false, true},
		{"network error disallows", fakeAnswer{err: netErr}, false, true},
		{"no status disallows", fakeAnswer{status: 0}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			site := newFakeSite()
			site.set("http://example.com/robots.txt", tc.answer)
			fc := newFakeClock()
			r := newTestRobots(t, site, RobotsOptions{Clock: fc})
			ok, _, err := r.Allowed(t.Context(), testUA, "http://example.com/feed")
			if ok != tc.allowed {
				t.Errorf("allowed = %v, want %v", ok, tc.allowed)
			}
			if got := errors.Is(err, ErrUnreachable); got != tc.unreachable {
				t.Fatalf("err = %v, want unreachable=%v", err, tc.unreachable)
			}
			if !tc.unreachable {
				return
			}
			var ue *UnreachableError
			if !errors.As(err, &ue) {
				t.Fatalf("err %T is not an *UnreachableError", err)
			}
			if ue.Origin != "http://example.com" || !ue.RetryAt.Equal(fc.Now().Add(10*time.Minute)) {
				t.Errorf("unreachable error %+v", ue)
			}
			if tc.answer.err != nil && !errors.Is(err, netErr) {
				t.Errorf("err %v does not wrap the fetch error", err)
			}
			if tc.answer.err == nil && ue.Status != tc.answer.status {
				t.Errorf("status %d, want %d", ue.Status, tc.answer.status)
			}
			if r.Stats().Unreachable != 1 {
				t.Errorf("stats: %+v", r.Stats())
			}
		})
	}
}

func TestRobotsErrorRetriedAfterErrorTTL(t *testing.T) {
	site := newFakeSite()
	site.set(exampleRobots, fakeAnswer{status: 500})
	fc := newFakeClock()
	r := newTestRobots(t, site, RobotsOptions{Clock: fc, ErrorTTL: 10 * time.Minute, MaxErrorTTL: 30 * time.Minute})
	expect := func(wantOK bool, wantFetches int) {
		t.Helper()
		ok, err := allowedAt(t.Context(), r, "/feed")
		if ok != wantOK || (err != nil) == wantOK {
			t.Fatalf("at +%v: allowed %v, err %v; want allowed %v", fc.Now().Sub(start(fc)), ok, err, wantOK)
		}
		if n := site.count(exampleRobots); n != wantFetches {
			t.Fatalf("at +%v: %d fetches, want %d", fc.Now().Sub(start(fc)), n, wantFetches)
		}
	}
	expect(false, 1)
	fc.Advance(10*time.Minute - time.Second)
	expect(false, 1) // still cached
	fc.Advance(time.Second)
	expect(false, 2) // retried after ErrorTTL, fails again
	fc.Advance(10 * time.Minute)
	expect(false, 2) // second failure: retry after 20m
	fc.Advance(10 * time.Minute)
	expect(false, 3)
	fc.Advance(30 * time.Minute) // capped at MaxErrorTTL
	expect(false, 4)
	site.set(exampleRobots, fakeAnswer{status: 200, body: "User-agent: *\nDisallow: /private\n"})
	fc.Advance(30 * time.Minute)
	expect(true, 5)
	fc.Advance(23 * time.Hour)
	expect(true, 5) // a good answer is kept for the full TTL
}

var fakeEpoch = newFakeClock().Now()

func start(*fakeClock) time.Time { return fakeEpoch }

func TestRobotsCacheTTL(t *testing.T) {
	site := serveRobots("User-agent: *\nDisallow: /a\n")
	fc := newFakeClock()
	r := newTestRobots(t, site, RobotsOptions{Clock: fc})
	check := func(path string, want bool, wantFetches int) {
		t.Helper()
		ok, err := allowedAt(t.Context(), r, path)
		if err != nil || ok != want {
			t.Fatalf("%s: allowed %v, %v; want %v", path, ok, err, want)
		}
		if n := site.count(exampleRobots); n != wantFetches {
			t.Fatalf("%d fetches, want %d", n, wantFetches)
		}
	}
	check("/a", false, 1)
	site.set(exampleRobots, fakeAnswer{status: 200, body: "User-agent: *\nDisallow: /b\n"})
	fc.Advance(24*time.Hour - time.Second)
	check("/a", false, 1)
	check("/b", true, 1)
	fc.Advance(time.Second)
	check("/a", true, 2)
	check("/b", false, 2)
	if s := r.Stats(); s.Fetches != 2 || s.Hits != 3 || s.Hosts != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// While the file is unreachable the last good copy keeps being used, up to
// MaxStale.
func TestRobotsStaleCopyWhileUnreachable(t *testing.T) {
	site := serveRobots("User-agent: *\nDisallow: /private\n")
	fc := newFakeClock()
	r := newTestRobots(t, site, RobotsOptions{Clock: fc, MaxStale: 48 * time.Hour})
	check := func(path string, want bool, wantErr bool) {
		t.Helper()
		ok, err := allowedAt(t.Context(), r, path)
		if ok != want || (err != nil) != wantErr {
			t.Fatalf("%s at +%v: allowed %v, err %v; want %v, err %v", path, fc.Now().Sub(fakeEpoch), ok, err, want, wantErr)
		}
	}
	check("/feed", true, false)
	site.set(exampleRobots, fakeAnswer{status: 503})
	fc.Advance(25 * time.Hour)
	check("/feed", true, false)
	check("/private", false, false)
	if n := site.count(exampleRobots); n != 2 {
		t.Fatalf("%d fetches, want 2", n)
	}
	fc.Advance(24 * time.Hour) // the good copy is now 49h old
	check("/feed", false, true)
}

func TestRobotsSingleFetchForConcurrentCallers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		site := serveRobots("User-agent: *\nDisallow: /private\n")
		site.gate = make(chan struct{})
		r := newTestRobots(t, site, RobotsOptions{})
		type result struct {
			ok  bool
			err error
		}
		results := make(chan result, 50)
		for i := range 50 {
			go func() {
				path := "/feed"
				if i%2 == 1 {
					path = "/private"
				}
				ok, err := allowedAt(context.Background(), r, path)
				results <- result{ok == (i%2 == 0), err}
			}()
		}
		synctest.Wait()
		if n := site.count(exampleRobots); n != 1 {
			t.Fatalf("%d fetches in flight, want 1", n)
		}
		close(site.gate)
		for range 50 {
			if res := <-results; !res.ok || res.err != nil {
				t.Fatalf("wrong answer: %+v", res)
			}
		}
		if n := site.count(exampleRobots); n != 1 {
			t.Fatalf("%d fetches, want 1", n)
		}
	})
}

// When the caller that fetches gives up, a waiting caller takes over and
// nothing is cached from the abandoned fetch.
func TestRobotsFetchingCallerCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		site := serveRobots("User-agent: *\nDisallow: /private\n")
		site.gate = make(chan struct{})
		r := newTestRobots(t, site, RobotsOptions{})
		leaderCtx, cancelLeader := context.WithCancel(context.Background())
		leaderErr := make(chan error, 1)
		go func() {
			_, _, err := r.Allowed(leaderCtx, testUA, "https://example.com/feed")
			leaderErr <- err
		}()
		synctest.Wait()
		waiterOK := make(chan bool, 1)
		go func() {
			ok, err := allowedAt(context.Background(), r, "/private")
			waiterOK <- err == nil && !ok
		}()
		// A third caller gives up while waiting.
		shortCtx, cancelShort := context.WithTimeout(context.Background(), time.Second)
		defer cancelShort()
		if _, _, err := r.Allowed(shortCtx, testUA, "https://example.com/feed"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("waiting caller: %v, want deadline exceeded", err)
		}
		cancelLeader()
		if err := <-leaderErr; !errors.Is(err, context.Canceled) {
			t.Fatalf("fetching caller: %v, want canceled", err)
		}
		synctest.Wait()
		if n := site.count(exampleRobots); n != 2 {
			t.Fatalf("%d fetches, want 2 (the waiter took over)", n)
		}
		close(site.gate)
		if !<-waiterOK {
			t.Fatal("the waiter that took over got a wrong answer")
		}
	})
}

func TestRobotsBodyCap(t *testing.T) {
	t.Run("default 500 KiB", func(t *testing.T) {
		var b strings.Builder
		b.WriteString("User-agent: *\nDisallow: /early\n")
		for i := 0; b.Len() < 500<<10; i++ {
			fmt.Fprintf(&b, "Disallow: /filler/%d\n", i)
		}
		b.WriteString("Disallow: /late\n")
		r := newTestRobots(t, serveRobots(b.String()), RobotsOptions{})
		checkPaths(t, r, map[string]bool{"/early": false, "/filler/1": false, "/late": true})
	})
	t.Run("partial last line dropped", func(t *testing.T) {
		body := "User-agent: *\nDisallow: /a\nDisallow: /abcdef\n"
		// The cap cuts "Disallow: /abcdef" to "Disallow: /", which would
		// disallow everything.
		r := newTestRobots(t, serveRobots(body), RobotsOptions{MaxBodyBytes: strings.Index(body, "/abcdef") + 1})
		checkPaths(t, r, map[string]bool{"/a": false, "/b": true, "/abcdef": false})
	})
}

func TestRobotsOrigins(t *testing.T) {
	site := serveRobots("User-agent: *\nDisallow: /\n")
	site.set("http://example.com/robots.txt", fakeAnswer{status: 200, body: ""})
	site.set("https://example.com:8443/robots.txt", fakeAnswer{status: 200, body: "User-agent: *\nDisallow: /x\n"})
	r := newTestRobots(t, site, RobotsOptions{})
	for _, tc := range []struct {
		url  string
		want bool
	}{
		{"https://example.com/feed", false},
		{"https://EXAMPLE.com:443/feed", false},
		{"http://example.com/feed", true},
		{"http://example.com:80/feed", true},
		{"https://example.com:8443/feed", true},
		{"https://example.com:8443/x", false},
		{"https://other.example/feed", true}, // 404
	} {
		ok, _, err := r.Allowed(t.Context(), testUA, tc.url)
		if err != nil || ok != tc.want {
			t.Errorf("%s: allowed %v, %v; want %v", tc.url, ok, err, tc.want)
		}
	}
	if s := r.Stats(); s.Fetches != 4 || s.Hosts != 4 {
		t.Errorf("stats %+v, want 4 fetches of 4 origins", s)
	}
	if _, _, err := r.Allowed(t.Context(), testUA, "ftp://example.com/x"); !errors.Is(err, ErrInvalidURL) {
		t.Errorf("ftp url: %v", err)
	}
}

func TestRobotsMaxHosts(t *testing.T) {
	site := newFakeSite()
	fc := newFakeClock()
	r := newTestRobots(t, site, RobotsOptions{Clock: fc, MaxHosts: 100})
	for i := range 1000 {
		if _, _, err := r.Allowed(t.Context(), testUA, fmt.Sprintf("https://h%d.example/feed", i)); err != nil {
			t.Fatal(err)
		}
		if n := r.Stats().Hosts; n > 100 {
			t.Fatalf("cache grew to %d entries", n)
		}
	}
}

func TestRobotsOptionsValidate(t *testing.T) {
	checkValidate(t, []optionsCase[RobotsOptions]{
		{"zero", RobotsOptions{}, true},
		{"defaults", DefaultRobotsOptions(), true},
		{"no crawl-delay cap", RobotsOptions{MaxCrawlDelay: -1}, true},
		{"error ttl above default max", RobotsOptions{ErrorTTL: 2 * time.Hour}, true},
		{"negative ttl", RobotsOptions{TTL: -1}, false},
		{"negative body", RobotsOptions{MaxBodyBytes: -1}, false},
		{"negative hosts", RobotsOptions{MaxHosts: -1}, false},
		{"max error below error", RobotsOptions{ErrorTTL: time.Hour, MaxErrorTTL: time.Minute}, false},
	})
	if _, err := NewRobots(nil, RobotsOptions{}); err == nil {
		t.Error("NewRobots accepted a nil fetch function")
	}
}

func TestProductToken(t *testing.T) {
	testutil.CheckFunc(t, "productToken", productToken, map[string]string{
		testUA:                  "newsflow",
		"Mozilla/5.0 (X11)":     "mozilla",
		"my_crawler-2":          "my_crawler-",
		"  leading space":       "",
		"":                      "",
		"Googlebot-News":        "googlebot-news",
		"ExampleBot (+http://)": "examplebot",
	})
}

// FuzzRobotsParse checks that no robots.txt body makes parsing or matching
// panic, and that normalising never makes the parser fail.
func FuzzRobotsParse(f *testing.F) {
	for _, s := range []string{
		"User-agent: *\nDisallow: /\n",
		"Disallow: /x\nUser-agent: a\nCrawl-delay: x\n",
		"\ufeffUser-agent:newsflow\r\nAllow: /*.xml$\r\n",
		"User-agent: *\nCrawl-delay: 1e400\nDisallow:\n",
		"user-agent\n:\n::\ndisallow",
	} {
		f.Add(s, "/feed?x=1")
	}
	f.Fuzz(func(t *testing.T, body, path string) {
		r, err := NewRobots(serveRobots(body).fetch, RobotsOptions{MaxBodyBytes: 4096})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		_, delay, err := r.Allowed(context.Background(), testUA, "https://example.com"+path)
		if err != nil && !errors.Is(err, ErrInvalidURL) {
			t.Fatalf("Allowed: %v", err)
		}
		if delay < 0 || delay > 2*time.Minute {
			t.Fatalf("crawl delay %v out of range", delay)
		}
		if n := r.Stats().ParseErrors; n != 0 {
			t.Fatalf("the parser refused the normalised file %q", normalize([]byte(body)))
		}
	})
}

func BenchmarkRobotsAllowedCached(b *testing.B) {
	var body strings.Builder
	body.WriteString("User-agent: *\n")
	for i := range 200 {
		fmt.Fprintf(&body, "Disallow: /section-%d/\nAllow: /section-%d/feed\n", i, i)
	}
	body.WriteString("User-agent: newsflow\nCrawl-delay: 1\nDisallow: /private\n")
	r, err := NewRobots(serveRobots(body.String()).fetch, RobotsOptions{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for b.Loop() {
		if _, _, err := r.Allowed(ctx, testUA, "https://example.com/section-150/feed.xml"); err != nil {
			b.Fatal(err)
		}
	}
}
