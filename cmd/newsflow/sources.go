package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// cmdSources manages the sources of a running node over its admin API.
func cmdSources(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const usage = "usage: newsflow sources import FILE | export [--addr URL] [--token TOKEN]"
	if len(args) == 0 {
		return errors.New(usage)
	}
	sub, args := args[0], args[1:]
	var file string
	if sub == "import" {
		if len(args) == 0 || strings.HasPrefix(args[0], "-") {
			return errors.New(usage)
		}
		file, args = args[0], args[1:]
	}
	fs := flag.NewFlagSet("sources", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "http://127.0.0.1:8080", "base URL of a running node")
	tok := fs.String("token", os.Getenv("NEWSFLOW_ADMIN_TOKEN"), "admin token or admin session token (default $NEWSFLOW_ADMIN_TOKEN)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	base := strings.TrimRight(*addr, "/") + "/api/v1/admin/sources"
	client := &http.Client{Timeout: 2 * time.Minute}
	var req *http.Request
	var err error
	switch sub {
	case "import":
		body, rerr := os.ReadFile(file)
		if rerr != nil {
			return rerr
		}
		req, err = http.NewRequestWithContext(ctx, http.MethodPost, base+"/import", bytes.NewReader(body))
		if err == nil {
			req.Header.Set("Content-Type", "text/x-opml")
		}
	case "export":
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, base+"/export", nil)
	default:
		return errors.New(usage)
	}
	if err != nil {
		return err
	}
	if *tok != "" {
		req.Header.Set("Authorization", "Bearer "+*tok)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("sources %s: %w", sub, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if _, err := stdout.Write(b); err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		return fmt.Errorf("sources %s: %s", sub, resp.Status)
	}
	return nil
}
