package fetch

import (
	"errors"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestGuardDefaultBlockList(t *testing.T) {
	blocked := []string{
		"127.0.0.1", "127.255.255.254", "10.0.0.1", "10.255.255.255", "172.16.0.1", "172.31.255.255",
		"192.168.1.1", "169.254.169.254", "169.254.0.1", "100.64.0.1", "100.127.255.255",
		"0.0.0.0", "0.1.2.3", "255.255.255.255", "240.0.0.1", "224.0.0.1", "239.255.255.250",
		"192.0.0.8", "192.0.2.1", "198.18.0.1", "198.51.100.7", "203.0.113.9",
		"::", "::1", "fe80::1", "fe80::1%eth0", "febf::1", "fc00::1", "fd00::2", "ff02::1", "fec0::1",
		"::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:169.254.169.254", "::7f00:1",
		"64:ff9b::7f00:1", "64:ff9b::a9fe:a9fe", "64:ff9b:1::1", "2002:7f00:1::1", "2002:a00:1::",
		"100::1", "2001:db8::1",
		// Special-purpose prefixes of the IANA registries.
		"192.31.196.1", "192.52.193.1", "192.88.99.1", "192.175.48.1", "2001::1", "2001:2::1",
		"2620:4f:8000::1", "3fff::1", "5f00::1", "::ffff:192.88.99.1", "64:ff9b::c058:6301",
	}
	allowed := []string{
		"8.8.8.8", "1.1.1.1", "93.184.216.34", "100.63.255.255", "100.128.0.0", "172.15.255.255",
		"172.32.0.1", "192.169.0.1", "169.253.255.255", "223.255.255.255",
		"2606:4700:4700::1111", "2a00:1450:4001::200e", "::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1",
		"192.88.100.1", "2620:4f:8001::1", "2001:4860:4860::8888",
	}
	g := &guard{}
	for _, s := range blocked {
		err := g.check(netip.MustParseAddr(s))
		if !errors.Is(err, ErrBlockedAddress) {
			t.Errorf("%s: err %v, want ErrBlockedAddress", s, err)
		} else if !strings.Contains(err.Error(), strings.Split(s, "%")[0]) {
			t.Errorf("%s: error %q does not name the address", s, err)
		}
	}
	for _, s := range allowed {
		if err := g.check(netip.MustParseAddr(s)); err != nil {
			t.Errorf("%s: %v, want allowed", s, err)
		}
	}
	if err := g.check(netip.Addr{}); !errors.Is(err, ErrBlockedAddress) {
		t.Errorf("invalid address: %v", err)
	}
}

func TestGuardAllowList(t *testing.T) {
	g := &guard{allow: []netip.Prefix{
		netip.MustParsePrefix("10.1.0.0/16"),
		netip.MustParsePrefix("fd12::/16"),
		loopback4,
	}}
	for _, s := range []string{"10.1.2.3", "::ffff:10.1.2.3", "fd12::5", "127.0.0.1", "::ffff:127.0.0.1", "8.8.8.8"} {
		if err := g.check(netip.MustParseAddr(s)); err != nil {
			t.Errorf("%s: %v, want allowed", s, err)
		}
	}
	for _, s := range []string{"10.2.0.1", "fd13::1", "127.0.0.2", "::1", "169.254.169.254"} {
		if err := g.check(netip.MustParseAddr(s)); !errors.Is(err, ErrBlockedAddress) {
			t.Errorf("%s: %v, want blocked", s, err)
		}
	}
	off := &guard{off: true}
	for _, s := range []string{"127.0.0.1", "::1", "10.0.0.1", "169.254.169.254"} {
		if err := off.check(netip.MustParseAddr(s)); err != nil {
			t.Errorf("guard off, %s: %v", s, err)
		}
	}
}

func TestGuardControl(t *testing.T) {
	g := &guard{}
	for addr, want := range map[string]bool{
		"93.184.216.34:443":     true,
		"[2606:4700::1111]:80":  true,
		"127.0.0.1:80":          false,
		"[::1]:80":              false,
		"[fe80::1%eth0]:80":     false,
		"[::ffff:10.0.0.1]:443": false,
		"example.com:80":        false, // not an IP: fail closed
		"garbage":               false,
	} {
		err := g.control(t.Context(), "tcp", addr, nil)
		if (err == nil) != want {
			t.Errorf("%s: err %v, want allowed=%v", addr, err, want)
		}
		if err != nil && !errors.Is(err, ErrBlockedAddress) {
			t.Errorf("%s: %v does not wrap ErrBlockedAddress", addr, err)
		}
	}
}

// TestDefaultGuardEndToEnd checks that a Fetcher with default options
// refuses every private destination, including a hostname that resolves to
// loopback. The guard runs before connect, so nothing is dialled.
func TestDefaultGuardEndToEnd(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("request reached the test server: %s", r.URL)
	})
	f, err := New(Options{ConnectTimeout: 2 * time.Second, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.CloseIdleConnections)
	_, port, _ := strings.Cut(strings.TrimPrefix(srv.URL, "http://"), ":")
	for _, u := range []string{
		srv.URL,
		"http://localhost:" + port + "/feed",
		"http://127.0.0.1:1/",
		"http://10.0.0.1/",
		"http://169.254.169.254/latest/meta-data/",
		"http://100.64.0.1/",
		"http://[::1]:" + port + "/",
		"http://[::ffff:127.0.0.1]:" + port + "/",
		"http://0.0.0.0:" + port + "/",
		"https://192.168.0.1/",
	} {
		resp, err := f.Fetch(t.Context(), Request{URL: u})
		if !errors.Is(err, ErrBlockedAddress) || resp != nil {
			t.Errorf("%s: err %v, want ErrBlockedAddress", u, err)
			continue
		}
		if IsPermanent(err) || IsRateLimited(err) {
			t.Errorf("%s: blocked address classified as permanent or rate limited", u)
		}
	}
}

// TestRedirectToBlockedAddress checks that every hop is dialled through the
// guard: the first server is allowed, its redirect targets are not.
func TestRedirectToBlockedAddress(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
	})
	_, port, _ := strings.Cut(strings.TrimPrefix(srv.URL, "http://"), ":")
	f := newFetcher(t, nil) // allows 127.0.0.1/32 only
	for _, to := range []string{
		"http://127.0.0.2:" + port + "/",
		"http://169.254.169.254/latest/meta-data/",
		"http://[::1]:" + port + "/",
	} {
		resp, err := f.Fetch(t.Context(), Request{URL: srv.URL + "/?to=" + to})
		if !errors.Is(err, ErrBlockedAddress) || resp != nil {
			t.Errorf("redirect to %s: err %v, want ErrBlockedAddress", to, err)
		}
		if err != nil && !strings.Contains(err.Error(), "redirect 1 to") {
			t.Errorf("error %q does not say which hop", err)
		}
	}
}
