package node

import (
	"context"
	"strings"
	"testing"
)

// A node asked for an operator it does not have refuses to open, rather
// than run without it.
func TestOpenUnknownOperator(t *testing.T) {
	cfg := Default()
	cfg.DataDir = t.TempDir()
	_, err := Open(context.Background(), cfg, Options{Operators: []string{"trending", "storys"}})
	if err == nil || !strings.Contains(err.Error(), `operator "storys"`) {
		t.Fatalf("Open with an unknown operator: %v", err)
	}
}

// A node running a subset registers exactly it, and Deps leaves the
// operators it does not run nil.
func TestOpenOperatorSubset(t *testing.T) {
	cfg := Default()
	cfg.DataDir, cfg.Crawl.Enabled = t.TempDir(), false
	n, err := Open(context.Background(), cfg, Options{Operators: []string{"trending"}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := n.Close(); err != nil {
			t.Error(err)
		}
	}()
	var stages []string
	for _, s := range n.Engine().Topology() {
		if s.Kind == "operator" {
			stages = append(stages, s.Name)
		}
	}
	if strings.Join(stages, ",") != "trending" {
		t.Errorf("operators %v, want trending alone", stages)
	}
	d := n.Deps()
	if d.Trending == nil || d.Stories != nil || d.Articles != nil || d.Search != nil || d.Interest != nil {
		t.Errorf("deps %+v", d)
	}
}
