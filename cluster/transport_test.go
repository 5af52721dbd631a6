package cluster

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
	"go.uber.org/goleak"

	"github.com/newsflow/newsflow/internal/meta"
	"github.com/newsflow/newsflow/internal/testutil"
	"github.com/newsflow/newsflow/state"
)

// Every node holding the secret derives the same CA, to the byte; another
// secret gives another key; a leaf verifies only against its own CA.
func TestDerivedCA(t *testing.T) {
	a1, err := deriveCA("secret one")
	if err != nil {
		t.Fatal(err)
	}
	a2, _ := deriveCA("secret one")
	b, _ := deriveCA("secret two")
	if !bytes.Equal(a1.cert.Raw, a2.cert.Raw) || !a1.key.Equal(a2.key) {
		t.Fatal("one secret derived two CAs")
	}
	if a1.key.Equal(b.key) || bytes.Equal(a1.cert.Raw, b.cert.Raw) {
		t.Fatal("two secrets derived one CA")
	}
	if _, err := deriveCA(""); err == nil {
		t.Fatal("derived a CA from an empty secret")
	}
	leaf, err := a1.issue("n1", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	verify := func(ca *derivedCA) error {
		pool := x509.NewCertPool()
		pool.AddCert(ca.cert)
		for _, u := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
			if _, err := leaf.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: derivedServerName, KeyUsages: []x509.ExtKeyUsage{u}}); err != nil {
				return err
			}
		}
		return nil
	}
	if err := verify(a2); err != nil {
		t.Fatalf("leaf against the CA of its secret: %v", err)
	}
	if err := verify(b); err == nil {
		t.Fatal("leaf verified against another secret's CA")
	}
	if leaf.Leaf.Subject.CommonName != "n1" {
		t.Fatalf("leaf names %q", leaf.Leaf.Subject.CommonName)
	}
}

// A node keeps its leaf until half its lifetime has passed, then issues
// itself a new one.
func TestLeafRenewal(t *testing.T) {
	ca, _ := deriveCA("s")
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	iss := &leafIssuer{ca: ca, id: "n", now: func() time.Time { return now }}
	first, err := iss.certificate()
	if err != nil {
		t.Fatal(err)
	}
	now = now.Add(leafLifetime/2 - time.Minute)
	if c, _ := iss.certificate(); c != first {
		t.Fatal("renewed before half the lifetime")
	}
	now = now.Add(2 * time.Minute)
	second, _ := iss.certificate()
	if second == first || !second.Leaf.NotAfter.After(first.Leaf.NotAfter) {
		t.Fatalf("not renewed after half the lifetime: %v then %v", first.Leaf.NotAfter, second.Leaf.NotAfter)
	}
	if !now.After(second.Leaf.NotBefore) || !now.Before(second.Leaf.NotAfter) {
		t.Fatalf("renewed leaf [%v, %v] does not cover %v", second.Leaf.NotBefore, second.Leaf.NotAfter, now)
	}
}

// raftState is what an attack must not change.
type raftState struct {
	term, lastIndex, commitIndex, applied string
	servers                               []raft.Server
}

func stateOf(t *testing.T, m *testMember) raftState {
	t.Helper()
	st := m.node.raft.Stats()
	f := m.node.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		t.Fatal(err)
	}
	return raftState{st["term"], st["last_log_index"], st["commit_index"], st["applied_index"], f.Configuration().Servers}
}

func (s raftState) String() string {
	return fmt.Sprintf("term %s, last %s, commit %s, applied %s, servers %v", s.term, s.lastIndex, s.commitIndex, s.applied, s.servers)
}

func (s raftState) equal(o raftState) bool {
	if s.term != o.term || s.lastIndex != o.lastIndex || s.commitIndex != o.commitIndex || s.applied != o.applied || len(s.servers) != len(o.servers) {
		return false
	}
	for i := range s.servers {
		if s.servers[i] != o.servers[i] {
			return false
		}
	}
	return true
}

