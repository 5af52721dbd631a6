package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/engine/eventlog/kafkalog"
	"github.com/newsflow/newsflow/internal/testutil"
)

// kafkaSecurity is a kfake broker that wants TLS with a client
// certificate and SASL, and a configuration file that reaches it, as an
// operator writes one (the password left to the environment).
type kafkaSecurity struct {
	broker *kfake.Cluster
	config string // path
}

func newKafkaSecurity(t *testing.T, mechanism, user string) kafkaSecurity {
	t.Helper()
	pki := testutil.NewPKI(t)
	srv := pki.Issue(t, "broker", testutil.ServerAuth, "127.0.0.1").KeyPair(t)
	broker, err := kfake.NewCluster(kfake.NumBrokers(1),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{srv}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pki.Pool()}),
		kfake.EnableSASL(),
		kfake.Superuser("SCRAM-SHA-256", "scram-user", "scram-pw"),
		kfake.Superuser("PLAIN", "plain-user", "plain-pw"),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(broker.Close)
	client := pki.Issue(t, "newsflow", testutil.ClientAuth)
	dir := t.TempDir()
	path := filepath.Join(dir, "newsflow.yaml")
	yaml := fmt.Sprintf(`data_dir: %s
log:
  backend: kafka
  brokers: [%s]
  kafka:
    tls:
      ca_file: %s
      cert_file: %s
      key_file: %s
    sasl:
      mechanism: %s
      user: %s
`, filepath.Join(dir, "data"), broker.ListenAddrs()[0], pki.CAFile, client.CertFile, client.KeyFile, mechanism, user)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return kafkaSecurity{broker: broker, config: path}
}

