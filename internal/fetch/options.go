package fetch

import (
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"time"

	"github.com/newsflow/newsflow/internal/option"
)

// DefaultUserAgent names the crawler and gives a contact URL, as polite
// crawlers do.
const DefaultUserAgent = "newsflow/1.0 (+https://github.com/newsflow/newsflow)"

// Options configures a Fetcher. The zero value of every field means its
// default (see DefaultOptions).
type Options struct {
	// UserAgent is sent with every request. It should name the crawler and
	// carry a contact URL so that feed owners can reach the operator.
	UserAgent string `yaml:"user_agent"`
	// ConnectTimeout bounds the TCP connect and the TLS handshake of each
	// new connection.
	ConnectTimeout time.Duration `yaml:"-"`
	// Timeout bounds the whole fetch: every redirect hop, the headers and the
	// whole body. It is what stops slow and endless bodies.
	Timeout time.Duration `yaml:"timeout"`
	// MaxBodyBytes caps the body both on the wire and after decompression.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// MaxRedirects is the number of redirect hops followed. Zero means the
	// default; a negative value follows none (the first redirect fails with
	// ErrTooManyRedirects).
	MaxRedirects int `yaml:"max_redirects"`
	// AllowPrivate turns the SSRF guard off: every address may be dialled.
	// Only for tests and fully trusted networks.
	AllowPrivate bool `yaml:"allow_private"`
	// AllowCIDRs are ranges that may be dialled even though the guard would
	// block them, e.g. an intranet's feed server or a test server on
	// 127.0.0.1/32. They override the block list.
	AllowCIDRs []netip.Prefix `yaml:"allow_cidrs"`
	// Logger receives debug records for fetches and refused dials. Nil
	// discards them.
	Logger *slog.Logger `yaml:"-"`
	// Now is the clock used for timing and for HTTP-dates in Retry-After.
	// Nil means time.Now.
	Now func() time.Time `yaml:"-"`
}

// DefaultOptions returns the options used for zero fields.
func DefaultOptions() Options {
	return Options{
		UserAgent:      DefaultUserAgent,
		ConnectTimeout: 10 * time.Second,
		Timeout:        30 * time.Second,
		MaxBodyBytes:   10 << 20,
		MaxRedirects:   5,
		Logger:         slog.New(slog.DiscardHandler),
		Now:            time.Now,
	}
}

// withDefaults returns o with every zero field replaced by its default.
func (o Options) withDefaults() Options {
	option.Fill(&o, DefaultOptions())
	if o.MaxRedirects < 0 {
		o.MaxRedirects = 0 // follow none
	}
	return o
}

// Validate reports options that cannot work. Zero fields are valid (they mean
// the default).
func (o Options) Validate() error {
	var errs []error
	if strings.ContainsFunc(o.UserAgent, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		errs = append(errs, fmt.Errorf("user agent %q: contains control characters", o.UserAgent))
	}
	errs = append(errs,
		option.NotNegative("connect timeout", o.ConnectTimeout),
		option.NotNegative("timeout", o.Timeout),
		option.NotNegative("max body bytes", o.MaxBodyBytes))
	for i, p := range o.AllowCIDRs {
		if !p.IsValid() {
			errs = append(errs, fmt.Errorf("allow cidr %d: invalid prefix", i))
		}
	}
	return option.Join("fetch", errs...)
}