// evilRPCs encodes, as raft's NetworkTransport does (a type byte, then
// msgpack), an AppendEntries from a leader of a newer term that appends
// and commits an admin account, and a RequestVote of a still newer term.
func evilRPCs(t *testing.T, m *testMember) (appendEntries, requestVote []byte) {
	t.Helper()
	st := m.node.raft.Stats()
	term, _ := strconv.ParseUint(st["term"], 10, 64)
	last, _ := strconv.ParseUint(st["last_log_index"], 10, 64)
	lastTerm, _ := strconv.ParseUint(st["last_log_term"], 10, 64)
	cmd, _ := json.Marshal(Command{Op: OpMetaPut, Collection: "users", Key: "mallory", Value: []byte(`{"role":"admin"}`)})
	hdr := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("mallory"), Addr: []byte("10.6.6.6:7000")}
	enc := func(rpcType byte, v any) []byte {
		var buf bytes.Buffer
		buf.WriteByte(rpcType)
		if err := codec.NewEncoder(&buf, &codec.MsgpackHandle{}).Encode(v); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	appendEntries = enc(0, &raft.AppendEntriesRequest{
		RPCHeader: hdr, Term: term + 1, PrevLogEntry: last, PrevLogTerm: lastTerm,
		Entries:           []*raft.Log{{Index: last + 1, Term: term + 1, Type: raft.LogCommand, Data: cmd}},
		LeaderCommitIndex: last + 1,
	})
	requestVote = enc(1, &raft.RequestVoteRequest{RPCHeader: hdr, Term: term + 10, LastLogIndex: last + 100, LastLogTerm: term + 10})
	return appendEntries, requestVote
}

// startSettled starts a one-node cluster and waits until it has nothing
// left to apply on its own.
func startSettled(t *testing.T, o memberOptions) *testMember {
	t.Helper()
	m := startMemberWith(t, o, "a", t.TempDir(), "127.0.0.1:0", "127.0.0.1:0", true)
	waitFor(t, 15*time.Second, "a settled one-node cluster", func() error {
		if _, err := owners(m); err != nil {
			return err
		}
		if st := m.node.raft.Stats(); st["applied_index"] != st["last_log_index"] {
			return fmt.Errorf("applied %s of %s", st["applied_index"], st["last_log_index"])
		}
		return nil
	})
	return m
}

func hasMallory(m *testMember) bool {
	_, ok, _ := meta.NewLocal(m.db).Get(context.Background(), "users", "mallory")
	return ok
}

// waitClosed reads from c until the other end closes it, and fails if it
// stays open for timeout or sends anything.
func waitClosed(t *testing.T, c net.Conn, timeout time.Duration) error {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(timeout))
	buf := make([]byte, 512)
	n, err := c.Read(buf)
	if n > 0 {
		t.Fatalf("the node answered %d bytes: %q", n, buf[:n])
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the node kept the connection open for %s", timeout)
	}
	if err == nil {
		t.Fatal("read returned no error and no data")
	}
	return err
}

