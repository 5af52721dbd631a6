package query_test

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/newsflow/newsflow/internal/testutil"
	"github.com/newsflow/newsflow/query"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"
)

// With http.ops_token, /metrics and /health/detailed need it; the probes
// stay open.
func TestOpsToken(t *testing.T) {
	n := newTestNode(t, withQuery(query.Options{OpsToken: "ops-secret"}))
	for _, p := range []string{"/metrics", "/health/detailed"} {
		for _, hdr := range [][]string{nil, bearer("wrong"), bearer(testAdminToken), {"Authorization", "Basic b3BzOm9wcy1zZWNyZXQ="}} {
			r := n.do(t, "GET", p, nil, hdr...)
			wantError(t, r, fasthttp.StatusUnauthorized, "ops token")
			if r.header["Www-Authenticate"] == "" {
				t.Errorf("%s %v: 401 without WWW-Authenticate", p, hdr)
			}
		}
	}
	if r := n.do(t, "GET", "/metrics", nil, bearer("ops-secret")...); r.status != fasthttp.StatusOK || !strings.Contains(string(r.body), "newsflow_http_requests_total") {
		t.Fatalf("/metrics with the ops token: %.300s", r)
	}
	if r := n.do(t, "GET", "/health/detailed", nil, bearer("ops-secret")...); r.status != fasthttp.StatusOK || !strings.Contains(string(r.body), `"status"`) {
		t.Fatalf("/health/detailed with the ops token: %s", r)
	}
	for _, p := range []string{"/health/live", "/health/ready"} {
		if r := n.get(t, p); r.status != fasthttp.StatusOK {
			t.Errorf("%s without a token: %s", p, r)
		}
	}
}

// With an ops listener, /metrics and /health/detailed are served there
// only (and need the ops token when one is set); the API's listener
// answers 404, never the web UI.
func TestOpsListener(t *testing.T) {
	ops := fasthttputil.NewInmemoryListener()
	n := newTestNode(t, withQuery(query.Options{OpsListener: ops, OpsToken: "ops-secret"}))
	for _, p := range []string{"/metrics", "/health/detailed"} {
		wantError(t, n.do(t, "GET", p, nil, bearer("ops-secret")...), fasthttp.StatusNotFound, "ops address")
	}
	client := &fasthttp.Client{Dial: func(string) (net.Conn, error) { return ops.Dial() }}
	get := func(path string, hdr ...string) response {
		t.Helper()
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		req.SetRequestURI("http://ops" + path)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		if err := client.DoTimeout(req, resp, 10*time.Second); err != nil {
			t.Fatalf("GET %s on the ops listener: %v", path, err)
		}
		return copyResponse(resp)
	}
	for _, p := range []string{"/metrics", "/health/detailed"} {
		wantError(t, get(p), fasthttp.StatusUnauthorized, "ops token")
		if r := get(p, bearer("ops-secret")...); r.status != fasthttp.StatusOK {
			t.Errorf("%s on the ops listener: %.200s", p, r)
		}
	}
	for _, p := range []string{"/health/live", "/health/ready"} {
		if r := get(p); r.status != fasthttp.StatusOK {
			t.Errorf("%s on the ops listener: %s", p, r)
		}
		if r := n.get(t, p); r.status != fasthttp.StatusOK {
			t.Errorf("%s on the API listener: %s", p, r)
		}
	}
	// The ops listener serves nothing else.
	wantError(t, get("/api/v1/trending?window=1h"), fasthttp.StatusNotFound)
	wantError(t, get("/"), fasthttp.StatusNotFound)
	if r := n.get(t, "/api/v1/trending?window=1h"); r.status != fasthttp.StatusOK {
		t.Fatalf("trending on the API listener: %s", r)
	}
	if err := (query.Options{Addr: "127.0.0.1:9000", OpsAddr: "127.0.0.1:9000"}).Validate(); err == nil {
		t.Error("ops_addr equal to addr was accepted")
	}
}

// With ops_addr the server listens there itself, and stops listening
// when it stops.
func TestOpsAddr(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // a free port for the node to take
	n := newTestNode(t, withQuery(query.Options{OpsAddr: addr}))
	get := func(path string) (int, error) {
		status, _, err := fasthttp.GetTimeout(nil, "http://"+addr+path, 5*time.Second)
		return status, err
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if s, err := get("/metrics"); err != nil || s != fasthttp.StatusOK {
			return fmt.Errorf("/metrics on %s: %d %v", addr, s, err)
		}
		return nil
	})
	wantError(t, n.get(t, "/metrics"), fasthttp.StatusNotFound, "ops address")
	n.stop()
	if _, err := get("/health/live"); err == nil {
		t.Fatal("the ops address answers after the server stopped")
	}
}
