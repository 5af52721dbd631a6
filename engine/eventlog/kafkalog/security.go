package kafkalog

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// TLSOptions configure TLS to the brokers. The zero value is plaintext.
type TLSOptions struct {
	// Enabled turns TLS on, with the system's roots unless CAFile is set.
	// Setting any file turns it on too.
	Enabled bool `yaml:"enabled"`
	// CAFile holds the CA certificates (PEM) the brokers' certificates
	// must chain to. Default: the system's roots.
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are a client certificate and its key (PEM), for
	// brokers that authenticate clients by certificate. Both or neither.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ServerName is the name the brokers' certificates must carry.
	// Default: the host of each broker's address.
	ServerName string `yaml:"server_name"`
}

// On reports whether TLS is used.
func (o TLSOptions) On() bool {
	return o.Enabled || o.CAFile != "" || o.CertFile != "" || o.KeyFile != ""
}

// Validate reports whether the settings are complete. The files are read
// by Open.
func (o TLSOptions) Validate() error {
	if (o.CertFile == "") != (o.KeyFile == "") {
		return errors.New("tls: cert_file and key_file go together")
	}
	if o.ServerName != "" && !o.On() {
		return errors.New("tls: server_name is set but tls is not enabled")
	}
	return nil
}

// config reads the files into a client TLS config (TLS 1.2 at least).
func (o TLSOptions) config() (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: o.ServerName}
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("tls: read ca_file: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls: ca_file %s holds no PEM certificate", o.CAFile)
		}
	}
	if o.CertFile != "" {
		pair, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("tls: load cert_file %s and key_file %s: %w", o.CertFile, o.KeyFile, err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c, nil
}

// ErrAuthentication is wrapped by Open's error when the brokers refuse
// the SASL login (wrong user, password or mechanism).
var ErrAuthentication = errors.New("kafka: authentication failed")

// saslWatch notes a SASL authentication that failed on the wire: a broker
// that refuses a login answers with an error code, or (some) closes the
// connection, which the client reports only as EOF.
type saslWatch struct{ failed atomic.Bool }

var _ kgo.HookBrokerRead = (*saslWatch)(nil)

func (w *saslWatch) OnBrokerRead(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err != nil && (key == kmsg.SASLAuthenticate.Int16() || key == kmsg.SASLHandshake.Int16()) {
		w.failed.Store(true)
	}
}

// SASL mechanisms.
const (
	SASLPlain       = "PLAIN"
	SASLScramSHA256 = "SCRAM-SHA-256"
	SASLScramSHA512 = "SCRAM-SHA-512"
)

// SASLOptions configure SASL authentication to the brokers. The zero value
// authenticates nothing.
type SASLOptions struct {
	// Mechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (any case); ""
	// for none. PLAIN sends the password as it is: use it over TLS.
	Mechanism string `yaml:"mechanism"`
	User      string `yaml:"user"`
	Password  string `yaml:"password"`
}

// On reports whether SASL is used.
func (o SASLOptions) On() bool { return o.Mechanism != "" }

// Validate reports whether the mechanism is known and has its user and
// password.
func (o SASLOptions) Validate() error {
	if !o.On() {
		if o.User != "" || o.Password != "" {
			return errors.New("sasl: user or password set without a mechanism (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)")
		}
		return nil
	}
	switch strings.ToUpper(o.Mechanism) {
	case SASLPlain, SASLScramSHA256, SASLScramSHA512:
	default:
		return fmt.Errorf("sasl: mechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", o.Mechanism)
	}
	if o.User == "" || o.Password == "" {
		return fmt.Errorf("sasl: mechanism %s needs a user and a password", strings.ToUpper(o.Mechanism))
	}
	return nil
}

// mechanism returns the franz-go mechanism; o is valid and on.
func (o SASLOptions) mechanism() sasl.Mechanism {
	switch strings.ToUpper(o.Mechanism) {
	case SASLPlain:
		return plain.Auth{User: o.User, Pass: o.Password}.AsMechanism()
	case SASLScramSHA256:
		return scram.Auth{User: o.User, Pass: o.Password}.AsSha256Mechanism()
	default:
		return scram.Auth{User: o.User, Pass: o.Password}.AsSha512Mechanism()
	}
}

// securityOpts returns the client options for TLS and SASL, reading the
// TLS files.
func (o Options) securityOpts() ([]kgo.Opt, error) {
	var opts []kgo.Opt
	if o.TLS.On() {
		c, err := o.TLS.config()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(c))
	}
	if o.SASL.On() {
		opts = append(opts, kgo.SASL(o.SASL.mechanism()))
	}
	return opts, nil
}