// The attack works over plain TCP: an AppendEntries written by anyone who
// reaches the port puts an admin account in the metadata. This is what
// the TLS transport is for, and the check that the RPC below is well
// formed.
func TestPlainRaftAcceptsForgedAppend(t *testing.T) {
	if testing.Short() {
		t.Skip("Raft node test")
	}
	m := startSettled(t, memberOptions{plainTCP: true})
	ae, _ := evilRPCs(t, m)
	c, err := net.Dial("tcp", m.raftAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(ae); err != nil {
		t.Fatal(err)
	}
	dec := codec.NewDecoder(c, &codec.MsgpackHandle{})
	var rpcErr string
	var resp raft.AppendEntriesResponse
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if err := dec.Decode(&rpcErr); err != nil {
		t.Fatal(err)
	}
	if err := dec.Decode(&resp); err != nil {
		t.Fatal(err)
	}
	if rpcErr != "" || !resp.Success {
		t.Fatalf("forged append refused over plain TCP: %q %+v", rpcErr, resp)
	}
	waitFor(t, 10*time.Second, "the forged account applied", func() error {
		if !hasMallory(m) {
			return errors.New("not yet")
		}
		return nil
	})
}

// Over the TLS transport the same bytes change nothing and the node
// closes the connection; so does a client that says nothing.
func TestRaftRefusesRawTCP(t *testing.T) {
	if testing.Short() {
		t.Skip("Raft node test")
	}
	m := startSettled(t, memberOptions{})
	before := stateOf(t, m)
	ae, rv := evilRPCs(t, m)
	for _, rpc := range [][]byte{ae, rv} {
		c, err := net.Dial("tcp", m.raftAddr)
		if err != nil {
			t.Fatal(err)
		}
		c.Write(rpc)
		waitClosed(t, c, 10*time.Second)
		c.Close()
	}
	// A client that connects and says nothing is closed after the
	// handshake timeout.
	silent, err := net.Dial("tcp", m.raftAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	start := time.Now()
	waitClosed(t, silent, 30*time.Second)
	t.Logf("silent client closed after %s", time.Since(start))
	waitFor(t, 5*time.Second, "three refusals counted", func() error {
		if n := m.node.RefusedConnections(); n < 3 {
			return fmt.Errorf("%d refused", n)
		}
		return nil
	})
	if after := stateOf(t, m); !after.equal(before) {
		t.Fatalf("raft state changed:\nbefore %v\nafter  %v", before, after)
	}
	if hasMallory(m) || !m.node.IsLeader() {
		t.Fatalf("forged account %v, still leader %v", hasMallory(m), m.node.IsLeader())
	}
}

// selfSigned returns a certificate for derivedServerName signed by its own
// key, with the usages a node's has.
func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "a"}, DNSNames: []string{derivedServerName},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, priv)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: priv}
}

// A TLS client without a certificate of the cluster's CA cannot get a
// Raft RPC through, nor read anything: the node ends the handshake with
// an alert and closes the connection, and its Raft state is unchanged.
func TestRaftRefusesUnauthenticatedTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("Raft node test")
	}
	m := startSettled(t, memberOptions{})
	before := stateOf(t, m)
	ae, _ := evilRPCs(t, m)
	other, _ := deriveCA("another cluster's secret")
	otherLeaf, err := other.issue("a", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	self := selfSigned(t)
	cases := []struct {
		name string
		cert *tls.Certificate
		want string // the server's alert
	}{
		{"another secret's certificate", otherLeaf, "unknown certificate authority"},
		{"no certificate", &tls.Certificate{}, "certificate required"},
		{"self-signed", &self, "unknown certificate authority"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			refused := m.node.RefusedConnections()
			// The attacker does not care who the server is, and sends its
			// certificate whatever CAs the server names.
			c, err := tls.Dial("tcp", m.raftAddr, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13,
				GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return tc.cert, nil }})
			if err == nil {
				// TLS 1.3: the client's side may finish before the
				// server has checked the client's certificate.
				c.Write(ae)
				err = waitClosed(t, c, 10*time.Second)
				c.Close()
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want the alert %q, got %v", tc.want, err)
			}
			t.Logf("refused: %v", err)
			waitFor(t, 5*time.Second, "the refusal counted", func() error {
				if m.node.RefusedConnections() == refused {
					return errors.New("not counted")
				}
				return nil
			})
		})
	}
	// The node's own certificate does not verify for a client that trusts
	// another cluster's CA: the attacker cannot pose as this cluster to
	// its members either.
	pool := x509.NewCertPool()
	pool.AddCert(other.cert)
	if c, err := tls.Dial("tcp", m.raftAddr, &tls.Config{RootCAs: pool, ServerName: derivedServerName, Certificates: []tls.Certificate{*otherLeaf}}); err == nil {
		c.Close()
		t.Fatal("the node's certificate verified against another secret's CA")
	}
	if after := stateOf(t, m); !after.equal(before) || hasMallory(m) {
		t.Fatalf("raft state changed:\nbefore %v\nafter  %v", before, after)
	}
}

