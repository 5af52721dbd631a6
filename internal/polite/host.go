package polite

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
)

// ErrInvalidURL is returned for a URL that is not an absolute http or https
// URL with a host. It is permanent.
var ErrInvalidURL = errors.New("invalid url")

// HostKey returns the key the Limiter should be given for rawURL: the
// lower-cased host name, with the port only when it is not the scheme's
// default. http://Example.com:80/a and https://example.com/b share the key
// "example.com": politeness is owed to the server, whatever the scheme.
func HostKey(rawURL string) (string, error) {
	u, err := parseHTTPURL(rawURL)
	if err != nil {
		return "", err
	}
	return hostPort(u), nil
}

// origin returns scheme://host[:port] of u, lower-cased, without a default
// port: the unit robots.txt applies to (RFC 9309 section 2.3).
func origin(u *url.URL) string {
	return strings.ToLower(u.Scheme) + "://" + hostPort(u)
}

func hostPort(u *url.URL) string {
	host := strings.ToLower(u.Hostname())
	port := u.Port()
	scheme := strings.ToLower(u.Scheme)
	if port == "" || (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		if strings.Contains(host, ":") {
			return "[" + host + "]"
		}
		return host
	}
	return net.JoinHostPort(host, port)
}

func parseHTTPURL(rawURL string) (*url.URL, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidURL, err)
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
	default:
		return nil, fmt.Errorf("%w: scheme %q is not http or https", ErrInvalidURL, u.Scheme)
	}
	if u.Hostname() == "" || u.Opaque != "" {
		return nil, fmt.Errorf("%w: %q has no host", ErrInvalidURL, rawURL)
	}
	return u, nil
}
