// Package canon canonicalizes article URLs and derives article ids from them.
//
// The crawler stores every item under its canonical URL, and the dedup
// operator merges items whose canonical URLs are equal, so two links that
// name the same article must canonicalize to the same string, and
// Canonical(Canonical(x)) == Canonical(x) for every x it accepts.
//
// Canonical applies these rules, in order:
//
//   - ASCII tab, LF and CR are removed anywhere, and leading and trailing
//     spaces and control characters are trimmed (as browsers do). An empty
//     reference is an error rather than a reference to the base.
//   - Characters that may not appear literally in a URL (space, non-ASCII,
//     `"<>\^{|}` and the like) are percent-encoded outside the authority, and
//     a '%' that does not start a two-digit hex escape becomes "%25".
//   - The reference is resolved against base (RFC 3986 §5). Without a base it
//     must be absolute.
//   - Only http and https are accepted; the scheme is lower-cased.
//   - User information ("user:pass@") is dropped: article links never need
//     it, and credentials must not reach the log.
//   - The host is lower-cased and trailing dots are removed; a host with
//     non-ASCII characters is converted to punycode with the IDNA lookup
//     profile (golang.org/x/net/idna), so "BÜCHER.de" and "xn--bcher-kva.de"
//     are the same host. IPv6 literals keep their brackets; zones are refused.
//   - The default port (:80 for http, :443 for https) and an empty port are
//     dropped; other ports lose leading zeros.
//   - Percent-encoding is normalized in the path and the query: escapes of
//     unreserved characters (ALPHA DIGIT - . _ ~) are decoded, all other
//     escapes use upper-case hex. Escapes of reserved characters (%2F, %26,
//     %3D, ...) are kept, since decoding them would change the meaning.
//   - Dot segments ("." and "..") are removed from the path.
//   - An empty path becomes "/", and trailing slashes are removed from any
//     other path ("/news/" → "/news"). "/index.html" and similar are kept:
//     servers do not promise that a directory and its index page are one
//     resource.
//   - The query is split on '&'. Empty pairs and tracking parameters (see
//     IsTrackingParam) are removed, and the remaining pairs are sorted by key;
//     pairs with equal keys keep their relative order. '+' is kept as is. An
//     empty query drops the '?'.
//   - The fragment is removed.
//
// Case in the path and query is kept, and "www." is not stripped: both are
// significant on some servers.
package canon

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// Errors returned by Canonical, wrapped with the offending input.
var (
	// ErrEmpty reports an empty reference.
	ErrEmpty = errors.New("empty URL")
	// ErrNotAbsolute reports a relative reference with no base to resolve it.
	ErrNotAbsolute = errors.New("relative URL without a base")
	// ErrUnsupportedScheme reports a scheme other than http or https.
	ErrUnsupportedScheme = errors.New("scheme is not http or https")
	// ErrInvalidHost reports a missing or unusable host or port.
	ErrInvalidHost = errors.New("invalid host")
)

// maxInputQuote bounds how much of a bad input an error message repeats.
const maxInputQuote = 120

// trackingParams are query keys, compared lower-cased, whose only purpose
// is to attribute a click to a campaign, an ad or a share. Keys are removed
// only when the parameter is known to be tracking-only everywhere; generic
// names such as "ref", "source", "mod" or "cmpid" are kept because some
// sites use them to select content.
var trackingParams = map[string]struct{}{
	// Ad click identifiers.
	"fbclid":    {}, // Facebook
	"gclid":     {}, // Google Ads
	"dclid":     {}, // Google Display
	"gbraid":    {}, // Google Ads (iOS)
	"wbraid":    {}, // Google Ads (web to app)
	"msclkid":   {}, // Microsoft Ads
	"yclid":     {}, // Yandex
	"twclid":    {}, // X/Twitter Ads
	"ttclid":    {}, // TikTok
	"li_fat_id": {}, // LinkedIn
	"igshid":    {}, // Instagram share
	// Mail and marketing automation.
	"mc_cid":      {}, // Mailchimp campaign
	"mc_eid":      {}, // Mailchimp recipient
	"_hsenc":      {}, // HubSpot
	"_hsmi":       {}, // HubSpot
	"__hstc":      {}, // HubSpot
	"__hssc":      {}, // HubSpot
	"__hsfp":      {}, // HubSpot
	"mkt_tok":     {}, // Marketo
	"oly_anon_id": {}, // Omeda
	"oly_enc_id":  {}, // Omeda
	"vero_id":     {}, // Vero
	"vero_conv":   {}, // Vero
	// Analytics cross-domain linkers.
	"_ga": {},
	"_gl": {},
	// X/Twitter share attribution.
	"ref_src": {},
	"ref_url": {},
}

