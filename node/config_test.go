package node

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The shipped configs/newsflow.yaml says exactly what the defaults are.
func TestShippedConfigMatchesDefaults(t *testing.T) {
	c, err := Load("../configs/newsflow.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := Default(); !reflect.DeepEqual(c, d) {
		t.Fatalf("configs/newsflow.yaml differs from the defaults:\nfile     %+v\ndefaults %+v", c, d)
	}
}

func TestConfigPrecedence(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(path, []byte("data_dir: /from/file\nhttp:\n  addr: 1.2.3.4:1\nlog:\n  partitions: 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path, []string{"NEWSFLOW_HTTP_ADDR=5.6.7.8:2", "NEWSFLOW_LOG_BROKERS=a:1, b:2", "NEWSFLOW_TRENDING_LATENESS=90s", "HOME=/x"})
	if err != nil {
		t.Fatal(err)
	}
	if c.DataDir != "/from/file" || c.HTTP.Addr != "5.6.7.8:2" || c.Log.Partitions != 3 ||
		!reflect.DeepEqual(c.Log.Brokers, []string{"a:1", "b:2"}) || c.Trending.Lateness != 90*time.Second {
		t.Fatalf("file < env precedence broken: %+v", c)
	}
	if c.Trending.MaxK != 100 {
		t.Fatalf("unset field lost its default: max_k = %d", c.Trending.MaxK)
	}
}

func TestConfigErrors(t *testing.T) {
	dir := t.TempDir()
	n := 0
	write := func(body string) string {
		n++
		p := filepath.Join(dir, fmt.Sprintf("c%d.yaml", n))
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		path string
		env  []string
		want string
	}{
		{write("http:\n  adress: x\n"), nil, "field adress not found"},
		{write("log:\n  partitions: many\n"), nil, "cannot unmarshal"},
		{write(""), []string{"NEWSFLOW_LOG_PARTITIONS=x"}, `NEWSFLOW_LOG_PARTITIONS="x"`},
		{write(""), []string{"NEWSFLOW_TRENDING_LATENESS=5"}, "missing unit"},
		{filepath.Join(dir, "missing.yaml"), nil, "no such file"},
	}
	for _, c := range cases {
		_, err := Load(c.path, c.env)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Load(%v) = %v, want error containing %q", c.env, err, c.want)
		}
	}
	c, err := Load(write(""), []string{"NEWSFLOW_HTTP_ADRESS=x", "NEWSFLOW_HTTP_ADDR=y:1"})
	if err != nil || !reflect.DeepEqual(c.unknownEnv, []string{"NEWSFLOW_HTTP_ADRESS"}) || c.HTTP.Addr != "y:1" {
		t.Errorf("unknown variable: %v, unknown %v", err, c.unknownEnv)
	}
	bad := Default()
	bad.Log.Backend = "kafka"
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "brokers is empty") {
		t.Errorf("kafka without brokers: %v", err)
	}
	bad.Log.Backend = "nats"
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "want embedded or kafka") {
		t.Errorf("unknown backend: %v", err)
	}
}

// trending.counter and the cms block reach the operator's options, from
// the file or the environment; an unknown counter is refused.
func TestConfigTrendingCounter(t *testing.T) {
	c, err := Load("../configs/newsflow.yaml", []string{"NEWSFLOW_TRENDING_COUNTER=cms", "NEWSFLOW_TRENDING_CMS_WIDTH=4096",
		"NEWSFLOW_TRENDING_CMS_CANDIDATES_PER_K=3"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	o := c.Trending.operatorOptions()
	if o.Counter != "cms" || o.CMS.Width != 4096 || o.CMS.CandidatesPerK != 3 || o.CMS.Epsilon != 2e-4 || o.CMS.Delta != 0.02 || o.CMS.MaxCategories != 64 {
		t.Fatalf("operator options %+v", o)
	}
	if d := Default().Trending.operatorOptions(); d.Counter != "exact" {
		t.Fatalf("default counter %q", d.Counter)
	}
	for _, c := range []struct {
		env  []string
		want string
	}{
		{[]string{"NEWSFLOW_TRENDING_COUNTER=approx"}, `counter "approx": want exact or cms`},
		{[]string{"NEWSFLOW_TRENDING_COUNTER=cms", "NEWSFLOW_TRENDING_CMS_WIDTH=1000"}, "width 1000 is not a power of two"},
		{[]string{"NEWSFLOW_TRENDING_COUNTER=cms", "NEWSFLOW_TRENDING_CMS_MAX_CATEGORIES=0"}, ""}, // 0 is the default
	} {
		cfg, err := Load("../configs/newsflow.yaml", c.env)
		if err != nil {
			t.Fatal(err)
		}
		err = cfg.Validate()
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%v: %v, want %q", c.env, err, c.want)
		}
	}
}
