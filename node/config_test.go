package node

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/operators/trending"
	"go.yaml.in/yaml/v3"
)

// The shipped configs/newsflow.yaml says exactly what the defaults are:
// every setting a file can hold is the same in both.
func TestShippedConfigMatchesDefaults(t *testing.T) {
	c, err := Load("../configs/newsflow.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	file, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	def, err := yaml.Marshal(Default())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(file, def) {
		t.Fatalf("configs/newsflow.yaml differs from the defaults:\nfile:\n%s\ndefaults:\n%s", file, def)
	}
	// And it names every setting, so that it documents each.
	raw, err := os.ReadFile("../configs/newsflow.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var shipped, all map[string]any
	if err := yaml.Unmarshal(raw, &shipped); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(def, &all); err != nil {
		t.Fatal(err)
	}
	for _, k := range missingKeys(all, shipped, "") {
		t.Errorf("configs/newsflow.yaml does not name %s", k)
	}
}

// missingKeys lists the keys of want, as dotted paths, that got lacks.
func missingKeys(want, got map[string]any, prefix string) []string {
	var out []string
	for k, v := range want {
		g, ok := got[k]
		switch {
		case !ok:
			out = append(out, prefix+k)
		case isMap(v) && isMap(g):
			out = append(out, missingKeys(v.(map[string]any), g.(map[string]any), prefix+k+".")...)
		}
	}
	slices.Sort(out)
	return out
}

func isMap(v any) bool { _, ok := v.(map[string]any); return ok }

// Every field of the configuration says its YAML key, or "-" for fields
// only a program sets: a field without a tag would take a key nobody chose.
func TestConfigFieldsTagged(t *testing.T) {
	var walk func(typ reflect.Type, path string)
	walk = func(typ reflect.Type, path string) {
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			if !f.IsExported() {
				continue
			}
			tag, ok := f.Tag.Lookup("yaml")
			if !ok {
				t.Errorf("%s.%s (%s) has no yaml tag", path, f.Name, typ)
				continue
			}
			if tag == "-" {
				continue
			}
			if ft := f.Type; ft.Kind() == reflect.Struct && ft != reflect.TypeFor[time.Duration]() {
				walk(ft, path+"."+f.Name)
			} else if ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct && ft.Elem().NumField() > 0 && ft.Elem().Field(0).IsExported() {
				walk(ft.Elem(), path+"."+f.Name+"[]")
			}
		}
	}
	walk(reflect.TypeFor[Config](), "Config")
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
	o := c.Trending.OperatorOptions
	if o.Counter != "cms" || o.CMS.Width != 4096 || o.CMS.CandidatesPerK != 3 || o.CMS.Epsilon != 2e-4 || o.CMS.Delta != 0.02 || o.CMS.MaxCategories != 64 {
		t.Fatalf("operator options %+v", o)
	}
	if d := Default().Trending.OperatorOptions; d.Counter != "exact" {
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

// trending.repeat_shares is once unless set; every and once are the only
// values, and repeat_pairs must not be negative.
func TestConfigTrendingRepeatShares(t *testing.T) {
	c, err := Load("../configs/newsflow.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if o := c.Trending.OperatorOptions; o.RepeatShares != trending.RepeatOnce || o.RepeatPairs != trending.DefaultRepeatPairs {
		t.Fatalf("shipped repeat_shares %q, repeat_pairs %d", o.RepeatShares, o.RepeatPairs)
	}
	if d := Default().Trending.OperatorOptions; d.RepeatShares != trending.RepeatOnce {
		t.Fatalf("default repeat_shares %q", d.RepeatShares)
	}
	for _, c := range []struct {
		env  []string
		want string
	}{
		{[]string{"NEWSFLOW_TRENDING_REPEAT_SHARES=every"}, ""},
		{[]string{"NEWSFLOW_TRENDING_REPEAT_SHARES=twice"}, `repeat_shares "twice": want once or every`},
		{[]string{"NEWSFLOW_TRENDING_REPEAT_PAIRS=-1"}, "repeat_pairs must not be negative"},
	} {
		cfg, err := Load("../configs/newsflow.yaml", c.env)
		if err != nil {
			t.Fatal(err)
		}
		err = cfg.Validate()
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%v: %v, want %q", c.env, err, c.want)
		}
		if c.want == "" && cfg.Trending.RepeatShares != trending.RepeatEvery {
			t.Errorf("%v: repeat_shares %q", c.env, cfg.Trending.RepeatShares)
		}
	}
}

// Settings of sections made of several packages' options keep their
// names in the environment, lists of addresses included.
func TestConfigEnvInlineSections(t *testing.T) {
	c, err := Load("", []string{"NEWSFLOW_CRAWL_ALLOW_CIDRS=10.0.0.0/8, fd00::/8", "NEWSFLOW_STATE_CACHE_SIZE=1000",
		"NEWSFLOW_STORIES_NEAR_DUP_K=5", "NEWSFLOW_AUTH_LOGIN_BURST_PER_IP=3", "NEWSFLOW_LOG_FSYNC=never", "NEWSFLOW_HTTP_RATE_PER_IP=7.5"})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(c.Crawl.Fetch.AllowCIDRs); got != "[10.0.0.0/8 fd00::/8]" {
		t.Errorf("allow_cidrs %s", got)
	}
	if c.State.CacheSize != 1000 || c.Stories.Builder.NearDup.K != 5 || c.Auth.Limiter.IPBurst != 3 ||
		c.Log.Embedded.Fsync != "never" || c.HTTP.RateLimits.PerIP != 7.5 {
		t.Errorf("environment not applied: state %+v, near_dup_k %d, login burst %d, fsync %q, rate %v",
			c.State, c.Stories.Builder.NearDup.K, c.Auth.Limiter.IPBurst, c.Log.Embedded.Fsync, c.HTTP.RateLimits.PerIP)
	}
	if _, err := Load("", []string{"NEWSFLOW_CRAWL_ALLOW_CIDRS=10.0.0.0/33"}); err == nil || !strings.Contains(err.Error(), "NEWSFLOW_CRAWL_ALLOW_CIDRS") {
		t.Errorf("bad prefix: %v", err)
	}
}

// An empty list in the file means none, not the default: a file that
// gives no evergreen topics gets none.
func TestConfigEmptyListMeansNone(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte("stories:\n  evergreen_topics: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Stories.Builder.EvergreenTopics; got == nil || len(got) != 0 {
		t.Fatalf("evergreen_topics: [] loaded as %#v, want an empty list", got)
	}
}

// The tracing section comes from the file or NEWSFLOW_TRACING_*, and is
// validated with the rest.
func TestConfigTracing(t *testing.T) {
	c, err := Load("../configs/newsflow.yaml", []string{"NEWSFLOW_TRACING_EXPORTER=otlp",
		"NEWSFLOW_TRACING_ENDPOINT=http://127.0.0.1:4318", "NEWSFLOW_TRACING_SAMPLE_RATIO=1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if o := c.Tracing; o.Exporter != "otlp" || o.Endpoint != "http://127.0.0.1:4318" || o.SampleRatio != 1 || o.ServiceName != "newsflow" {
		t.Errorf("tracing %+v", o)
	}
	if d := Default().Tracing; d.Exporter != "none" {
		t.Errorf("tracing is on by default: %+v", d)
	}
	c.Tracing.Exporter = "jaeger"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), `tracing options: exporter "jaeger"`) {
		t.Errorf("unknown exporter: %v", err)
	}
}

