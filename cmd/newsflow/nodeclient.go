package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// nodeClient calls a running node's HTTP API: the admin commands (sources,
// status, leave) and the demo's simulated readers. The token goes with
// admin requests, the ingestion token (if set) with the others.
type nodeClient struct {
	base, token string
	ingest      string
	http        *http.Client // default: a client with a 2 minute timeout
}

// register adds the --addr and --token flags.
func (c *nodeClient) register(fs *flag.FlagSet) {
	fs.StringVar(&c.base, "addr", "http://127.0.0.1:8080", "base URL of a running node")
	fs.StringVar(&c.token, "token", os.Getenv("NEWSFLOW_ADMIN_TOKEN"), "admin token or admin session token (default $NEWSFLOW_ADMIN_TOKEN)")
}

// statusError is an answer outside 2xx.
type statusError struct {
	code   int
	status string // e.g. "404 Not Found"
	msg    string
	body   []byte
}

func (e *statusError) Error() string { return e.msg }

// call sends a request and returns the answer's body; an answer outside 2xx
// is a *statusError that carries its body.
func (c *nodeClient) call(ctx context.Context, method, path, contentType string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.base, "/")+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if admin := strings.HasPrefix(path, "/api/v1/admin/"); admin && c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	} else if !admin && c.ingest != "" {
		req.Header.Set("Authorization", "Bearer "+c.ingest)
	}
	hc := c.http
	if hc == nil {
		hc = &http.Client{Timeout: 2 * time.Minute}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, &statusError{code: resp.StatusCode, status: resp.Status, body: b,
			msg: fmt.Sprintf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(b))}
	}
	return b, nil
}

// do is call that decodes a JSON answer into out (when not nil).
func (c *nodeClient) do(ctx context.Context, method, path, contentType string, body []byte, out any) error {
	b, err := c.call(ctx, method, path, contentType, body)
	if err != nil || out == nil {
		return err
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	return nil
}
