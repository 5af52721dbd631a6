package cluster

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// internalClient calls a member's internal API over its Raft port with
// the TLS identity of the cluster with secret.
func internalClient(t *testing.T, secret string) *http.Client {
	t.Helper()
	id, err := newRaftTLS(TLSConfig{}, secret, "client")
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			host, _, _ := net.SplitHostPort(addr)
			d := tls.Dialer{Config: id.clientConfig(host)}
			return d.DialContext(ctx, "tcp", addr)
		},
	}}
}

func postInternal(c *http.Client, addr, path, token string) (int, string, error) {
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b), nil
}

// The internal API is served on the Raft port, behind its mutual TLS: a
// holder of the cluster's identity with the internal token is answered;
// the token alone over plain TCP, another cluster's certificate, or the
// identity without the token are not.
func TestInternalAPIOnRaftPort(t *testing.T) {
	if testing.Short() {
		t.Skip("Raft node test")
	}
	m := startSettled(t, memberOptions{})
	token := internalToken(testSecret)

	status, body, err := postInternal(internalClient(t, testSecret), m.raftAddr, PathIndex, token)
	if err != nil || status != http.StatusOK {
		t.Fatalf("a member's request: %d %s %v", status, body, err)
	}
	var idx struct{ Applied uint64 }
	if err := json.Unmarshal([]byte(body), &idx); err != nil || idx.Applied == 0 {
		t.Fatalf("index answer %q: %v", body, err)
	}
	if status, body, _ := postInternal(internalClient(t, testSecret), m.raftAddr, PathIndex, "wrong"); status != http.StatusUnauthorized {
		t.Fatalf("a member's identity with a wrong token: %d %s", status, body)
	}
	if _, _, err := postInternal(internalClient(t, "another cluster's secret"), m.raftAddr, PathIndex, token); err == nil {
		t.Fatal("a certificate of another cluster's CA reached the internal API")
	}
	// Plain HTTP with the right token: the port speaks TLS first, and
	// closes the connection without an HTTP answer.
	refused := m.node.RefusedConnections()
	c, err := net.Dial("tcp", m.raftAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "POST "+PathIndex+" HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+token+"\r\nContent-Length: 0\r\n\r\n")
	if line, err := bufio.NewReader(c).ReadString('\n'); strings.HasPrefix(line, "HTTP/") {
		t.Fatalf("plain HTTP on the Raft port was answered: %q", line)
	} else if err == nil {
		t.Fatalf("plain HTTP on the Raft port got %q", line)
	}
	waitFor(t, 5*time.Second, "the plain connection counted as refused", func() error {
		if m.node.RefusedConnections() <= refused {
			return io.ErrNoProgress
		}
		return nil
	})
	// A request that is not a POST.
	req, _ := http.NewRequest(http.MethodGet, "http://"+m.raftAddr+PathIndex, nil)
	if res, err := internalClient(t, testSecret).Do(req); err != nil || res.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET: %v %v", res, err)
	}
}

// A join sent to a member's HTTP address, where the internal API used to
// be, fails with an error that says to use its Raft address.
func TestJoinAtHTTPAddressSaysWhy(t *testing.T) {
	if testing.Short() {
		t.Skip("Raft node test")
	}
	m := startSettled(t, memberOptions{})
	web := httptest.NewServer(http.NotFoundHandler())
	defer web.Close()
	_, _, err := m.node.post(context.Background(), strings.TrimPrefix(web.URL, "http://"), PathJoin, []byte(`{}`))
	if err == nil || !strings.Contains(err.Error(), "Raft address") {
		t.Fatalf("got %v, want an error naming the Raft address", err)
	}
}