// A node started with another secret cannot join: its join request does
// not get past the Raft port's handshake, and even added to the Raft configuration by the leader it is
// never sent the log and the leader accepts nothing from it.
func TestOtherSecretCannotJoin(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-node Raft test")
	}
	a := startSettled(t, memberOptions{})
	x := startMemberWith(t, memberOptions{secret: "not the cluster's secret"}, "x", t.TempDir(), "127.0.0.1:0", "127.0.0.1:0", false, a.raftAddr)
	// Past that check (as if it were not there): the leader adds x as
	// a non-voter, which it then tries to replicate to.
	a.node.mu.Lock()
	a.node.added["x"] = time.Now()
	a.node.mu.Unlock()
	if err := a.node.raft.AddNonvoter("x", raft.ServerAddress(x.raftAddr), 0, 5*time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := a.node.Meta().Put(ctx, "users", "ann", []byte("v")); err != nil {
		t.Fatal(err)
	}
	// x refuses the leader's connections (a's certificate is not of x's
	// CA, nor x's of a's): count a few attempts.
	waitFor(t, 20*time.Second, "the leader's connections refused by x", func() error {
		if n := x.node.RefusedConnections(); n < 3 {
			return fmt.Errorf("%d refused", n)
		}
		return nil
	})
	if st := x.node.raft.Stats(); st["last_log_index"] != "0" || st["commit_index"] != "0" {
		t.Fatalf("x received the log: %v", st)
	}
	if v, ok, _ := meta.NewLocal(x.db).Get(ctx, "users", "ann"); ok {
		t.Fatalf("x has the cluster's metadata: %q", v)
	}
	if xs, _ := x.node.State(); len(xs.Members) != 0 {
		t.Fatalf("x sees members %v", xs.Members)
	}
	if as, _ := a.node.State(); len(as.Members) != 1 {
		t.Fatalf("the cluster's members: %v", as.Members)
	}
	if !a.node.IsLeader() {
		t.Fatal("a lost its leadership")
	}
}

// memberTLS is the TLSConfig of a member with certificate files f.
func memberTLS(pki *testutil.PKI, f testutil.CertFiles) TLSConfig {
	return TLSConfig{CertFile: f.CertFile, KeyFile: f.KeyFile, CAFile: pki.CAFile}
}