// IsTrackingParam reports whether Canonical removes the query parameter
// with this key: any key starting with "utm_", or one of a fixed list of
// click and campaign identifiers (fbclid, gclid, dclid, gbraid, wbraid,
// msclkid, yclid, twclid, ttclid, li_fat_id, igshid, mc_cid, mc_eid, _hsenc,
// _hsmi, __hstc, __hssc, __hsfp, mkt_tok, oly_anon_id, oly_enc_id, vero_id,
// vero_conv, _ga, _gl, ref_src, ref_url). The comparison ignores case; the
// key is given as it appears in the URL after canonical percent-decoding.
func IsTrackingParam(key string) bool {
	k := strings.ToLower(key)
	if strings.HasPrefix(k, "utm_") {
		return true
	}
	_, ok := trackingParams[k]
	return ok
}

// Canonical returns the canonical form of raw, an absolute URL or a
// reference relative to base (which may be nil). The rules are listed in the
// package documentation. The result is an absolute http or https URL in
// ASCII, and Canonical returns it unchanged when given it again.
func Canonical(raw string, base *url.URL) (string, error) {
	s := clean(raw)
	if s == "" {
		return "", ErrEmpty
	}
	u, err := url.Parse(preEscape(s))
	if err != nil {
		return "", fmt.Errorf("parse %s: %w", quote(raw), unwrapURLError(err))
	}
	if base != nil {
		u = base.ResolveReference(u)
	} else if !u.IsAbs() {
		return "", fmt.Errorf("canonicalize %s: %w", quote(raw), ErrNotAbsolute)
	}
	switch u.Scheme {
	case "http", "https":
	default:
		return "", fmt.Errorf("canonicalize %s: %w", quote(raw), ErrUnsupportedScheme)
	}
	if u.Opaque != "" {
		return "", fmt.Errorf("canonicalize %s: %w: no authority", quote(raw), ErrInvalidHost)
	}
	host, err := canonicalHost(u)
	if err != nil {
		return "", fmt.Errorf("canonicalize %s: %w", quote(raw), err)
	}

	var b strings.Builder
	b.Grow(len(u.Scheme) + 3 + len(host) + len(u.RawPath) + len(u.Path) + len(u.RawQuery) + 2)
	b.WriteString(u.Scheme)
	b.WriteString("://")
	b.WriteString(host)
	b.WriteString(canonicalPath(u.EscapedPath()))
	if q := canonicalQuery(u.RawQuery); q != "" {
		b.WriteByte('?')
		b.WriteString(q)
	}
	return b.String(), nil
}

// ArticleID returns the article id of a canonical URL: the first 16 bytes
// of its SHA-256 digest in lower-case hex (32 characters). It does not
// canonicalize; pass it the output of Canonical.
func ArticleID(canonical string) string {
	sum := sha256.Sum256([]byte(canonical))
	return hex.EncodeToString(sum[:16])
}

// clean removes tab, LF and CR anywhere and trims spaces and C0 controls at
// both ends, as the WHATWG URL parser does.
func clean(s string) string {
	if strings.ContainsAny(s, "\t\n\r") {
		s = strings.Map(func(r rune) rune {
			if r == '\t' || r == '\n' || r == '\r' {
				return -1
			}
			return r
		}, s)
	}
	return strings.TrimFunc(s, func(r rune) bool { return r <= ' ' })
}

// preEscape percent-encodes, outside the authority, every byte that may not
// appear literally in a URL, and turns a '%' that does not start an escape
// into "%25", so that url.Parse accepts the input and keeps its raw path.
func preEscape(s string) string {
	start, end := authoritySpan(s)
	var b *strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if i >= start && i < end {
			if b != nil {
				b.WriteByte(c)
			}
			continue
		}
		ok := allowedRaw(c) && (c != '%' || isEscape(s, i))
		if ok {
			if b != nil {
				b.WriteByte(c)
			}
			continue
		}
		if b == nil {
			b = &strings.Builder{}
			b.Grow(len(s) + 16)
			b.WriteString(s[:i])
		}
		writeEscape(b, c)
	}
	if b == nil {
		return s
	}
	return b.String()
}

