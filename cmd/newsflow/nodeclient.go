package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
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

// adminFlags parses the flags of an admin command without arguments
// (status, leave): the node's address and token, and --json.
func adminFlags(name string, args []string, stderr io.Writer) (c *nodeClient, asJSON bool, err error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	c = &nodeClient{}
	c.register(fs)
	j := fs.Bool("json", false, "print the node's JSON answer")
	if err := fs.Parse(args); err != nil {
		return c, false, err
	}
	if fs.NArg() > 0 {
		return c, false, fmt.Errorf("usage: newsflow %s [--addr URL] [--token TOKEN]", name)
	}
	return c, *j, nil
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
	hint   string // for a 401: which token the node wants and how to give it
}

func (e *statusError) Error() string { return e.msg + e.hintLine() }

// hintLine is the hint on a line of its own, or "".
func (e *statusError) hintLine() string {
	if e.hint == "" {
		return ""
	}
	return "\nhint: " + e.hint
}

// authHint explains a 401 answer to a request for path: which token the
// node wants and how to give it. sent says whether the request carried one.
func authHint(path string, sent bool) string {
	const admin = "the node's admin token (auth.admin_token in its configuration, or NEWSFLOW_AUTH_ADMIN_TOKEN in its environment) " +
		"or the session token of an admin account (newsflow user add --admin NAME on the stopped node, then POST /api/v1/auth/login)"
	switch {
	case strings.HasPrefix(path, "/api/v1/events/"):
		const ingest = "the node's ingestion token (auth.ingest_token in its configuration, or NEWSFLOW_AUTH_INGEST_TOKEN in its environment); " +
			"an admin token (NEWSFLOW_ADMIN_TOKEN) does not stand for users"
		if sent {
			return "the node refused the token given with --token or NEWSFLOW_INGEST_TOKEN: events for any user need " + ingest
		}
		return "events for any user need a token: pass --token TOKEN or set NEWSFLOW_INGEST_TOKEN, with " + ingest
	case strings.HasPrefix(path, "/api/v1/articles"):
		if sent {
			return "the node refused the token given with --token, NEWSFLOW_INGEST_TOKEN or NEWSFLOW_ADMIN_TOKEN: articles need the node's " +
				"ingestion token (auth.ingest_token) or " + admin
		}
		return "articles need a token: pass --token TOKEN, or set NEWSFLOW_INGEST_TOKEN or NEWSFLOW_ADMIN_TOKEN, with the node's " +
			"ingestion token (auth.ingest_token) or " + admin
	case sent:
		return "the node refused the token given with --token or NEWSFLOW_ADMIN_TOKEN: it must be " + admin
	}
	return "this needs an admin and no token was given: pass --token TOKEN or set NEWSFLOW_ADMIN_TOKEN, with " + admin
}

// errorText is the "error" of a JSON error answer, else the answer itself.
func errorText(b []byte) string {
	var v struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(b, &v) == nil && v.Error != "" {
		return v.Error
	}
	return string(bytes.TrimSpace(b))
}

// call sends a request and returns the answer's body; an answer outside 2xx
// is a *statusError that carries its body.
func (c *nodeClient) call(ctx context.Context, method, path, contentType string, body []byte) ([]byte, error) {
	resp, err := c.send(ctx, method, path, contentType, body, nil)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, unreachable(c.base, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		se := &statusError{code: resp.StatusCode, status: resp.Status, body: b,
			msg: fmt.Sprintf("%s %s: %s: %s", method, path, resp.Status, errorText(b))}
		if resp.StatusCode == http.StatusUnauthorized {
			se.hint = authHint(path, c.bearer(path) != "")
		}
		return nil, se
	}
	return b, nil
}

// bearer is the token a request for path carries: the admin token for the
// admin API, the ingestion token for the rest.
func (c *nodeClient) bearer(path string) string {
	if strings.HasPrefix(path, "/api/v1/admin/") {
		return c.token
	}
	return c.ingest
}

// send sends a request with its content type (if any), header and token,
// and returns the response, whose body the caller closes.
func (c *nodeClient) send(ctx context.Context, method, path, contentType string, body []byte, header http.Header) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.base, "/")+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	maps.Copy(req.Header, header)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if tok := c.bearer(path); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	hc := c.http
	if hc == nil {
		hc = &http.Client{Timeout: 2 * time.Minute}
	}
	return hc.Do(req)
}

// unreachable explains a request that got no answer from the node at base.
func unreachable(base string, err error) error {
	if ue := (*url.Error)(nil); errors.As(err, &ue) {
		err = ue.Err // without the method and URL
	}
	return fmt.Errorf("cannot reach the node at %s: %w (is it running? give its address with --addr)", base, err)
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
