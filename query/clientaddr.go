package query

import (
	"bytes"
	"fmt"
	"net/netip"

	"github.com/valyala/fasthttp"
)

// The client address of a request is what every per-client limit and the
// idempotency scope of anonymous requests count by. It is the peer's
// address, unless the peer is a trusted proxy (Options.TrustedProxies):
// then X-Forwarded-For is read from the right, each proxy naming the hop
// before it, and the client is the rightmost address that is not a
// trusted proxy (when every hop is trusted, the leftmost). An address a
// client wrote itself is left of what its first proxy appended, so no
// client can choose its own address; a malformed entry ends the walk at
// the trusted hop that passed it on.

// clientKey is the user value that holds the request's client address.
const clientKey = "client_ip"

// parseProxies parses TrustedProxies: CIDRs or single addresses.
func parseProxies(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range list {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, err2 := netip.ParseAddr(s)
			if err2 != nil {
				return nil, fmt.Errorf("query: trusted proxy %q: not a CIDR or an address", s)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// trustedProxy reports whether a is one of the trusted proxies.
func (s *Server) trustedProxy(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range s.proxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// resolveClient finds the request's client address and keeps it for
// clientIP.
func (s *Server) resolveClient(next fasthttp.RequestHandler) fasthttp.RequestHandler {
	if len(s.proxies) == 0 {
		return next // the peer is the client: clientIP asks the connection
	}
	return func(ctx *fasthttp.RequestCtx) {
		ctx.SetUserValue(clientKey, s.clientFromProxies(ctx))
		next(ctx)
	}
}

// clientFromProxies walks X-Forwarded-For from the right while the hop
// that wrote it is trusted.
func (s *Server) clientFromProxies(ctx *fasthttp.RequestCtx) string {
	peer := peerIP(ctx)
	cur, err := netip.ParseAddr(peer)
	if err != nil {
		return peer
	}
	// Several headers are one list, in order.
	var hops [][]byte
	for _, h := range ctx.Request.Header.PeekAll(fasthttp.HeaderXForwardedFor) {
		hops = append(hops, bytes.Split(h, []byte(","))...)
	}
	for i := len(hops) - 1; i >= 0 && s.trustedProxy(cur); i-- {
		a, err := netip.ParseAddr(string(bytes.TrimSpace(hops[i])))
		if err != nil {
			break
		}
		cur = a
	}
	return cur.Unmap().String()
}
