package main

import (
	"context"
	"errors"
	"io"
)

// cmdTopics trains and evaluates topic classifiers.
func cmdTopics(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("topics: not implemented yet")
}
