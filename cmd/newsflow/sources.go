package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/newsflow/newsflow/internal/opml"
)

// cmdSources manages the sources of a running node over its admin API.
func cmdSources(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const usage = "usage: newsflow sources add URL [--name NAME] [--category C] [--no-discover] | import FILE | export [--addr URL] [--token TOKEN]"
	if len(args) == 0 {
		return errors.New(usage)
	}
	sub, args := args[0], args[1:]
	var arg string
	if sub == "import" || sub == "add" {
		if len(args) == 0 || strings.HasPrefix(args[0], "-") {
			return errors.New(usage)
		}
		arg, args = args[0], args[1:]
	}
	fs := flag.NewFlagSet("sources "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := &nodeClient{}
	c.register(fs)
	var in sourceAdd
	if sub == "add" {
		fs.StringVar(&in.name, "name", "", "the source's name (default: the feed's title)")
		fs.StringVar(&in.category, "category", "", "the source's category (e.g. world, technology)")
		fs.BoolVar(&in.noDiscover, "no-discover", false,
			"take URL as the feed's address without fetching it now (for a feed that is down; the crawler still checks it)")
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return errors.New(usage)
	}
	var b []byte
	var err error
	switch sub {
	case "add":
		return addSource(ctx, c, arg, in, stdout, stderr)
	case "import":
		// A broken file is reported here, with its name and line.
		if _, err := opml.ParseFile(arg); err != nil {
			return fmt.Errorf("sources import: %w", err)
		}
		body, rerr := os.ReadFile(arg)
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
		return fmt.Errorf("sources %s: %s%s", sub, se.status, se.hintLine())
	}
	if err != nil {
		return fmt.Errorf("sources %s: %w", sub, err)
	}
	return nil
}

// sourceAdd are the flags of newsflow sources add.
type sourceAdd struct {
	name, category string
	noDiscover     bool
}

// addSource asks the node to add the feed or page at u. The node checks
// it (unless --no-discover) and refuses, with the reason, a URL that
// cannot work; the error says why.
func addSource(ctx context.Context, c *nodeClient, u string, in sourceAdd, stdout, stderr io.Writer) error {
	body, err := json.Marshal(struct {
		FeedURL  string `json:"feed_url"`
		Name     string `json:"name,omitempty"`
		Category string `json:"category,omitempty"`
	}{u, in.name, in.category})
	if err != nil {
		return err
	}
	path := "/api/v1/admin/sources"
	if in.noDiscover {
		path += "?discover=false"
	}
	var added struct {
		ID       string `json:"id"`
		FeedURL  string `json:"feed_url"`
		Name     string `json:"name"`
		Homepage string `json:"homepage"`
		Warning  string `json:"warning"`
	}
	if err := c.do(ctx, http.MethodPost, path, "application/json", body, &added); err != nil {
		return fmt.Errorf("sources add: %w", err)
	}
	fmt.Fprintf(stdout, "added %s: %s", added.ID, added.FeedURL)
	if added.Name != "" {
		fmt.Fprintf(stdout, " (%s)", added.Name)
	}
	fmt.Fprintln(stdout)
	if added.Warning != "" {
		fmt.Fprintln(stderr, "warning:", added.Warning)
	}
	return nil
}
