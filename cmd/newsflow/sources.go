package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
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
	c := &nodeClient{}
	c.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	var b []byte
	var err error
	switch sub {
	case "import":
		body, rerr := os.ReadFile(file)
		if rerr != nil {
			return rerr
		}
		b, err = c.call(ctx, http.MethodPost, "/api/v1/admin/sources/import", "text/x-opml", body)
	case "export":
		b, err = c.call(ctx, http.MethodGet, "/api/v1/admin/sources/export", "", nil)
	default:
		return errors.New(usage)
	}
	// The node's answer is printed also when it is an error: it lists
	// what was wrong.
	var se *statusError
	if errors.As(err, &se) {
		b = se.body
	}
	if _, werr := stdout.Write(b); werr != nil {
		return werr
	}
	if se != nil {
		return fmt.Errorf("sources %s: %s", sub, se.status)
	}
	if err != nil {
		return fmt.Errorf("sources %s: %w", sub, err)
	}
	return nil
}
