package fetch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// ErrUnresolved is returned by Guard.CheckURL when the URL's host name
// does not resolve now. It is not a refusal: DNS may answer later, and the
// dial-time guard checks whatever it answers then.
var ErrUnresolved = errors.New("host does not resolve")

// Guard is the SSRF guard as a check of a URL before it is stored (a
// source's feed URL, a webhook's URL): what the fetcher would refuse to
// dial is refused at once, with the reason, rather than at every fetch.
// The dial-time guard stays the defence, since a name may resolve
// elsewhere later. A Guard is safe for concurrent use.
type Guard struct {
	g guard
	// lookup resolves a host name (net.DefaultResolver.LookupNetIP).
	lookup func(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// NewGuard returns the guard of a Fetcher made with o: AllowPrivate and
// AllowCIDRs let through what they let through at dial time.
func NewGuard(o Options) *Guard {
	g := &Guard{g: guard{off: o.AllowPrivate}, lookup: net.DefaultResolver.LookupNetIP}
	for _, p := range o.AllowCIDRs {
		g.g.allow = append(g.g.allow, p.Masked())
	}
	return g
}

// Guard returns the fetcher's SSRF guard as a URL check.
func (f *Fetcher) Guard() *Guard {
	return &Guard{g: *f.guard, lookup: net.DefaultResolver.LookupNetIP}
}

// CheckURL reports whether the fetcher may reach the host of raw, an
// absolute http or https URL. The host is an IP address in any of its
// forms (dotted, bracketed IPv6, IPv4-mapped, and the numeric forms
// inet_aton reads: decimal, octal, hexadecimal and short, e.g. 2130706433,
// 0177.0.0.1, 0x7f.1, 127.1), or a name, which is resolved: every address
// it resolves to must pass. A refused host gives a *BlockedError (it
// matches ErrBlockedAddress), which names the host and the kind of range
// ("loopback", "private", ...) but not the address a name resolves to; a
// name that does not resolve gives an error wrapping ErrUnresolved; what
// is no absolute http or https URL, one wrapping ErrInvalidURL, before any
// lookup. Errors name no resolver.
func (g *Guard) CheckURL(ctx context.Context, raw string) error {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return fmt.Errorf("%w: %q is not an absolute http or https URL", ErrInvalidURL, raw)
	}
	if g.g.off {
		return nil
	}
	host := strings.TrimSuffix(u.Hostname(), ".")
	if addr, ok := ParseHostIP(host); ok {
		if g.g.check(addr) != nil {
			return &BlockedError{Host: host, Kind: AddrKind(addr)}
		}
		return nil
	}
	addrs, err := g.lookup(ctx, "ip", host)
	if err != nil || len(addrs) == 0 {
		// The resolver's error names the resolver's address: say only
		// what it found.
		var de *net.DNSError
		switch {
		case errors.As(err, &de) && de.IsNotFound:
			return fmt.Errorf("%s: %w: no such host", host, ErrUnresolved)
		case errors.As(err, &de) && de.IsTimeout:
			return fmt.Errorf("%s: %w: the lookup timed out", host, ErrUnresolved)
		}
		return fmt.Errorf("%s: %w", host, ErrUnresolved)
	}
	for _, a := range addrs {
		if g.g.check(a) != nil {
			return &BlockedError{Host: host, Kind: AddrKind(a), Name: true}
		}
	}
	return nil
}

// BlockedError is CheckURL's refusal of a URL's host. It wraps
// ErrBlockedAddress.
type BlockedError struct {
	// Host is the URL's host as given.
	Host string
	// Kind is the range of the refused address (AddrKind).
	Kind string
	// Name says Host is a name that resolves to the refused address,
	// which the error does not name.
	Name bool
}

// Reason says why the host is refused, as a clause for people:
// "127.0.0.1 is a loopback address", "intranet.corp resolves to a
// private address".
func (e *BlockedError) Reason() string {
	if e.Name {
		return fmt.Sprintf("%s resolves to %s %s address", e.Host, article(e.Kind), e.Kind)
	}
	return fmt.Sprintf("%s is %s %s address", e.Host, article(e.Kind), e.Kind)
}

func (e *BlockedError) Error() string { return ErrBlockedAddress.Error() + ": " + e.Reason() }

// Unwrap makes the error match ErrBlockedAddress.
func (e *BlockedError) Unwrap() error { return ErrBlockedAddress }

func article(word string) string {
	if strings.ContainsRune("aeiou", rune(word[0])) {
		return "an"
	}
	return "a"
}

// ParseHostIP reads a URL's host as an IP address: an IPv6 address
// (without brackets; a zone is dropped), a dotted IPv4 address, or one of
// the numeric forms inet_aton reads, which a resolver may map to an
// address: one to four parts, each decimal, octal (a leading 0) or
// hexadecimal (0x), the last filling the bytes left ("127.1",
// "2130706433", "0x7f000001"). It reports false for a name.
func ParseHostIP(host string) (netip.Addr, bool) {
	host = strings.TrimSuffix(host, ".")
	if a, err := netip.ParseAddr(host); err == nil {
		return a.WithZone(""), true
	}
	parts := strings.Split(host, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	nums := make([]uint64, len(parts))
	for i, p := range parts {
		n, ok := parseAtonPart(p)
		if !ok {
			return netip.Addr{}, false
		}
		nums[i] = n
	}
	// Every part but the last is one byte; the last fills the rest.
	last := nums[len(nums)-1]
	if last >= 1<<(8*(5-len(nums))) {
		return netip.Addr{}, false
	}
	v := last
	for i, n := range nums[:len(nums)-1] {
		if n > 0xff {
			return netip.Addr{}, false
		}
		v |= n << (8 * (3 - i))
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

// parseAtonPart reads one part of an inet_aton address.
func parseAtonPart(p string) (uint64, bool) {
	base := 10
	switch {
	case p == "":
		return 0, false
	case len(p) > 1 && (p[:2] == "0x" || p[:2] == "0X"):
		base, p = 16, p[2:]
		if p == "" {
			return 0, true // "0x" is 0 to inet_aton
		}
	case len(p) > 1 && p[0] == '0':
		base, p = 8, p[1:]
	}
	n, err := strconv.ParseUint(p, base, 32)
	return n, err == nil
}

// AddrKind names the range of a blocked address for people: loopback,
// private, link-local, cloud metadata, ... ("non-public" for the rest).
func AddrKind(a netip.Addr) string {
	a = a.WithZone("").Unmap()
	switch {
	case a == netip.AddrFrom4([4]byte{169, 254, 169, 254}) || a == netip.MustParseAddr("fd00:ec2::254"):
		return "cloud metadata"
	case a.IsLoopback():
		return "loopback"
	case a.IsUnspecified():
		return "unspecified"
	case a.IsPrivate():
		return "private"
	case a.IsLinkLocalUnicast():
		return "link-local"
	case a.IsMulticast() || a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast():
		return "multicast"
	case sharedSpace.Contains(a):
		return "shared (carrier-grade NAT)"
	}
	return "non-public"
}

var sharedSpace = netip.MustParsePrefix("100.64.0.0/10")
