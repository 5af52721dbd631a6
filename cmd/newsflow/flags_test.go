package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// Flags win over the environment, which wins over the file.
func TestFlagsOverrideConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte("http:\n  addr: 1.2.3.4:1\nlog:\n  partitions: 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("NEWSFLOW_HTTP_ADDR", "5.6.7.8:2")
	cf := commonFlags{config: path, http: "9.9.9.9:3", brokers: "k:9092", partitions: 5}
	c, err := cf.load()
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTP.Addr != "9.9.9.9:3" || c.Log.Backend != "kafka" || c.Log.Partitions != 5 || !reflect.DeepEqual(c.Log.Brokers, []string{"k:9092"}) {
		t.Fatalf("flags did not override: %+v", c)
	}
}

// Every command of the usage text is dispatched; an unknown one is
// refused with the usage.
func TestCommandDispatch(t *testing.T) {
	for _, line := range strings.Split(usage, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "newsflow" {
			continue
		}
		if _, ok := commands[f[1]]; !ok && !slices.Contains([]string{"run", "user", "version", "help"}, f[1]) {
			t.Errorf("usage names %q, which run does not dispatch", f[1])
		}
	}
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"version"}, &out, &errOut); err != nil || !strings.HasPrefix(out.String(), "newsflow ") {
		t.Errorf("version: %v, %q", err, out.String())
	}
	err := run(context.Background(), []string{"frobnicate"}, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), `unknown command "frobnicate"`) || !strings.Contains(errOut.String(), "newsflow run") {
		t.Errorf("unknown command: %v, stderr %q", err, errOut.String())
	}
}
