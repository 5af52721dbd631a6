package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/newsflow/newsflow/cmd/newsflow/nodeproc"
)

// TestClusterRaftPortRefusesStrangers runs three processes, whose Raft
// runs over mutual TLS by default: a raw TCP client that writes a Raft
// RPC, a TLS client with a certificate of its own and one with none are
// each refused before anything reaches Raft, and a node started with
// another cluster secret cannot join; the cluster's members, leader and
// term stay as they were.
func TestClusterRaftPortRefusesStrangers(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test skipped in -short mode")
	}
	tc := startTestCluster(t)
	before, err := tc.view("a")
	if err != nil {
		t.Fatal(err)
	}
	var raftAddr string
	for _, m := range before.Members {
		if m.ID == before.Leader {
			raftAddr = m.RaftAddr
		}
	}
	if raftAddr == "" {
		t.Fatalf("no leader's raft address in %+v", before)
	}

	// Raw TCP: a type byte and msgpack, as hashicorp/raft's transport
	// writes an AppendEntries. The node answers with nothing and closes.
	conn, err := net.DialTimeout("tcp", raftAddr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write(append([]byte{0}, []byte("\x86\xa4Term\xcf\x00\x00\x00\x00\x00\x00\x03\xe8\xa6Leader\xa4evil")...)); err != nil {
		t.Fatal(err)
	}
	reply, err := io.ReadAll(conn)
	conn.Close()
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the raft port kept a raw TCP connection open (read %q)", reply)
	}
	if len(reply) > 0 && reply[0] != 0x15 { // 0x15: a TLS alert record
		t.Errorf("the raft port answered a raw TCP RPC with %q", reply)
	}

	// TLS with a self-signed certificate, and with none.
	self := selfSigned(t)
	for name, certs := range map[string][]tls.Certificate{"self-signed": {self}, "no certificate": nil} {
		cfg := &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13,
			// Present the certificate whatever CAs the node asks for.
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
				if len(certs) == 0 {
					return &tls.Certificate{}, nil
				}
				return &certs[0], nil
			}}
		tconn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", raftAddr, cfg)
		if err == nil {
			// TLS 1.3: the client's certificate is checked after the
			// client's handshake ends; the refusal comes on the first read.
			tconn.SetDeadline(time.Now().Add(5 * time.Second))
			tconn.Write([]byte{0})
			_, err = tconn.Read(make([]byte, 1))
			tconn.Close()
		}
		if err == nil {
			t.Errorf("%s: the raft port took a TLS connection", name)
		} else {
			t.Logf("%s: refused: %v", name, err)
		}
	}

	// A node with another secret asks to join: it never becomes a member.
	other := startNodeEnv(t, t.TempDir(), []string{"NEWSFLOW_CLUSTER_SECRET=another-secret-entirely"},
		"--brokers", tc.brokers[0], "--node-id", "x", "--raft", nodeproc.FreeAddr(t, ""), "--join", raftOf(tc.nodes["a"]))
	deadline := time.Now().Add(8 * time.Second)
	for time.Now().Before(deadline) {
		v, err := tc.view("a")
		if err == nil && len(v.Members) != len(before.Members) {
			t.Fatalf("members %+v after a node with another secret asked to join", v.Members)
		}
		time.Sleep(200 * time.Millisecond)
	}
	other.Kill()
	after, err := tc.view("a")
	if err != nil {
		t.Fatal(err)
	}
	if after.Leader != before.Leader || len(after.Members) != len(before.Members) || !after.allRunning() {
		t.Errorf("cluster changed: before %+v, after %+v", before, after)
	}
}

// selfSigned returns a certificate no cluster CA signed.
func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "stranger"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth}, DNSNames: []string{"stranger"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
