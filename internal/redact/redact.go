// Package redact takes out of text what must not leave the process with
// it: credentials and tokens out of log lines (the userinfo of URLs, query
// parameters that carry secrets, Authorization values), and the process's
// own network addresses (its DNS resolver, its end of a connection) out of
// error messages shown to people. Handler applies the first to every
// record of a slog.Logger.
package redact

import (
	"net/url"
	"regexp"
	"strings"
)

// Mask replaces what is redacted.
const Mask = "REDACTED"

// secretWords are the parts of a name (a query parameter, a log
// attribute, a header) that say its value is a secret; names are compared
// lower-case with '-' and '_' removed.
var secretWords = []string{"token", "secret", "password", "passwd", "pwd", "signature", "apikey", "accesskey", "privatekey",
	"credential", "authorization", "cookie", "session"}

// paramWords are further parts of a query parameter's name that say its
// value is a secret: short names that would be too broad for log
// attributes.
var paramWords = []string{"key", "sig", "auth", "pass", "code"}

func normalize(name string) string {
	return strings.NewReplacer("-", "", "_", "", ".", "").Replace(strings.ToLower(name))
}

func containsAny(s string, words []string) bool {
	for _, w := range words {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

// SecretName reports whether a name (a log attribute's key, a header)
// says its value is a secret: token, secret, password, signature,
// authorization, cookie, api_key, ...
func SecretName(name string) bool { return containsAny(normalize(name), secretWords) }

// secretParam reports whether a query parameter's value is a secret:
// what SecretName says, and key, sig, auth, pass and code.
func secretParam(name string) bool {
	n := normalize(name)
	return containsAny(n, secretWords) || containsAny(n, paramWords)
}

// URL returns raw with its credentials masked: the whole userinfo (user
// and password), and the values of the query and fragment parameters
// whose names say they are secrets (token, key, secret, signature,
// password, ...). Anything that is not a URL is returned as Text makes it.
func URL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		return Text(raw)
	}
	if u.User != nil {
		u.User = url.User(Mask)
	}
	u.RawQuery = params(u.RawQuery)
	if strings.Contains(u.Fragment, "=") {
		u.Fragment, u.RawFragment = params(u.Fragment), ""
	}
	return u.String()
}

// params masks the secret values of an encoded parameter list, keeping
// its order and everything else as it was.
func params(q string) string {
	if q == "" {
		return q
	}
	parts := strings.Split(q, "&")
	for i, p := range parts {
		name, _, ok := strings.Cut(p, "=")
		if n, err := url.QueryUnescape(name); err == nil {
			name = n
		}
		if ok && secretParam(name) {
			parts[i] = p[:strings.IndexByte(p, '=')+1] + Mask
		}
	}
	return strings.Join(parts, "&")
}

var (
	urlInText = regexp.MustCompile(`(?i)\b[a-z][a-z0-9+.-]*://[^\s"'<>` + "`" + `]+`)
	// authInText is an Authorization value: a scheme as headers spell it
	// and its credentials.
	authInText = regexp.MustCompile(`\b((?:[Bb]earer|BEARER|Basic|Digest)\s+|GoogleLogin auth=)([A-Za-z0-9._~+/=-]{6,})`)
	// pairInText is a name=value pair whose name says the value is a
	// secret, outside URLs ("token=...", "api_key=...").
	pairInText = regexp.MustCompile(`(?i)\b([a-z0-9_.-]*(?:token|secret|password|passwd|signature|api_?key)[a-z0-9_.-]*)(=)([^\s&"',;]+)`)
)

// Text returns s with the credentials it carries masked: every URL in it
// as URL masks it, Authorization values ("Bearer ...", "Basic ...",
// "GoogleLogin auth=..."), and name=value pairs whose name says the value
// is a secret.
func Text(s string) string {
	if !strings.ContainsAny(s, ":=") {
		return s
	}
	if strings.Contains(s, "://") {
		s = urlInText.ReplaceAllStringFunc(s, func(m string) string {
			// A URL in a sentence may end in punctuation that is not its.
			trail := len(m) - len(strings.TrimRight(m, ".,;:)"))
			return URL(m[:len(m)-trail]) + m[len(m)-trail:]
		})
	}
	s = authInText.ReplaceAllStringFunc(s, func(m string) string {
		sub := authInText.FindStringSubmatch(m)
		if sub[2] == Mask {
			return m
		}
		return sub[1] + Mask
	})
	return pairInText.ReplaceAllStringFunc(s, func(m string) string {
		sub := pairInText.FindStringSubmatch(m)
		if strings.HasPrefix(sub[3], Mask) || strings.HasPrefix(sub[3], "//") {
			return m // masked already, or a URL's scheme
		}
		return sub[1] + sub[2] + Mask
	})
}

var (
	// resolverInText is where a Go DNS error names the resolver: "lookup
	// example.org on 10.0.0.2:53: no such host".
	resolverInText = regexp.MustCompile(`(lookup \S+?) on (?:\[[0-9A-Fa-f:.%]+\]|[0-9.]+|[0-9A-Fa-f:]+):\d+`)
	// localEndInText is the local end of a connection in a Go network
	// error: "read tcp 10.0.0.7:50122->93.184.216.34:443: ...".
	localEndInText = regexp.MustCompile(`\b((?:tcp|udp)[46]?) (?:\[[0-9A-Fa-f:.%]+\]|[0-9.]+):\d+->`)
)

// InternalAddrs returns an error message without the process's own
// network addresses: the DNS resolver a lookup asked ("lookup x on
// 10.0.0.2:53: no such host" becomes "lookup x: no such host") and the
// local end of a connection ("read tcp 10.0.0.7:50122->93.184.216.34:443"
// becomes "read tcp 93.184.216.34:443"). What remains says what failed.
func InternalAddrs(msg string) string {
	if strings.Contains(msg, "lookup ") {
		msg = resolverInText.ReplaceAllString(msg, "$1")
	}
	if strings.Contains(msg, "->") {
		msg = localEndInText.ReplaceAllString(msg, "$1 ")
	}
	return msg
}
