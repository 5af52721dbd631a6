package main

import (
	"os"
	"path/filepath"
	"reflect"
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
