package kafkalog_test

import (
	"context"
	"crypto/tls"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/newsflow/newsflow/engine/eventlog"
	"github.com/newsflow/newsflow/engine/eventlog/kafkalog"
	"github.com/newsflow/newsflow/internal/testutil"
)

func TestSecurityOptionsValidate(t *testing.T) {
	base := kafkalog.Options{Brokers: []string{"k:9092"}}
	with := func(tls kafkalog.TLSOptions, sasl kafkalog.SASLOptions) kafkalog.Options {
		o := base
		o.TLS, o.SASL = tls, sasl
		return o
	}
	none := kafkalog.TLSOptions{}
	cases := []struct {
		name string
		o    kafkalog.Options
		want string // "" valid
	}{
		{"plaintext", base, ""},
		{"scram lower case", with(none, kafkalog.SASLOptions{Mechanism: "scram-sha-512", User: "u", Password: "p"}), ""},
		{"plain over tls", with(kafkalog.TLSOptions{Enabled: true, ServerName: "k"}, kafkalog.SASLOptions{Mechanism: "PLAIN", User: "u", Password: "p"}), ""},
		{"unknown mechanism", with(none, kafkalog.SASLOptions{Mechanism: "GSSAPI", User: "u", Password: "p"}), `mechanism "GSSAPI": want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512`},
		{"no user", with(none, kafkalog.SASLOptions{Mechanism: "PLAIN", Password: "p"}), "needs a user and a password"},
		{"no password", with(none, kafkalog.SASLOptions{Mechanism: "SCRAM-SHA-256", User: "u"}), "needs a user and a password"},
		{"user without mechanism", with(none, kafkalog.SASLOptions{User: "u", Password: "p"}), "without a mechanism"},
		{"cert without key", with(kafkalog.TLSOptions{CertFile: "c.pem"}, kafkalog.SASLOptions{}), "cert_file and key_file go together"},
		{"server name without tls", with(kafkalog.TLSOptions{ServerName: "k"}, kafkalog.SASLOptions{}), "tls is not enabled"},
	}
	for _, tc := range cases {
		err := tc.o.Validate()
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
		if tc.want != "" {
			// Open refuses it before connecting to anything.
			if _, err := kafkalog.Open(testCtx(t), tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: open: %v", tc.name, err)
			}
		}
	}
}

