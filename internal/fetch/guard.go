package fetch

import (
	"context"
	"fmt"
	"net/netip"
	"syscall"

	"code.dny.dev/ssrf"
)

// The ranges the SSRF guard refuses by default are the IANA special-purpose
// registries as code.dny.dev/ssrf maintains them: for IPv4 every prefix of
// the IPv4 special-purpose registry (private use, loopback, link-local and
// cloud metadata, shared address space, documentation, benchmarking,
// AS112, AMT, multicast, reserved, ...); for IPv6 everything outside global
// unicast (2000::/3: loopback, unspecified, IPv4-compatible and -mapped,
// unique and link local, multicast, discard-only, local-use NAT64) and the
// special-purpose prefixes inside it. IPv4-mapped addresses
// (::ffff:a.b.c.d) are checked as the IPv4 address they map.
//
// Two IPv6 forms reach an IPv4 address through a translator: NAT64
// (64:ff9b::/96) and 6to4 (2002::/16). They are allowed when the IPv4
// address they embed is, so that a host with IPv6-only egress can still
// fetch IPv4 feeds, and refused when it is not.
var (
	nat64Prefix = ssrf.IPv6NAT64Prefix
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
	if addr.Is4() {
		return inAny(ssrf.IPv4DeniedPrefixes, addr)
	}
	b := addr.As16()
	switch {
	case nat64Prefix.Contains(addr):
		return isBlocked(netip.AddrFrom4([4]byte(b[12:16])))
	case sixToFour.Contains(addr):
		return isBlocked(netip.AddrFrom4([4]byte(b[2:6])))
	}
	return !ssrf.IPv6GlobalUnicast.Contains(addr) || inAny(ssrf.IPv6DeniedPrefixes, addr)
}

func inAny(prefixes []netip.Prefix, addr netip.Addr) bool {
	for _, p := range prefixes {
		if p.Contains(addr) {
			return true
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
