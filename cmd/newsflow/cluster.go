package main

import (
	"context"
	"errors"
	"io"
)

// cmdCluster runs the article operators offline over an NDJSON file.
func cmdCluster(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("cluster: not implemented yet")
}
