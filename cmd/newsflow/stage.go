package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"text/tabwriter"
)

// cmdStage lists a node's stages or pauses and resumes one on that node.
func cmdStage(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const use = "usage: newsflow stage list | pause STAGE | resume STAGE [--addr URL] [--token TOKEN] [--json]"
	if len(args) == 0 {
		return errors.New(use)
	}
	verb, args := args[0], args[1:]
	fs := flag.NewFlagSet("stage "+verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := &nodeClient{}
	c.register(fs)
	asJSON := fs.Bool("json", false, "print the node's JSON answer")
	var stage string
	if verb == "pause" || verb == "resume" {
		if len(args) == 0 || len(args[0]) == 0 || args[0][0] == '-' {
			return errors.New(use)
		}
		stage, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return errors.New(use)
	}
	switch verb {
	case "list":
		var out struct {
			Stages []struct {
				Stage     string `json:"stage"`
				Running   int    `json:"running"`
				Restoring int    `json:"restoring"`
				Standby   int    `json:"standby"`
				Paused    bool   `json:"paused"`
				Lag       int64  `json:"lag"`
			} `json:"stages"`
		}
		if *asJSON {
			b, err := c.call(ctx, http.MethodGet, "/api/v1/admin/stages", "", nil)
			if err != nil {
				return fmt.Errorf("stage list: %w", err)
			}
			_, err = stdout.Write(append(b, '\n'))
			return err
		}
		if err := c.do(ctx, http.MethodGet, "/api/v1/admin/stages", "", nil, &out); err != nil {
			return fmt.Errorf("stage list: %w", err)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "STAGE\tTASKS\tRESTORING\tSTANDBY\tPAUSED\tLAG")
		for _, s := range out.Stages {
			paused := "no"
			if s.Paused {
				paused = "yes"
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%d\n", s.Stage, s.Running, s.Restoring, s.Standby, paused, s.Lag)
		}
		return tw.Flush()
	case "pause", "resume":
		b, err := c.call(ctx, http.MethodPost, "/api/v1/admin/stages/"+url.PathEscape(stage)+"/"+verb, "", nil)
		if err != nil {
			return fmt.Errorf("stage %s: %w", verb, err)
		}
		if *asJSON {
			_, err = stdout.Write(append(b, '\n'))
			return err
		}
		what := "paused"
		if verb == "resume" {
			what = "resumed"
		}
		_, err = fmt.Fprintf(stdout, "%s %s on %s\n", stage, what, c.base)
		return err
	}
	return errors.New(use)
}
