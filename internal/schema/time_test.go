package schema

import (
	"encoding/json"
	"strings"
	"testing"
)

// A raw article's times may be RFC 3339 strings or ms since the epoch, as
// the README promises for every ingested time; anything else is refused
// with a reason.
func TestRawArticleTimes(t *testing.T) {
	for _, c := range []struct{ in, published, fetched string }{
		{`{"published_at":"2026-03-01T10:00:00Z","fetched_at":1772359200000}`, "2026-03-01T10:00:00Z", "1772359200000"},
		{`{"published_at":1772359200000}`, "1772359200000", ""},
		{`{"published_at":null,"fetched_at":""}`, "", ""},
	} {
		var a RawArticle
		if err := json.Unmarshal([]byte(c.in), &a); err != nil || string(a.PublishedAt) != c.published || string(a.FetchedAt) != c.fetched {
			t.Errorf("%s: %q %q %v", c.in, a.PublishedAt, a.FetchedAt, err)
		}
	}
	for _, in := range []string{`{"published_at":true}`, `{"published_at":1.5}`, `{"published_at":{}}`} {
		var a RawArticle
		if err := json.Unmarshal([]byte(in), &a); err == nil || !strings.Contains(err.Error(), "RFC 3339") && !strings.Contains(err.Error(), "cannot unmarshal") {
			t.Errorf("%s: %v, want a refusal", in, err)
		}
	}
}
