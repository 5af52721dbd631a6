package configs

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// runbookBase is where every alert's runbook_url points, followed by the
// anchor of the alert's section.
const runbookBase = "https://github.com/newsflow/newsflow/blob/main/docs/runbooks.md"

// TestAlertsHaveRunbooks: every alert has a severity of page or ticket, a
// summary and a description, and a runbook_url whose anchor is a section
// of docs/runbooks.md named after the alert.
func TestAlertsHaveRunbooks(t *testing.T) {
	var rules ruleFile
	readYAML(t, "alerts.yaml", &rules)
	doc, err := os.ReadFile("../docs/runbooks.md")
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^#{1,6} (.+)$`).FindAllStringSubmatch(string(doc), -1) {
		anchors[githubAnchor(m[1])] = true
	}
	alerts := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			alerts++
			if sev := r.Labels["severity"]; sev != "page" && sev != "ticket" {
				t.Errorf("%s: severity %q, want page or ticket", r.Alert, sev)
			}
			for _, a := range []string{"summary", "description"} {
				if strings.TrimSpace(r.Annotations[a]) == "" {
					t.Errorf("%s: no %s", r.Alert, a)
				}
			}
			anchor := strings.ToLower(r.Alert)
			if got, want := r.Annotations["runbook_url"], runbookBase+"#"+anchor; got != want {
				t.Errorf("%s: runbook_url %q, want %q", r.Alert, got, want)
			}
			if !anchors[anchor] {
				t.Errorf("%s: docs/runbooks.md has no section %q", r.Alert, "## "+r.Alert)
			}
		}
	}
	if alerts == 0 {
		t.Fatal("alerts.yaml holds no alert")
	}
}

// githubAnchor is the anchor GitHub gives a Markdown heading: lower case,
// punctuation other than hyphens and underscores dropped, spaces as
// hyphens.
func githubAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		}
	}
	return b.String()
}