// The node's Kafka log reaches a broker that wants TLS with a client
// certificate and SASL (SCRAM-SHA-256, and PLAIN), configured by the file
// and the password by NEWSFLOW_LOG_KAFKA_SASL_PASSWORD: it creates a
// topic, produces and consumes.
func TestKafkaTLSAndSASLFromConfig(t *testing.T) {
	for _, tc := range []struct{ mechanism, user, password string }{
		{"SCRAM-SHA-256", "scram-user", "scram-pw"},
		{"PLAIN", "plain-user", "plain-pw"},
	} {
		t.Run(tc.mechanism, func(t *testing.T) {
			k := newKafkaSecurity(t, tc.mechanism, tc.user)
			cfg, err := Load(k.config, []string{"NEWSFLOW_LOG_KAFKA_SASL_PASSWORD=" + tc.password})
			if err != nil {
				t.Fatal(err)
			}
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			if w := cfg.Warnings(); len(w) != 0 {
				t.Fatalf("warnings over TLS: %v", w)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			l, err := openLog(ctx, cfg, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			if err := l.CreateTopic(ctx, "shares", 2); err != nil {
				t.Fatal(err)
			}
			want := []string{`{"n":1}`, `{"n":2}`}
			var recs []*eventlog.Record
			for _, v := range want {
				recs = append(recs, &eventlog.Record{Topic: "shares", Partition: 0, Key: []byte("k"), Value: []byte(v)})
			}
			if err := l.Append(ctx, recs); err != nil {
				t.Fatal(err)
			}
			got := testutil.ReadTopic(t, l, "shares")
			if len(got) != len(want) {
				t.Fatalf("consumed %d records, want %d", len(got), len(want))
			}
			for i, r := range got {
				if string(r.Value) != want[i] {
					t.Fatalf("record %d: %q, want %q", i, r.Value, want[i])
				}
			}
		})
	}
}

// A wrong password stops the node at start with the reason; so do an
// unknown mechanism, a missing password and an unreadable file, before
// anything connects.
func TestKafkaSecurityErrors(t *testing.T) {
	k := newKafkaSecurity(t, "SCRAM-SHA-256", "scram-user")
	open := func(env ...string) error {
		cfg, err := Load(k.config, env)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		n, err := Open(ctx, cfg, Options{})
		if err == nil {
			n.Close()
		}
		return err
	}
	err := open("NEWSFLOW_LOG_KAFKA_SASL_PASSWORD=wrong")
	if !errors.Is(err, kafkalog.ErrAuthentication) || !strings.Contains(err.Error(), `refused the SCRAM-SHA-256 login of user "scram-user"`) {
		t.Fatalf("wrong password: %v", err)
	}
	t.Logf("wrong password: %v", err)
	missing := filepath.Join(t.TempDir(), "missing.pem")
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{nil, "log.kafka.sasl.mechanism is SCRAM-SHA-256 but the password is empty (set NEWSFLOW_LOG_KAFKA_SASL_PASSWORD)"},
		{[]string{"NEWSFLOW_LOG_KAFKA_SASL_PASSWORD=p", "NEWSFLOW_LOG_KAFKA_SASL_MECHANISM=GSSAPI"}, `log.kafka.sasl: mechanism "GSSAPI": want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512`},
		{[]string{"NEWSFLOW_LOG_KAFKA_SASL_PASSWORD=p", "NEWSFLOW_LOG_KAFKA_SASL_USER="}, "needs a user and a password"},
		{[]string{"NEWSFLOW_LOG_KAFKA_SASL_PASSWORD=p", "NEWSFLOW_LOG_KAFKA_TLS_KEY_FILE="}, "log.kafka.tls: cert_file and key_file go together"},
		{[]string{"NEWSFLOW_LOG_KAFKA_SASL_PASSWORD=p", "NEWSFLOW_LOG_KAFKA_TLS_CA_FILE=" + missing}, "read ca_file: open " + missing},
	} {
		if err := open(tc.env...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v\nwant %q", tc.env, err, tc.want)
		}
	}
}

// PLAIN without TLS is accepted with a warning: it sends the password as
// it is.
func TestKafkaPlainWithoutTLSWarns(t *testing.T) {
	cfg, err := Load("", []string{"NEWSFLOW_LOG_BACKEND=kafka", "NEWSFLOW_LOG_BROKERS=k:9092",
		"NEWSFLOW_LOG_KAFKA_SASL_MECHANISM=PLAIN", "NEWSFLOW_LOG_KAFKA_SASL_USER=u", "NEWSFLOW_LOG_KAFKA_SASL_PASSWORD=p"})
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if w := strings.Join(cfg.Warnings(), "\n"); !strings.Contains(w, "clear text") {
		t.Fatalf("warnings: %q", w)
	}
	// Kafka settings on the embedded log do nothing, and say so.
	cfg, err = Load("", []string{"NEWSFLOW_LOG_KAFKA_TLS_ENABLED=true"})
	if err != nil {
		t.Fatal(err)
	}
	if w := strings.Join(cfg.Warnings(), "\n"); !strings.Contains(w, "log.kafka is ignored: log.backend is embedded") {
		t.Fatalf("warnings: %q", w)
	}
}

// The cluster's Raft certificates: all three files or none, and a warning
// for a secret short enough to guess when they are derived from it.
func TestClusterTLSConfig(t *testing.T) {
	base := []string{"NEWSFLOW_LOG_BACKEND=kafka", "NEWSFLOW_LOG_BROKERS=k:9092", "NEWSFLOW_CLUSTER_BOOTSTRAP=true",
		"NEWSFLOW_DATA_DIR=" + t.TempDir()}
	load := func(env ...string) Config {
		t.Helper()
		cfg, err := Load("", append(base, env...))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	cfg := load("NEWSFLOW_CLUSTER_SECRET=0123456789abcdef0123", "NEWSFLOW_CLUSTER_TLS_CERT_FILE=node.pem")
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "tls.cert_file, tls.key_file and tls.ca_file go together") {
		t.Fatalf("cert file alone: %v", err)
	}
	cfg = load("NEWSFLOW_CLUSTER_SECRET=0123456789abcdef0123", "NEWSFLOW_CLUSTER_TLS_CERT_FILE=node.pem",
		"NEWSFLOW_CLUSTER_TLS_KEY_FILE=node-key.pem", "NEWSFLOW_CLUSTER_TLS_CA_FILE=ca.pem", "NEWSFLOW_CLUSTER_TLS_SERVER_NAME=raft.internal")
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.Cluster.TLS.CAFile != "ca.pem" || cfg.Cluster.TLS.ServerName != "raft.internal" {
		t.Fatalf("tls from the environment: %+v", cfg.Cluster.TLS)
	}
	if w := load("NEWSFLOW_CLUSTER_SECRET=0123456789abcdef0123").Warnings(); len(w) != 0 {
		t.Fatalf("warnings for a long secret: %v", w)
	}
	if w := strings.Join(load("NEWSFLOW_CLUSTER_SECRET=change-me").Warnings(), "\n"); !strings.Contains(w, "cluster.secret is shorter than 16 bytes") {
		t.Fatalf("warnings for a short secret: %q", w)
	}
}
