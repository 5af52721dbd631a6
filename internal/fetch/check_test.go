package fetch

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
)

func TestParseHostIP(t *testing.T) {
	for host, want := range map[string]string{
		"127.0.0.1": "127.0.0.1", "127.0.0.1.": "127.0.0.1", "2130706433": "127.0.0.1", "017700000001": "127.0.0.1",
		"0x7f000001": "127.0.0.1", "0x7f.1": "127.0.0.1", "127.1": "127.0.0.1", "0177.0.0.01": "127.0.0.1",
		"10.1": "10.0.0.1", "169.254.43518": "169.254.169.254", "0xa9.0xfe.0xa9.0xfe": "169.254.169.254", "0": "0.0.0.0",
		"::1": "::1", "::ffff:127.0.0.1": "::ffff:127.0.0.1", "fe80::1%eth0": "fe80::1", "8.8.8.8": "8.8.8.8",
	} {
		got, ok := ParseHostIP(host)
		if !ok || got != netip.MustParseAddr(want) {
			t.Errorf("ParseHostIP(%q) = %v %v, want %s", host, got, ok, want)
		}
	}
	for _, name := range []string{"example.com", "localhost", "1.2.3.4.5", "256.1.1.1", "1.2.3.256", "08.1.1.1", "0x1g", "1..1", "", "1e100"} {
		if a, ok := ParseHostIP(name); ok {
			t.Errorf("ParseHostIP(%q) = %v, want a name", name, a)
		}
	}
}

// CheckURL refuses every URL whose host the dialer would refuse, in every
// numeric form and by name, allows what AllowCIDRs and AllowPrivate allow,
// and names neither the resolver nor the address a name resolves to.
func TestGuardCheckURL(t *testing.T) {
	names := map[string][]string{
		"intranet.corp": {"10.1.2.3"}, "metadata.corp": {"169.254.169.254"}, "news.example": {"93.184.216.34"},
		"mixed.example": {"93.184.216.34", "127.0.0.1"}, "v6.example": {"2606:4700:4700::1111"},
	}
	lookup := func(_ context.Context, _, host string) ([]netip.Addr, error) {
		var out []netip.Addr
		for _, a := range names[host] {
			out = append(out, netip.MustParseAddr(a))
		}
		if len(out) == 0 {
			return nil, &net.DNSError{Err: "no such host", Name: host, Server: "10.0.0.2:53", IsNotFound: true}
		}
		return out, nil
	}
	g := NewGuard(Options{})
	g.lookup = lookup
	ctx := context.Background()
	for raw, kind := range map[string]string{
		"http://127.0.0.1/feed": "loopback", "http://2130706433/": "loopback", "http://0x7f.1/": "loopback",
		"http://017700000001:8080/": "loopback", "http://[::1]/": "loopback", "http://[::ffff:127.0.0.1]/": "loopback",
		"https://10.0.0.1/": "private", "http://192.168.1.1./": "private", "http://[fd00::1]/": "private",
		"http://169.254.169.254/latest/meta-data/": "cloud metadata", "http://169.254.43518/": "cloud metadata",
		"http://[fe80::1%25eth0]/": "link-local", "http://0/": "unspecified", "http://100.64.0.1/": "shared",
		"http://intranet.corp/rss": "private", "http://metadata.corp/": "cloud metadata", "http://mixed.example/": "loopback",
		"http://user:pw@10.0.0.1/": "private",
	} {
		err := g.CheckURL(ctx, raw)
		if !errors.Is(err, ErrBlockedAddress) || !strings.Contains(err.Error(), kind) {
			t.Errorf("%s: %v, want blocked (%s)", raw, err, kind)
		}
		if err != nil && (strings.Contains(err.Error(), "10.1.2.3") || strings.Contains(err.Error(), "pw")) {
			t.Errorf("%s: error %q names what it should not", raw, err)
		}
	}
	for _, raw := range []string{"https://news.example/rss", "http://8.8.8.8/", "https://v6.example/", "http://[2606:4700:4700::1111]/"} {
		if err := g.CheckURL(ctx, raw); err != nil {
			t.Errorf("%s: %v", raw, err)
		}
	}
	err := g.CheckURL(ctx, "https://nowhere.invalid/feed")
	if !errors.Is(err, ErrUnresolved) || errors.Is(err, ErrBlockedAddress) || strings.Contains(err.Error(), "10.0.0.2") ||
		!strings.Contains(err.Error(), "nowhere.invalid") {
		t.Errorf("unresolved: %v", err)
	}
	for _, raw := range []string{"not a url", "gopher://intranet.corp/", "//10.0.0.1/", "http://"} {
		if err := g.CheckURL(ctx, raw); !errors.Is(err, ErrInvalidURL) {
			t.Errorf("%q: %v, want ErrInvalidURL", raw, err)
		}
	}

	allow := NewGuard(Options{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("10.1.0.0/16")}})
	allow.lookup = lookup
	for _, raw := range []string{"http://127.0.0.1:8080/", "http://2130706433/", "http://intranet.corp/rss"} {
		if err := allow.CheckURL(ctx, raw); err != nil {
			t.Errorf("allowed %s: %v", raw, err)
		}
	}
	if err := allow.CheckURL(ctx, "http://127.0.0.2/"); !errors.Is(err, ErrBlockedAddress) {
		t.Errorf("127.0.0.2 outside the allowed range: %v", err)
	}
	if err := NewGuard(Options{AllowPrivate: true}).CheckURL(ctx, "http://10.0.0.1/"); err != nil {
		t.Errorf("allow_private: %v", err)
	}
}

// The fetcher's debug log names the URLs it fetches, redirects and fails
// on without their credentials.
func TestFetchLogsNoCredentials(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/old" {
			http.Redirect(w, r, "/feed?token=n3xttoken", http.StatusFound)
			return
		}
		w.Write([]byte(feedXML))
	})
	var log bytes.Buffer
	f := newFetcher(t, func(o *Options) {
		o.Logger = slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	u := strings.Replace(srv.URL, "http://", "http://ann:hunter22@", 1)
	if _, err := f.Fetch(context.Background(), Request{URL: u + "/old?api_key=k3yvalue"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Fetch(context.Background(), Request{URL: "http://ann:hunter22@127.0.0.2:1/feed?token=t0kenvalue"}); err == nil {
		t.Fatal("fetch of a blocked address succeeded")
	}
	out := log.String()
	if !strings.Contains(out, "redirect") || !strings.Contains(out, "fetched") || !strings.Contains(out, "fetch failed") {
		t.Fatalf("log:\n%s", out)
	}
	for _, s := range []string{"hunter22", "k3yvalue", "n3xttoken", "t0kenvalue"} {
		if strings.Contains(out, s) {
			t.Errorf("the log carries %q:\n%s", s, out)
		}
	}
}