// secureCluster is a kfake cluster that wants TLS with a client
// certificate of pki, and SASL with these users.
func secureCluster(t *testing.T, pki *testutil.PKI) *kfake.Cluster {
	t.Helper()
	srv := pki.Issue(t, "broker", testutil.ServerAuth, "127.0.0.1").KeyPair(t)
	c, err := kfake.NewCluster(kfake.NumBrokers(1),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{srv}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pki.Pool(), MinVersion: tls.VersionTLS12}),
		kfake.EnableSASL(),
		kfake.Superuser("SCRAM-SHA-256", "scram256", "pw-256"),
		kfake.Superuser("SCRAM-SHA-512", "scram512", "pw-512"),
		kfake.Superuser("PLAIN", "plain", "pw-plain"),
	)
	if err != nil {
		t.Fatalf("start kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// Each mechanism over TLS with a client certificate: the log creates a
// topic, appends and reads back (the readers' own clients authenticate
// the same way).
func TestOpenTLSAndSASL(t *testing.T) {
	pki := testutil.NewPKI(t)
	c := secureCluster(t, pki)
	client := pki.Issue(t, "newsflow", testutil.ClientAuth)
	tlsOpts := kafkalog.TLSOptions{CAFile: pki.CAFile, CertFile: client.CertFile, KeyFile: client.KeyFile}
	for _, sasl := range []kafkalog.SASLOptions{
		{Mechanism: "SCRAM-SHA-256", User: "scram256", Password: "pw-256"},
		{Mechanism: "SCRAM-SHA-512", User: "scram512", Password: "pw-512"},
		{Mechanism: "PLAIN", User: "plain", Password: "pw-plain"},
	} {
		t.Run(sasl.Mechanism, func(t *testing.T) {
			l, err := kafkalog.Open(testCtx(t), kafkalog.Options{Brokers: c.ListenAddrs(), TLS: tlsOpts, SASL: sasl})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			topic := "t-" + strings.ToLower(sasl.Mechanism)
			createTopic(t, l, topic, 2)
			want := []string{"a", "b", "c"}
			var recs []*eventlog.Record
			for _, v := range want {
				recs = append(recs, &eventlog.Record{Topic: topic, Partition: 1, Value: []byte(v)})
			}
			if err := l.Append(testCtx(t), recs); err != nil {
				t.Fatal(err)
			}
			got := testutil.ReadTopic(t, l, topic)
			if len(got) != len(want) {
				t.Fatalf("read %d records, want %d", len(got), len(want))
			}
			for i, r := range got {
				if string(r.Value) != want[i] || r.Partition != 1 || r.Offset != int64(i) {
					t.Fatalf("record %d: %+v", i, r)
				}
			}
		})
	}
}

// A wrong password, a missing client certificate, plaintext to a TLS
// broker and unreadable files fail Open with the reason.
func TestOpenSecurityErrors(t *testing.T) {
	pki := testutil.NewPKI(t)
	c := secureCluster(t, pki)
	client := pki.Issue(t, "newsflow", testutil.ClientAuth)
	good := kafkalog.TLSOptions{CAFile: pki.CAFile, CertFile: client.CertFile, KeyFile: client.KeyFile}
	scram := kafkalog.SASLOptions{Mechanism: "SCRAM-SHA-256", User: "scram256", Password: "pw-256"}
	open := func(tlsOpts kafkalog.TLSOptions, sasl kafkalog.SASLOptions) error {
		ctx, cancel := context.WithTimeout(testCtx(t), 5*time.Second)
		defer cancel()
		l, err := kafkalog.Open(ctx, kafkalog.Options{Brokers: c.ListenAddrs(), TLS: tlsOpts, SASL: sasl})
		if err == nil {
			l.Close()
		}
		return err
	}

	wrong := scram
	wrong.Password = "guess"
	err := open(good, wrong)
	if !errors.Is(err, kafkalog.ErrAuthentication) || !strings.Contains(err.Error(), `refused the SCRAM-SHA-256 login of user "scram256"`) {
		t.Fatalf("wrong password: %v", err)
	}
	plainWrong := kafkalog.SASLOptions{Mechanism: "plain", User: "plain", Password: "guess"}
	if err := open(good, plainWrong); !errors.Is(err, kafkalog.ErrAuthentication) || !strings.Contains(err.Error(), "refused the PLAIN login") {
		t.Fatalf("wrong PLAIN password: %v", err)
	}
	// The right password under another mechanism is no login either.
	if err := open(good, kafkalog.SASLOptions{Mechanism: "SCRAM-SHA-512", User: "scram256", Password: "pw-256"}); !errors.Is(err, kafkalog.ErrAuthentication) {
		t.Fatalf("other mechanism: %v", err)
	}
	if err := open(kafkalog.TLSOptions{CAFile: pki.CAFile}, scram); err == nil || errors.Is(err, kafkalog.ErrAuthentication) {
		t.Fatal("connected without the client certificate the broker asks for")
	}
	if err := open(kafkalog.TLSOptions{}, scram); err == nil {
		t.Fatal("connected in plaintext to a TLS broker")
	}
	// A broker certificate of another CA does not verify.
	other := testutil.NewPKI(t)
	if err := open(kafkalog.TLSOptions{CAFile: other.CAFile, CertFile: client.CertFile, KeyFile: client.KeyFile}, scram); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("broker certificate of another CA: %v", err)
	}
	missing := filepath.Join(t.TempDir(), "missing.pem")
	for _, tc := range []struct {
		tls  kafkalog.TLSOptions
		want string
	}{
		{kafkalog.TLSOptions{CAFile: missing}, "read ca_file"},
		{kafkalog.TLSOptions{CAFile: client.KeyFile}, "holds no PEM certificate"},
		{kafkalog.TLSOptions{CertFile: client.CertFile, KeyFile: missing}, "load cert_file"},
	} {
		if err := open(tc.tls, scram); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.tls, err, tc.want)
		}
	}
}
