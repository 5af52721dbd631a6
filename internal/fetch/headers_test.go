package fetch

import (
	"net/http"
	"testing"
	"time"

	"github.com/newsflow/newsflow/internal/testutil"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	parse := func(v string) time.Duration { return parseRetryAfter(v, now) }
	testutil.CheckFunc(t, "parseRetryAfter", parse, map[string]time.Duration{
		"":                        0,
		"0":                       0,
		"120":                     2 * time.Minute,
		" 7 ":                     7 * time.Second,
		"-5":                      0,
		"1.5":                     0,
		"soon":                    0,
		"99999999999999999999999": maxRetryAfter,
		"31536000":                maxRetryAfter,
		now.Add(time.Hour).Format(http.TimeFormat):  time.Hour,
		now.Add(-time.Hour).Format(http.TimeFormat): 0,
		"Sunday, 01-Mar-26 12:00:30 GMT":            30 * time.Second, // RFC 850
		"Sun Mar  1 12:01:00 2026":                  time.Minute,      // asctime
	})
}

func TestParseMaxAge(t *testing.T) {
	testutil.CheckFunc(t, "parseMaxAge", parseMaxAge, map[string]time.Duration{
		"":                                 0,
		"max-age=600":                      10 * time.Minute,
		"public, max-age=60, s-maxage=900": time.Minute,
		"MAX-AGE = 30":                     30 * time.Second,
		`max-age="45"`:                     45 * time.Second,
		"max-age=abc, max-age=5":           5 * time.Second,
		"no-cache":                         0,
		"max-age=-1":                       0,
		"max-age=99999999999999999999999":  (1 << 31) * time.Second,
	})
}

func TestParseExpires(t *testing.T) {
	want := time.Date(2026, 5, 1, 8, 30, 0, 0, time.UTC)
	if got := parseExpires(want.Format(http.TimeFormat)); !got.Equal(want) {
		t.Errorf("got %v", got)
	}
	for _, v := range []string{"", "0", "-1", "tomorrow"} {
		if got := parseExpires(v); !got.IsZero() {
			t.Errorf("%q: %v, want zero", v, got)
		}
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"120", "Mon, 02 Jan 2006 15:04:05 GMT", "", "-1", "99999999999999999999"} {
		f.Add(s)
	}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string) {
		if d := parseRetryAfter(v, now); d < 0 || d > maxRetryAfter {
			t.Fatalf("%q: %v out of range", v, d)
		}
	})
}

func FuzzParseMaxAge(f *testing.F) {
	for _, s := range []string{"max-age=60", "public, max-age=1", `max-age="3"`, "max-age=", ","} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if d := parseMaxAge(v); d < 0 || d > (1<<31)*time.Second {
			t.Fatalf("%q: %v out of range", v, d)
		}
	})
}