// With configured certificates three nodes form a cluster and replicate
// metadata; a client with a certificate of another CA is refused.
func TestClusterConfiguredCertificates(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-node Raft test")
	}
	pki := testutil.NewPKI(t)
	const name = "raft.example.internal"
	a := startMemberWith(t, memberOptions{tls: memberTLS(pki, pki.Issue(t, "a", testutil.BothAuth, "127.0.0.1", name))},
		"a", t.TempDir(), "127.0.0.1:0", "127.0.0.1:0", true)
	b := startMemberWith(t, memberOptions{tls: memberTLS(pki, pki.Issue(t, "b", testutil.BothAuth, "127.0.0.1", name))},
		"b", t.TempDir(), "127.0.0.1:0", "127.0.0.1:0", false, a.raftAddr)
	// c checks the name rather than the address it dials.
	ctls := memberTLS(pki, pki.Issue(t, "c", testutil.BothAuth, "127.0.0.1", name))
	ctls.ServerName = name
	c := startMemberWith(t, memberOptions{tls: ctls}, "c", t.TempDir(), "127.0.0.1:0", "127.0.0.1:0", false, a.raftAddr)
	all := []*testMember{a, b, c}
	waitFor(t, 15*time.Second, "three members", func() error {
		for _, m := range all {
			if cnt, err := owners(m); err != nil || len(cnt) != 3 {
				return fmt.Errorf("%s: owners %v %v", m.id, cnt, err)
			}
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.node.Apply(ctx, Command{Op: OpMetaPut, Collection: "users", Key: "ann", Value: []byte("v1")}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "replicated user", func() error {
		for _, m := range all {
			if v, ok, _ := meta.NewLocal(m.db).Get(ctx, "users", "ann"); !ok || string(v) != "v1" {
				return fmt.Errorf("%s has %q", m.id, v)
			}
		}
		return nil
	})
	// A certificate of another CA, for the right address, is refused.
	pair := testutil.NewPKI(t).Issue(t, "s", testutil.BothAuth, "127.0.0.1").KeyPair(t)
	refused := a.node.RefusedConnections()
	conn, err := tls.Dial("tcp", a.raftAddr, &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS13})
	if err == nil {
		conn.Write([]byte{0})
		waitClosed(t, conn, 10*time.Second)
		conn.Close()
	}
	waitFor(t, 5*time.Second, "the stranger refused", func() error {
		if a.node.RefusedConnections() == refused {
			return errors.New("not counted")
		}
		return nil
	})
}

func openTestDB(t *testing.T, dir string) *state.DB {
	t.Helper()
	db, err := state.Open(filepath.Join(dir, "state"), state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// Incomplete or unusable certificate settings fail at start with the
// file and the reason.
func TestConfiguredCertificatesErrors(t *testing.T) {
	pki := testutil.NewPKI(t)
	good := memberTLS(pki, pki.Issue(t, "n", testutil.BothAuth, "127.0.0.1"))
	serverOnly := pki.Issue(t, "srv", testutil.ServerAuth, "127.0.0.1")
	foreign := testutil.NewPKI(t).Issue(t, "f", testutil.BothAuth, "127.0.0.1")
	garbage := filepath.Join(t.TempDir(), "garbage.pem")
	os.WriteFile(garbage, []byte("not a certificate"), 0o600)
	with := func(f func(*TLSConfig)) TLSConfig { c := good; f(&c); return c }
	cases := []struct {
		name string
		tls  TLSConfig
		want string
	}{
		{"cert without key and ca", TLSConfig{CertFile: good.CertFile}, "go together"},
		{"server name alone", TLSConfig{ServerName: "x"}, "server_name is set"},
		{"missing ca", with(func(c *TLSConfig) { c.CAFile = filepath.Join(pki.Dir, "nope.pem") }), "read ca_file"},
		{"ca without certificates", with(func(c *TLSConfig) { c.CAFile = garbage }), "holds no PEM certificate"},
		{"missing key", with(func(c *TLSConfig) { c.KeyFile = filepath.Join(pki.Dir, "nope.pem") }), "load cert_file"},
		{"key of another cert", with(func(c *TLSConfig) { c.KeyFile = foreign.KeyFile }), "load cert_file"},
		{"cert of another ca", with(func(c *TLSConfig) { c.CertFile, c.KeyFile = foreign.CertFile, foreign.KeyFile }), "does not verify against ca_file"},
		{"no client usage", with(func(c *TLSConfig) { c.CertFile, c.KeyFile = serverOnly.CertFile, serverOnly.KeyFile }), "for client authentication"},
		{"name not in cert", with(func(c *TLSConfig) { c.ServerName = "raft.example.internal" }), "raft.example.internal"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			db := openTestDB(t, dir)
			_, err := Start(context.Background(), Config{ID: "n", RaftAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:1", Dir: filepath.Join(dir, "cluster"),
				Bootstrap: true, Secret: testSecret, TLS: tc.tls, Meta: meta.NewLocal(db), Logger: slog.New(slog.DiscardHandler)})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// The stream layer bounds the handshakes in progress: silent clients get
// a slot each until none is left, the next is closed at once, and Close
// ends the ones waiting.
func TestStreamLayerBoundsHandshakes(t *testing.T) {
	// Close leaves no goroutine of the stream layer behind.
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	id, err := newRaftTLS(TLSConfig{}, testSecret, "n")
	if err != nil {
		t.Fatal(err)
	}
	s, err := listenStream("127.0.0.1:0", nil, id, time.Hour, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var silent []net.Conn
	defer func() {
		for _, c := range silent {
			c.Close()
		}
	}()
	for range maxHandshakes {
		c, err := net.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		silent = append(silent, c)
	}
	waitFor(t, 10*time.Second, "every slot taken", func() error {
		if n := len(s.slots); n != maxHandshakes {
			return fmt.Errorf("%d handshakes in progress", n)
		}
		return nil
	})
	extra, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	if err := waitClosed(t, extra, 10*time.Second); !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !strings.Contains(err.Error(), "reset") {
		t.Fatalf("extra connection: %v", err)
	}
	if n := s.rejected.Load(); n != 1 {
		t.Fatalf("%d refused, want 1", n)
	}
	// Close cancels the waiting handshakes and waits for them.
	s.Close()
	if n := len(s.slots); n != 0 {
		t.Fatalf("%d handshakes still in progress after Close", n)
	}
	for _, c := range silent[:3] {
		waitClosed(t, c, 10*time.Second)
	}
	if _, err := s.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close: %v", err)
	}
}