// The HTTP guards are set from the file and the environment, and a node
// refuses bad ones before it starts.
func TestConfigHTTPGuards(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "newsflow.yaml")
	if err := os.WriteFile(path, []byte("http:\n  ops_addr: 127.0.0.1:9090\n  trusted_proxies: [127.0.0.1/32, 10.0.0.0/8]\n  share_rate_per_ip: 2\n  max_auth_body_bytes: 2048\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path, []string{"NEWSFLOW_HTTP_OPS_TOKEN=ops-secret", "NEWSFLOW_HTTP_RATE_EXEMPT_LOOPBACK=true", "NEWSFLOW_AUTH_LOGIN_MAX_BACKOFF=5m"})
	if err != nil {
		t.Fatal(err)
	}
	h := c.HTTP
	if h.OpsAddr != "127.0.0.1:9090" || h.OpsToken != "ops-secret" || fmt.Sprint(h.TrustedProxies) != "[127.0.0.1/32 10.0.0.0/8]" ||
		h.RateLimits.SharesPerIP != 2 || h.RateLimits.BurstSharesIP != 100 || !h.RateLimits.ExemptLoopback || h.MaxAuthBodyBytes != 2048 ||
		c.Auth.Limiter.MaxBackoff != 5*time.Minute {
		t.Errorf("http section: %+v, login backoff %v", h, c.Auth.Limiter.MaxBackoff)
	}
	// The defaults: loopback not exempt, anonymous shares limited.
	if d := Default().HTTP.RateLimits; d.ExemptLoopback || d.SharesPerIP <= 0 {
		t.Errorf("default rate limits: %+v", d)
	}
	for _, env := range []string{"NEWSFLOW_HTTP_TRUSTED_PROXIES=proxy.example", "NEWSFLOW_HTTP_OPS_ADDR=127.0.0.1:8080"} {
		c, err := Load("", []string{env})
		if err == nil {
			err = c.Validate()
		}
		if err == nil {
			t.Errorf("%s accepted", env)
		}
	}
}
