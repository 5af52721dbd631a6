package testutil

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// PKI is a test certificate authority whose files live in a temporary
// directory: the CA certificate in CAFile, and each certificate it issues
// next to it.
type PKI struct {
	Dir    string
	CAFile string
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
}

// CertFiles are the PEM files of an issued certificate and its key.
type CertFiles struct{ CertFile, KeyFile string }

// Usages for Issue.
var (
	ServerAuth = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	ClientAuth = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	BothAuth   = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
)

// NewPKI makes a CA (ECDSA P-256, valid for a day) and writes its
// certificate to CAFile.
func NewPKI(tb testing.TB) *PKI {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign, IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	dir := tb.TempDir()
	p := &PKI{Dir: dir, CAFile: filepath.Join(dir, "ca.pem"), cert: cert, key: key}
	writePEM(tb, p.CAFile, "CERTIFICATE", der)
	return p
}

// Pool returns a pool holding the CA.
func (p *PKI) Pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(p.cert)
	return pool
}

// Issue makes a certificate for name with the given usages, valid for
// hosts (IP addresses or DNS names), and writes it and its key to
// <name>.pem and <name>-key.pem.
func (p *PKI) Issue(tb testing.TB, name string, usages []x509.ExtKeyUsage, hosts ...string) CertFiles {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: usages,
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.cert, &key.PublicKey, p.key)
	if err != nil {
		tb.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	f := CertFiles{CertFile: filepath.Join(p.Dir, name+".pem"), KeyFile: filepath.Join(p.Dir, name+"-key.pem")}
	writePEM(tb, f.CertFile, "CERTIFICATE", der)
	writePEM(tb, f.KeyFile, "PRIVATE KEY", kder)
	return f
}

// KeyPair loads the files as a tls.Certificate.
func (f CertFiles) KeyPair(tb testing.TB) tls.Certificate {
	tb.Helper()
	c, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

func writePEM(tb testing.TB, path, kind string, der []byte) {
	tb.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		tb.Fatal(err)
	}
}
