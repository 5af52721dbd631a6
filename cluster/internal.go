package cluster

// The internal API: what members ask each other outside Raft's RPCs (admit
// me, apply this through the leader, how far has the leader applied). It is
// plain HTTP/1.1 carried on the Raft port's connections (streamLayer tells
// them apart by their first byte), so it has the Raft transport's mutual
// TLS: only a member, holding the cluster secret or a certificate of the
// configured CA, reaches it, and its requests are encrypted. No route of
// the public API serves it. The bearer token derived from the secret is
// checked as well, so that a configured CA which also signs other services'
// certificates does not make those services members of the internal API.

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"
)

// The internal API's paths.
const (
	PathJoin  = "/internal/v1/cluster/join"
	PathApply = "/internal/v1/cluster/apply"
	PathIndex = "/internal/v1/cluster/index"
)

const (
	// maxInternalBody bounds an internal request's body (a command).
	maxInternalBody = 32 << 20
	// maxInternalAnswer bounds what a node reads of an answer.
	maxInternalAnswer = 1 << 20
)

// startInternal serves the internal API on the Raft port's internal
// connections and makes the client that calls the other members'.
func (n *Node) startInternal() {
	n.internal = &http.Server{
		Handler:           http.HandlerFunc(n.serveInternal),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(n.log.Handler(), slog.LevelWarn),
	}
	go n.internal.Serve(n.stream.internal) //nolint:errcheck // ends with the stream layer
	n.client = &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			DialContext:         func(ctx context.Context, _, addr string) (net.Conn, error) { return n.stream.dial(ctx, addr) },
			MaxIdleConnsPerHost: 2,
			IdleConnTimeout:     time.Minute,
		},
	}
}

func (n *Node) serveInternal(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		w.Write(errJSON("internal API: POST only"))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxInternalBody))
	if err != nil {
		w.WriteHeader(http.StatusRequestEntityTooLarge)
		w.Write(errJSON(fmt.Sprintf("internal API: body: %v", err)))
		return
	}
	status, answer := n.handle(r.URL.Path, r.Header.Get("Authorization"), body)
	w.WriteHeader(status)
	w.Write(answer)
}

// post sends an internal request to the member whose Raft address is addr.
func (n *Node) post(ctx context.Context, addr, path string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+internalToken(n.cfg.Secret))
	req.Header.Set("Content-Type", "application/json")
	res, err := n.client.Do(req)
	if err != nil {
		var notTLS tls.RecordHeaderError
		if errors.As(err, &notTLS) || strings.Contains(err.Error(), "HTTP response to HTTPS client") {
			return 0, nil, fmt.Errorf("%s does not answer with the cluster's TLS (is it a member's HTTP address? members reach each other at their Raft address, --raft): %w", addr, err)
		}
		return 0, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, maxInternalAnswer))
	return res.StatusCode, b, err
}

// leaderAddr returns the leader's Raft address, or "".
func (n *Node) leaderAddr() string {
	addr, _ := n.raft.LeaderWithID()
	return string(addr)
}

// PeerToken authenticates a node's query requests to the other members
// (forwarded and fanned-out queries): derived from the cluster secret, the
// same on every member, and never the secret itself.
func (n *Node) PeerToken() string { return PeerToken(n.cfg.Secret) }

// PeerToken returns the peer token of the cluster with this secret.
func PeerToken(secret string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("newsflow peer query"))
	return hex.EncodeToString(m.Sum(nil))
}

// internalToken is the bearer token of the internal API: derived from the
// cluster secret, never the secret itself.
func internalToken(secret string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("newsflow internal api"))
	return hex.EncodeToString(m.Sum(nil))
}

// handle answers an internal request: it checks the token derived from the
// cluster secret, then answers with a status and a JSON body.
func (n *Node) handle(path, authorization string, body []byte) (int, []byte) {
	want := "Bearer " + internalToken(n.cfg.Secret)
	if subtle.ConstantTimeCompare([]byte(authorization), []byte(want)) != 1 {
		return http.StatusUnauthorized, errJSON("cluster: bad or missing secret")
	}
	switch path {
	case PathApply:
		if !n.IsLeader() {
			return http.StatusMisdirectedRequest, errJSON("not the leader")
		}
		err := n.applyLocal(context.Background(), body)
		var retry retryable
		switch {
		case err == nil:
			return http.StatusOK, []byte(`{}`)
		case errors.Is(err, ErrExists):
			return http.StatusConflict, errJSON(err.Error())
		case errors.Is(err, ErrConflict):
			return http.StatusPreconditionFailed, errJSON(err.Error())
		case errors.As(err, &retry):
			return http.StatusServiceUnavailable, errJSON(err.Error())
		}
		return http.StatusBadRequest, errJSON(err.Error())
	case PathJoin:
		var m Member
		if err := json.Unmarshal(body, &m); err != nil || m.ID == "" || m.RaftAddr == "" || m.HTTPAddr == "" {
			return http.StatusBadRequest, errJSON("join: id, raft_addr and http_addr are required")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := n.admit(ctx, m); err != nil {
			return http.StatusServiceUnavailable, errJSON(err.Error())
		}
		return http.StatusOK, []byte(`{}`)
	case PathIndex:
		b, _ := json.Marshal(map[string]uint64{"applied": n.fsm.applied.Load()})
		return http.StatusOK, b
	}
	return http.StatusNotFound, errJSON("no such cluster endpoint")
}

func errJSON(msg string) []byte {
	b, _ := json.Marshal(map[string]string{"error": msg})
	return b
}
