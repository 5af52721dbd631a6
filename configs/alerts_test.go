package configs

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/newsflow/newsflow/internal/testutil"
	"go.yaml.in/yaml/v3"
)

// TestAlertRules has promtool check alerts.yaml and run its unit tests,
// alerts_test.yaml.
func TestAlertRules(t *testing.T) {
	promtool := testutil.Promtool(t)
	for _, args := range [][]string{{"check", "rules", "alerts.yaml"}, {"test", "rules", "alerts_test.yaml"}} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// ruleFile is the part of a Prometheus rule file the tests read.
type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Record      string            `yaml:"record"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// ruleTests is the part of a promtool test file the tests read.
type ruleTests struct {
	Tests []struct {
		AlertRuleTest []struct {
			Alertname string `yaml:"alertname"`
			ExpAlerts []struct {
				ExpLabels map[string]string `yaml:"exp_labels"`
			} `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestAlertsAllTested: alerts_test.yaml makes every alert of alerts.yaml
// fire, at each of its severities, and checks it quiet somewhere.
func TestAlertsAllTested(t *testing.T) {
	var rules ruleFile
	readYAML(t, "alerts.yaml", &rules)
	var tests ruleTests
	readYAML(t, "alerts_test.yaml", &tests)
	fired := map[string][]string{} // alert name: severities seen firing
	quiet := map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) == 0 {
				quiet[a.Alertname] = true
			}
			for _, e := range a.ExpAlerts {
				fired[a.Alertname] = append(fired[a.Alertname], e.ExpLabels["severity"])
			}
		}
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			if !slices.Contains(fired[r.Alert], r.Labels["severity"]) {
				t.Errorf("alerts_test.yaml never has %s fire with severity %s", r.Alert, r.Labels["severity"])
			}
			if !quiet[r.Alert] {
				t.Errorf("alerts_test.yaml never checks that %s stays quiet", r.Alert)
			}
		}
	}
}
