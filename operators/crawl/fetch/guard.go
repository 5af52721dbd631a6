package fetch

import (
	"context"
	"fmt"
	"net/netip"
	"syscall"
)

// blockedPrefixes are the ranges the SSRF guard refuses by default. IPv4
// addresses are checked after unmapping, so ::ffff:a.b.c.d is covered by the
// IPv4 entries.
var blockedPrefixes = []netip.Prefix{
	// IPv4.
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network", includes unspecified
	netip.MustParsePrefix("10.0.0.0/8"),      // RFC 1918
	netip.MustParsePrefix("100.64.0.0/10"),   // CGNAT, RFC 6598
	netip.MustParsePrefix("127.0.0.0/8"),     // loopback
	netip.MustParsePrefix("169.254.0.0/16"),  // link-local, cloud metadata
	netip.MustParsePrefix("172.16.0.0/12"),   // RFC 1918
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("192.0.2.0/24"),    // TEST-NET-1
	netip.MustParsePrefix("192.168.0.0/16"),  // RFC 1918
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"), // TEST-NET-2
	netip.MustParsePrefix("203.0.113.0/24"),  // TEST-NET-3
	netip.MustParsePrefix("224.0.0.0/4"),     // multicast
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, includes broadcast
	// IPv6.
	netip.MustParsePrefix("::/128"),         // unspecified
	netip.MustParsePrefix("::1/128"),        // loopback
	netip.MustParsePrefix("::/96"),          // IPv4-compatible (deprecated)
	netip.MustParsePrefix("64:ff9b:1::/48"), // local-use NAT64
	netip.MustParsePrefix("100::/64"),       // discard-only
	netip.MustParsePrefix("2001:db8::/32"),  // documentation
	netip.MustParsePrefix("fc00::/7"),       // unique local
	netip.MustParsePrefix("fe80::/10"),      // link-local
	netip.MustParsePrefix("fec0::/10"),      // site-local (deprecated)
	netip.MustParsePrefix("ff00::/8"),       // multicast
}

var (
	nat64Prefix = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour   = netip.MustParsePrefix("2002::/16")
)

// guard decides which addresses may be dialled.
type guard struct {
	off   bool
	allow []netip.Prefix
}

// check returns nil if addr may be dialled, or an error wrapping
// ErrBlockedAddress.
func (g *guard) check(addr netip.Addr) error {
	if g.off {
		return nil
	}
	addr = addr.WithZone("")
	for _, p := range g.allow {
		if p.Contains(addr) || p.Contains(addr.Unmap()) {
			return nil
		}
	}
	if isBlocked(addr) {
		return fmt.Errorf("%w %s", ErrBlockedAddress, addr)
	}
	return nil
}

// isBlocked reports whether addr is in a range that is not the public
// internet.
func isBlocked(addr netip.Addr) bool {
	if !addr.IsValid() {
		return true
	}
	addr = addr.WithZone("").Unmap()
	for _, p := range blockedPrefixes {
		if p.Contains(addr) {
			return true
		}
	}
	// IPv6 forms that embed an IPv4 address and reach it through a
	// translator: block them when the embedded address is blocked.
	if addr.Is6() {
		b := addr.As16()
		switch {
		case nat64Prefix.Contains(addr):
			return isBlocked(netip.AddrFrom4([4]byte(b[12:16])))
		case sixToFour.Contains(addr):
			return isBlocked(netip.AddrFrom4([4]byte(b[2:6])))
		}
	}
	return false
}

// control is the net.Dialer ControlContext hook. address is the resolved
// "ip:port" about to be connected, so DNS answers cannot bypass the guard.
func (g *guard) control(_ context.Context, network, address string, _ syscall.RawConn) error {
	if g.off {
		return nil
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		// Fail closed: anything that is not a plain IP is refused.
		return fmt.Errorf("%w %q (%s)", ErrBlockedAddress, address, network)
	}
	return g.check(ap.Addr())
}
