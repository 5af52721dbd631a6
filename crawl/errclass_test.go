package crawl

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/newsflow/newsflow/internal/feed"
	"github.com/newsflow/newsflow/internal/fetch"
	"github.com/newsflow/newsflow/internal/polite"
)

func TestClassify(t *testing.T) {
	_, notAFeed := feed.Parse([]byte("<!doctype html><html><body>hello</body></html>"), "text/html", nil, time.Now())
	_, malformed := feed.Parse([]byte(`<rss version="2.0"><channel><title>x</title><item><title>a`), "application/rss+xml", nil, time.Now())
	_, hostErr := polite.HostKey("mailto:someone@example.com")
	for _, tc := range []struct {
		name string
		err  error
		want Class
	}{
		{"410", &fetch.StatusError{Status: 410}, Gone},
		{"429", &fetch.StatusError{Status: 429}, RateLimited},
		{"503", fmt.Errorf("fetch: %w", &fetch.StatusError{Status: 503}), RateLimited},
		{"404", &fetch.StatusError{Status: 404}, Transient},
		{"500", &fetch.StatusError{Status: 500}, Transient},
		{"invalid url", fmt.Errorf("x: %w", fetch.ErrInvalidURL), Permanent},
		{"host key", hostErr, Permanent},
		{"html page", fmt.Errorf("parse: %w", notAFeed), Permanent},
		{"blocked", fetch.ErrBlockedAddress, Transient},
		{"timeout", fetch.ErrTimeout, Transient},
		{"canceled", context.Canceled, Transient},
		{"nil", nil, Transient},
	} {
		if got := Classify(tc.err); got != tc.want {
			t.Errorf("%s (%v): %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
	if malformed != nil {
		if got := Classify(malformed); got != Transient {
			t.Errorf("malformed feed (%v): %v, want transient (a truncated answer may be whole next time)", malformed, got)
		}
	}
	if hostErr == nil {
		t.Fatal("HostKey accepted a mailto: URL")
	}
}