// authoritySpan returns the byte range of the authority component in s, or
// an empty range if s has none.
func authoritySpan(s string) (start, end int) {
	i := 0
	// An optional scheme: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) ":".
	for j := 0; j < len(s); j++ {
		c := s[j]
		if isAlpha(c) || (j > 0 && (isDigit(c) || c == '+' || c == '-' || c == '.')) {
			continue
		}
		if c == ':' && j > 0 {
			i = j + 1
		}
		break
	}
	if !strings.HasPrefix(s[i:], "//") {
		return 0, 0
	}
	start = i + 2
	end = len(s)
	if k := strings.IndexAny(s[start:], "/?#"); k >= 0 {
		end = start + k
	}
	return start, end
}

// canonicalHost returns the host and port of u in canonical form.
func canonicalHost(u *url.URL) (string, error) {
	host := u.Hostname()
	port := u.Port()
	if strings.HasSuffix(u.Host, ":") {
		port = ""
	}
	if strings.HasPrefix(u.Host, "[") {
		// IPv6 literal: url.Parse validated the brackets.
		if strings.Contains(host, "%") {
			return "", fmt.Errorf("%w: IPv6 zone", ErrInvalidHost)
		}
		ip := net.ParseIP(host)
		if ip == nil || !strings.Contains(host, ":") {
			return "", fmt.Errorf("%w: bad IPv6 literal", ErrInvalidHost)
		}
		if ip.To4() == nil {
			host = "[" + ip.String() + "]"
		} else {
			// IPv4-mapped: ip.String() would drop the IPv6 form.
			host = "[" + strings.ToLower(host) + "]"
		}
	} else {
		host = strings.TrimRight(host, ".")
		if host == "" {
			return "", fmt.Errorf("%w: empty", ErrInvalidHost)
		}
		if isASCII(host) {
			host = strings.ToLower(host)
		} else {
			a, err := idna.Lookup.ToASCII(host)
			if err != nil {
				return "", fmt.Errorf("%w: %v", ErrInvalidHost, err)
			}
			host = strings.TrimRight(a, ".")
			if host == "" {
				return "", fmt.Errorf("%w: empty", ErrInvalidHost)
			}
		}
		for i := 0; i < len(host); i++ {
			if !allowedHost(host[i]) {
				return "", fmt.Errorf("%w: character %q", ErrInvalidHost, host[i])
			}
		}
	}
	if port != "" {
		n, err := strconv.ParseUint(port, 10, 32)
		if err != nil || n > 65535 {
			return "", fmt.Errorf("%w: port %q", ErrInvalidHost, port)
		}
		if !(u.Scheme == "http" && n == 80) && !(u.Scheme == "https" && n == 443) {
			host += ":" + strconv.FormatUint(n, 10)
		}
	}
	return host, nil
}

// canonicalPath normalizes an escaped path: escapes, dot segments, and
// trailing slashes.
func canonicalPath(p string) string {
	p = normalizeEscapes(p, allowedPath)
	if p == "" || p[0] != '/' {
		p = "/" + p
	}
	p = removeDotSegments(p)
	if len(p) > 1 {
		p = strings.TrimRight(p, "/")
		if p == "" {
			p = "/"
		}
	}
	return p
}

// removeDotSegments implements RFC 3986 §5.2.4 for an absolute path.
func removeDotSegments(p string) string {
	if !strings.Contains(p, "/.") {
		return p
	}
	segs := strings.Split(p[1:], "/")
	out := make([]string, 0, len(segs))
	for i, s := range segs {
		last := i == len(segs)-1
		switch s {
		case ".":
			if last {
				out = append(out, "")
			}
		case "..":
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
			if last {
				out = append(out, "")
			}
		default:
			out = append(out, s)
		}
	}
	return "/" + strings.Join(out, "/")
}

