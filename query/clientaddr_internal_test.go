package query

import (
	"net"
	"testing"

	"github.com/valyala/fasthttp"
)

// X-Forwarded-For is believed only from trusted proxies, read from the
// right: the client is the rightmost hop that is not a trusted proxy.
func TestClientFromProxies(t *testing.T) {
	proxies, err := parseProxies([]string{"127.0.0.1/32", "10.0.0.0/8", "2001:db8:aa::1"})
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{proxies: proxies}
	for _, c := range []struct {
		peer string
		xff  []string
		want string
	}{
		{"192.0.2.9", []string{"198.51.100.1"}, "192.0.2.9"}, // not from a proxy: ignored
		{"127.0.0.1", nil, "127.0.0.1"},                      // a proxy's own request
		{"127.0.0.1", []string{"198.51.100.1"}, "198.51.100.1"},
		{"127.0.0.1", []string{"6.6.6.6, 198.51.100.1"}, "198.51.100.1"},             // a client's own entry is left of its proxy's
		{"127.0.0.1", []string{"198.51.100.1, 10.1.2.3"}, "198.51.100.1"},            // two proxies
		{"127.0.0.1", []string{"6.6.6.6", "198.51.100.1, 10.1.2.3"}, "198.51.100.1"}, // several headers are one list
		{"127.0.0.1", []string{"10.0.0.1, 10.0.0.2"}, "10.0.0.1"},                    // every hop trusted: the leftmost
		{"127.0.0.1", []string{"198.51.100.1, garbage"}, "127.0.0.1"},                // a malformed hop stops at the proxy behind it
		{"127.0.0.1", []string{"::ffff:198.51.100.1"}, "198.51.100.1"},
		{"2001:db8:aa::1", []string{"2001:db8:bb::5"}, "2001:db8:bb::5"},
		{"::ffff:127.0.0.1", []string{"198.51.100.1"}, "198.51.100.1"},
	} {
		var req fasthttp.Request
		for _, h := range c.xff {
			req.Header.Add(fasthttp.HeaderXForwardedFor, h)
		}
		var ctx fasthttp.RequestCtx
		ctx.Init(&req, &net.TCPAddr{IP: net.ParseIP(c.peer), Port: 4000}, nil)
		if got := s.clientFromProxies(&ctx); got != c.want {
			t.Errorf("peer %s, X-Forwarded-For %q: client %s, want %s", c.peer, c.xff, got, c.want)
		}
	}
	if _, err := parseProxies([]string{"10.0.0.0/33"}); err == nil {
		t.Error("a bad CIDR was accepted")
	}
	if err := (Options{TrustedProxies: []string{"proxy.example"}}).Validate(); err == nil {
		t.Error("Validate accepted a host name as a trusted proxy")
	}
}
