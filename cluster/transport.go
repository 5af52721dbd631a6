package cluster

// The Raft transport: hashicorp/raft's NetworkTransport over a stream layer
// of mutually authenticated TLS 1.3.
//
// Threat model. Whoever reaches a node's Raft address can, over plain TCP,
// send any Raft RPC: an AppendEntries with a higher term makes the node a
// follower of the sender and applies whatever entries it carries (members,
// partition owners, accounts, admin roles, sources), and a reader of the
// traffic sees every replicated value (sessions, password hashes). The TLS
// stream layer closes that: a connection reaches Raft only once both ends
// have shown a certificate that chains to the cluster's CA, so a peer that
// holds neither the cluster secret nor a certificate of the configured CA
// can neither append, vote, install a snapshot nor read, and a node never
// sends its log to a peer that cannot prove itself. The traffic is
// encrypted and integrity-protected. A connection that has not finished its
// handshake within the handshake timeout is closed, and at most
// maxHandshakes are in progress at once, so silent or slow clients cannot
// pin goroutines.
//
// What it does not cover: a holder of the cluster secret (or of a node's
// key, with configured certificates) is a member and may do what a member
// does; a flood of connections can delay peers' handshakes (availability is
// the network's to protect: keep the Raft port private). With derived
// certificates the CA key is derived from the secret, and a node shows its
// certificate to any client before the client has proved anything (TLS
// 1.3 order), so a guessable secret can be found offline: use a long random
// one (e.g. openssl rand -hex 32). The members' internal API
// (internal.go) shares the port and its handshake; the stream layer tells
// its connections from Raft's by their first byte.
//
// Certificates. Without configured files every node derives the same CA
// from the cluster secret (an Ed25519 key from HKDF-SHA256, and a
// certificate built from fixed fields, so the same bytes everywhere) and
// issues itself a short-lived leaf signed by it at start, renewed while it
// runs; peers verify the chain against the derived CA and the fixed name
// derivedServerName. With TLSConfig's files, the node's certificate and key
// and the CA that signs every member's certificate are the operator's; the
// dialed host (or TLSConfig.ServerName) must be in the peer's certificate.

import (
	"bufio"
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// TLSConfig gives a node's Raft transport its own certificates. The zero
// value derives them from the cluster secret.
type TLSConfig struct {
	// CertFile and KeyFile are the node's certificate (PEM, with any
	// intermediates) and private key. The certificate must allow both
	// server and client authentication: a node is both to its peers.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// CAFile holds the CA certificates (PEM) that sign every member's
	// certificate; peers must chain to one of them.
	CAFile string `yaml:"ca_file"`
	// ServerName, if set, is the name every peer's certificate must carry
	// (instead of the host of the address dialed).
	ServerName string `yaml:"server_name"`
}

// configured reports whether any file is set.
func (c TLSConfig) configured() bool {
	return c.CertFile != "" || c.KeyFile != "" || c.CAFile != ""
}

// Validate reports whether the settings are complete: all three files or
// none.
func (c TLSConfig) Validate() error {
	if !c.configured() {
		if c.ServerName != "" {
			return errors.New("cluster: tls.server_name is set but tls.cert_file, key_file and ca_file are not (derived certificates have their own name)")
		}
		return nil
	}
	if c.CertFile == "" || c.KeyFile == "" || c.CAFile == "" {
		return errors.New("cluster: tls.cert_file, tls.key_file and tls.ca_file go together: set all three, or none to derive certificates from the secret")
	}
	return nil
}

const (
	// derivedServerName is the name in every derived leaf, and the name
	// peers check.
	derivedServerName = "raft.newsflow.cluster"
	// leafLifetime is a derived leaf's validity; a node issues itself a
	// new one once half of it has passed. A leaf is back-dated by
	// leafBackdate, for peers whose clock is behind.
	leafLifetime = 7 * 24 * time.Hour
	leafBackdate = time.Hour
	// maxHandshakes bounds the inbound handshakes in progress; a
	// connection over it is closed at once.
	maxHandshakes = 64
	// minHandshakeTimeout is the shortest time an inbound connection has
	// to complete its handshake.
	minHandshakeTimeout = 2 * time.Second
)

// raftTLS is a node's TLS identity: its certificate source and the pool
// of CAs its peers must chain to.
type raftTLS struct {
	pool       *x509.CertPool
	serverName string // "" checks the dialed host
	cert       func() (*tls.Certificate, error)
}

// newRaftTLS loads the configured certificates, or derives them from
// secret. id names the node in a derived leaf.
func newRaftTLS(c TLSConfig, secret, id string) (*raftTLS, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if !c.configured() {
		ca, err := deriveCA(secret)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		pool.AddCert(ca.cert)
		iss := &leafIssuer{ca: ca, id: id, now: time.Now}
		if _, err := iss.certificate(); err != nil {
			return nil, err
		}
		return &raftTLS{pool: pool, serverName: derivedServerName, cert: iss.certificate}, nil
	}
	pair, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("cluster: tls: load cert_file %s and key_file %s: %w", c.CertFile, c.KeyFile, err)
	}
	pem, err := os.ReadFile(c.CAFile)
	if err != nil {
		return nil, fmt.Errorf("cluster: tls: read ca_file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("cluster: tls: ca_file %s holds no PEM certificate", c.CAFile)
	}
	// A certificate its peers would refuse is an error now, not a
	// handshake failure on every connection later.
	inter := x509.NewCertPool()
	for _, der := range pair.Certificate[1:] {
		if ic, err := x509.ParseCertificate(der); err == nil {
			inter.AddCert(ic)
		}
	}
	leaf := pair.Leaf
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			return nil, fmt.Errorf("cluster: tls: cert_file %s does not verify against ca_file %s for %s: %w",
				c.CertFile, c.CAFile, usageName(usage), err)
		}
	}
	if c.ServerName != "" {
		if err := leaf.VerifyHostname(c.ServerName); err != nil {
			return nil, fmt.Errorf("cluster: tls: cert_file %s: %w", c.CertFile, err)
		}
	}
	return &raftTLS{pool: pool, serverName: c.ServerName, cert: func() (*tls.Certificate, error) { return &pair, nil }}, nil
}

