package query

import (
	"fmt"
	"strings"
	"testing"

	"github.com/newsflow/newsflow/internal/fetch"
)

// A refusal names the address the guard refused only when the URL's host
// is that address; for a name it says the name resolves to such an
// address, not which.
func TestBlockedAddressNamesNoResolvedAddress(t *testing.T) {
	dial := func(addr string) error {
		return fmt.Errorf("fetch: request: dial tcp %s:80: %w", addr, fmt.Errorf("%w %s", fetch.ErrBlockedAddress, addr))
	}
	for _, c := range []struct {
		err       error
		feedURL   string
		want, not string
	}{
		{dial("10.1.2.3"), "http://intranet.corp/feed", "intranet.corp (or where it redirects) resolves to", "10.1.2.3"},
		{dial("127.0.0.1"), "http://127.0.0.1:8080/feed", "127.0.0.1 is", ""},
		{dial("127.0.0.2"), "http://127.0.0.1:8080/feed", "127.0.0.2 is", ""},
		{dial("::1"), "http://[::1]/feed", "::1 is", ""},
	} {
		got := blockedAddress(c.err, c.feedURL)
		if got != c.want || (c.not != "" && strings.Contains(got, c.not)) {
			t.Errorf("blockedAddress(%v, %s) = %q, want %q", c.err, c.feedURL, got, c.want)
		}
	}
}