// canonicalQuery removes empty pairs and tracking parameters from a raw
// query, normalizes escapes, and sorts the pairs stably by key.
func canonicalQuery(q string) string {
	if q == "" {
		return ""
	}
	type pair struct{ key, kv string }
	var pairs []pair
	for part := range strings.SplitSeq(q, "&") {
		if part == "" {
			continue
		}
		key, value, hasValue := strings.Cut(part, "=")
		key = normalizeEscapes(key, allowedQuery)
		if IsTrackingParam(key) {
			continue
		}
		kv := key
		if hasValue {
			kv += "=" + normalizeEscapes(value, allowedQuery)
		}
		pairs = append(pairs, pair{key, kv})
	}
	if len(pairs) == 0 {
		return ""
	}
	slices.SortStableFunc(pairs, func(a, b pair) int { return strings.Compare(a.key, b.key) })
	var b strings.Builder
	for i, p := range pairs {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(p.kv)
	}
	return b.String()
}

// normalizeEscapes decodes escapes of unreserved characters, upper-cases
// the hex of the others, escapes "%" that starts no escape, and escapes every
// byte that allowed rejects.
func normalizeEscapes(s string, allowed func(byte) bool) string {
	var b *strings.Builder
	start := func(i int) {
		if b == nil {
			b = &strings.Builder{}
			b.Grow(len(s) + 8)
			b.WriteString(s[:i])
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '%' && isEscape(s, i):
			d := unhex(s[i+1])<<4 | unhex(s[i+2])
			if isUnreserved(d) {
				start(i)
				b.WriteByte(d)
			} else if isLowerHex(s[i+1]) || isLowerHex(s[i+2]) {
				start(i)
				writeEscape(b, d)
			} else if b != nil {
				b.WriteString(s[i : i+3])
			}
			i += 2
		case c != '%' && allowed(c):
			if b != nil {
				b.WriteByte(c)
			}
		default:
			start(i)
			writeEscape(b, c)
		}
	}
	if b == nil {
		return s
	}
	return b.String()
}

func writeEscape(b *strings.Builder, c byte) {
	const hexUpper = "0123456789ABCDEF"
	b.WriteByte('%')
	b.WriteByte(hexUpper[c>>4])
	b.WriteByte(hexUpper[c&15])
}

func isEscape(s string, i int) bool {
	return i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2])
}

func isAlpha(c byte) bool    { return c|0x20 >= 'a' && c|0x20 <= 'z' }
func isDigit(c byte) bool    { return c >= '0' && c <= '9' }
func isHex(c byte) bool      { return isDigit(c) || (c|0x20 >= 'a' && c|0x20 <= 'f') }
func isLowerHex(c byte) bool { return c >= 'a' && c <= 'f' }

func unhex(c byte) byte {
	if isDigit(c) {
		return c - '0'
	}
	return c | 0x20 - 'a' + 10
}

// isUnreserved reports RFC 3986 unreserved characters.
func isUnreserved(c byte) bool {
	return isAlpha(c) || isDigit(c) || c == '-' || c == '.' || c == '_' || c == '~'
}

func isSubDelim(c byte) bool {
	switch c {
	case '!', '$', '&', '\'', '(', ')', '*', '+', ',', ';', '=':
		return true
	}
	return false
}

// allowedRaw reports bytes that may appear literally anywhere in a URL
// reference (RFC 3986 unreserved, reserved, and '%').
func allowedRaw(c byte) bool {
	return isUnreserved(c) || isSubDelim(c) || c == '%' ||
		c == ':' || c == '/' || c == '?' || c == '#' || c == '[' || c == ']' || c == '@'
}

// allowedPath reports bytes kept literally in a canonical path.
func allowedPath(c byte) bool {
	return isUnreserved(c) || isSubDelim(c) || c == ':' || c == '@' || c == '/'
}

// allowedQuery reports bytes kept literally in a canonical query key or
// value; '&' never reaches it, since the query was split on it.
func allowedQuery(c byte) bool {
	return isUnreserved(c) || (isSubDelim(c) && c != '&') || c == ':' || c == '@' || c == '/' || c == '?'
}

// allowedHost reports bytes allowed in a canonical registered name: the
// letters, digits, '-', '.' and '_' that DNS names use.
func allowedHost(c byte) bool {
	return isAlpha(c) || isDigit(c) || c == '-' || c == '.' || c == '_'
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func quote(s string) string {
	if len(s) > maxInputQuote {
		i := maxInputQuote
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		return strconv.Quote(s[:i]) + "…"
	}
	return strconv.Quote(s)
}

// unwrapURLError drops the *url.Error wrapper, whose message repeats the
// input.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
