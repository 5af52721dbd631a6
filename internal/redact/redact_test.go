package redact

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

func TestURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://user:pass@hooks.example/x":                            "https://REDACTED@hooks.example/x",
		"https://tok3n@hooks.example/x":                                "https://REDACTED@hooks.example/x",
		"https://hooks.example/x?token=abc&topic=science":              "https://hooks.example/x?token=REDACTED&topic=science",
		"https://h.example/?api_key=1&X-Amz-Signature=2&sig=3&page=4":  "https://h.example/?api_key=REDACTED&X-Amz-Signature=REDACTED&sig=REDACTED&page=4",
		"https://h.example/?Password=1&client_secret=2&access_token=3": "https://h.example/?Password=REDACTED&client_secret=REDACTED&access_token=REDACTED",
		"https://h.example/cb#access_token=abc&state=1":                "https://h.example/cb#access_token=REDACTED&state=1",
		"http://127.0.0.1:8080/setup?token=s3cr3tvalue":                "http://127.0.0.1:8080/setup?token=REDACTED",
		"https://news.example/rss?page=2":                              "https://news.example/rss?page=2",
	} {
		if got := URL(in); got != want {
			t.Errorf("URL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestText(t *testing.T) {
	for in, want := range map[string]string{
		`Post "https://ann:hunter22@hooks.example/x?token=abc": dial tcp: i/o timeout`: `Post "https://REDACTED@hooks.example/x?token=REDACTED": dial tcp: i/o timeout`,
		"open http://127.0.0.1:8080/setup?token=s3cr3tvalue.":                          "open http://127.0.0.1:8080/setup?token=REDACTED.",
		"Authorization: Bearer abcdef123456":                                           "Authorization: Bearer REDACTED",
		"Authorization: Basic YW5uOmh1bnRlcjIy":                                        "Authorization: Basic REDACTED",
		"Authorization: GoogleLogin auth=abcdef123456":                                 "Authorization: GoogleLogin auth=REDACTED",
		"newsflow user add --setup-token=abcdef NAME":                                  "newsflow user add --setup-token=REDACTED NAME",
		"password=hunter22 user=ann":                                                   "password=REDACTED user=ann",
		"the setup token is no longer valid":                                           "the setup token is no longer valid",
		"crawl: source failing; retrying with backoff":                                 "crawl: source failing; retrying with backoff",
	} {
		if got := Text(in); got != want {
			t.Errorf("Text(%q) = %q, want %q", in, got, want)
		}
		if got := Text(Text(in)); got != want {
			t.Errorf("Text twice (%q) = %q", in, got)
		}
	}
}

func TestInternalAddrs(t *testing.T) {
	for in, want := range map[string]string{
		`Get "http://nowhere.invalid/feed": dial tcp: lookup nowhere.invalid on 10.0.0.2:53: no such host`: `Get "http://nowhere.invalid/feed": dial tcp: lookup nowhere.invalid: no such host`,
		"lookup x.example on [fd00::53]:53: server misbehaving":                                            "lookup x.example: server misbehaving",
		"read tcp 10.0.0.7:50122->93.184.216.34:443: read: connection reset by peer":                       "read tcp 93.184.216.34:443: read: connection reset by peer",
		"write tcp [fd00::7]:50122->[2606:4700::1]:443: broken pipe":                                       "write tcp [2606:4700::1]:443: broken pipe",
		"dial tcp 93.184.216.34:443: connect: connection refused":                                          "dial tcp 93.184.216.34:443: connect: connection refused",
		"blocked address 127.0.0.1":                                                                        "blocked address 127.0.0.1",
	} {
		if got := InternalAddrs(in); got != want {
			t.Errorf("InternalAddrs(%q) = %q, want %q", in, got, want)
		}
	}
}

type stringer struct{}

func (stringer) String() string { return "https://u:p@h.example/" }

func TestHandler(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(NewHandler(slog.NewJSONHandler(&buf, nil))).With("token", "abcdef", slog.Group("hook", "url", "https://u:hunter22@h.example/?key=k3y"))
	u, _ := url.Parse("https://ann:hunter22@h.example/?secret=s3cr3t")
	log.Warn("open https://h.example/setup?token=t0ken123 now",
		"url", u, "err", errors.New(`Post "https://h.example/?signature=s1gn4ture": EOF`), "password", "hunter22", "stringer", stringer{},
		"header", http.Header{"Authorization": {"Bearer b3arer99"}, "Accept": {"*/*"}}, "count", 3, slog.Group("g", "api_key", "k3y2"))
	out := buf.String()
	for _, secret := range []string{"abcdef", "hunter22", "k3y", "s3cr3t", "t0ken123", "s1gn4ture", "b3arer99", ":p@"} {
		if strings.Contains(out, secret) {
			t.Errorf("log line carries %q: %s", secret, out)
		}
	}
	for _, kept := range []string{`"count":3`, "h.example", `"Accept":["*/*"]`} {
		if !strings.Contains(out, kept) {
			t.Errorf("log line lost %q: %s", kept, out)
		}
	}
}