func usageName(u x509.ExtKeyUsage) string {
	if u == x509.ExtKeyUsageServerAuth {
		return "server authentication"
	}
	return "client authentication"
}

// serverConfig is the listener's side: TLS 1.3, and a client certificate
// that chains to the pool is required.
func (r *raftTLS) serverConfig() *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS13,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return r.cert() },
		ClientAuth:     tls.RequireAndVerifyClientCert,
		ClientCAs:      r.pool,
	}
}

// clientConfig is the dialer's side for a peer at host.
func (r *raftTLS) clientConfig(host string) *tls.Config {
	name := r.serverName
	if name == "" {
		name = host
	}
	return &tls.Config{
		MinVersion:           tls.VersionTLS13,
		RootCAs:              r.pool,
		ServerName:           name,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return r.cert() },
	}
}

// derivedCA is the cluster CA derived from the secret.
type derivedCA struct {
	key  ed25519.PrivateKey
	cert *x509.Certificate
}

// deriveCA derives the cluster CA from secret: the same key and the same
// certificate bytes on every node that holds it.
func deriveCA(secret string) (*derivedCA, error) {
	if secret == "" {
		return nil, errors.New("cluster: a secret is required to derive the Raft certificates")
	}
	seed, err := hkdf.Key(sha256.New, []byte(secret), []byte("newsflow cluster"), "raft ca ed25519 v1", ed25519.SeedSize)
	if err != nil {
		return nil, fmt.Errorf("cluster: derive the raft ca: %w", err)
	}
	key := ed25519.NewKeyFromSeed(seed)
	serial, err := hkdf.Key(sha256.New, []byte(secret), []byte("newsflow cluster"), "raft ca serial v1", 16)
	if err != nil {
		return nil, fmt.Errorf("cluster: derive the raft ca: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          new(big.Int).SetBytes(serial),
		Subject:               pkix.Name{Organization: []string{"newsflow"}, CommonName: "newsflow cluster raft CA"},
		NotBefore:             time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC),
		NotAfter:              time.Date(2124, 1, 1, 0, 0, 0, 0, time.UTC),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	// Ed25519 signatures are deterministic: the certificate is the same
	// bytes wherever it is made.
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("cluster: derive the raft ca: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("cluster: derive the raft ca: %w", err)
	}
	return &derivedCA{key: key, cert: cert}, nil
}

// issue makes a leaf for node id with a fresh key, valid from now.
func (ca *derivedCA) issue(id string, now time.Time) (*tls.Certificate, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{Organization: []string{"newsflow"}, CommonName: id},
		DNSNames:     []string{derivedServerName},
		NotBefore:    now.Add(-leafBackdate),
		NotAfter:     now.Add(leafLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, pub, ca.key)
	if err != nil {
		return nil, fmt.Errorf("cluster: issue the raft certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: crypto.Signer(priv), Leaf: leaf}, nil
}

// leafIssuer holds a node's derived leaf and issues a new one once half
// its lifetime has passed.
type leafIssuer struct {
	ca  *derivedCA
	id  string
	now func() time.Time

	mu struct {
		sync.Mutex
		cert *tls.Certificate
	}
}

func (l *leafIssuer) certificate() (*tls.Certificate, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if c := l.mu.cert; c != nil && now.Before(c.Leaf.NotBefore.Add(leafBackdate+leafLifetime/2)) {
		return c, nil
	}
	c, err := l.ca.issue(l.id, now)
	if err != nil {
		return nil, err
	}
	l.mu.cert = c
	return c, nil
}

// streamLayer is the raft.StreamLayer of a node's Raft port: mutually
// authenticated TLS (plain TCP when id is nil, which only tests choose).
// The port carries two protocols: Raft's RPCs, whose first byte is a small
// RPC type, and the members' internal HTTP API (internal.go), whose first
// byte is a request method's capital letter. It owns one goroutine that
// accepts TCP connections and one per handshake in progress; Close stops
// and waits for all of them. Accept hands out only Raft connections whose
// handshake has completed; Internal is the listener of the others.
type streamLayer struct {
	ln        net.Listener
	advertise net.Addr // nil: the listener's address
	id        *raftTLS // nil: plain TCP
	server    *tls.Config
	timeout   time.Duration // inbound handshake deadline
	log       *slog.Logger

	ready    chan net.Conn // handshaken Raft connections, for Accept
	internal *connListener // handshaken internal API connections
	slots    chan struct{} // a token per handshake in progress
	ctx      context.Context
	cancel   context.CancelFunc // stops the accept loop and the handshakes
	wg       sync.WaitGroup
	once     sync.Once
	rejected atomic.Uint64 // inbound connections refused
}

// listenStream listens on addr and starts accepting. handshakeTimeout is
// how long an inbound connection has to complete its handshake and send
// its first byte (at least minHandshakeTimeout). A nil id is plain TCP.
func listenStream(addr string, advertise net.Addr, id *raftTLS, handshakeTimeout time.Duration, log *slog.Logger) (*streamLayer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &streamLayer{
		ln: ln, advertise: advertise, id: id,
		timeout: max(handshakeTimeout, minHandshakeTimeout), log: log,
		ready: make(chan net.Conn), slots: make(chan struct{}, maxHandshakes),
	}
	if id != nil {
		s.server = id.serverConfig()
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.internal = &connListener{conns: make(chan net.Conn), done: s.ctx.Done(), addr: s.Addr()}
	if err := checkAdvertisable(s.Addr()); err != nil {
		ln.Close()
		return nil, err
	}
	s.wg.Add(1)
	go s.acceptLoop()
	return s, nil
}

// checkAdvertisable refuses an address peers cannot dial (what
// raft.NewTCPTransport checks).
func checkAdvertisable(a net.Addr) error {
	tcp, ok := a.(*net.TCPAddr)
	if !ok {
		return fmt.Errorf("raft address %v is not a TCP address", a)
	}
	if tcp.IP == nil || tcp.IP.IsUnspecified() {
		return fmt.Errorf("raft address %v cannot be dialed by peers: set cluster.advertise", a)
	}
	return nil
}

func (s *streamLayer) acceptLoop() {
	defer s.wg.Done()
	var delay time.Duration
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if s.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: back off.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			s.log.Warn("raft accept", "error", err, "retry_in", delay)
			select {
			case <-s.ctx.Done():
				return
			case <-time.After(delay):
			}
			continue
		}
		delay = 0
		select {
		case s.slots <- struct{}{}:
		default:
			s.rejected.Add(1)
			s.log.Warn("raft connection refused: too many handshakes in progress", "remote", c.RemoteAddr(), "limit", maxHandshakes)
			c.Close()
			continue
		}
		s.wg.Add(1)
		go s.handshake(c)
	}
}

// handshake completes an inbound connection's handshake and reads its
// first byte within the timeout, then hands it to Accept (Raft) or to the
// internal API's listener, or closes it.
func (s *streamLayer) handshake(c net.Conn) {
	defer s.wg.Done()
	conn, internal, err := s.open(c)
	<-s.slots
	if err != nil {
		s.rejected.Add(1)
		s.log.Warn("raft connection refused", "remote", c.RemoteAddr(), "error", err)
		c.Close()
		return
	}
	to := s.ready
	if internal {
		to = s.internal.conns
	}
	select {
	case to <- conn:
	case <-s.ctx.Done():
		conn.Close()
	}
}

// open does what handshake waits for: the TLS handshake, then the first
// byte, which says whether the connection is Raft's or the internal API's.
func (s *streamLayer) open(c net.Conn) (conn net.Conn, internal bool, err error) {
	ctx, cancel := context.WithTimeout(s.ctx, s.timeout)
	defer cancel()
	conn = c
	if s.server != nil {
		tc := tls.Server(c, s.server)
		if err := tc.HandshakeContext(ctx); err != nil {
			return nil, false, fmt.Errorf("TLS handshake failed: %w", err)
		}
		conn = tc
	}
	deadline, _ := ctx.Deadline()
	if err := conn.SetReadDeadline(deadline); err != nil {
		return nil, false, err
	}
	r := bufio.NewReader(conn)
	first, err := r.Peek(1)
	if err != nil {
		return nil, false, fmt.Errorf("no first byte: %w", err)
	}
	if err := conn.SetReadDeadline(time.Time{}); err != nil {
		return nil, false, err
	}
	return &peekedConn{Conn: conn, r: r}, isInternal(first[0]), nil
}

// isInternal tells an internal API request (an HTTP method starts with a
// capital letter) from a Raft RPC (whose first byte is its type, a small
// number).
func isInternal(first byte) bool { return first >= 'A' && first <= 'Z' }

// peekedConn is a connection whose first bytes were read ahead.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *peekedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// connListener is a net.Listener of connections another accept loop hands
// over: the internal API's, taken from the Raft port.
type connListener struct {
	conns chan net.Conn
	done  <-chan struct{}
	addr  net.Addr
}

func (l *connListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close does nothing: the stream layer's Close ends Accept.
func (l *connListener) Close() error   { return nil }
func (l *connListener) Addr() net.Addr { return l.addr }

// Accept returns the next connection whose handshake has completed.
func (s *streamLayer) Accept() (net.Conn, error) {
	select {
	case c := <-s.ready:
		return c, nil
	case <-s.ctx.Done():
		return nil, net.ErrClosed
	}
}

// Close stops accepting and waits for the handshakes in progress to end.
// Connections already accepted are their owner's to close.
func (s *streamLayer) Close() error {
	var err error
	s.once.Do(func() {
		s.cancel()
		err = s.ln.Close()
		s.wg.Wait()
	})
	return err
}

// Addr returns the address peers dial.
func (s *streamLayer) Addr() net.Addr {
	if s.advertise != nil {
		return s.advertise
	}
	return s.ln.Addr()
}

// Dial connects to a peer's Raft port and completes the handshake within
// timeout.
func (s *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return s.dial(ctx, string(address))
}

// dial connects to a peer's Raft port, over TLS unless the layer is plain.
func (s *streamLayer) dial(ctx context.Context, address string) (net.Conn, error) {
	if s.id == nil {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", address)
	}
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("raft peer address %q: %w", address, err)
	}
	d := tls.Dialer{NetDialer: &net.Dialer{}, Config: s.id.clientConfig(host)}
	return d.DialContext(ctx, "tcp", address)
}

// RefusedConnections counts the inbound Raft connections the node refused
// since it started: failed handshakes (no certificate of the cluster's CA,
// not TLS, too slow) and connections over the handshake limit.
func (n *Node) RefusedConnections() uint64 {
	return n.stream.rejected.Load()
}

// newTransport makes the node's Raft transport: mutual TLS, or plain TCP
// where a test asks for it.
func (n *Node) newTransport(advertise net.Addr, hlog hclog.Logger) (*raft.NetworkTransport, error) {
	// The transport's I/O timeout is also how long a heartbeat to a peer
	// that silently stopped answering (cut off, not dead: no connection
	// refused) takes to fail, and a failed heartbeat is how the leader
	// notices: keep it within down_after. Large transfers (snapshots)
	// scale it by their size. Dialing a peer, its handshake included,
	// has the same budget.
	ioTimeout := min(5*time.Second, max(500*time.Millisecond, n.cfg.DownAfter/2))
	var id *raftTLS
	if !n.cfg.plainTCP {
		var err error
		if id, err = newRaftTLS(n.cfg.TLS, n.cfg.Secret, n.cfg.ID); err != nil {
			return nil, err
		}
	}
	var err error
	if n.stream, err = listenStream(n.cfg.RaftAddr, advertise, id, ioTimeout, n.log); err != nil {
		return nil, fmt.Errorf("cluster: raft listen %s: %w", n.cfg.RaftAddr, err)
	}
	return raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: n.stream, MaxPool: 4, Timeout: ioTimeout, Logger: hlog,
	}), nil
}
