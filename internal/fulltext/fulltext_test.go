package fulltext

import (
	"errors"
	"net/url"
	"os"
	"strings"
	"testing"
)

func TestExtractMainText(t *testing.T) {
	body, err := os.ReadFile("testdata/article.html")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := url.Parse("https://gazette.example/local/bridge")
	got, err := Extract(body, "text/html", page, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"The Vestby harbour bridge reopened to traffic on Tuesday morning",
		"Engineers replaced 42 of the bridge's 96 suspension cables",
		"“It feels like getting an hour of my day back,” said Mikael Dahl", // Windows-1252 quotes decoded
		"Inspectors will check the remaining cables in the spring",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("text lacks %q:\n%s", want, got)
		}
	}
	for _, junk := range []string{"Subscribe now", "Advertisement", "Most read", "Celebrity chef", "All rights reserved"} {
		if strings.Contains(got, junk) {
			t.Errorf("text holds page furniture %q:\n%s", junk, got)
		}
	}
	if strings.Contains(got, "  ") || strings.Contains(got, "\n\n\n") {
		t.Errorf("whitespace not collapsed: %q", got)
	}
}

func TestExtractLimitsAndErrors(t *testing.T) {
	body, _ := os.ReadFile("testdata/article.html")
	page, _ := url.Parse("https://gazette.example/local/bridge")
	got, err := Extract(body, "text/html; charset=windows-1252", page, 120)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) > 120 || strings.HasSuffix(got, " ") || !strings.HasPrefix(got, "The Vestby harbour bridge") {
		t.Errorf("cut text %q (%d bytes)", got, len(got))
	}
	if _, err := Extract([]byte(`{"a":1}`), "application/json", page, 0); !errors.Is(err, ErrNotHTML) {
		t.Errorf("JSON page: %v, want ErrNotHTML", err)
	}
	if _, err := Extract([]byte(`<html><body><nav><a href="/">Home</a></nav></body></html>`), "text/html", page, 0); err == nil {
		t.Error("a page without an article gave no error")
	}
	if _, err := Extract(nil, "", page, 0); err == nil {
		t.Error("an empty page gave no error")
	}
}

func TestTruncateKeepsRunesWhole(t *testing.T) {
	s := strings.Repeat("ä", 100) // 2 bytes each, no spaces
	got := truncate(s, 51)
	if len(got) != 50 || !strings.HasPrefix(s, got) {
		t.Errorf("truncate cut inside a rune: %d bytes", len(got))
	}
	if got := truncate("short", 100); got != "short" {
		t.Errorf("truncate changed a short text: %q", got)
	}
}

func TestOnlyALine(t *testing.T) {
	for _, c := range []struct {
		summary, content string
		want             bool
	}{
		{"Bridge reopens after repairs.", "", true},
		{"", "", true},
		{"Bridge reopens.", "<p>The full article.</p>", false},
		{strings.Repeat("word ", 30), "", false},
	} {
		if got := OnlyALine(c.summary, c.content, 25); got != c.want {
			t.Errorf("OnlyALine(%q, %q) = %v", c.summary, c.content, got)
		}
	}
}
